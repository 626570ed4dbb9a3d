"""RuleEvaluator(mlflow=EvaluatorMlflow(...)): the MLflow client comes as a layer, the function knows the one tracking
server it may write, and it may do exactly GetRun and LogBatch there and put objects under the artifact prefix."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from cdk_sagemaker_debugger import EvaluatorMlflow, RuleEvaluator, TrainingJobs
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

SERVER = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"


def _stack(mlflow: object) -> tuple[cdk.Stack, RuleEvaluator]:
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    bucket = s3.Bucket(stack, "Output", enforce_ssl=True)
    artifacts = s3.Bucket.from_bucket_name(stack, "Artifacts", "team-mlflow-artifacts")
    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:mlflow-client:3")
    option = mlflow(artifacts, layer) if callable(mlflow) else mlflow
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=TrainingJobs.from_job_name_prefix(
        "exp-", output_bucket=bucket), mlflow=option)
    return stack, evaluator


def _with_server(artifacts: s3.IBucket, layer: lambda_.ILayerVersion) -> EvaluatorMlflow:
    return EvaluatorMlflow(tracking_server_arn=SERVER, artifact_bucket=artifacts, artifact_prefix="/mlflow/",
                           layer=layer)


def test_the_function_gets_the_layer_the_server_and_exactly_the_grants():
    stack, evaluator = _stack(_with_server)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "evaluator.lambda_handler.handler",
        "Layers": ["arn:aws:lambda:us-east-1:123456789012:layer:mlflow-client:3"],
        "Environment": {"Variables": Match.object_like({"MLFLOW_TRACKING_SERVER_ARN": SERVER})},
    })
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    mlflow = [s for s in statements if "sagemaker-mlflow" in str(s["Action"])]
    assert mlflow == [{"Action": ["sagemaker-mlflow:GetRun", "sagemaker-mlflow:LogBatch"], "Effect": "Allow",
                       "Resource": SERVER}]
    puts = [s for s in statements if "team-mlflow-artifacts" in str(s["Resource"])]
    assert len(puts) == 1 and "s3:PutObject" in puts[0]["Action"]
    assert "s3:GetObject" not in puts[0]["Action"] and "s3:DeleteObject*" not in puts[0]["Action"]
    assert "team-mlflow-artifacts/mlflow/*" in json.dumps(puts[0]["Resource"])  # one prefix, not the bucket
    assert len(evaluator.mlflow_grants) == 2


def test_without_mlflow_nothing_changes():
    stack, evaluator = _stack(None)
    template = Template.from_stack(stack)
    assert "sagemaker-mlflow" not in str(template.to_json()) and "MLFLOW" not in str(template.to_json())
    assert evaluator.mlflow_grants == []


def test_a_wrong_arn_or_kind_is_refused_by_name():
    with pytest.raises(ConfigurationError, match=r"S/Evaluator.*mlflow.tracking_server_arn.*mlflow-tracking-server"):
        _stack(lambda a, layer: EvaluatorMlflow(tracking_server_arn="http://mlflow:5000", artifact_bucket=a,
                                                layer=layer))
    with pytest.raises(ConfigurationTypeError, match=r"mlflow.*expected an EvaluatorMlflow"):
        _stack(True)
