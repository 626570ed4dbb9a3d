"""A ProfiledTrainingJob's props as the CreateTrainingJob request: each member rendered by its renderer in
``model/request/render.py``, the rule engine's channels, environment and members added by its binding. A new prop
adds its member here (or to ``model/request/members.py`` for members beyond the basics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...model.request import render
from ...model.request.training import example_job_name
from .. import multinode

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["render_job_request"]


def render_job_request(job: JobParts, *, job_name: str | None = None) -> dict[str, Any]:
    """The request of ``ProfiledTrainingJob.render_request`` (documented there)."""
    channels, environment, engine_members = job._engine.request(
        [channel.to_request() for channel in job.inputs], job._environment, job_name=job_name)
    return render.render_training_request(
        job_name=job_name or example_job_name(job.job_name_prefix),
        algorithm=render.algorithm_specification(training_image=job.training_image,
                                                 algorithm_name=job.algorithm_name,
                                                 input_mode=job.training_input_mode),
        role_arn=job._role_arn,
        channels=channels,
        output=render.output_data_config(s3_output_path=job.output_s3_uri, kms_key_id=job._output_key_arn),
        resource=render.resource_config(instance_type=job.instance_type, instance_count=job.instance_count,
                                        volume_size_in_gb=job.volume_size_in_gb,
                                        volume_kms_key_id=job._volume_key_arn),
        vpc=render.vpc_config(security_group_ids=job._security_group_ids, subnets=job._subnet_ids,
                              in_vpc=job.vpc is not None),
        stopping=job._stopping,
        hyperparameters=multinode.hyperparameters(job, job_name or example_job_name(job.job_name_prefix)),
        environment=environment,
        tags=job.tags,
        network_isolation=job.enable_network_isolation,
        inter_container_encryption=job.encrypt_inter_container_traffic,
        managed_spot=job.use_spot_instances,
        checkpoint=render.checkpoint_config(s3_uri=job.checkpoint_s3_uri, local_path=job.checkpoint_local_path),
        engine_members=engine_members,
        members=job.request_members,
    )
