#!/usr/bin/env python3
"""Synthesis cost of ProfiledTrainingJob against hand-written raw-L1 baselines that build the same templates.

For each rule engine (RuleEngine.DEBUGGER, and the default RuleEngine.EVALUATOR with its RuleEvaluator), prints seconds
per job for 1, 10 and 50 jobs in one stack, the ratio construct/baseline, both measured in this
process (best of --repeat runs, after a warm-up that pays jsii's start and the template validator's first load), and
the jsii requests per job of each side (every call into the jsii process is one round trip: what synthesis costs).
Usage: python benchmarks/synth.py [--repeat 5] [--counts 1,10,50] [--engines RuleEngine.DEBUGGER,RuleEngine.EVALUATOR]
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stacks  # noqa: E402,F401  (supported Node.js for jsii, before aws_cdk loads)

# isort: split
import aws_cdk as cdk  # noqa: E402
import jsii  # noqa: E402
from aws_cdk import aws_events as events  # noqa: E402
from aws_cdk import aws_iam as iam  # noqa: E402
from aws_cdk import aws_lambda as lambda_  # noqa: E402
from aws_cdk import aws_logs as logs  # noqa: E402
from aws_cdk import aws_s3 as s3  # noqa: E402
from aws_cdk import aws_s3_assets as s3_assets  # noqa: E402
from aws_cdk import aws_sqs as sqs  # noqa: E402
from aws_cdk import aws_stepfunctions as sfn  # noqa: E402
from jsii._kernel.providers import process as _jsii_process  # noqa: E402

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleEngine, rules  # noqa: E402


class JsiiRequests:
    """Counts the requests this process sends to the jsii kernel (each one a round trip to Node.js); with
    ``by_site``, also by call site: the innermost frame of the library (or of this script) that sent it, with the
    request's kind."""

    count = 0
    sites: collections.Counter = collections.Counter()
    by_site = False
    _send = _jsii_process._NodeProcess.send
    _ours = (str(Path(__file__).resolve().parents[1] / "src"), str(Path(__file__).resolve()))

    @classmethod
    def install(cls) -> None:
        def counting_send(process, request, response_type):
            cls.count += 1
            if cls.by_site:
                cls.sites[(type(request).__name__.removesuffix("Request").lstrip("_"), cls._site())] += 1
            return cls._send(process, request, response_type)

        _jsii_process._NodeProcess.send = counting_send

    @classmethod
    def _site(cls) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(cls._ours):
                where = name.split("/src/", 1)[-1] if "/src/" in name else Path(name).name
                return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"
            frame = frame.f_back
        return "(outside)"

REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
RULE_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"


def _rule_set(stack: cdk.Stack, index: int) -> ProfilerRuleSet:
    return ProfilerRuleSet(stack, f"Rules{index}", rules=[
        rules.ProfilerReport(CPUBottleneck_threshold=90),
        rules.LowGPUUtilization(threshold_p95=80),
        rules.StepOutlier(stddev=5),
    ])


def construct_job(stack: cdk.Stack, index: int) -> None:
    """RuleEngine.DEBUGGER: the request carries the rules; SageMaker Debugger evaluates them."""
    ProfiledTrainingJob(stack, f"Job{index}", job_name_prefix=f"resnet{index}", training_image=IMAGE,
                        instance_type="ml.g5.2xlarge", instance_count=1, rule_set=_rule_set(stack, index),
                        rule_engine=RuleEngine.DEBUGGER)


def construct_evaluator_job(stack: cdk.Stack, index: int) -> None:
    """RuleEngine.EVALUATOR (the default): the sampler in the container and a RuleEvaluator for the job's rules."""
    ProfiledTrainingJob(stack, f"Job{index}", job_name_prefix=f"resnet{index}", training_image=IMAGE,
                        instance_type="ml.g5.2xlarge", instance_count=1, rule_set=_rule_set(stack, index))


def _statement(**fields):
    return {"Effect": "Allow", **fields}


def baseline_job(stack: cdk.Stack, index: int) -> None:
    """The same resources written by hand with L1 constructs only: no validation, no rendering helpers."""
    prefix = f"resnet{index}"
    account = cdk.Aws.ACCOUNT_ID
    bucket = s3.CfnBucket(
        stack, f"Bucket{index}",
        bucket_encryption={"serverSideEncryptionConfiguration": [
            {"bucketKeyEnabled": True, "serverSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
        public_access_block_configuration={"blockPublicAcls": True, "blockPublicPolicy": True,
                                           "ignorePublicAcls": True, "restrictPublicBuckets": True},
        versioning_configuration={"status": "Enabled"},
    )
    objects = cdk.Fn.join("", [bucket.attr_arn, "/*"])
    s3.CfnBucketPolicy(stack, f"BucketPolicy{index}", bucket=bucket.ref, policy_document={
        "Version": "2012-10-17",
        "Statement": [
            {"Action": "s3:*", "Effect": "Deny", "Principal": {"AWS": "*"}, "Resource": [bucket.attr_arn, objects],
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            {"Action": "s3:*", "Effect": "Deny", "Principal": {"AWS": "*"}, "Resource": [bucket.attr_arn, objects],
             "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}},
        ],
    })
    output_objects = cdk.Fn.join("", [bucket.attr_arn, "/training/*"])
    role = iam.CfnRole(stack, f"ExecutionRole{index}", description=f"SageMaker execution role of training jobs {prefix}-*",
                       assume_role_policy_document={"Version": "2012-10-17", "Statement": [_statement(
                           Action="sts:AssumeRole", Principal={"Service": "sagemaker.amazonaws.com"})]},
                       policies=[{"policyName": "TrainingJobs", "policyDocument": {"Version": "2012-10-17", "Statement": [
                      _statement(Action=["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"], Resource=output_objects),
                      _statement(Action="s3:ListBucket", Resource=bucket.attr_arn,
                                 Condition={"StringLike": {"s3:prefix": ["training/*"]}}),
                      _statement(Action=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                                 Resource=[f"arn:aws:ecr:{REGION}:503895931360:repository/sagemaker-debugger-rules",
                                           f"arn:aws:ecr:{REGION}:763104351884:repository/pytorch-training"]),
                      _statement(Action="ecr:GetAuthorizationToken", Resource="*"),
                      _statement(Action="cloudwatch:PutMetricData", Resource="*",
                                 Condition={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}),
                      _statement(Action=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                                         "logs:PutLogEvents"],
                                 Resource=[f"arn:aws:logs:{REGION}:{account}:log-group:/aws/sagemaker/ProcessingJobs:*",
                                           f"arn:aws:logs:{REGION}:{account}:log-group:/aws/sagemaker/TrainingJobs:*"]),
                       ]}}])
    log_group = logs.CfnLogGroup(stack, f"Logs{index}", retention_in_days=365)
    machine_role = iam.CfnRole(stack, f"MachineRole{index}", assume_role_policy_document={
        "Version": "2012-10-17", "Statement": [_statement(
            Action="sts:AssumeRole", Principal={"Service": "states.amazonaws.com"},
            Condition={"ArnLike": {"aws:SourceArn": f"arn:aws:states:{REGION}:{account}:stateMachine:*"},
                       "StringEquals": {"aws:SourceAccount": account}})]},
        policies=[{"policyName": "StartTrainingJobs", "policyDocument": {"Version": "2012-10-17", "Statement": [
            _statement(Action=["sagemaker:AddTags", "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob",
                               "sagemaker:ListTags", "sagemaker:StopTrainingJob"],
                       Resource=f"arn:aws:sagemaker:{REGION}:{account}:training-job/{prefix}-*"),
            _statement(Action="iam:PassRole", Resource=role.attr_arn,
                       Condition={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
            _statement(Action=["events:DescribeRule", "events:PutRule", "events:PutTargets"],
                       Resource=f"arn:aws:events:{REGION}:{account}:rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule"),
        ]}}])
    machine_default_policy = iam.CfnPolicy(
        stack, f"MachineDefaultPolicy{index}", policy_name=f"MachineDefaultPolicy{index}", roles=[machine_role.ref],
        policy_document={"Version": "2012-10-17", "Statement": [
            _statement(Action=["logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups",
                               "logs:DescribeResourcePolicies", "logs:GetLogDelivery", "logs:ListLogDeliveries",
                               "logs:PutResourcePolicy", "logs:UpdateLogDelivery", "xray:GetSamplingRules",
                               "xray:GetSamplingTargets", "xray:PutTelemetryRecords", "xray:PutTraceSegments"],
                       Resource="*")]})
    iam.CfnPolicy(stack, f"DebuggerTopicDeny{index}", policy_name=f"DebuggerTopicDeny{index}", roles=[role.ref],
                  policy_document={"Version": "2012-10-17", "Statement": [{
                      "Effect": "Deny", "Resource": f"arn:aws:sns:*:{account}:SMDebugRules",
                      "Action": ["sns:Publish", "sns:Subscribe", "sns:CreateTopic", "sns:SetTopicAttributes",
                                 "sns:AddPermission", "sns:DeleteTopic"]}]})
    output = f"s3://{bucket.ref}/training"
    image_rules = [
        {"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": RULE_IMAGE,
         "RuleParameters": {"CPUBottleneck_threshold": "90", "rule_to_invoke": "ProfilerReport"}},
        {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluatorImage": RULE_IMAGE,
         "RuleParameters": {"threshold_p95": "80", "threshold_p5": "10", "window": "500", "patience": "1000",
                            "scan_interval_us": "60000000", "rule_to_invoke": "LowGPUUtilization"}},
        {"RuleConfigurationName": "StepOutlier", "RuleEvaluatorImage": RULE_IMAGE,
         "RuleParameters": {"stddev": "5", "mode": "None", "n_outliers": "10", "scan_interval_us": "60000000",
                            "rule_to_invoke": "StepOutlier"}},
    ]
    definition = {"StartAt": "NameJob", "States": {
        "NameJob": {"Type": "Pass", "ResultPath": "$.jobNaming",
                    "Parameters": {"parts.$": "States.StringSplit(States.UUID(), '-')"}, "Next": "CreateTrainingJob"},
        "CreateTrainingJob": {"End": True, "Type": "Task",
                              "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
                              "Parameters": {
                                  "TrainingJobName.$": f"States.Format('{prefix}-{{}}{{}}', $.jobNaming.parts[0], $.jobNaming.parts[4])",
                                  "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
                                  "RoleArn": role.attr_arn,
                                  "OutputDataConfig": {"S3OutputPath": output},
                                  "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                                  "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
                                  "ProfilerConfig": {"S3OutputPath": output, "DisableProfiler": False},
                                  "ProfilerRuleConfigurations": image_rules},
                              "ResultPath": "$.trainingJob",
                              "Retry": [{"ErrorEquals": ["SageMaker.AmazonSageMakerException"], "IntervalSeconds": 30,
                                         "MaxAttempts": 3, "BackoffRate": 2}]}}}
    machine = sfn.CfnStateMachine(
        stack, f"StateMachine{index}", role_arn=machine_role.attr_arn,
        definition_string=stack.to_json_string(definition),
        tracing_configuration={"enabled": True},
        logging_configuration={"level": "ALL", "includeExecutionData": False,
                               "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": log_group.attr_arn}}]},
    )
    machine.add_resource_dependency(machine_role)
    machine.add_resource_dependency(machine_default_policy)



# -- the default engine's baseline: the same resources as RuleEngine.EVALUATOR, by hand --------------------------------
EVALUATOR_RULES = json.dumps([
    {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport",
     "parameters": {"CPUBottleneck_threshold": 90}},
    {"configuration_name": "LowGPUUtilization", "rule_to_invoke": "LowGPUUtilization",
     "parameters": {"threshold_p95": 80, "threshold_p5": 10, "window": 500, "patience": 1000,
                    "scan_interval_us": 60000000}},
    {"configuration_name": "StepOutlier", "rule_to_invoke": "StepOutlier",
     "parameters": {"stddev": 5, "mode": None, "n_outliers": 10, "scan_interval_us": 60000000}},
])


@jsii.implements(cdk.IStableAnyProducer)
class _Later:
    """A value the stack's jobs add to until synthesis (the bus policy lists every evaluator's role)."""

    def __init__(self, produce):
        self._produce = produce

    def produce(self, context=None):
        return self._produce()


@functools.lru_cache(maxsize=1)
def _sampler_bundle_dir() -> str:
    from cdk_sagemaker_debugger.constructs.sampler import _bundle_dir  # the bundle's files (the baseline zips them too)

    return str(_bundle_dir())


class _StackShared:
    """What one stack's jobs share: the sampler bundle, the evaluator code, the verdict bus and its policy."""

    _by_stack: dict[int, _StackShared] = {}

    @classmethod
    def of(cls, stack: cdk.Stack) -> _StackShared:
        shared = cls._by_stack.get(id(stack))
        if shared is None or shared.stack is not stack:
            shared = cls._by_stack[id(stack)] = cls(stack)
        return shared

    def __init__(self, stack: cdk.Stack) -> None:
        from cdk_sagemaker_debugger.constructs._cdk.lambda_function import RUNTIME_DIR

        self.stack = stack
        self.bundle = s3_assets.Asset(stack, "SamplerBundle", path=_sampler_bundle_dir())
        self.code = s3_assets.Asset(stack, "EvaluatorCode", path=str(RUNTIME_DIR),
                                    follow_symlinks=cdk.SymlinkFollowMode.ALWAYS,
                                    exclude=["*", "!evaluator", "!evaluator/**", "**/__pycache__", "**/*.pyc",
                                             "evaluator/synthetic.py"])
        self.bus = events.CfnEventBus(stack, "VerdictBus", name="BenchVerdictBus",
                                      description="cdk-sagemaker-debugger: RuleEvaluator verdicts and continuation "
                                                  "events")
        self.bus_arn = self.bus.attr_arn
        self.bus_name = self.bus.ref
        self.publishers: list[str] = []
        events.CfnEventBusPolicy(stack, "VerdictBusPublishersOnly", event_bus_name=self.bus_name,
                                 statement_id="OnlyRuleEvaluatorsPublish", statement={
                                     "Sid": "OnlyRuleEvaluatorsPublish", "Effect": "Deny", "Principal": "*",
                                     "Action": "events:PutEvents", "Resource": self.bus_arn,
                                     "Condition": {"ArnNotEquals": {"aws:PrincipalArn": cdk.Lazy.any(
                                         _Later(lambda: self.publishers))}}})


def _ssl_only_queue(stack: cdk.Stack, name: str, extra_statements=(), **props) -> sqs.CfnQueue:
    queue = sqs.CfnQueue(stack, name, sqs_managed_sse_enabled=True, **props)
    sqs.CfnQueuePolicy(stack, f"{name}Policy", queues=[queue.ref], policy_document={
        "Version": "2012-10-17", "Statement": [
            {"Action": "sqs:*", "Effect": "Deny", "Principal": {"AWS": "*"}, "Resource": queue.attr_arn,
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}}, *extra_statements]})
    return queue


def baseline_evaluator_job(stack: cdk.Stack, index: int) -> None:
    """RuleEngine.EVALUATOR's resources written by hand with L1 constructs only: the job with the sampler channel, and
    its evaluator (function, role, policies, queues, log group, schedule, job-end and continuation rules)."""
    shared = _StackShared.of(stack)
    prefix = f"resnet{index}"
    account = cdk.Aws.ACCOUNT_ID
    bucket = s3.CfnBucket(
        stack, f"Bucket{index}",
        bucket_encryption={"serverSideEncryptionConfiguration": [
            {"bucketKeyEnabled": True, "serverSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
        lifecycle_configuration={"rules": [{"id": "CdkSageMakerDebuggerEvaluatorState", "status": "Enabled",
                                            "noncurrentVersionExpiration": {"noncurrentDays": 1},
                                            "tagFilters": [{"key": "cdk-sagemaker-debugger",
                                                            "value": "evaluator-state"}]}]},
        public_access_block_configuration={"blockPublicAcls": True, "blockPublicPolicy": True,
                                           "ignorePublicAcls": True, "restrictPublicBuckets": True},
        versioning_configuration={"status": "Enabled"},
    )
    bucket_arn, bucket_name = bucket.attr_arn, bucket.ref
    s3.CfnBucketPolicy(stack, f"BucketPolicy{index}", bucket=bucket_name, policy_document={
        "Version": "2012-10-17",
        "Statement": [
            {"Action": "s3:*", "Effect": "Deny", "Principal": {"AWS": "*"}, "Resource": [bucket_arn, f"{bucket_arn}/*"],
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            {"Action": "s3:*", "Effect": "Deny", "Principal": {"AWS": "*"}, "Resource": [bucket_arn, f"{bucket_arn}/*"],
             "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}},
        ],
    })
    objects = f"arn:aws:s3:::{bucket_name}"
    bundle_object = f"arn:{cdk.Aws.PARTITION}:s3:::{shared.bundle.s3_bucket_name}/{shared.bundle.s3_object_key}"
    role = iam.CfnRole(stack, f"ExecutionRole{index}", description=f"SageMaker execution role of training jobs {prefix}-*",
                       assume_role_policy_document={"Version": "2012-10-17", "Statement": [_statement(
                           Action="sts:AssumeRole", Principal={"Service": "sagemaker.amazonaws.com"})]},
                       policies=[{"policyName": "TrainingJobs", "policyDocument": {"Version": "2012-10-17", "Statement": [
                      _statement(Action=["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
                                 Resource=f"{objects}/training/*"),
                      _statement(Action="s3:ListBucket", Resource=objects,
                                 Condition={"StringLike": {"s3:prefix": ["training/*"]}}),
                      _statement(Action=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                                 Resource=f"arn:aws:ecr:{REGION}:763104351884:repository/pytorch-training"),
                      _statement(Action="ecr:GetAuthorizationToken", Resource="*"),
                      _statement(Action="cloudwatch:PutMetricData", Resource="*",
                                 Condition={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}),
                      _statement(Action=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                                         "logs:PutLogEvents"],
                                 Resource=[f"arn:aws:logs:{REGION}:{account}:log-group:/aws/sagemaker/TrainingJobs:*",
                                           f"arn:aws:logs:{REGION}:{account}:log-group:/aws/sagemaker/ProcessingJobs:*"]),
                      {"Effect": "Deny", "Action": ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
                       "Resource": [f"{objects}/training/{prefix}-*/rule-output/evaluator-state/*",
                                    f"{objects}/training/{prefix}-*/rule-output/*/evaluator-output/*"]},
                      _statement(Action="s3:GetObject", Resource=bundle_object),
                      _statement(Action="s3:PutObject", Resource=f"{objects}/training/{prefix}-*/profiler-output/*"),
                       ]}}])
    log_group = logs.CfnLogGroup(stack, f"Logs{index}", retention_in_days=365)
    machine_role = iam.CfnRole(stack, f"MachineRole{index}", assume_role_policy_document={
        "Version": "2012-10-17", "Statement": [_statement(
            Action="sts:AssumeRole", Principal={"Service": "states.amazonaws.com"},
            Condition={"ArnLike": {"aws:SourceArn": f"arn:aws:states:{REGION}:{account}:stateMachine:*"},
                       "StringEquals": {"aws:SourceAccount": account}})]},
        policies=[{"policyName": "StartTrainingJobs", "policyDocument": {"Version": "2012-10-17", "Statement": [
            _statement(Action=["sagemaker:AddTags", "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob",
                               "sagemaker:ListTags", "sagemaker:StopTrainingJob"],
                       Resource=f"arn:aws:sagemaker:{REGION}:{account}:training-job/{prefix}-*"),
            _statement(Action="iam:PassRole", Resource=role.attr_arn,
                       Condition={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
            _statement(Action=["events:DescribeRule", "events:PutRule", "events:PutTargets"],
                       Resource=f"arn:aws:events:{REGION}:{account}:rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule"),
        ]}}])
    machine_default_policy = iam.CfnPolicy(
        stack, f"MachineDefaultPolicy{index}", policy_name=f"MachineDefaultPolicy{index}", roles=[machine_role.ref],
        policy_document={"Version": "2012-10-17", "Statement": [
            _statement(Action=["logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups",
                               "logs:DescribeResourcePolicies", "logs:GetLogDelivery", "logs:ListLogDeliveries",
                               "logs:PutResourcePolicy", "logs:UpdateLogDelivery", "xray:GetSamplingRules",
                               "xray:GetSamplingTargets", "xray:PutTelemetryRecords", "xray:PutTraceSegments"],
                       Resource="*")]})
    output = f"s3://{bucket_name}/training"
    bundle_hash = shared.bundle.asset_hash
    definition = {"StartAt": "NameJob", "States": {
        "NameJob": {"Type": "Pass", "ResultPath": "$.jobNaming",
                    "Parameters": {"parts.$": "States.StringSplit(States.UUID(), '-')"}, "Next": "CreateTrainingJob"},
        "CreateTrainingJob": {"End": True, "Type": "Task",
                              "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
                              "Parameters": {
                                  "TrainingJobName.$": f"States.Format('{prefix}-{{}}{{}}', $.jobNaming.parts[0], $.jobNaming.parts[4])",
                                  "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
                                  "RoleArn": role.attr_arn,
                                  "InputDataConfig": [{"ChannelName": "cdk-sagemaker-sampler", "InputMode": "File",
                                                       "DataSource": {"S3DataSource": {
                                                           "S3DataType": "S3Prefix", "S3Uri": shared.bundle.s3_object_url,
                                                           "S3DataDistributionType": "FullyReplicated"}}}],
                                  "OutputDataConfig": {"S3OutputPath": output},
                                  "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                                  "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
                                  "Environment": {"CDK_SAGEMAKER_SAMPLER_S3_URI": output,
                                                  "CDK_SAGEMAKER_SAMPLER_INTERVAL_MS": "500",
                                                  "CDK_SAGEMAKER_SAMPLER_FRAMEWORK_EVENTS": "1",
                                                  "PYTHONPATH": f"/opt/ml/input/data/cdk-sagemaker-sampler/{bundle_hash}.zip"}},
                              "ResultPath": "$.trainingJob",
                              "Retry": [{"ErrorEquals": ["SageMaker.AmazonSageMakerException"], "IntervalSeconds": 30,
                                         "MaxAttempts": 3, "BackoffRate": 2}]}}}
    machine = sfn.CfnStateMachine(
        stack, f"StateMachine{index}", role_arn=machine_role.attr_arn,
        definition_string=stack.to_json_string(definition),
        tracing_configuration={"enabled": True},
        logging_configuration={"level": "ALL", "includeExecutionData": False,
                               "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": log_group.attr_arn}}]},
    )
    machine.add_resource_dependency(machine_role)
    machine.add_resource_dependency(machine_default_policy)
    _baseline_evaluator(stack, index, shared, prefix, bucket_arn, bucket_name)


def _baseline_evaluator(stack: cdk.Stack, index: int, shared: _StackShared, prefix: str, bucket_arn: str,
                        bucket_name: str) -> None:
    account = cdk.Aws.ACCOUNT_ID
    name = f"Evaluator{index}"
    job_dlq = _ssl_only_queue(stack, f"{name}JobDeadLetterQueue", fifo_queue=True, message_retention_period=1209600)
    job_queue = _ssl_only_queue(stack, f"{name}JobQueue", fifo_queue=True, message_retention_period=3600,
                                visibility_timeout=1800,
                                redrive_policy={"deadLetterTargetArn": job_dlq.attr_arn, "maxReceiveCount": 3})
    rule_ids = [f"{name}Schedule", f"{name}JobEnded", f"{name}Continuation"]
    rule_arns = [f"arn:aws:events:{REGION}:{account}:rule/{rule_id}" for rule_id in rule_ids]
    dlq = _ssl_only_queue(stack, f"{name}DeadLetterQueue", message_retention_period=1209600, extra_statements=[
        {"Action": "sqs:SendMessage", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Resource": f"arn:aws:sqs:{REGION}:{account}:{name}DeadLetterQueue", "Sid": f"AllowEventRule{rule_id}",
         "Condition": {"ArnEquals": {"aws:SourceArn": arn}}} for rule_id, arn in zip(rule_ids, rule_arns, strict=True)])
    log_group = logs.CfnLogGroup(stack, f"{name}Logs", retention_in_days=90)
    role = iam.CfnRole(stack, f"{name}Role", description=f"Profiler rule evaluator for training jobs {prefix}-*",
                       assume_role_policy_document={"Version": "2012-10-17", "Statement": [_statement(
                           Action="sts:AssumeRole", Principal={"Service": "lambda.amazonaws.com"})]})
    shared.publishers.append(role.attr_arn)
    default_policy = iam.CfnPolicy(stack, f"{name}RoleDefaultPolicy", policy_name=f"{name}RoleDefaultPolicy",
                                   roles=[role.ref], policy_document={"Version": "2012-10-17", "Statement": [
        _statement(Action="sqs:SendMessage", Resource=dlq.attr_arn),
        _statement(Action="events:PutEvents", Resource=shared.bus_arn),
        _statement(Action=["sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                           "sqs:GetQueueUrl", "sqs:ReceiveMessage"], Resource=job_queue.attr_arn),
        _statement(Action=["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"], Resource=job_queue.attr_arn),
        _statement(Action=["logs:CreateLogStream", "logs:PutLogEvents"], Resource=log_group.attr_arn)]})
    state = f"{bucket_arn}/training/{prefix}-*/rule-output/evaluator-state/*"
    permissions = iam.CfnPolicy(stack, f"{name}Permissions", policy_name=f"{name}Permissions", roles=[role.ref],
                                policy_document={"Version": "2012-10-17", "Statement": [
        _statement(Action="sagemaker:DescribeTrainingJob",
                   Resource=f"arn:aws:sagemaker:{REGION}:{account}:training-job/{prefix}-*"),
        _statement(Action=["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData", "ec2:DescribeInstanceTypes"],
                   Resource="*"),
        _statement(Action=["s3:GetObject", "s3:PutObject"],
                   Resource=[state, f"{bucket_arn}/training/{prefix}-*/rule-output/*/evaluator-output/*"]),
        _statement(Action="s3:PutObjectTagging", Resource=state),
        _statement(Action="s3:GetObject", Resource=f"{bucket_arn}/training/{prefix}-*/profiler-output/*"),
        _statement(Action="s3:ListBucket", Resource=bucket_arn, Condition={"StringLike": {"s3:prefix": [
            f"training/{prefix}-*/profiler-output/*", f"training/{prefix}-*/rule-output/*"]}})]})
    function = lambda_.CfnFunction(
        stack, f"{name}Function", architectures=["arm64"], runtime="python3.14", memory_size=1769, timeout=300,
        handler="evaluator.lambda_handler.handler", role=role.attr_arn, reserved_concurrent_executions=5,
        code={"s3Bucket": shared.code.s3_bucket_name, "s3Key": shared.code.s3_object_key},
        dead_letter_config={"targetArn": dlq.attr_arn},
        description=f"Evaluates SageMaker profiler rules for training jobs {prefix}-*",
        logging_config={"logGroup": log_group.ref},
        environment={"variables": {
            "JOB_FAMILY": json.dumps({"job_name_prefix": f"{prefix}-"}), "RULES": EVALUATOR_RULES, "SOURCE": "AUTO",
            "PROFILER_S3_URI": f"s3://{bucket_name}/training", "EVENT_BUS_NAME": shared.bus_name,
            "METRIC_NAMESPACE": "CdkSageMakerDebugger", "JOB_QUEUE_URL": job_queue.ref}})
    function.add_resource_dependency(permissions)
    function.add_resource_dependency(default_policy)
    function.add_resource_dependency(role)
    function_arn = function.attr_arn
    lambda_.CfnEventInvokeConfig(stack, f"{name}EventInvokeConfig", function_name=function.ref, qualifier="$LATEST",
                                 maximum_retry_attempts=2)
    lambda_.CfnEventSourceMapping(stack, f"{name}JobQueueSource", function_name=function.ref, batch_size=1,
                                  event_source_arn=job_queue.attr_arn, function_response_types=["ReportBatchItemFailures"],
                                  scaling_config={"maximumConcurrency": 4})
    target = [{"arn": function_arn, "id": "Target0", "deadLetterConfig": {"arn": dlq.attr_arn},
               "retryPolicy": {"maximumRetryAttempts": 2}}]
    patterns = [
        {"schedule_expression": "rate(1 minute)", "description": f"Evaluate profiler rules of InProgress training jobs {prefix}-*"},
        {"event_pattern": {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
                           "detail": {"TrainingJobName": [{"prefix": f"{prefix}-"}],
                                      "TrainingJobStatus": ["Completed", "Failed", "Stopped"]}}},
        {"event_bus_name": shared.bus_name,
         "event_pattern": {"source": ["cdk-sagemaker-debugger"], "detail-type": ["Profiler Rule Evaluation Continuation"],
                           "detail": {"TrainingJobName": [{"prefix": f"{prefix}-"}]}}},
    ]
    for rule_id, props in zip(rule_ids, patterns, strict=True):
        rule = events.CfnRule(stack, rule_id, state="ENABLED", targets=target, **props)
        lambda_.CfnPermission(stack, f"{rule_id}Invoke", action="lambda:InvokeFunction", function_name=function_arn,
                              principal="events.amazonaws.com", source_arn=rule.attr_arn)


def synth(builder, count: int, per_stack: int | None = None) -> tuple[float, dict, int]:
    """Seconds, template and jsii requests of building ``count`` jobs with ``builder`` and synthesizing: in one stack,
    or ``per_stack`` jobs to a stack (the template then holds every stack's resources, under their stacks' names)."""
    gc.collect()  # release the previous apps' jsii objects so neither side pays for the other's garbage
    per_stack = per_stack or count
    with tempfile.TemporaryDirectory() as out:
        requests = JsiiRequests.count
        start = time.perf_counter()
        app = cdk.App(outdir=out)
        names = []
        for first in range(0, count, per_stack):
            names.append("Bench" if first == 0 else f"Bench{first // per_stack}")
            stack = cdk.Stack(app, names[-1], env=cdk.Environment(region=REGION))
            for index in range(first, min(count, first + per_stack)):
                builder(stack, index)
        assembly = app.synth()
        elapsed = time.perf_counter() - start
        requests = JsiiRequests.count - requests
        template: dict = {"Resources": {}}
        for name in names:
            resources = json.loads(Path(assembly.get_stack_by_name(name).template_full_path).read_text())["Resources"]
            template["Resources"].update({f"{name}/{key}": value for key, value in resources.items()})
    return elapsed, template, requests


def resource_types(template: dict) -> collections.Counter:
    return collections.Counter(r["Type"] for r in template["Resources"].values() if r["Type"] != "AWS::CDK::Metadata")


#: Each engine's construct and the hand-written baseline that builds the same resources.
ENGINES = {
    "RuleEngine.DEBUGGER": (construct_job, baseline_job),
    "RuleEngine.EVALUATOR": (construct_evaluator_job, baseline_evaluator_job),
}
#: Jobs per stack (None: all in one). A default-engine job with its own RuleEvaluator is 26 resources, so a stack holds
#: 19 of them under CloudFormation's 500; the benchmark spreads them over stacks of 10 (both sides alike).
JOBS_PER_STACK = {"RuleEngine.DEBUGGER": None, "RuleEngine.EVALUATOR": 10}


def measure(construct, baseline, counts: list[int], repeat: int, per_stack: int | None = None
            ) -> list[tuple[int, float, float, float, float]]:
    """(jobs, construct s/job, baseline s/job, construct requests/job, baseline requests/job) per count."""
    rows = []
    # Largest count first: jsii keeps Python-implemented constructs (ours) alive for the life of the process, so each
    # measurement runs on the heap the earlier ones left behind; the headline 50-job figure should not pay for them.
    for count in sorted(counts, reverse=True):
        ours, base = [], []
        for _ in range(repeat):  # interleaved so machine noise hits both sides alike
            elapsed, ours_template, ours_requests = synth(construct, count, per_stack)
            ours.append(elapsed)
            elapsed, base_template, base_requests = synth(baseline, count, per_stack)
            base.append(elapsed)
        if resource_types(ours_template) != resource_types(base_template):
            raise SystemExit(f"templates differ: {resource_types(ours_template)} vs {resource_types(base_template)}")
        rows.append((count, min(ours) / count, min(base) / count, ours_requests / count, base_requests / count))
    return sorted(rows)


def print_sites(name: str, count: int, top: int) -> None:
    """Where the construct side's jsii requests come from, per job."""
    construct, _ = ENGINES[name]
    JsiiRequests.sites.clear()
    JsiiRequests.by_site = True
    try:
        _, _, requests = synth(construct, count, JOBS_PER_STACK[name])
    finally:
        JsiiRequests.by_site = False
    print(f"{name}: {requests / count:.1f} jsii requests per job, by call site")
    for (kind, site), sent in JsiiRequests.sites.most_common(top):
        print(f"{sent / count:>7.2f}  {kind:<12} {site}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--counts", default="1,10,50")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated, of {', '.join(ENGINES)} (default: both)")
    parser.add_argument("--sites", type=int, default=0, metavar="N",
                        help="instead of timing, print the N call sites that send the most jsii requests per job "
                             "(construct side, at the largest count, once)")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    chosen = [name.strip() for name in args.engines.split(",")]
    unknown = [name for name in chosen if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine {', '.join(unknown)}; choose from {', '.join(ENGINES)}")
    JsiiRequests.install()
    for name in chosen:  # warm-up: jsii start, the built-in template validator, the assets' first staging
        for builder in ENGINES[name]:
            synth(builder, 1)
    if args.sites:
        for name in chosen:
            print_sites(name, max(counts), args.sites)
        return
    for name in chosen:
        per_stack = JOBS_PER_STACK[name]
        rows = measure(*ENGINES[name], counts, args.repeat, per_stack)
        print(f"{name} against its hand-written L1 baseline" + (f" ({per_stack} jobs per stack)" if per_stack else ""))
        print(f"{'jobs':>5} {'construct s/job':>16} {'baseline s/job':>15} {'ratio':>6} {'jsii req/job':>13} "
              f"{'baseline req/job':>17}")
        for count, best_ours, best_base, ours_per_job, base_per_job in rows:
            print(f"{count:>5} {best_ours:>16.4f} {best_base:>15.4f} {best_ours / best_base:>6.2f} "
                  f"{ours_per_job:>13.1f} {base_per_job:>17.1f}")


if __name__ == "__main__":
    main()
