"""Region image registry for the Debugger rule evaluator containers.

Sources: the AWS "Docker images for Debugger rules" tables (seed 002) and the SageMaker Python SDK's
``image_uri_config/debugger.json``, which adds ap-northeast-3 for the built-in image. No source lists a custom-rule
evaluator account for ap-northeast-3, so it is absent from that table on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from .errors import UnsupportedRegionError, did_you_mean

__all__ = [
    "BUILTIN_RULE_REPOSITORY",
    "CUSTOM_RULE_REPOSITORY",
    "BUILTIN_RULE_ACCOUNTS",
    "CUSTOM_RULE_ACCOUNTS",
    "DEBUGGER_UNSUPPORTED_REGIONS",
    "builtin_rule_image",
    "custom_rule_image",
    "url_suffix",
    "partition_of",
    "check_debugger_region",
]

BUILTIN_RULE_REPOSITORY = "sagemaker-debugger-rules"
CUSTOM_RULE_REPOSITORY = "sagemaker-debugger-rule-evaluator"
IMAGE_TAG = "latest"

#: Account that hosts ``sagemaker-debugger-rules:latest`` per region (24 regions).
BUILTIN_RULE_ACCOUNTS: Mapping[str, str] = MappingProxyType(
    {
        "af-south-1": "314341159256",
        "ap-east-1": "199566480951",
        "ap-northeast-1": "430734990657",
        "ap-northeast-2": "578805364391",
        "ap-northeast-3": "479947661362",
        "ap-south-1": "904829902805",
        "ap-southeast-1": "972752614525",
        "ap-southeast-2": "184798709955",
        "ca-central-1": "519511493484",
        "cn-north-1": "618459771430",
        "cn-northwest-1": "658757709296",
        "eu-central-1": "482524230118",
        "eu-north-1": "314864569078",
        "eu-south-1": "563282790590",
        "eu-west-1": "929884845733",
        "eu-west-2": "250201462417",
        "eu-west-3": "447278800020",
        "me-south-1": "986000313247",
        "sa-east-1": "818342061345",
        "us-east-1": "503895931360",
        "us-east-2": "915447279597",
        "us-gov-west-1": "515509971035",
        "us-west-1": "685455198987",
        "us-west-2": "895741380848",
    }
)

#: Account that hosts ``sagemaker-debugger-rule-evaluator:latest`` per region (23 regions).
CUSTOM_RULE_ACCOUNTS: Mapping[str, str] = MappingProxyType(
    {
        "af-south-1": "515950693465",
        "ap-east-1": "645844755771",
        "ap-northeast-1": "670969264625",
        "ap-northeast-2": "326368420253",
        "ap-south-1": "552407032007",
        "ap-southeast-1": "631532610101",
        "ap-southeast-2": "445670767460",
        "ca-central-1": "105842248657",
        "cn-north-1": "617202126805",
        "cn-northwest-1": "658559488188",
        "eu-central-1": "691764027602",
        "eu-north-1": "091235270104",
        "eu-south-1": "335033873580",
        "eu-west-1": "606966180310",
        "eu-west-2": "074613877050",
        "eu-west-3": "224335253976",
        "me-south-1": "050406412588",
        "sa-east-1": "466516958431",
        "us-east-1": "864354269164",
        "us-east-2": "840043622174",
        "us-west-1": "952348334681",
        "us-west-2": "759209512951",
        "us-gov-west-1": "515361955729",
    }
)

#: Regions where SageMaker offers neither Debugger nor the profiler (the SDK's DEBUGGER/PROFILER_UNSUPPORTED_REGIONS).
DEBUGGER_UNSUPPORTED_REGIONS: frozenset[str] = frozenset(
    {
        "us-iso-east-1",
        "us-isob-east-1",
        "ap-southeast-3",
        "ap-southeast-4",
        "eu-south-2",
        "me-central-1",
        "ap-south-2",
        "eu-central-2",
        "us-gov-east-1",
    }
)


#: Region name prefix -> (partition, DNS suffix), longest prefixes first; every other region is in ``aws``.
_PARTITIONS = (
    ("cn-", "aws-cn", "amazonaws.com.cn"),
    ("us-gov-", "aws-us-gov", "amazonaws.com"),
    ("us-isob-", "aws-iso-b", "sc2s.sgov.gov"),
    ("us-isof-", "aws-iso-f", "csp.hci.ic.gov"),
    ("us-iso-", "aws-iso", "c2s.ic.gov"),
    ("eu-isoe-", "aws-iso-e", "cloud.adc-e.uk"),
    ("eusc-", "aws-eusc", "amazonaws.eu"),
)


def _partition_entry(region: str) -> tuple[str, str]:
    for prefix, partition, suffix in _PARTITIONS:
        if region.startswith(prefix):
            return partition, suffix
    return "aws", "amazonaws.com"


def partition_of(region: str) -> str:
    """The partition a region belongs to: ``aws``, ``aws-cn``, ``aws-us-gov``, ``aws-iso``, ``aws-iso-b``, ..."""
    return _partition_entry(region)[0]


def url_suffix(region: str) -> str:
    """DNS suffix of the partition a region belongs to (``amazonaws.com.cn`` in China, ``c2s.ic.gov`` in aws-iso)."""
    return _partition_entry(region)[1]


def check_debugger_region(region: str, *, where: str | None = None, field: str = "region") -> None:
    """Raise when SageMaker has no Debugger or profiler in ``region`` at all."""
    if region in DEBUGGER_UNSUPPORTED_REGIONS:
        raise UnsupportedRegionError(
            f"SageMaker Debugger and the profiler are not available in region '{region}' "
            f"(unsupported: {', '.join(sorted(DEBUGGER_UNSUPPORTED_REGIONS))}). "
            "Deploy the training job to a supported region, or drop the profiler rules and use RuleEvaluator "
            "with MetricsSource.CLOUDWATCH, which needs no Debugger.",
            where=where,
            field=field,
            value=region,
        )


_REGION_NAME = re.compile(r"[a-z]{2,4}(-[a-z]+)+-\d{1,2}")
_DIRECTIONS = frozenset({"east", "west", "north", "south", "central", "northeast", "northwest", "southeast",
                         "southwest"})


def _region_hint(region: str, table: Mapping[str, str]) -> str:
    """A "did you mean" for a misspelt region only. A real region the table lacks (``il-central-1`` or ``ca-west-1``,
    launched after it) is no misspelling of ``eu-central-1`` or ``ca-central-1``: a well-formed name is matched only
    with regions of its own stem (``us-east-7`` -> ``us-east-1``), or, when its direction word is no direction
    (``eu-centrl-1``), with regions of its own geography."""
    if not _REGION_NAME.fullmatch(region):
        return did_you_mean(region, table)
    stem, geography, direction = region.rsplit("-", 1)[0], region.split("-")[0], region.split("-")[-2]
    same_stem = [name for name in table if name.rsplit("-", 1)[0] == stem]
    if same_stem:
        return did_you_mean(region, same_stem)
    if direction in _DIRECTIONS:
        return ""
    return did_you_mean(region, [name for name in table if name.split("-")[0] == geography])


def _image(table: Mapping[str, str], repository: str, region: str, kind: str, where: str | None) -> str:
    if not isinstance(region, str):
        raise UnsupportedRegionError(
            f"region must be a string such as 'us-east-1', got {type(region).__name__} {region!r}.",
            where=where,
            field="region",
            value=region,
        )
    check_debugger_region(region, where=where)
    account = table.get(region)
    if account is None:
        raise UnsupportedRegionError(
            f"no {kind} rule image is published for region '{region}'.{_region_hint(region, table)} "
            f"Supported regions: {', '.join(sorted(table))}. Pass image_uri= explicitly if AWS has published one since.",
            where=where,
            field="region",
            value=region,
        )
    return f"{account}.dkr.ecr.{region}.{url_suffix(region)}/{repository}:{IMAGE_TAG}"


def builtin_rule_image(region: str, *, where: str | None = None) -> str:
    """URI of the built-in rule evaluator image (``sagemaker-debugger-rules:latest``) for ``region``."""
    return _image(BUILTIN_RULE_ACCOUNTS, BUILTIN_RULE_REPOSITORY, region, "built-in", where)


def custom_rule_image(region: str, *, where: str | None = None) -> str:
    """URI of the custom rule evaluator image (``sagemaker-debugger-rule-evaluator:latest``) for ``region``."""
    return _image(CUSTOM_RULE_ACCOUNTS, CUSTOM_RULE_REPOSITORY, region, "custom", where)
