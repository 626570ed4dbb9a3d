"""The low-GPU watch: every minute, the lowest per-GPU utilisation among the training hosts of a job family.

CloudWatch alarms cannot use SEARCH expressions, and Metrics Insights cannot match a job-name prefix, so no alarm can
watch "every job of a family" on ``/aws/sagemaker/TrainingJobs`` directly. This function reads those metrics for the
family's jobs that are training, and publishes one family-level metric that TrainingDashboard's alarm watches.
"""
