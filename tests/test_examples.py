"""The runnable examples synthesize, and their requests carry what the docs say they do."""

from __future__ import annotations

import importlib.util
import json

import aws_cdk as cdk
from aws_cdk.assertions import Template
from helpers import ROOT, task_parameters

EXAMPLE = ROOT / "examples" / "multinode_torchrun" / "app.py"


def load_example():
    spec = importlib.util.spec_from_file_location("multinode_torchrun_app", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_multinode_example_synthesizes_a_two_node_torchrun_job(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = load_example().build(app)
    app.synth()
    params = task_parameters(stack)
    assert params["ResourceConfig"]["InstanceCount"] == 2
    assert params["HyperParameters"]["sagemaker_program"] == '"train.py"'
    assert params["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert params["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert params["EnableManagedSpotTraining"] is True and "MaxWaitTimeInSeconds" in params["StoppingCondition"]
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {"IpProtocol": "-1"})
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    output = template.find_outputs("StartRun")["StartRun"]
    assert "start-execution" in output["Description"] and "Ref" in json.dumps(output["Value"])
