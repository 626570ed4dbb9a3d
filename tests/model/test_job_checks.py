"""The request checks the API documents and botocore does not run: each names the member, the value and the fix."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.model.job_checks import MAX_RUNTIME_SECONDS, JobShape, check_job, has_instance_storage


def shape(**changes) -> JobShape:
    values = dict(instance_types=["ml.p4d.24xlarge"], volume_kms_key=False, use_spot=True, max_runtime_seconds=72000,
                  max_wait_seconds=108000, keep_alive_seconds=None)
    values.update(changes)
    return JobShape(**values)


def test_a_valid_multi_node_spot_job_passes():
    check_job(shape())


@pytest.mark.parametrize("instance_type", ["ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge"])
def test_volume_key_on_instance_storage_is_refused(instance_type):
    with pytest.raises(ConfigurationError, match=rf"volume_kms_key: ResourceConfig.VolumeKmsKeyId cannot be used with "
                       rf"{instance_type}.*Remove volume_kms_key="):
        check_job(shape(instance_types=[instance_type], volume_kms_key=True))


def test_volume_key_on_ebs_only_instances_and_groups():
    assert not has_instance_storage("ml.p3.16xlarge") and not has_instance_storage("ml.m5.xlarge")
    check_job(shape(instance_types=["ml.p3.16xlarge", "ml.m5.xlarge"], volume_kms_key=True))
    with pytest.raises(ConfigurationError, match="ml.g5.2xlarge"):
        check_job(shape(instance_types=["ml.m5.xlarge", "ml.g5.2xlarge"], volume_kms_key=True))


def test_spot_without_max_wait_is_refused():
    with pytest.raises(ConfigurationError, match=r"max_wait: managed spot training needs StoppingCondition"
                       r".MaxWaitTimeInSeconds.*Set max_wait="):
        check_job(shape(max_wait_seconds=None))
    check_job(shape(use_spot=False, max_wait_seconds=None))


def test_max_runtime_over_28_days_is_refused():
    check_job(shape(max_runtime_seconds=MAX_RUNTIME_SECONDS, max_wait_seconds=MAX_RUNTIME_SECONDS))
    with pytest.raises(ConfigurationError, match=r"max_runtime: StoppingCondition.MaxRuntimeInSeconds is 2592000 s "
                       r"\(30 days\), over the 28 days"):
        check_job(shape(max_runtime_seconds=30 * 86400, max_wait_seconds=31 * 86400))


def test_warm_pool_with_spot_is_refused():
    with pytest.raises(ConfigurationError, match="keep_alive: .*KeepAlivePeriodInSeconds.*managed spot"):
        check_job(shape(keep_alive_seconds=600))
    check_job(shape(use_spot=False, max_wait_seconds=None, keep_alive_seconds=600))


def test_tokens_are_left_to_deploy_time():
    check_job(shape(instance_types=["${Token[TOKEN.1]}"], volume_kms_key=True))
