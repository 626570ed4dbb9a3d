"""What the construct tells the sampler: the environment variables a training job carries (one definition each).

ProfiledTrainingJob writes these into the CreateTrainingJob ``Environment``; the sampler and the CLI read them. This
module is standard library only and imports nothing, so it ships inside the sampler bundle unchanged.
"""

#: s3:// URI under which each run writes ``<training job name>/profiler-output/`` (Debugger's ProfilerConfig.S3OutputPath).
S3_URI = "CDK_SAGEMAKER_SAMPLER_S3_URI"
#: Sampling interval in milliseconds: 100, 200, 500, 1000, 5000 or 60000 (ProfilerConfig's allowed values).
INTERVAL_MS = "CDK_SAGEMAKER_SAMPLER_INTERVAL_MS"
#: "1" to write python-timeline framework events from ``sampler.step()`` and the framework callbacks, "0" not to.
FRAMEWORK_EVENTS = "CDK_SAGEMAKER_SAMPLER_FRAMEWORK_EVENTS"
#: "exit" ends the training's process group (non-zero) when no step or phase progresses on this host for
#: HANG_MINUTES; "log" (the default) only writes a line to the job's log. The sampler never ends a job on its own
#: unless this says "exit".
ON_HANG = "CDK_SAGEMAKER_SAMPLER_ON_HANG"
#: Minutes without progress on this host before ON_HANG applies (longer pauses learned from the job's own steps, a
#: checkpoint save for example, raise it).
HANG_MINUTES = "CDK_SAGEMAKER_SAMPLER_HANG_MINUTES"
#: "1" switches the sampler off without removing the channel (for a quick A/B of its overhead).
DISABLED = "CDK_SAGEMAKER_SAMPLER_DISABLED"

#: The sampling intervals ProfilerConfig allows; the sampler accepts the same.
INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)
DEFAULT_INTERVAL_MS = 500
HANG_ACTIONS = ("log", "exit")
DEFAULT_HANG_MINUTES = 10.0


def environment(s3_uri: str, interval_ms: int = DEFAULT_INTERVAL_MS, framework_events: bool = True) -> dict:
    """The variables a job needs for the sampler to upload to ``<s3_uri>/<job>/profiler-output/``."""
    return {S3_URI: s3_uri, INTERVAL_MS: str(interval_ms), FRAMEWORK_EVENTS: "1" if framework_events else "0"}


def hang_environment(action: str, minutes: float) -> dict:
    """The variables of the in-container hang watch (``Sampler(on_hang=...)``)."""
    return {ON_HANG: action, HANG_MINUTES: repr(float(minutes))}
