"""The multi-node contract: code upload, launcher, checkpoints, the cluster's network, the request checks, cdk-nag."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from helpers import role_policy_statements, task_parameters

from cdk_sagemaker_debugger import (
    Checkpoints,
    Distribution,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    TrainingCode,
    rules,
)
from cdk_sagemaker_debugger.constructs.training_code import pack_source
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

SOURCE = Path(__file__).parent / "data" / "train_src"
PYTORCH_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
ENV = cdk.Environment(account="123456789012", region="us-east-1")


def stack_with_vpc(app: cdk.App | None = None) -> tuple[cdk.Stack, ec2.Vpc]:
    stack = cdk.Stack(app or cdk.App(), "Llm", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    vpc.add_flow_log("FlowLog")
    return stack, vpc


def llm(stack: cdk.Stack, vpc: ec2.Vpc | None = None, **changes: Any) -> ProfiledTrainingJob:
    """The contract of the issue, with ``changes``."""
    props: dict[str, Any] = dict(
        job_name_prefix="llm", training_image=PYTORCH_DLC, instance_type="ml.p4d.24xlarge", instance_count=4,
        code=TrainingCode.from_asset(str(SOURCE), entry_point="train.py"),
        distribution=Distribution.torch_distributed(),
        use_spot_instances=True, max_runtime=cdk.Duration.hours(20), max_wait=cdk.Duration.hours(30))
    if vpc is not None:
        props.update(vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS))
    props.update(changes)
    return ProfiledTrainingJob(stack, "Llm", **props)


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The contract with a KMS key, synthesized once with cdk-nag's AwsSolutions checks (synth raises on any
    unacknowledged finding)."""
    from cdk_nag import AwsSolutionsChecks

    out = tmp_path_factory.mktemp("multinode")
    app = cdk.App(outdir=str(out))
    stack, vpc = stack_with_vpc(app)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    bucket = s3.Bucket(stack, "Checkpoints", encryption_key=key, enforce_ssl=True, versioned=True,
                       server_access_logs_bucket=s3.Bucket(stack, "Logs", enforce_ssl=True))
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
    job = llm(stack, vpc, checkpoints=Checkpoints.from_bucket(bucket, "ckpt/llm"), output_kms_key=key,
              rule_set=rule_set)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    return {"stack": stack, "job": job, "report": json.loads((out / "validation-report.json").read_text()),
            "template": Template.from_stack(stack), "out": out,
            "bucket": stack.get_logical_id(bucket.node.default_child), "key": stack.get_logical_id(key.node.default_child)}


def test_the_request_carries_the_sdks_code_and_launcher_hyperparameters(contract):
    params = task_parameters(contract["stack"])
    hyper = params["HyperParameters"]
    assert list(hyper) == ["sagemaker_submit_directory", "sagemaker_program", "sagemaker_container_log_level",
                           "sagemaker_job_name.$", "sagemaker_region", "sagemaker_torch_distributed_enabled",
                           "sagemaker_instance_type"]
    archive = contract["job"].training_code_location.asset
    assert hyper["sagemaker_submit_directory"] == (
        f'"s3://cdk-hnb659fds-assets-123456789012-us-east-1/{archive.s3_object_key}"')
    assert hyper["sagemaker_program"] == '"train.py"' and hyper["sagemaker_container_log_level"] == "20"
    assert hyper["sagemaker_region"] == '"us-east-1"'
    assert hyper["sagemaker_job_name.$"] == """States.Format('"{}"', $.trainingRun.TrainingJobName)"""
    assert hyper["sagemaker_torch_distributed_enabled"] == "true"
    assert hyper["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'
    assert params["CheckpointConfig"] == {"S3Uri": f"s3://<Ref {contract['bucket']}>/ckpt/llm"}


def test_the_code_archive_is_the_sdks_sourcedir_layout(contract):
    asset = contract["job"].training_code_location.asset
    (archive,) = [p for p in contract["out"].glob(f"asset.{asset.asset_hash}*") if p.is_file()]
    assert asset.s3_object_key.endswith(".gz")
    with tarfile.open(archive, mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["requirements.txt", "scripts/helper.py", "train.py"]


def test_code_and_checkpoints_are_granted_on_exact_locations(contract):
    statements = role_policy_statements(contract["stack"], "LlmExecutionRole")
    text = json.dumps(statements)
    asset = contract["job"].training_code_location.asset
    assert {"Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":s3:::cdk-hnb659fds-assets-123456789012-us-east-1/{asset.s3_object_key}"]]}
            } in statements
    bucket_arn = {"Fn::GetAtt": [contract["bucket"], "Arn"]}
    checkpoint_objects = {"Fn::Join": ["", [bucket_arn, "/ckpt/llm/*"]]}
    assert {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": checkpoint_objects} in statements
    assert {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": ["ckpt/llm/*", "ckpt/llm"]}}} in statements
    assert "kms:GenerateDataKey*" in text and contract["key"] in text


def test_the_created_security_group_allows_traffic_from_itself(contract):
    contract["template"].has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "-1", "GroupId": {"Fn::GetAtt": [Match.string_like_regexp("LlmSecurityGroup"), "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [Match.string_like_regexp("LlmSecurityGroup"), "GroupId"]}})


def test_cdk_nag_reports_nothing_unacknowledged_with_a_kms_key(contract):
    (aws_solutions,) = [r for r in contract["report"]["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["conclusion"] == "success" and aws_solutions["violations"] == []
    kms_acknowledged = {(v["ruleName"], v["violatingResources"][0]["resourceLogicalId"]
                         if "violatingResources" in v else v["violatingConstructs"][0]["constructPath"])
                        for v in aws_solutions.get("suppressedViolations", []) if "kms:" in v["ruleName"]}
    paths = {where for _, where in kms_acknowledged}
    assert any("Llm/ExecutionRole/DefaultPolicy" in p for p in paths), kms_acknowledged
    assert any("Llm/Evaluator/Role/DefaultPolicy" in p for p in paths), kms_acknowledged


def test_a_token_checkpoint_uri_is_granted_on_its_prefix():
    stack, vpc = stack_with_vpc()
    bucket = s3.Bucket(stack, "Ckpt")
    llm(stack, vpc, checkpoint_s3_uri=f"s3://{bucket.bucket_name}/ckpt", sampler=None)
    statements = role_policy_statements(stack, "LlmExecutionRole")
    objects = {"Fn::Join": ["", ["arn:aws:s3:::", {"Ref": stack.get_logical_id(bucket.node.default_child)}, "/ckpt/*"]]}
    assert {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": objects} in statements
    Annotations.from_stack(stack).has_warning("/Llm/Llm", Match.string_like_regexp("customer managed KMS key"))


def test_a_checkpoint_location_that_cannot_be_granted_is_warned_about():
    stack = cdk.Stack(cdk.App(), "Llm", env=ENV)
    uri = cdk.CfnParameter(stack, "CheckpointUri").value_as_string
    llm(stack, checkpoint_s3_uri=uri, sampler=None, instance_count=1)
    Annotations.from_stack(stack).has_warning("/Llm/Llm", Match.string_like_regexp(
        "names no bucket this construct can read.*Checkpoints.from_bucket"))


def test_a_passed_security_group_without_a_self_rule_is_warned_about_until_it_has_one():
    stack, vpc = stack_with_vpc()
    group = ec2.SecurityGroup(stack, "Group", vpc=vpc)
    llm(stack, vpc, security_groups=[group], sampler=None)
    Annotations.from_stack(stack).has_warning("/Llm/Llm", Match.string_like_regexp(
        r"allow traffic from itself.*job.connections.allow_internally\(ec2.Port.all_traffic\(\)\)"))

    stack, vpc = stack_with_vpc()
    group = ec2.SecurityGroup(stack, "Group", vpc=vpc)
    job = llm(stack, vpc, security_groups=[group], sampler=None)
    job.connections.allow_internally(ec2.Port.all_traffic())
    Annotations.from_stack(stack).has_no_warning("/Llm/Llm", Match.string_like_regexp("allow traffic from itself"))


def test_single_instance_jobs_get_no_self_rule():
    stack, vpc = stack_with_vpc()
    llm(stack, vpc, instance_count=1, sampler=None)
    Template.from_stack(stack).resource_count_is("AWS::EC2::SecurityGroupIngress", 0)


def test_inter_container_traffic_encryption_under_both_names():
    stack = cdk.Stack(cdk.App(), "Llm", env=ENV)
    llm(stack, enable_inter_container_traffic_encryption=True, sampler=None)
    assert task_parameters(stack)["EnableInterContainerTrafficEncryption"] is True
    with pytest.raises(ConfigurationError, match="enable_inter_container_traffic_encryption: .*contradicts"):
        llm(cdk.Stack(cdk.App(), "S", env=ENV), encrypt_inter_container_traffic=True,
            enable_inter_container_traffic_encryption=False)


@pytest.mark.parametrize(("changes", "message"), [
    ({"volume_kms_key": "key", "instance_type": "ml.p4d.24xlarge"}, r"volume_kms_key: ResourceConfig.VolumeKmsKeyId"),
    ({"max_wait": None}, r"max_wait: managed spot training needs"),
    ({"max_runtime": cdk.Duration.days(30), "max_wait": cdk.Duration.days(31)}, r"max_runtime: .*over the 28 days"),
    ({"keep_alive": cdk.Duration.minutes(10)}, r"keep_alive: .*managed spot"),
    ({"instance_type": "ml.m5.xlarge"}, r"instance_type: torch_distributed: torchrun is supported on GPU"),
    ({"distribution": Distribution.pytorch_ddp()}, r"training_image: .*2\.3\.0 is not supported by SMDDP"),
    ({"distribution": Distribution.mpi(), "instance_type": "ml.trn1.32xlarge"}, r"Trainium instances"),
    ({"hyperparameters": {"sagemaker_program": "x.py"}}, r"hyperparameters: sagemaker_program is set from code="),
    ({"training_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-trainer:1"},
     r"code: the training image .* is not an AWS Deep Learning Container"),
])
def test_invalid_combinations_fail_with_the_member_and_the_fix(changes, message):
    stack = cdk.Stack(cdk.App(), "Llm", env=ENV)
    if changes.get("volume_kms_key") == "key":
        changes["volume_kms_key"] = kms.Key(stack, "Key")
    with pytest.raises(ConfigurationError, match=message) as raised:
        llm(stack, **changes)
    assert str(raised.value).startswith("Llm/Llm: ")


def test_a_distribution_without_code_warns_that_it_launches_nothing():
    stack = cdk.Stack(cdk.App(), "Llm", env=ENV)
    llm(stack, code=None, sampler=None)
    Annotations.from_stack(stack).has_warning("/Llm/Llm", Match.string_like_regexp("sets no launcher"))


def test_code_from_a_bucket_is_granted_with_its_key():
    stack = cdk.Stack(cdk.App(), "Llm", env=ENV)
    key = kms.Key(stack, "CodeKey")
    bucket = s3.Bucket(stack, "Code", encryption_key=key)
    llm(stack, code=TrainingCode.from_bucket(bucket, "code/sourcedir.tar.gz", entry_point="train.py"), sampler=None)
    assert task_parameters(stack)["HyperParameters"]["sagemaker_submit_directory"] == (
        f'"s3://<Ref {stack.get_logical_id(bucket.node.default_child)}>/code/sourcedir.tar.gz"')
    text = json.dumps(role_policy_statements(stack, "LlmExecutionRole"))
    assert '"/code/sourcedir.tar.gz"' in text and "kms:Decrypt" in text


def test_training_code_inputs_are_checked():
    with pytest.raises(ConfigurationError, match="entry_point: 'missing.py' is not a file"):
        TrainingCode.from_asset(str(SOURCE), entry_point="missing.py")
    with pytest.raises(ConfigurationError, match=r"entry_point: must be a relative path .* got '../x.py'"):
        TrainingCode.from_asset(str(SOURCE), entry_point="../x.py")
    with pytest.raises(ConfigurationTypeError, match="s3_uri: expected an s3:// URI"):
        TrainingCode.from_s3_uri("/local/code.tar.gz", entry_point="train.py")
    with pytest.raises(ConfigurationError, match="prefix: must be a key prefix"):
        Checkpoints.from_bucket(s3.Bucket.from_bucket_name(cdk.Stack(), "B", "bucket-b"), "/")


def test_the_archive_is_reproducible_and_leaves_out_caches(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    first = pack_source(tmp_path)
    (tmp_path / "train.py").touch()  # a new mtime changes nothing
    assert pack_source(tmp_path) == first
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        assert tar.getnames() == ["train.py"] and tar.getmember("train.py").mtime == 0
