"""A minimal DDP training script for the two-node example: torchrun starts one process per GPU on every host (the
toolkit in the PyTorch Deep Learning Container reads sagemaker_torch_distributed_enabled), and SageMaker copies
/opt/ml/checkpoints to the job's checkpoint prefix, so a spot restart resumes from the last saved epoch."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from cdk_sagemaker_debugger import sampler  # the sampler bundle is on PYTHONPATH in every container of the job

CHECKPOINT = "/opt/ml/checkpoints/model.pt"


def main(epochs: int = 10, steps: int = 100) -> None:
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    model = DistributedDataParallel(torch.nn.Linear(1024, 1024).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if os.path.exists(CHECKPOINT):  # restored by SageMaker after a spot interruption
        state = torch.load(CHECKPOINT, map_location=device)
        model.module.load_state_dict(state["model"])
        start = state["epoch"] + 1
    for epoch in range(start, epochs):
        for _ in range(steps):
            with sampler.step():  # one step event per iteration, for StepOutlier and the dashboard
                batch = torch.randn(64, 1024, device=device)
                loss = model(batch).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        if dist.get_rank() == 0:
            os.makedirs(os.path.dirname(CHECKPOINT), exist_ok=True)
            torch.save({"model": model.module.state_dict(), "epoch": epoch}, CHECKPOINT)
            print(f"epoch={epoch} loss={loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
