"""The sampler: profiler data from inside a training container, in SageMaker Debugger's layout, without Debugger.

Standard library only, Python 3.8+: it runs inside other people's training images. Relative imports only, so the
package also works when shipped alone (as ``cdk_sagemaker_debugger.sampler`` inside the sampler bundle).
"""
