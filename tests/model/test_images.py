"""Region image registry: both tables, the China DNS suffix, and clear errors for unsupported regions."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger import images
from cdk_sagemaker_debugger.images import UnsupportedRegionError
from cdk_sagemaker_debugger.model.images import partition_of, url_suffix


def test_table_sizes_match_the_published_tables():
    assert len(images.BUILTIN_RULE_ACCOUNTS) == 24
    assert len(images.CUSTOM_RULE_ACCOUNTS) == 23
    assert set(images.BUILTIN_RULE_ACCOUNTS) - set(images.CUSTOM_RULE_ACCOUNTS) == {"ap-northeast-3"}


@pytest.mark.parametrize(
    ("region", "builtin", "custom"),
    [
        ("us-east-1", "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
         "864354269164.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"),
        ("ap-south-1", "904829902805.dkr.ecr.ap-south-1.amazonaws.com/sagemaker-debugger-rules:latest",
         "552407032007.dkr.ecr.ap-south-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"),
        ("eu-north-1", "314864569078.dkr.ecr.eu-north-1.amazonaws.com/sagemaker-debugger-rules:latest",
         "091235270104.dkr.ecr.eu-north-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"),
        ("cn-north-1", "618459771430.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rules:latest",
         "617202126805.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rule-evaluator:latest"),
        ("cn-northwest-1", "658757709296.dkr.ecr.cn-northwest-1.amazonaws.com.cn/sagemaker-debugger-rules:latest",
         "658559488188.dkr.ecr.cn-northwest-1.amazonaws.com.cn/sagemaker-debugger-rule-evaluator:latest"),
        ("us-gov-west-1", "515509971035.dkr.ecr.us-gov-west-1.amazonaws.com/sagemaker-debugger-rules:latest",
         "515361955729.dkr.ecr.us-gov-west-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"),
    ],
)
def test_image_uris(region, builtin, custom):
    assert images.builtin_rule_image(region) == builtin
    assert images.custom_rule_image(region) == custom


def test_ap_northeast_3_has_a_builtin_image_but_no_custom_evaluator():
    assert images.builtin_rule_image("ap-northeast-3").startswith("479947661362.dkr.ecr.ap-northeast-3.amazonaws.com/")
    with pytest.raises(UnsupportedRegionError, match=r"no custom rule image is published for region 'ap-northeast-3'"):
        images.custom_rule_image("ap-northeast-3")


def test_unknown_region_names_the_supported_regions_and_suggests():
    with pytest.raises(UnsupportedRegionError) as caught:
        images.builtin_rule_image("us-east-7")
    message = str(caught.value)
    assert "no built-in rule image is published for region 'us-east-7'" in message
    assert "Did you mean 'us-east-" in message
    assert "Supported regions: af-south-1, ap-east-1" in message and "us-west-2" in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("region", sorted(images.DEBUGGER_UNSUPPORTED_REGIONS))
def test_regions_without_debugger_explain_why(region):
    with pytest.raises(UnsupportedRegionError, match=rf"SageMaker Debugger and the profiler are not available in region '{region}'"):
        images.builtin_rule_image(region)


def test_il_central_1_is_not_in_the_tables():
    with pytest.raises(UnsupportedRegionError, match="il-central-1"):
        images.builtin_rule_image("il-central-1")


@pytest.mark.parametrize("region", ["il-central-1", "ca-west-1", "mx-central-1"])
def test_a_real_region_missing_from_the_tables_is_not_called_a_misspelling(region):
    """A region launched after the tables is no typo of one in them (il-central-1 was answered 'eu-central-1')."""
    with pytest.raises(UnsupportedRegionError) as caught:
        images.builtin_rule_image(region)
    assert "Did you mean" not in str(caught.value) and f"for region '{region}'" in str(caught.value)


@pytest.mark.parametrize(("typo", "meant"), [("us-east-7", "us-east-"), ("eu-centrl-1", "eu-central-1"),
                                             ("useast1", "us-east-1"), ("ap-southeast-22", "ap-southeast-2")])
def test_a_misspelt_region_still_gets_a_suggestion(typo, meant):
    with pytest.raises(UnsupportedRegionError, match=f"Did you mean '{meant}"):
        images.builtin_rule_image(typo)


def test_non_string_region():
    with pytest.raises(UnsupportedRegionError, match="region must be a string"):
        images.builtin_rule_image(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("region", "partition", "suffix"),
    [
        ("us-east-1", "aws", "amazonaws.com"),
        ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
        ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
        ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
        ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"),
        ("us-isof-south-1", "aws-iso-f", "csp.hci.ic.gov"),
        ("eu-isoe-west-1", "aws-iso-e", "cloud.adc-e.uk"),
        ("eusc-de-east-1", "aws-eusc", "amazonaws.eu"),
    ],
)
def test_partition_and_dns_suffix_of_every_partition(region: str, partition: str, suffix: str):
    """The values CDK's RegionInfo gives for these regions; ISO regions are not in the aws partition."""
    assert (partition_of(region), url_suffix(region)) == (partition, suffix)
