"""Guard rails for Debugger features under distributed training, checkpointing, Trainium and unsupported regions."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger.model.distribution import (
    DebuggerFeatures,
    Distribution,
    check_debugger_compatibility,
    is_trainium,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, UnsupportedRegionError
from cdk_sagemaker_debugger.model.frameworks import FrameworkInfo

PYTORCH = FrameworkInfo("pytorch", (1, 13, 1))
TF2 = FrameworkInfo("tensorflow", (2, 10, 0))
TF1 = FrameworkInfo("tensorflow", (1, 15, 5))
MXNET = FrameworkInfo("mxnet", (1, 9, 0))
XGBOOST = FrameworkInfo("xgboost", (1, 7))

SYSTEM = DebuggerFeatures(system_monitoring=True)
TENSORS = DebuggerFeatures(tensor_debugging=True)
PROFILING = DebuggerFeatures(system_monitoring=True, framework_profiling=True)
COLLECTIVES = DebuggerFeatures(system_monitoring=True, framework_profiling=True, profiles_collectives=True)


def check(**kwargs):
    kwargs.setdefault("region", "us-west-2")
    return check_debugger_compatibility(**kwargs)


class TestRegions:
    def test_region_without_debugger_fails(self):
        with pytest.raises(UnsupportedRegionError, match=r"^Stack/Job: region: SageMaker Debugger and the profiler are not available in region 'me-central-1'"):
            check(features=TENSORS, region="me-central-1", where="Stack/Job")

    def test_region_without_debugger_is_fine_when_nothing_is_used(self):
        assert check(features=DebuggerFeatures(), region="me-central-1") == []

    @pytest.mark.parametrize("region", [None, "${Token[AWS.Region.3]}"])
    def test_unknown_region_is_not_checked(self, region):
        assert check(features=TENSORS, region=region) == []


class TestTrainium:
    @pytest.mark.parametrize("instance_type", ["ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge", "ml_trn1"])
    def test_trainium_instance_types(self, instance_type):
        assert is_trainium(instance_type)

    @pytest.mark.parametrize("instance_type", ["ml.p4d.24xlarge", "ml.inf2.xlarge", "ml.g5.xlarge", None, "${Token[X.1]}"])
    def test_other_instance_types(self, instance_type):
        assert not is_trainium(instance_type)

    @pytest.mark.parametrize(
        "features", [SYSTEM, DebuggerFeatures(framework_profiling=True), DebuggerFeatures(profiler_rules=True)]
    )
    def test_profiler_on_trainium_fails(self, features):
        with pytest.raises(ConfigurationError, match=r"instance_type: ml\.trn1\.32xlarge is an AWS Trainium instance, where the SageMaker profiler is not supported\. Turn it off: profiler=ProfilerConfig\(disable_profiler=True\)"):
            check(features=features, instance_type="ml.trn1.32xlarge")

    def test_tensor_debugging_on_trainium_is_allowed(self):
        assert check(features=TENSORS, instance_type="ml.trn1.32xlarge") == []


class TestUnsupportedStrategies:
    @pytest.mark.parametrize(
        ("distribution", "label"),
        [
            (Distribution.smdistributed_model_parallel(), "SageMaker distributed model parallel"),
            (Distribution.parameter_server(), "parameter server"),
        ],
    )
    @pytest.mark.parametrize(
        ("features", "used"),
        [
            (TENSORS, "the debugger hook/rules are configured"),
            (DebuggerFeatures(framework_profiling=True), "framework profiling are configured"),
            (DebuggerFeatures(tensor_debugging=True, framework_profiling=True), "the debugger hook/rules and framework profiling"),
        ],
    )
    def test_debugger_with_model_parallel_or_parameter_server_fails(self, distribution, label, features, used):
        with pytest.raises(ConfigurationError) as raised:
            check(features=features, distribution=distribution, framework=TF2)
        message = str(raised.value)
        assert message.startswith(f"distribution: SageMaker Debugger does not support {label} training, but ")
        assert used in message
        assert "Remove debug_hook, debugger_rules and framework_profile" in message

    def test_system_monitoring_alone_warns(self):
        warnings = check(features=SYSTEM, distribution=Distribution.smdistributed_model_parallel(), framework=PYTORCH)
        assert warnings == [
            "SageMaker Debugger does not support SageMaker distributed model parallel training; system monitoring and "
            "profiler rules may report incomplete data for this job."
        ]


class TestCheckpointing:
    MESSAGE = "SMDebug Does Not Currently Support Distributed Training Jobs With Checkpointing Enabled"

    def test_multi_instance_with_checkpointing_and_hook_fails(self):
        with pytest.raises(ConfigurationError) as raised:
            check(features=TENSORS, instance_count=2, checkpointing=True, where="Stack/Job")
        message = str(raised.value)
        # the guard rail names the props the user sets (checkpoint_s3_uri), not the API member
        assert message.startswith(f"Stack/Job: checkpoint_s3_uri: {self.MESSAGE} (2 instances with checkpoint_s3_uri)")
        assert "disable SageMaker checkpointing (remove checkpoint_s3_uri and checkpoint_local_path) and save checkpoints" in message
        assert "checkpoint_config" not in message
        assert "or remove debug_hook and debugger_rules" in message

    def test_single_instance_distribution_with_checkpointing_fails(self):
        with pytest.raises(ConfigurationError, match=rf"{self.MESSAGE} \(torch_distributed with checkpoint_s3_uri\)"):
            check(features=TENSORS, distribution=Distribution.torch_distributed(), framework=PYTORCH, checkpointing=True)

    def test_single_instance_without_distribution_keeps_its_hook(self):
        # The SDK drops the hook here for PyTorch and TensorFlow (its distribution attribute is never None).
        assert check(features=TENSORS, instance_count=1, checkpointing=True) == []

    def test_checkpointing_without_tensor_debugging(self):
        assert check(features=SYSTEM, instance_count=4, checkpointing=True) == []

    def test_unknown_instance_count_is_not_multi_instance(self):
        assert check(features=TENSORS, instance_count=-1.8881545897087626e289, checkpointing=True) == []


class TestCollectives:
    @pytest.mark.parametrize(
        ("distribution", "label"),
        [(Distribution.horovod(), "MPI/Horovod"), (Distribution.smdistributed_data_parallel(), "SageMaker distributed data parallel (SMDDP)")],
    )
    def test_profiling_collectives_warns(self, distribution, label):
        warnings = check(features=COLLECTIVES, distribution=distribution, framework=PYTORCH)
        assert warnings == [
            f"Framework profiling does not collect the collective operations of {label} (AllReduce and Horovod "
            "operations); their time shows only in step durations."
        ]

    def test_no_warning_without_collective_profiling(self):
        assert check(features=PROFILING, distribution=Distribution.horovod(), framework=PYTORCH) == []

    def test_no_warning_for_other_strategies(self):
        assert check(features=COLLECTIVES, distribution=Distribution.torch_distributed(), framework=PYTORCH) == []


class TestFrameworkTable:
    @pytest.mark.parametrize(
        ("distribution", "framework", "message"),
        [
            (Distribution.torch_distributed(), TF2, r"torch_distributed runs PyTorch training, but the training image is TensorFlow 2\.10\.0"),
            (Distribution.parameter_server(), PYTORCH, r"parameter server runs TensorFlow or MXNet training, but the training image is PyTorch 1\.13\.1"),
            (Distribution.smdistributed_data_parallel(), MXNET, r"SageMaker distributed data parallel \(SMDDP\) runs TensorFlow or PyTorch training, but the training image is MXNet 1\.9\.0"),
            (Distribution.mpi(), XGBOOST, r"MPI/Horovod runs TensorFlow, PyTorch or MXNet training, but the training image is XGBoost 1\.7\. Use a matching framework image"),
            (Distribution.smdistributed_data_parallel(), TF1, r"SageMaker distributed data parallel \(SMDDP\) supports TensorFlow 2\.x, but the training image is TensorFlow 1\.15\.5"),
        ],
    )
    def test_strategy_and_framework_must_match(self, distribution, framework, message):
        with pytest.raises(ConfigurationError, match=r"^distribution: " + message):
            check(features=SYSTEM, distribution=distribution, framework=framework)

    def test_unknown_framework_is_not_checked(self):
        assert check(features=SYSTEM, distribution=Distribution.torch_distributed(), framework=None) == []

    @pytest.mark.parametrize(
        ("distribution", "framework", "fragment"),
        [
            (Distribution.horovod(), MXNET, "not collected for MXNet training with Horovod"),
            (Distribution.horovod(), TF1, "only for TensorFlow 2.x models built with Keras; with TensorFlow 1.15.5"),
            (Distribution.smdistributed_data_parallel(), TF2, "does not profile TensorFlow 2.x framework operations under SMDDP"),
        ],
    )
    def test_framework_profiling_gaps_warn(self, distribution, framework, fragment):
        warnings = check(features=PROFILING, distribution=distribution, framework=framework)
        assert len(warnings) == 1 and fragment in warnings[0]

    @pytest.mark.parametrize("distribution", [Distribution.horovod(), Distribution.smdistributed_data_parallel()])
    def test_pytorch_framework_profiling_is_supported(self, distribution):
        assert check(features=PROFILING, distribution=distribution, framework=PYTORCH) == []


class TestDistributionSetting:
    @pytest.mark.parametrize(
        ("sdk", "expected"),
        [
            ({"mpi": {"enabled": True, "processes_per_host": 8}}, Distribution.mpi(processes_per_host=8)),
            ({"smdistributed": {"dataparallel": {"enabled": True}}}, Distribution.smdistributed_data_parallel()),
            ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}}}, Distribution.smdistributed_model_parallel(parameters={"partitions": 2})),
            ({"parameter_server": {"enabled": True}}, Distribution.parameter_server()),
            ({"torch_distributed": {"enabled": True}}, Distribution.torch_distributed()),
            ({"pytorchddp": {"enabled": True}}, Distribution.pytorch_ddp()),
            ({"mpi": {"enabled": False}}, None),
            ({}, None),
        ],
    )
    def test_from_sdk(self, sdk, expected):
        assert Distribution.from_sdk(sdk) == expected

    def test_horovod_is_mpi(self):
        assert Distribution.horovod(processes_per_host=2) == Distribution.mpi(processes_per_host=2)

    def test_unknown_sdk_key(self):
        with pytest.raises(ConfigurationError, match=r"^Distribution: paramater_server: unknown distribution key 'paramater_server'\. Did you mean 'parameter_server'\?"):
            Distribution.from_sdk({"paramater_server": {"enabled": True}})

    def test_unknown_smdistributed_library(self):
        with pytest.raises(ConfigurationError, match=r"unknown smdistributed library 'pipeline'"):
            Distribution.from_sdk({"smdistributed": {"pipeline": {"enabled": True}}})

    def test_two_strategies(self):
        with pytest.raises(ConfigurationError, match=r"enables more than one strategy \(MPI/Horovod, parameter server\)"):
            Distribution.from_sdk({"mpi": {"enabled": True}, "parameter_server": {"enabled": True}})

    def test_unknown_kind(self):
        with pytest.raises(ConfigurationError, match=r"^Distribution: kind: unknown distribution 'horovd'"):
            Distribution("horovd")

    @pytest.mark.parametrize("count", [0, -1, 1.5, True])
    def test_processes_per_host(self, count):
        with pytest.raises(ConfigurationError, match=r"^Distribution: processes_per_host: must be a positive integer"):
            Distribution.mpi(processes_per_host=count)
