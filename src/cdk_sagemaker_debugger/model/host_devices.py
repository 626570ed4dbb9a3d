"""How many GPUs one training host has, from its instance type and what the user says: the one check the dashboard's
per-GPU figures rest on."""

from __future__ import annotations

from typing import Any

from .errors import ConfigurationError

__all__ = ["MAX_GPUS_PER_HOST", "resolve_gpus_per_host"]

#: No SageMaker instance type has more; the prop accepts 0 (no GPU) to this.
MAX_GPUS_PER_HOST = 64


def resolve_gpus_per_host(instance_type: str | None, given: Any, table_gpus: int | None, *, where: str) -> int:
    """The GPUs of one host: ``given`` (the ``gpus_per_host=`` prop) when set, else ``table_gpus`` (what the
    library's instance table says about ``instance_type``; None: not known).

    A given count that contradicts the table is refused: SageMaker's GPU utilisation of a host is the sum over its
    GPUs, so dividing by a wrong count shows every reading at the wrong scale (8 on a 1-GPU type: an eighth)."""
    if given is None:
        if table_gpus is None:
            known = "is not known to the library's GPU table" if instance_type else "is not given"
            raise ConfigurationError(
                f"the instance type {instance_type!r} {known}, so GPU utilisation cannot be shown per GPU. Pass "
                "instance_type= (for example 'ml.g5.12xlarge') or gpus_per_host= (for example 8 for "
                "ml.p4d.24xlarge).", where=where, field="instance_type" if instance_type is None else "gpus_per_host",
                value=instance_type)
        return table_gpus
    if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given <= MAX_GPUS_PER_HOST:
        raise ConfigurationError(f"must be a whole number of GPUs per instance from 0 to {MAX_GPUS_PER_HOST}, got "
                                 f"{given!r}.", where=where, field="gpus_per_host", value=given)
    if table_gpus is not None and given != table_gpus:
        raise ConfigurationError(
            f"{instance_type} has {table_gpus} GPU{'s' if table_gpus != 1 else ''} per instance, not {given}; every "
            f"per-GPU reading would show at {table_gpus}/{given} of its value. Drop gpus_per_host= (the instance "
            "type decides) or fix instance_type=.", where=where, field="gpus_per_host", value=given)
    return given
