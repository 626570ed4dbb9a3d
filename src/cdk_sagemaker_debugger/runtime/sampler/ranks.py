"""Which rank this process is, from the launcher's environment: torchrun, Open MPI / smddp (mpirun), Intel MPI / MPICH.

The rank goes into the name of every timeline file (Debugger's ``<rank>-<host>`` token, which readers turn into
``algo-1-<rank>``); the local rank (the GPU a rank drives, by convention) goes into the phase and data loader events.
"""

import os

#: torchrun and torch.distributed.launch, Open MPI (smddp runs under mpirun), MPICH / Intel MPI, Slurm.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def _first_number(names, env) -> int:
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def rank(env=None) -> int:
    """The global rank (0 when no launcher set one)."""
    return _first_number(RANK_VARIABLES, os.environ if env is None else env)


def local_rank(env=None) -> int:
    """The rank on this host (0 when no launcher set one)."""
    return _first_number(LOCAL_RANK_VARIABLES, os.environ if env is None else env)
