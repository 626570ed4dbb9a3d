"""The VPC a ProfiledTrainingJob's runs join: its security groups (a new one unless given) and subnets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_cdk import aws_ec2 as ec2

from .props import subnet_kwargs

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["place_in_vpc"]


def place_in_vpc(job: JobParts, vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None,
                 security_groups: Sequence[ec2.ISecurityGroup] | None
                 ) -> tuple[ec2.IVpc | None, list[ec2.ISecurityGroup], list[str]]:
    """The VPC, the security groups (a new one unless given) and the subnets of VpcConfig."""
    groups = list(security_groups or ())
    if vpc is None:
        return None, groups, []
    if not groups:
        groups.append(ec2.SecurityGroup(job, "SecurityGroup", vpc=vpc,  # type: ignore[arg-type]
                                        description=f"Training jobs {job.job_name_prefix}-*"))
    return vpc, groups, vpc.select_subnets(**subnet_kwargs(vpc_subnets)).subnet_ids
