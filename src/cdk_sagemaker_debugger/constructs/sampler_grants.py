"""What a training job's execution role needs for the sampler, as one grant: read the sampler bundle (the one object)
and upload the profiler files (the one prefix, ``<output>/<job name prefix>-*/profiler-output/``).

``ProfiledTrainingJob`` grants this to the execution role it creates; ``job.grant_sampler(role)`` gives
the same to a role you pass (``role=``), with the same cdk-nag acknowledgement on that role's policy alone.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from ..model.errors import ConfigurationError
from ._cdk.nag import acknowledge_wildcards


def upload_prefix(job: Any) -> str:
    """The ARN pattern of the profiler files of the job's runs (the same the job's own execution role gets)."""
    return job._policy.upload_prefix(f"{job.job_name_prefix}-")  # noqa: SLF001 - the job's execution policy


def grant_sampler(job: Any, grantee: iam.IGrantable) -> iam.Grant:
    """``s3:GetObject`` on the sampler bundle object and ``s3:PutObject`` on the profiler-output prefix of the job's
    runs, nothing else (no bucket-wide read of the assets bucket)."""
    bundle = job.sampler_bundle
    if bundle is None:
        raise ConfigurationError("the job has no sampler (sampler=None, or it stepped aside): nothing to grant",
                                 where=job.node.path, field="sampler")
    read = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                      resource_arns=[bundle.bucket.arn_for_objects(bundle.s3_object_key)])
    uploads = upload_prefix(job)
    write = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:PutObject"], resource_arns=[uploads])
    # the role's own policy holds the statement: the wildcard (one per run's job name) is acknowledged there alone
    principal = grantee.grant_principal
    default = principal.node.try_find_child("DefaultPolicy") if hasattr(principal, "node") else None
    if default is not None:
        acknowledge_wildcards(default, {f"Resource::{uploads}": "The sampler uploads each run's profiler files to "
                                        "<job>/profiler-output/, whose job name is generated per run; scoped to "
                                        "this prefix."}, stack=cdk.Stack.of(job))
    return read.combine(write)
