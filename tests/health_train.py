"""A small DistributedDataParallel job for the health scenarios (run by torchrun --nproc_per_node=2, gloo, CPU).

    health_train.py <scenario>     healthy | hang | slow-data

Every step: the next batch through ``sampler.wrap(loader)``, then the phases forward (10 ms of simulated compute),
backward (the gradient all-reduce, a barrier across ranks) and optimizer, inside ``sampler.step()``. Training runs
until HEALTH_TRAIN_UNTIL (epoch seconds on the sampler's clock, which CDK_SAGEMAKER_SAMPLER_CLOCK_OFFSET_S shifts)
and for at least MIN_TRAIN_S. ``hang``: rank 1 sleeps forever inside its forward phase after HANG_AFTER_S and one
second after the minute boundary, so rank 0 blocks in the all-reduce. ``slow-data``: rank 1's batches take about 40 ms to load.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

from cdk_sagemaker_debugger import sampler

MIN_TRAIN_S = 8.0
HANG_AFTER_S = 5.0


class Samples(torch.utils.data.Dataset):
    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int):
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randn(32), torch.randn(8)


def main() -> int:
    scenario = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    offset = float(os.environ.get("CDK_SAGEMAKER_SAMPLER_CLOCK_OFFSET_S", "0"))
    until = float(os.environ["HEALTH_TRAIN_UNTIL"])
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = scenario == "slow-data" and rank == 1
    workers = 0  # in-process loading: its time is the rank's own (a starved worker on a loaded host is not "healthy")
    loader = torch.utils.data.DataLoader(Samples(0.005 if slow else 0.0), batch_size=8, num_workers=workers)
    batches = iter(sampler.wrap(loader))
    started = time.time()
    step = 0
    while True:
        done = torch.tensor([int(time.time() - started >= MIN_TRAIN_S and time.time() + offset >= until)])
        dist.all_reduce(done, op=dist.ReduceOp.MIN)  # every rank stops after the same step
        if done.item():
            break
        with sampler.step():
            x, y = next(batches)
            with sampler.phase("forward"):
                if scenario == "hang" and rank == 1 and time.time() - started > HANG_AFTER_S \
                        and time.time() + offset >= until - 1:
                    sys.stderr.write(f"rank {rank}: hanging at step {step}\n")
                    time.sleep(3600)
                time.sleep(0.01)
                loss = torch.nn.functional.mse_loss(model(x), y)
            with sampler.phase("backward"):
                loss.backward()
            with sampler.phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad()
        step += 1
        time.sleep(0.005)
    dist.destroy_process_group()
    sys.stderr.write(f"rank {rank}: {step} steps\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
