"""The environment each construct writes is what its Lambda reads: every construct synthesized, its function's
environment resolved to a deployment's values (template_values.TemplateResolver), and the runtime's own settings built
from it. The names come from model/contract.py on both sides; these tests check the values.

(RuleAlarm's: tests/constructs/test_rule_alarm.py::test_the_synthesized_environment_is_what_the_handler_reads.)
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from helpers import make_stack
from template_values import TemplateResolver

from cdk_sagemaker_debugger import (
    MetricsSource,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleEvaluator,
    TrainingDashboard,
    TrainingJobs,
    rules,
)
from cdk_sagemaker_debugger.model.contract import DEFAULT_NAMESPACE, JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator, RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.lambda_handler import Settings as EvaluatorSettings
from cdk_sagemaker_debugger.runtime.gpu_watch import watch
from cdk_sagemaker_debugger.runtime.gpu_watch.watch import Settings as WatchSettings
from cdk_sagemaker_debugger.runtime.sampler import contract as sampler_contract

REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
EVALUATOR_HANDLER = "evaluator.lambda_handler.handler"
WATCH_HANDLER = "gpu_watch.handler.handler"


def _deployed(stack: cdk.Stack) -> TemplateResolver:
    return TemplateResolver(stack.stack_name, Template.from_stack(stack).to_json(), REGION)


def _bucket_name(stack: cdk.Stack, deployed: TemplateResolver, bucket: s3.Bucket) -> str:
    return deployed.physical_name(stack.get_logical_id(bucket.node.default_child))


def _fields(family: Any) -> dict[str, Any]:
    """A family's fields: the runtime's JobFamily is the same file imported as another module (contract_shared), so
    the two classes are not the same object and dataclass equality would not compare them."""
    return asdict(family)


def _rule_configs(rule_list: list[Any]) -> list[RuleConfig]:
    return [RuleConfig(r.name, r.rule_to_invoke, dict(r.parameters)) for r in rule_list]


TEAM_ROLE = "arn:aws:iam::123456789012:role/team-jobs"


def _role(bucket: s3.IBucket) -> iam.IRole:
    return iam.Role.from_role_arn(bucket.stack, "TeamRole", TEAM_ROLE)


# -- RuleEvaluator -----------------------------------------------------------------------------------------------------
FAMILIES = {
    "prefix": (lambda bucket, **kw: TrainingJobs.from_job_name_prefix("llm-finetune-", output_bucket=bucket, **kw),
               JobFamily(job_name_prefix="llm-finetune-")),
    "tag": (lambda bucket, **kw: TrainingJobs.from_tag("team", "vision", output_bucket=bucket, **kw,
                                                       execution_role=_role(bucket)),
            JobFamily(tag_key="team", tag_value="vision", execution_role_arns=(TEAM_ROLE,))),
    "pipeline": (lambda bucket, **kw: TrainingJobs.from_pipeline("churn-pipeline", output_bucket=bucket, **kw,
                                                                 execution_role=_role(bucket)),
                 JobFamily(job_name_prefix="pipelines-", pipeline_name="churn-pipeline",
                           execution_role_arns=(TEAM_ROLE,))),
}


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_the_evaluator_reads_the_family_rules_bus_namespace_and_profiler_location_it_was_given(kind: str) -> None:
    stack = make_stack(REGION, name="Contract")
    output, profiles = s3.Bucket(stack, "Output"), s3.Bucket(stack, "Profiles")
    factory, family = FAMILIES[kind]
    jobs = factory(output, output_prefix="training", profiler_bucket=profiles, profiler_prefix="/sampler/files/")
    given = [rules.LowGPUUtilization(threshold_p95=80, window=300), rules.CPUBottleneck(threshold=40)]
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=jobs, rules=given, source=MetricsSource.PROFILER,
                              metric_namespace="Team/Training")
    deployed = _deployed(stack)

    settings = EvaluatorSettings.from_env(deployed.function_environment(EVALUATOR_HANDLER))

    assert _fields(settings.family) == _fields(family) == _fields(jobs.family)
    assert settings.rules == _rule_configs(given)
    Evaluator(settings.rules)  # the runtime accepts every rule it is given (strict: unknown parameters raise)
    assert settings.source == "PROFILER" and settings.namespace == "Team/Training"
    bus_id = stack.get_logical_id(evaluator.event_bus.node.default_child)
    assert settings.event_bus == deployed.physical_name(bus_id) != "default"
    assert settings.profiler_s3_uri == f"s3://{_bucket_name(stack, deployed, profiles)}/sampler/files"


def test_a_rule_set_and_the_defaults_reach_the_evaluator() -> None:
    """Rules added to the set after the evaluator was created count; default source, namespace, profiler location."""
    stack = make_stack(REGION, name="Contract")
    output = s3.Bucket(stack, "Output")
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport(LowGPUUtilization_threshold_p95=60)])
    RuleEvaluator(stack, "Evaluator", rules=rule_set,
                  training_jobs=TrainingJobs.from_job_name_prefix("exp-", output_bucket=output, output_prefix="out"))
    rule_set.add_rule(rules.GPUMemoryIncrease(increase=10))
    deployed = _deployed(stack)

    settings = EvaluatorSettings.from_env(deployed.function_environment(EVALUATOR_HANDLER))

    assert _fields(settings.family) == _fields(JobFamily(job_name_prefix="exp-"))
    assert settings.rules == _rule_configs(rule_set.rules)
    assert [r.rule_to_invoke for r in settings.rules] == ["ProfilerReport", "GPUMemoryIncrease"]
    Evaluator(settings.rules)
    assert settings.source == "AUTO" and settings.namespace == "CdkSageMakerDebugger"
    assert settings.profiler_s3_uri == f"s3://{_bucket_name(stack, deployed, output)}/out"


@pytest.fixture(scope="module")
def profiled_job() -> dict[str, Any]:
    stack = make_stack(REGION, name="Contract")
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport(), rules.LowGPUUtilization(threshold_p95=80)])
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge", rule_set=rule_set, output_prefix="training")
    deployed = _deployed(stack)
    return {"stack": stack, "job": job, "rule_set": rule_set, "deployed": deployed,
            "request": deployed.resolve(stack.resolve(job.render_request())),
            "settings": EvaluatorSettings.from_env(deployed.function_environment(EVALUATOR_HANDLER))}


def test_a_training_jobs_evaluator_reads_where_its_sampler_writes(profiled_job: dict[str, Any]) -> None:
    """The sampler uploads to the URI in the job's request; the evaluator the job created reads that same URI."""
    settings, request = profiled_job["settings"], profiled_job["request"]
    assert settings.profiler_s3_uri == request["Environment"][sampler_contract.S3_URI]
    assert settings.profiler_s3_uri.startswith(request["OutputDataConfig"]["S3OutputPath"].rstrip("/"))


def test_a_training_jobs_evaluator_evaluates_its_runs_and_its_rules(profiled_job: dict[str, Any]) -> None:
    settings, job = profiled_job["settings"], profiled_job["job"]
    role = profiled_job["deployed"].resolve(profiled_job["stack"].resolve(job.role.role_arn))
    assert ":role/" in role
    assert _fields(settings.family) == _fields(JobFamily(job_name_prefix="resnet-", execution_role_arns=(role,)))
    assert settings.family.refusal("resnet-" + "0123456789abcdef0123", role_arn=role) is None  # a run of the job
    assert settings.family.refusal("resnet2-" + "0123456789abcdef0123", role_arn=role) is not None  # a sibling's run
    assert settings.family.refusal("resnet-" + "0123456789abcdef0123", role_arn=role + "2") is not None  # other role
    assert settings.rules == _rule_configs(profiled_job["rule_set"].rules)
    Evaluator(settings.rules)
    bus_id = profiled_job["stack"].get_logical_id(job.evaluator.event_bus.node.default_child)
    assert settings.event_bus == profiled_job["deployed"].physical_name(bus_id)
    assert settings.namespace == job.evaluator.metric_namespace == "CdkSageMakerDebugger"


# -- TrainingDashboard's GPU watch ---------------------------------------------------------------------------------------
def _low_gpu_metric(deployed: TemplateResolver) -> dict[str, Any]:
    _, alarm = deployed.one("AWS::CloudWatch::Alarm", lambda p: p.get("MetricName") == "LowestGPUUtilization")
    return {"Namespace": alarm["Namespace"], "MetricName": alarm["MetricName"],
            "Dimensions": deployed.resolve(alarm["Dimensions"])}


def _published_metric(settings: WatchSettings) -> dict[str, Any]:
    """What the watch's EMF line publishes when one host reported (CloudWatch's reading of the format)."""
    line = json.loads(watch.emf_line(settings, watch.Measurement({"vision-train-1/algo-1": 5.0}), 0))
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    (dimensions,) = directive["Dimensions"]
    assert "LowestGPUUtilization" in [m["Name"] for m in directive["Metrics"]]
    return {"Namespace": directive["Namespace"], "MetricName": "LowestGPUUtilization",
            "Dimensions": [{"Name": name, "Value": line[name]} for name in dimensions]}


@pytest.mark.parametrize("namespace", [None, "Team/Training"])
def test_the_gpu_watch_reads_the_family_gpus_and_namespace_and_publishes_what_the_alarm_watches(
        namespace: str | None) -> None:
    stack = make_stack(REGION, name="Contract")
    jobs = TrainingJobs.from_job_name_prefix("vision-train-", output_bucket=s3.Bucket(stack, "Output"))
    evaluator = (RuleEvaluator(stack, "Evaluator", training_jobs=jobs, metric_namespace=namespace)
                 if namespace is not None else None)
    TrainingDashboard(stack, "Dashboard", training_jobs=jobs, evaluator=evaluator, instance_type="ml.g5.12xlarge")
    deployed = _deployed(stack)

    settings = WatchSettings.from_environment(deployed.function_environment(WATCH_HANDLER))

    assert settings == WatchSettings("vision-train-", 4, namespace or "CdkSageMakerDebugger")
    assert _published_metric(settings) == _low_gpu_metric(deployed)
    if evaluator is not None:  # the evaluator publishes its verdict metric in the same namespace
        evaluator_settings = EvaluatorSettings.from_env(deployed.function_environment(EVALUATOR_HANDLER))
        assert evaluator_settings.namespace == settings.namespace
        assert evaluator_settings.family.job_name_prefix == settings.job_name_prefix


def test_a_training_jobs_dashboard_watch_reads_its_runs_and_its_instance_gpus() -> None:
    stack = make_stack(REGION, name="Contract")
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE,
                              instance_type="ml.p4d.24xlarge")
    TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs)
    deployed = _deployed(stack)

    settings = WatchSettings.from_environment(deployed.function_environment(WATCH_HANDLER))

    role = deployed.resolve(stack.resolve(job.role.role_arn))
    assert settings == WatchSettings("vision-", 8, DEFAULT_NAMESPACE, (role,))
    assert ":role/" in role  # the family's role
    assert _published_metric(settings) == _low_gpu_metric(deployed)
