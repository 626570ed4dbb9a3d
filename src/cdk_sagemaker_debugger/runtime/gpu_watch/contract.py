"""What TrainingDashboard and the low-GPU watch agree on: environment variables and the metric it publishes.

Standard library only and imports nothing, so the construct imports it without starting anything.
"""

#: Jobs whose name starts with this (case-insensitive, as SageMaker compares names) are the family.
JOB_NAME_PREFIX = "JOB_NAME_PREFIX"
#: GPUs of one instance: SageMaker's GPUUtilization is summed over them (0-100 x GPUs).
GPUS_PER_HOST = "GPUS_PER_HOST"
#: CloudWatch namespace of the published metrics.
METRIC_NAMESPACE = "METRIC_NAMESPACE"

DEFAULT_NAMESPACE = "CdkSageMakerDebugger"
#: Percent per GPU, the minimum over the family's hosts in status Training (no datapoint when none is training).
LOWEST_GPU_UTILIZATION = "LowestGPUUtilization"
#: Hosts of the family's jobs in status Training that reported GPU utilisation in the last minutes.
TRAINING_HOSTS = "TrainingHosts"
#: The one dimension of both metrics; its value is the family's job-name prefix.
DIMENSION = "JobNamePrefix"
