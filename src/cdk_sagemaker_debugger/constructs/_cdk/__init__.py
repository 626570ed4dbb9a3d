"""CDK helpers the constructs share, one module per job: ``checks`` (prop checks located at a construct path),
``images`` (the region and Debugger's rule images), ``lambda_function`` (the runtime's Lambda functions), ``layout``
(the evaluator's objects in a run's output), ``lazy`` (values rendered at synth) and ``nag`` (cdk-nag
acknowledgements)."""
