"""Launchers read from and written as the SDK's distribution dict, and their own checks."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger import Distribution
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.model.frameworks import parse_training_image
from cdk_sagemaker_debugger.model.launchers import check_launcher

LAUNCHERS = [
    Distribution.torch_distributed(), Distribution.pytorch_ddp(), Distribution.mpi(),
    Distribution.mpi(processes_per_host=8, custom_mpi_options="-x NCCL_DEBUG=INFO"),
    Distribution.smdistributed_data_parallel(custom_mpi_options="-verbose"),
    Distribution.smdistributed_model_parallel(parameters={"partitions": 2}, processes_per_host=8),
    Distribution.parameter_server(),
]


@pytest.mark.parametrize("launcher", LAUNCHERS, ids=lambda d: d.kind)
def test_the_sdk_dict_reads_back_as_the_same_launcher(launcher):
    assert Distribution.from_sdk(launcher.to_sdk()) == launcher


def test_model_parallel_needs_partitions_when_it_launches():
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310"
    with pytest.raises(ConfigurationError, match="'partitions' is a required parameter"):
        check_launcher(Distribution.smdistributed_model_parallel(), framework=parse_training_image(image),
                       training_image=image, instance_type="ml.p4d.24xlarge", entry_point="train.py")


def test_a_dlc_tag_with_a_minor_version_passes_when_a_patch_release_is_supported():
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-gpu-py311"
    check_launcher(Distribution.torch_distributed(), framework=parse_training_image(image), training_image=image,
                   instance_type="ml.p4d.24xlarge", entry_point="train.py")
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9-gpu-py312"
    with pytest.raises(ConfigurationError, match=r"PyTorch 2\.9 is not supported on ml.p4d.24xlarge"):
        check_launcher(Distribution.torch_distributed(), framework=parse_training_image(image), training_image=image,
                       instance_type="ml.p4d.24xlarge", entry_point="train.py")
