"""One evaluator invocation in its own process, as Lambda runs each (test_evaluator_race.py, test_evaluator_queue.py).

``python race_worker.py CONFIG.json``: runs the real Lambda handler against a moto server, with a SageMaker Stubber
answering from the config. The config can hold the run at two points so a test can order two processes:
``signal_loaded`` (a file created once the run has read the job's state) and ``wait_before_save`` (a file the run
waits for before its first state commit). ``event: "sqs"`` invokes it with the job message in ``message``, as the
queue's event source mapping does; ``memory_cap_mb`` caps the address space that far above what the interpreter uses
when it starts evaluating (a function's memory size). Prints the handler's outcome as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

TIME_FIELDS = ("CreationTime", "TrainingStartTime", "TrainingEndTime")


class GatedS3:
    """The real S3 client, holding this run at the points the config names (only around the state object)."""

    def __init__(self, real: Any, state_key: str, config: dict[str, Any]):
        self.real, self.state_key, self.config = real, state_key, config
        self.saves = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_object(self, **kwargs: Any) -> Any:
        try:
            return self.real.get_object(**kwargs)
        finally:  # read, or found missing (a first run)
            if kwargs["Key"] == self.state_key and self.config.get("signal_loaded"):
                Path(self.config["signal_loaded"]).touch()

    def put_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"] == self.state_key and self.saves == 0 and self.config.get("wait_before_save"):
            gate = Path(self.config["wait_before_save"])
            give_up = time.monotonic() + 120
            while not gate.exists() and time.monotonic() < give_up:
                time.sleep(0.05)
        if kwargs["Key"] == self.state_key:
            self.saves += 1
        return self.real.put_object(**kwargs)


class Context:
    def __init__(self, remaining_ms: int):
        self.end = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self.end - time.monotonic()) * 1000)


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    endpoint, region = config["endpoint"], config["region"]
    description = dict(config["describe"])
    for name in TIME_FIELDS:
        if name in description:
            description[name] = datetime.fromisoformat(description[name])
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=1,
                           safety_margin_s=config.get("safety_margin_s", 30.0))
    sagemaker = boto3.client("sagemaker", region_name=region)
    stub = Stubber(sagemaker)
    job = description["TrainingJobName"]
    if config["event"] == "schedule":
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": [{
            "TrainingJobName": job, "TrainingJobArn": description["TrainingJobArn"],
            "CreationTime": description["CreationTime"], "TrainingJobStatus": "InProgress"}]})
    stub.add_response("describe_training_job", description, {"TrainingJobName": job})
    stub.activate()
    s3 = boto3.client("s3", region_name=region, endpoint_url=endpoint)
    clients = lh.Clients(s3=GatedS3(s3, config["state_key"], config), sagemaker=sagemaker,
                         events=boto3.client("events", region_name=region, endpoint_url=endpoint))
    if config["event"] == "sqs":
        event: dict[str, Any] = {"Records": [{**config["message"], "eventSource": "aws:sqs"}]}
    elif config["event"] == "schedule":
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    else:
        event = {"source": "aws.sagemaker", "detail": {"TrainingJobName": job, "TrainingJobStatus": "Completed"}}
    if config.get("memory_cap_mb"):
        import resource

        in_use = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
        cap = in_use + config["memory_cap_mb"] * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    outcome = lh.handler(event, Context(config.get("remaining_ms", 300_000)), clients=clients, settings=settings)
    print(json.dumps(outcome))


if __name__ == "__main__":
    main(sys.argv[1])
