"""``RuleEvaluator(mlflow=EvaluatorMlflow(...))``: the evaluator writes each job's verdicts into the job's own MLflow run
(the run SageMaker created from the job's ``MlflowConfig``; ``DescribeTrainingJob`` returns its ``MlflowRunId``).

The MLflow client is not in the evaluator's asset (it would be a hundred times the evaluator's size): it comes as a
Lambda layer, by default the stack's ``MlflowLayer`` that the synth builds from the library's pinned requirements
(docs/evaluator.md, MLflow).
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ..model.contract import EvaluatorEnvironment
from ..model.errors import ConfigurationError
from ..model.parameters import is_token
from .mlflow_layer import MlflowLayer

#: What the export calls on the tracking server: read the run (it must exist), then one LogBatch of tags and metrics.
TRACKING_SERVER_ACTIONS = ("sagemaker-mlflow:GetRun", "sagemaker-mlflow:LogBatch")
_ARN_PATTERN = ":mlflow-tracking-server/"


class EvaluatorMlflow:
    """Where the verdicts go in MLflow, and what the evaluator may do there (a bound option of RuleEvaluator).

    Example::

        RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs,
                      mlflow=EvaluatorMlflow(tracking_server_arn=server_arn, artifact_bucket=artifacts,
                                             artifact_prefix="mlflow"))
    """

    def __init__(self, *, tracking_server_arn: str, artifact_bucket: s3.IBucket,
                 layer: lambda_.ILayerVersion | None = None, artifact_prefix: str = "") -> None:
        """
        Args:
            tracking_server_arn: the SageMaker MLflow tracking server the jobs log to (their
                ``MlflowConfig.MlflowResourceArn``); a job that names another server is not written. Required.
            artifact_bucket: the tracking server's artifact store bucket (its ``ArtifactStoreUri``): the report and
                the summary are uploaded there by the MLflow client. Required.
            layer: a Lambda layer with ``mlflow-skinny`` and ``sagemaker-mlflow`` under ``python/``, for Python 3.14
                on arm64. Default: ``MlflowLayer.shared(stack)``, the stack's one layer that the synth builds from
                the library's pinned requirements with pip (the synth then needs the package index).
            artifact_prefix: the artifact store's key prefix (the path of its ``ArtifactStoreUri``). Default: "" (the
                whole bucket).
        """
        self.tracking_server_arn = tracking_server_arn
        self.artifact_bucket = artifact_bucket
        self.artifact_prefix = artifact_prefix.strip("/")
        self.layer = layer

    def _bind(self, scope: Construct, function: lambda_.Function, role: iam.IRole) -> list[iam.Grant]:
        """Add the layer and the setting to the evaluator's function, and grant exactly what the export needs."""
        where = scope.node.path
        if not is_token(self.tracking_server_arn) and _ARN_PATTERN not in self.tracking_server_arn:
            raise ConfigurationError("not a tracking server ARN; pass the ARN of a SageMaker MLflow tracking server "
                                     "(arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>)",
                                     where=where, field="mlflow.tracking_server_arn", value=self.tracking_server_arn)
        function.add_layers(self.layer if self.layer is not None else MlflowLayer.shared(scope))
        function.add_environment(EvaluatorEnvironment.MLFLOW_TRACKING_SERVER_ARN, self.tracking_server_arn)
        server = iam.Grant.add_to_principal(grantee=role, actions=list(TRACKING_SERVER_ACTIONS),
                                            resource_arns=[self.tracking_server_arn])
        keys = f"{self.artifact_prefix}/*" if self.artifact_prefix else "*"
        return [server, self.artifact_bucket.grant_put(role, keys)]
