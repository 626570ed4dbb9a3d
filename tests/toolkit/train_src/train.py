"""The user's training script of the toolkit test: one all-reduce over gloo between the hosts, and a report of where
and how it ran (written to SM_OUTPUT_DATA_DIR, which the toolkit sets)."""

import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    report = {
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "launched_by_torchrun": "TORCHELASTIC_RUN_ID" in os.environ,
        "host": os.environ.get("SM_CURRENT_HOST"),
        "sampler_s3_uri": os.environ.get("CDK_SAGEMAKER_SAMPLER_S3_URI"),
    }
    if report["launched_by_torchrun"]:
        dist.init_process_group("gloo")
        value = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(value)
        report.update(rank=dist.get_rank(), world_size=dist.get_world_size(), all_reduce_sum=value.item())
        dist.destroy_process_group()
    folder = os.environ["SM_OUTPUT_DATA_DIR"]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "report.json"), "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main()
