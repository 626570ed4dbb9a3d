"""What one run's training code (its job's execution role) can do to other runs in a shared output bucket, decided on
the synthesized templates by the local IAM evaluator (tests/policy_decisions.py): two teams' jobs in one bucket, a
job's pipeline runs, the evaluator's objects, the bucket policy of a bucket the job owns, the shared-location warning,
the roles' trust, and the Debugger notification topic."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from policy_decisions import ACCOUNT, REGION, decide, resolve

from cdk_sagemaker_debugger import (
    ActionList,
    Email,
    ProfiledTrainingJob,
    RuleEngine,
    RuleEvaluator,
    StopTraining,
    TrainingJobs,
    TrainingPipeline,
    debugger_rules,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
STATE = "rule-output/evaluator-state/0123abcd.json.gz"
SUMMARY = "rule-output/LowGPUUtilization/evaluator-output/evaluation-summary.json"
SAMPLES = "profiler-output/system/incremental/2026113012/1764504000.algo-9.json"


def _stack(app: cdk.App | None = None, name: str = "Training") -> cdk.Stack:
    return cdk.Stack(app or cdk.App(), name, env=cdk.Environment(account=ACCOUNT, region=REGION))


def _job(stack: cdk.Stack, prefix: str, **props: Any) -> ProfiledTrainingJob:
    return ProfiledTrainingJob(stack, prefix.title().replace("-", ""), job_name_prefix=prefix, training_image=IMAGE,
                               instance_type="ml.g5.2xlarge", **props)


def _role_statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of the role (inline and attached), resolved, as identity statements of that principal."""
    resources = template["Resources"]
    documents = [p["PolicyDocument"] for p in resources[role_id]["Properties"].get("Policies", [])]
    documents += [r["Properties"]["PolicyDocument"] for r in resources.values()
                  if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]]
    statements = [s for d in documents for s in resolve(d, template)["Statement"]]
    return [{**s, "Principal": "*"} for s in statements]


def _bucket_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The bucket policies' statements, each bucket's Arn written as the execution role writes it (arn:aws:s3:::name)."""
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::S3::BucketPolicy"
                  for s in resolve(r["Properties"]["PolicyDocument"], template)["Statement"]]
    text = json.dumps(statements)
    for logical_id in (k for k, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"):
        arn = resolve({"Fn::GetAtt": [logical_id, "Arn"]}, template)
        text = text.replace(arn, f"arn:aws:s3:::{resolve({'Ref': logical_id}, template)}")
    return json.loads(text)


def _id(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


class Bucket:
    """The resolved objects of one output bucket, and who may do what to them."""

    def __init__(self, stack: cdk.Stack, job: ProfiledTrainingJob) -> None:
        self.template = Template.from_stack(stack).to_json()
        self.name = resolve({"Ref": _id(stack, job.output_bucket)}, self.template)

    def key(self, key: str) -> str:
        return f"arn:aws:s3:::{self.name}/{key}"

    def may(self, role_id: str, action: str, key: str) -> str:
        """The decision for the role's identity policies together with the bucket policy (same account)."""
        role_arn = resolve({"Fn::GetAtt": [role_id, "Arn"]}, self.template)
        statements = _role_statements(self.template, role_id) + _bucket_statements(self.template)
        return decide(statements, principal={"AWS": "*"}, action=action, resource=self.key(key),
                      context={"aws:PrincipalArn": role_arn})


def test_a_run_reaches_only_its_own_runs_in_a_bucket_shared_with_another_team() -> None:
    """Before: team-a's code could write fake idle samples for team-b's runs (so the evaluator stopped them), forge
    their state and summaries (stop them with its own text, or mark them final so they were never judged), and read
    or replace their models. Now none of it is allowed, and its own runs' evaluator objects are denied too."""
    stack = _stack()
    team_a = _job(stack, "team-a")
    team_b = _job(stack, "team-b", output_bucket=team_a.output_bucket)
    bucket = Bucket(stack, team_a)
    role_a = _id(stack, team_a.role)
    victim, own = "training/team-b-0123456789abcdef0123", "training/team-a-0123456789abcdef0123"
    for action, key in [("s3:PutObject", SAMPLES), ("s3:PutObject", STATE), ("s3:PutObject", SUMMARY),
                        ("s3:GetObject", "output/model.tar.gz"), ("s3:PutObject", "output/model.tar.gz")]:
        assert bucket.may(role_a, action, f"{victim}/{key}") != "Allow", (action, key)
    assert bucket.may(role_a, "s3:PutObject", f"{own}/{SAMPLES}") == "Allow"
    assert bucket.may(role_a, "s3:PutObject", f"{own}/output/model.tar.gz") == "Allow"
    for key in (STATE, SUMMARY):  # the evaluator's objects: denied for its own runs and for everyone's
        assert bucket.may(role_a, "s3:PutObject", f"{own}/{key}") == "Deny"
        assert bucket.may(role_a, "s3:PutObject", f"{victim}/{key}") == "Deny"
        assert bucket.may(role_a, "s3:PutObject", f"elsewhere/pipelines-x-Train-y/{key}") == "Deny"
    assert bucket.may(_id(stack, team_b.role), "s3:GetObject", f"{own}/output/model.tar.gz") == "ImplicitDeny"
    assert not Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("share the output location"))


def test_pipeline_runs_are_reachable_only_once_the_job_is_a_pipeline_step() -> None:
    stack = _stack()
    job = _job(stack, "churn")
    run = "training/pipelines-kytlemm1lvpq-Train-cIpzShs3Qp"
    before = Bucket(stack, job)
    assert before.may(_id(stack, job.role), "s3:PutObject", f"{run}/{SAMPLES}") == "ImplicitDeny"

    stack = _stack()
    job = _job(stack, "churn")
    TrainingPipeline(stack, "Pipeline", steps=[job.pipeline_step("Train")], pipeline_name="churn")
    after = Bucket(stack, job)
    assert after.may(_id(stack, job.role), "s3:PutObject", f"{run}/{SAMPLES}") == "Allow"
    assert after.may(_id(stack, job.role), "s3:PutObject", f"{run}/output/model.tar.gz") == "Allow"
    assert after.may(_id(stack, job.role), "s3:PutObject", f"{run}/{STATE}") == "Deny"  # never the verdicts
    assert after.may(_id(stack, job.role), "s3:PutObject", f"{run}/{SUMMARY}") == "Deny"


def test_on_a_bucket_the_job_owns_only_the_evaluator_writes_its_objects() -> None:
    """A role made elsewhere in the account (another team's, a CI role with s3:* on the bucket) cannot forge state or
    summaries either: the bucket policy denies every principal but the RuleEvaluator's role."""
    stack = _stack()
    job = _job(stack, "resnet", rule_set=None)
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs,
                              rules=[rules.LowGPUUtilization(threshold_p95=80)])
    template = Template.from_stack(stack).to_json()
    bucket = Bucket(stack, job)
    policy = _bucket_statements(template)
    key = bucket.key(f"training/resnet-0123456789abcdef0123/{STATE}")
    evaluator_role = resolve({"Fn::GetAtt": [_id(stack, evaluator.role), "Arn"]}, template)
    broad = [{"Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "*"}]  # an admin-like role
    for principal, expected in ((f"arn:aws:iam::{ACCOUNT}:role/ci-deployer", "Deny"), (evaluator_role, "Allow")):
        decision = decide(policy + broad, principal={"AWS": "*"}, action="s3:PutObject", resource=key,
                          context={"aws:PrincipalArn": principal})
        assert decision == expected, principal
    reports = bucket.key(f"training/resnet-0123456789abcdef0123/{SUMMARY}")
    assert decide(policy + broad, principal={"AWS": "*"}, action="s3:DeleteObject", resource=reports,
                  context={"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/ci-deployer"}) == "Deny"


def test_an_evaluator_in_another_stack_is_named_in_the_owned_buckets_policy_without_a_stack_cycle() -> None:
    app = cdk.App()
    training, monitoring = _stack(app), _stack(app, "Monitoring")
    job = _job(training, "resnet")
    evaluator = RuleEvaluator(monitoring, "Evaluator", training_jobs=job.training_jobs,
                              rules=[rules.LowGPUUtilization(threshold_p95=80)])
    app.synth()  # no cyclic reference between the stacks
    name = monitoring.resolve(evaluator.role.node.default_child.role_name)
    assert name.startswith("Monitoring") and name.endswith(f"-{REGION}") and len(name) <= 64
    template = Template.from_stack(training).to_json()
    (guard,) = [s for s in _bucket_statements(template) if s.get("Sid") == "OnlyTheRuleEvaluatorWritesItsState"]
    assert guard["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == [f"arn:aws:iam::{ACCOUNT}:role/{name}"]


def test_two_parties_sharing_job_folders_get_a_warning_naming_both_and_the_fix() -> None:
    stack = _stack()
    exp = _job(stack, "exp")
    _job(stack, "exp-big", output_bucket=exp.output_bucket)  # exp's runs exp-* include exp-big-*
    other = iam.Role.from_role_arn(stack, "Other", f"arn:aws:iam::{ACCOUNT}:role/team-b")
    RuleEvaluator(stack, "TaggedEvaluator", rules=[rules.LowGPUUtilization(threshold_p95=80)],
                  training_jobs=TrainingJobs.from_tag("team", "b", output_bucket=exp.output_bucket,
                                                      output_prefix="training", execution_role=other))
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("share the output location"))
    warnings = {w.id: w.entry.data for w in found}
    assert set(warnings) == {"/Training/ExpBig", "/Training/TaggedEvaluator"}  # the later construct of each pair
    assert "Training/ExpBig and the training job Training/Exp share" in warnings["/Training/ExpBig"]
    assert "s3://<Training/Exp/OutputBucket>/training" in warnings["/Training/ExpBig"]
    assert "exp-big-* and exp-*" in warnings["/Training/ExpBig"] and "output_prefix" in warnings["/Training/ExpBig"]


@pytest.mark.parametrize("factory", [TrainingJobs.from_tag, TrainingJobs.from_pipeline], ids=["tag", "pipeline"])
def test_tag_and_pipeline_families_need_a_role(factory: Any) -> None:
    stack = _stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-output")
    args = ("team", "vision") if factory == TrainingJobs.from_tag else ("churn",)
    with pytest.raises(ConfigurationError, match="needs the role its jobs run as.*execution_role=") as caught:
        factory(*args, output_bucket=bucket)
    assert "sagemaker:AddTags" in str(caught.value)
    role = iam.Role.from_role_arn(stack, "R", f"arn:aws:iam::{ACCOUNT}:role/r")
    with pytest.raises(ConfigurationError, match="not both"):
        factory(*args, output_bucket=bucket, execution_role=role, execution_roles=[role])


def test_a_family_of_several_roles_keeps_the_identity_check() -> None:
    from cdk_sagemaker_debugger.model.contract import JobFamily

    stack = _stack()
    roles = [iam.Role.from_role_arn(stack, f"R{i}", f"arn:aws:iam::{ACCOUNT}:role/step-{i}") for i in (1, 2, 3)]
    jobs = TrainingJobs.from_tag("team", "vision", output_bucket=s3.Bucket.from_bucket_name(stack, "Out", "team-output"),
                                 execution_roles=roles[:2])
    assert jobs.execution_role is None and jobs.execution_roles == tuple(roles[:2])
    family = JobFamily.from_json(jobs.environment["JOB_FAMILY"])
    tags = {"team": "vision"}
    assert family.refusal("j", tags, role_arn=f"arn:aws:iam::{ACCOUNT}:role/step-1") is None
    assert family.refusal("j", tags, role_arn=f"arn:aws:iam::{ACCOUNT}:role/step-2") is None
    assert family.refusal("j", tags, role_arn=f"arn:aws:iam::{ACCOUNT}:role/step-3") is not None


def test_a_pipelines_family_knows_its_steps_bucket_prefix_and_roles() -> None:
    stack = _stack()
    prepare = _job(stack, "prepare")
    train = _job(stack, "train", output_bucket=prepare.output_bucket)
    pipeline = TrainingPipeline(stack, "Pipeline", pipeline_name="churn", steps=[
        prepare.pipeline_step("Prepare"), train.pipeline_step("Train", depends_on=["Prepare"])])
    jobs = pipeline.training_jobs
    assert jobs is pipeline.training_jobs  # one family
    assert jobs.output_bucket is prepare.output_bucket and jobs.output_prefix == "training"
    assert jobs.execution_roles == (prepare.role, train.role) and jobs.family.pipeline_name == "churn"
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs, rules=[rules.LowGPUUtilization(threshold_p95=80)])
    RuleEvaluator(stack, "Misread", training_jobs=TrainingJobs.from_pipeline(
        "churn", output_bucket=prepare.output_bucket, execution_roles=[prepare.role, train.role]),
        rules=[rules.LowGPUUtilization(threshold_p95=80)])
    annotations = Annotations.from_stack(stack)
    (warning,) = annotations.find_warning("*", Match.string_like_regexp("watches the runs of the SageMaker Pipeline"))
    assert warning.id == "/Training/Misread"
    assert "s3://<bucket>/training/pipelines-" in warning.entry.data and ".training_jobs" in warning.entry.data
    template = Template.from_stack(stack).to_json()
    (evaluator,) = [r for k, r in template["Resources"].items()
                    if r["Type"] == "AWS::Lambda::Function" and k.startswith("EvaluatorFunction")]
    family = evaluator["Properties"]["Environment"]["Variables"]["JOB_FAMILY"]
    assert str(family).count(":role/") == 0 and str(family).count("Arn") == 2  # both steps' roles


def test_the_execution_role_trusts_only_sagemaker_acting_for_this_account_and_region() -> None:
    stack = _stack()
    job = _job(stack, "resnet")
    template = Template.from_stack(stack).to_json()
    trust = resolve(template["Resources"][_id(stack, job.role)]["Properties"]["AssumeRolePolicyDocument"],
                    template)["Statement"]
    own = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/resnet-0123456789abcdef0123"

    def assume(account: str, source: str) -> str:
        return decide(trust, principal={"Service": "sagemaker.amazonaws.com"}, action="sts:AssumeRole",
                      resource="*", context={"aws:SourceAccount": account, "aws:SourceArn": source})

    assert assume(ACCOUNT, own) == "Allow"
    assert assume("222222222222", own.replace(ACCOUNT, "222222222222")) == "ImplicitDeny"  # a confused deputy
    assert assume(ACCOUNT, own.replace(REGION, "eu-west-1")) == "ImplicitDeny"


def _debugger_job(stack: cdk.Stack, actions: Any = None) -> ProfiledTrainingJob:
    rule = debugger_rules.Overfit(actions=actions) if actions is not None else debugger_rules.Overfit()
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="bert", training_image=IMAGE,
                               instance_type="ml.g5.2xlarge", rule_engine=RuleEngine.DEBUGGER, debugger_rules=[rule])


def _may_publish(stack: cdk.Stack, job: ProfiledTrainingJob, region: str = REGION) -> str:
    template = Template.from_stack(stack).to_json()
    return decide(_role_statements(template, _id(stack, job.role)), principal={}, action="sns:Publish",
                  resource=f"arn:aws:sns:{region}:{ACCOUNT}:SMDebugRules", context={})


def test_with_debugger_the_training_code_cannot_publish_to_the_account_wide_topic() -> None:
    stack = _stack()
    job = _debugger_job(stack, None)
    job.role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=["*"]))  # a broad grant
    assert _may_publish(stack, job) == "Deny" and _may_publish(stack, job, "eu-west-1") == "Deny"

    stack = _stack()
    job = _debugger_job(stack, ActionList(Email("ml@example.com"), StopTraining()))
    assert _may_publish(stack, job) == "Allow"  # the rule container runs as this role and must publish
    (warning,) = Annotations.from_stack(stack).find_warning("/Training/Job", Match.string_like_regexp("SMDebugRules"))
    assert "RuleAlarm" in warning.entry.data

    stack = _stack()
    job = _debugger_job(stack, None)
    job.add_debugger_rule(debugger_rules.VanishingGradient(actions=Email("ml@example.com")))  # added later
    assert _may_publish(stack, job) == "Allow"
