"""A ProfiledTrainingJob's request as a SageMaker Pipelines Training step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...model.contract import PIPELINE_JOB_NAME_PREFIX
from ...model.pipeline_definition import training_step
from ..output_locations import claim_output_location

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["pipeline_step"]


def pipeline_step(job: JobParts, name: str, *, depends_on: Sequence[str] | None = None,
                  display_name: str | None = None, description: str | None = None,
                  cache_expire_after: str | None = None) -> dict[str, Any]:
    """The step of ``ProfiledTrainingJob.pipeline_step`` (documented there)."""
    step = training_step(name, job.render_request(), depends_on=depends_on, display_name=display_name,
                         description=description, cache_expire_after=cache_expire_after, where=job._where)
    dropped = sorted(set(job.request_members.top.get("ExperimentConfig", {})) - {"TrialComponentDisplayName"})
    if dropped:
        job._warn("pipelineExperimentConfig", f"Pipeline step {name!r} leaves out ExperimentConfig "
                  f"{', '.join(dropped)}: Pipelines associates its jobs with the pipeline's own experiment and "
                  "trial (the SageMaker Python SDK drops them too).")
    job._policy.allow_pipeline_runs()
    if not getattr(job, "_pipeline_claimed", False):
        job._pipeline_claimed = True  # type: ignore[attr-defined]
        claim_output_location(job, bucket=job.output_bucket, prefix=job.output_prefix, names=PIPELINE_JOB_NAME_PREFIX,
                              roles=[job.role.role_arn], what="the SageMaker Pipelines runs of the training job",
                              stack=job._stack)
    job._engine.grant_pipeline_runs()
    return step
