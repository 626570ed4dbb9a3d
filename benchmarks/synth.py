#!/usr/bin/env python3
"""Synthesis cost of ProfiledTrainingJob against a hand-written raw-L1 baseline that builds the same templates.

Prints seconds per job for 1, 10 and 50 jobs in one stack, the ratio construct/baseline, both measured in this
process (best of --repeat runs, after a warm-up that pays jsii's start and the template validator's first load), and
the jsii requests per job of each side (every call into the jsii process is one round trip: what synthesis costs).
Usage: python benchmarks/synth.py [--repeat 5] [--counts 1,10,50]
"""

from __future__ import annotations

import argparse
import collections
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
from aws_cdk import aws_iam as iam  # noqa: E402
from aws_cdk import aws_logs as logs  # noqa: E402
from aws_cdk import aws_s3 as s3  # noqa: E402
from aws_cdk import aws_stepfunctions as sfn  # noqa: E402
from jsii._kernel.providers import process as _jsii_process  # noqa: E402

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleEngine, rules  # noqa: E402


class JsiiRequests:
    """Counts the requests this process sends to the jsii kernel (each one a round trip to Node.js)."""

    count = 0
    _send = _jsii_process._NodeProcess.send

    @classmethod
    def install(cls) -> None:
        def counting_send(process, request, response_type):
            cls.count += 1
            return cls._send(process, request, response_type)

        _jsii_process._NodeProcess.send = counting_send

REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
RULE_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"


def construct_job(stack: cdk.Stack, index: int) -> None:
    rule_set = ProfilerRuleSet(stack, f"Rules{index}", rules=[
        rules.ProfilerReport(CPUBottleneck_threshold=90),
        rules.LowGPUUtilization(threshold_p95=80),
        rules.StepOutlier(stddev=5),
    ])
    # The Debugger engine: the resources the baseline writes by hand (the default engine adds an evaluator per job).
    ProfiledTrainingJob(stack, f"Job{index}", job_name_prefix=f"resnet{index}", training_image=IMAGE,
                        instance_type="ml.g5.2xlarge", instance_count=1, rule_set=rule_set,
                        rule_engine=RuleEngine.DEBUGGER)


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


def synth(builder, count: int) -> tuple[float, dict, int]:
    """Seconds, template and jsii requests of building ``count`` jobs with ``builder`` in one stack and synthesizing."""
    gc.collect()  # release the previous apps' jsii objects so neither side pays for the other's garbage
    with tempfile.TemporaryDirectory() as out:
        requests = JsiiRequests.count
        start = time.perf_counter()
        app = cdk.App(outdir=out)
        stack = cdk.Stack(app, "Bench", env=cdk.Environment(region=REGION))
        for index in range(count):
            builder(stack, index)
        assembly = app.synth()
        elapsed = time.perf_counter() - start
        requests = JsiiRequests.count - requests
        template = json.loads(Path(assembly.get_stack_by_name("Bench").template_full_path).read_text())
    return elapsed, template, requests


def resource_types(template: dict) -> collections.Counter:
    return collections.Counter(r["Type"] for r in template["Resources"].values() if r["Type"] != "AWS::CDK::Metadata")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--counts", default="1,10,50")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    JsiiRequests.install()
    synth(construct_job, 1)  # warm-up: jsii start and the built-in template validator
    synth(baseline_job, 1)
    rows = []
    # Largest count first: jsii keeps Python-implemented constructs (ours) alive for the life of the process, so each
    # measurement runs on the heap the earlier ones left behind; the headline 50-job figure should not pay for them.
    for count in sorted(counts, reverse=True):
        ours, base = [], []
        for _ in range(args.repeat):  # interleaved so machine noise hits both sides alike
            elapsed, ours_template, ours_requests = synth(construct_job, count)
            ours.append(elapsed)
            elapsed, base_template, base_requests = synth(baseline_job, count)
            base.append(elapsed)
        if resource_types(ours_template) != resource_types(base_template):
            raise SystemExit(f"templates differ: {resource_types(ours_template)} vs {resource_types(base_template)}")
        best_ours, best_base = min(ours) / count, min(base) / count
        rows.append((count, best_ours, best_base, ours_requests / count, base_requests / count))
    print("RuleEngine.DEBUGGER against its hand-written L1 baseline")
    print(f"{'jobs':>5} {'construct s/job':>16} {'baseline s/job':>15} {'ratio':>6} {'jsii req/job':>13} "
          f"{'baseline req/job':>17}")
    for count, best_ours, best_base, ours_per_job, base_per_job in sorted(rows):
        print(f"{count:>5} {best_ours:>16.4f} {best_base:>15.4f} {best_ours / best_base:>6.2f} {ours_per_job:>13.1f} "
              f"{base_per_job:>17.1f}")


if __name__ == "__main__":
    main()
