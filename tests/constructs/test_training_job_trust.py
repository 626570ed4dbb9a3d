"""ProfiledTrainingJob: what cdk-nag still reports, what the execution role may not write, and the props that used to
slip through (empty image, None output prefix, fractional durations, overlapping prefixes, another region's image,
partitions beyond aws)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack, role_policy_statements

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleEngine, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
CHINA_IMAGE = "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.3.0-gpu-py311"


def job(stack: cdk.Stack, id: str = "Job", **kwargs: Any) -> ProfiledTrainingJob:
    props: dict[str, Any] = {"job_name_prefix": "bert", "training_image": IMAGE, "instance_type": "ml.g5.xlarge"}
    props.update(kwargs)
    return ProfiledTrainingJob(stack, id, **props)


def _violations(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((v["ruleName"], r["constructPath"]) for v in report["violations"]
                  for r in v.get("violatingResources", v.get("violatingConstructs", [])))


class TestCdkNag:
    def test_a_wildcard_a_user_adds_to_the_role_later_is_reported(self, synth_with_nag):
        def build(app: cdk.App) -> None:
            training = job(make_stack(app=app), rule_set=None)
            training.role.add_to_policy(iam.PolicyStatement(actions=["s3:DeleteObject"], resources=["*"]))

        report = synth_with_nag(build)
        assert _violations(report) == [("AwsSolutions-IAM5[Resource::*]", "Training/Job/ExecutionRole/DefaultPolicy/Resource")]
        # the job's own findings stay acknowledged, each on the one resource that holds the statement
        acknowledged = {v["acknowledgedAt"] for v in report["suppressedViolations"]}
        assert acknowledged <= {"Training/Job/ExecutionRole/Resource", "Training/Job/StateMachineRole/Resource",
                                "Training/Job/StateMachineRole/DefaultPolicy/Resource",
                                "Training/Job/OutputBucket/Resource"}
        assert acknowledged  # the findings are there, acknowledged

    def test_the_library_alone_has_no_finding_left(self, synth_with_nag):
        def build(app: cdk.App) -> None:
            stack = make_stack(app=app)
            job(stack, rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]))

        report = synth_with_nag(build)
        assert report["violations"] == [] and report["suppressedViolations"]


class TestEvaluatorKeys:
    def test_the_execution_role_cannot_write_the_evaluators_state_or_reports(self):
        stack = make_stack()
        job(stack)
        deny = [s for s in role_policy_statements(stack, "JobExecutionRole") if s["Effect"] == "Deny"]
        assert len(deny) == 1 and deny[0]["Action"] == ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"]
        bucket = {"Ref": stack.get_logical_id(stack.node.find_child("Job").node.find_child("OutputBucket").node.default_child)}
        assert deny[0]["Resource"] == [  # every job's, anywhere in the bucket: not only this job's runs
            {"Fn::Join": ["", ["arn:aws:s3:::", bucket, "/*/rule-output/evaluator-state/*"]]},
            {"Fn::Join": ["", ["arn:aws:s3:::", bucket, "/*/rule-output/*/evaluator-output/*"]]},
        ]

    def test_a_role_the_user_passes_is_left_as_it_is(self):
        stack = make_stack()
        role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/Existing")
        job(stack, role=role)
        policies = json.dumps(Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
        assert "evaluator-output" not in policies


class TestProps:
    @pytest.mark.parametrize(("kwargs", "error", "message"), [
        ({"output_prefix": None}, ConfigurationTypeError,
         "Training/Job: output_prefix: expected a key prefix string such as 'training' (the default), or '' for the "
         "bucket root, got NoneType None."),
        ({"training_image": ""}, ConfigurationError, "Training/Job: training_image: must be a container image URI"),
        ({"training_image": "   "}, ConfigurationError, "Training/Job: training_image: must be a container image URI"),
        ({"max_runtime": cdk.Duration.millis(1500)}, ConfigurationError,
         "Training/Job: max_runtime: must be a whole number of seconds, got 1500 milliseconds. Use "
         "Duration.seconds(...) with an integer, for example Duration.seconds(1)."),
        ({"use_spot_instances": True, "max_wait": cdk.Duration.seconds(7200.5)}, ConfigurationError,
         "Training/Job: max_wait: must be a whole number of seconds, got 7200500 milliseconds."),
        ({"max_runtime": 3600}, ConfigurationTypeError,
         "Training/Job: max_runtime: expected a Duration such as Duration.minutes(5), got int 3600."),
    ])
    def test_bad_props_name_the_field_and_the_fix(self, kwargs: dict[str, Any], error: type, message: str):
        with pytest.raises(error) as caught:
            job(make_stack(), **kwargs)
        assert str(caught.value).startswith(message)

    def test_whole_second_durations_are_sent(self):
        stack = make_stack()
        training = job(stack, max_runtime=cdk.Duration.millis(7_200_000), use_spot_instances=True,
                       max_wait=cdk.Duration.hours(3))
        assert training.render_request()["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200,
                                                                  "MaxWaitTimeInSeconds": 10800}

    def test_profiler_rules_on_trainium_do_not_blame_the_user(self):
        """The library switched the profiler off (SageMaker refuses it on Trainium); the message says so."""
        stack = make_stack()
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
        with pytest.raises(ConfigurationError) as caught:
            job(stack, instance_type="ml.trn1.32xlarge", rule_set=rule_set, rule_engine=RuleEngine.DEBUGGER)
        message = str(caught.value)
        assert message.startswith(
            "Training/Job: profiler: profiler rules ['LowGPUUtilization'] need the profiler, which is off for this job "
            "because the profiler does not support Trainium instances (ml.trn1.32xlarge)")
        assert "Use the default rule_engine=RuleEngine.EVALUATOR" in message
        other = make_stack()
        trainium = job(other, instance_type="ml.trn1.32xlarge",
                       rule_set=ProfilerRuleSet(other, "Rules", rules=[rules.LowGPUUtilization()]))
        assert trainium.evaluator is not None  # the default engine runs on Trainium
        assert "disable_profiler=True) turns it off" not in message


class TestSharedPrefixes:
    def warnings(self, stack: cdk.Stack) -> list[Any]:
        return Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("sharedJobNamePrefix"))

    @pytest.mark.parametrize(("first", "second", "warned"), [
        ("bert", "bert", True),
        ("bert", "Bert", True),  # job ARNs are lower case: the IAM patterns coincide
        ("bert", "bert-large", True),  # training-job/bert-* also matches bert-large-<suffix>
        ("bert-large", "bert", True),
        ("bert", "bertlarge", False),
        ("bert", "roberta", False),
    ])
    def test_two_jobs_of_an_app_whose_runs_overlap_warn(self, first: str, second: str, warned: bool):
        app = cdk.App()
        job(make_stack(app=app, name="One"), job_name_prefix=first)
        other = make_stack(app=app, name="Two")
        job(other, job_name_prefix=second)
        found = self.warnings(other)
        assert len(found) == (1 if warned else 0)
        if warned:
            assert "One/Job" in found[0].entry.data and "Give each job a prefix" in found[0].entry.data


    def test_jobs_in_other_regions_or_unknown_regions_are_not_compared(self):
        app = cdk.App()
        job(make_stack(app=app, name="One"), job_name_prefix="bert")
        for name, region in (("Two", "eu-west-1"), ("Three", None)):
            other = make_stack(region, app=app, name=name)
            job(other, job_name_prefix="bert")
            assert self.warnings(other) == []


class TestRegionsAndPartitions:
    def test_an_image_from_another_region_warns(self):
        stack = make_stack("cn-north-1")
        job(stack)
        (warning,) = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("trainingImageRegion"))
        assert "is in us-east-1, but this stack deploys to cn-north-1" in warning.entry.data
        assert "and partition (aws-cn)" in warning.entry.data

    @pytest.mark.parametrize(("region", "image"), [("cn-north-1", CHINA_IMAGE), (None, IMAGE), ("us-east-1", IMAGE)])
    def test_an_image_from_the_stacks_region_or_an_agnostic_stack_does_not(self, region: str | None, image: str):
        stack = make_stack(region)
        job(stack, training_image=image)
        assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("trainingImageRegion")) == []

    def test_iso_regions_use_their_own_partition(self):
        stack = make_stack("us-iso-east-1")
        image = "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/training:1"
        training = job(stack, training_image=image)
        assert training.training_job_arn_pattern.startswith("arn:aws-iso:sagemaker:us-iso-east-1:")
        statements = role_policy_statements(stack, "JobExecutionRole")
        pull = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
        assert pull["Resource"] == "arn:aws-iso:ecr:us-iso-east-1:123456789012:repository/training"
        assert "arn:aws:" not in json.dumps(statements)
        assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("trainingImageRegion")) == []
