"""CollectionConfig, DebugHookConfig, TensorBoardOutputConfig and the deterministic collection merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdk_sagemaker_debugger.model.debug_hook import (
    CollectionConfig,
    CollectionRequest,
    DebugHookConfig,
    TensorBoardOutputConfig,
    merge_collections,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

SDK = json.loads((Path(__file__).parents[1] / "data" / "sdk_debugger_rules.json").read_text())


class TestCollectionConfig:
    def test_renders_like_the_sdk(self):
        assert CollectionConfig("gradients").to_request() == {"CollectionName": "gradients"}
        assert CollectionConfig("losses", {"save_interval": "500"}).to_request() == {
            "CollectionName": "losses",
            "CollectionParameters": {"save_interval": "500"},
        }

    def test_values_are_sent_as_strings(self):
        config = CollectionConfig("weights", {"save_interval": 100, "save_histogram": False})
        assert config.to_request()["CollectionParameters"] == {"save_interval": "100", "save_histogram": "False"}

    def test_equal_name_and_parameters_are_equal(self):
        assert CollectionConfig("losses", {"save_interval": 50}) == CollectionConfig("losses", {"save_interval": "50"})
        assert CollectionConfig("losses") != CollectionConfig("losses", {"save_interval": "50"})
        assert len({CollectionConfig("a"), CollectionConfig("a")}) == 1

    def test_immutable(self):
        with pytest.raises(AttributeError, match="immutable"):
            CollectionConfig("a").name = "b"  # type: ignore[misc]

    @pytest.mark.parametrize("name", ["", None, 5, "x" * 257])
    def test_bad_names(self, name):
        with pytest.raises(ConfigurationTypeError, match=r"^CollectionConfig: name: expected a collection name of 1 to 256 characters"):
            CollectionConfig(name)  # type: ignore[arg-type]

    def test_too_many_parameters(self):
        with pytest.raises(ConfigurationError, match=r"parameters: has 21 entries; the API allows at most 20"):
            CollectionConfig("a", {f"k{i}": "v" for i in range(21)})

    def test_unsupported_value_type(self):
        with pytest.raises(ConfigurationTypeError, match=r"CollectionConfig 'a': parameters.reductions: expected a string, number or boolean, got list"):
            CollectionConfig("a", {"reductions": ["min", "max"]})

    def test_long_value(self):
        with pytest.raises(ConfigurationError, match=r"parameters.include_regex: value is 300 characters; the API allows at most 256"):
            CollectionConfig("a", {"include_regex": "x" * 300})

    def test_unknown_keys_warn_with_a_suggestion(self):
        warnings = CollectionConfig("a", {"save_intervall": 5, "train.save_interval": 1}).warnings()
        assert len(warnings) == 1
        assert "'save_intervall' is not one the Debugger hook reads" in warnings[0]
        assert "Did you mean 'save_interval'?" in warnings[0]


class TestMerge:
    def test_first_appearance_order_and_exact_duplicates_dropped(self):
        merged = merge_collections(
            [
                CollectionRequest("rule 'A'", (CollectionConfig("losses", {"save_interval": "500"}), CollectionConfig("weights"))),
                CollectionRequest("rule 'B'", (CollectionConfig("gradients"), CollectionConfig("losses", {"save_interval": 500}))),
                CollectionRequest("debug_hook", (CollectionConfig("weights"), CollectionConfig("biases"))),
            ]
        )
        assert [c.name for c in merged] == ["losses", "weights", "gradients", "biases"]

    def test_a_bare_collection_is_satisfied_by_a_configured_one(self):
        merged = merge_collections(
            [
                CollectionRequest("rule 'A'", (CollectionConfig("gradients"),)),
                CollectionRequest("rule 'B'", (CollectionConfig("gradients", {"save_interval": "500"}),)),
                CollectionRequest("rule 'C'", (CollectionConfig("gradients"),)),
            ]
        )
        assert merged == [CollectionConfig("gradients", {"save_interval": "500"})]

    def test_conflicting_parameters_name_both_sources(self):
        with pytest.raises(ConfigurationError) as raised:
            merge_collections(
                [
                    CollectionRequest("rule 'LossNotDecreasing'", (CollectionConfig("losses", {"save_interval": "500"}),)),
                    CollectionRequest("debug_hook", (CollectionConfig("losses", {"save_interval": "50"}),)),
                ],
                where="Stack/Job",
            )
        message = str(raised.value)
        assert message.startswith("Stack/Job: CollectionConfigurations: collection 'losses' is requested with different parameters")
        assert "rule 'LossNotDecreasing' ({'save_interval': '500'})" in message
        assert "debug_hook ({'save_interval': '50'})" in message
        assert "collections_to_save=" in message

    def test_more_than_20_distinct_collections(self):
        many = tuple(CollectionConfig(f"c{i}") for i in range(21))
        with pytest.raises(ConfigurationError, match=r"21 distinct collections are requested .*at most 20"):
            merge_collections([CollectionRequest("debug_hook", many)])

    @settings(max_examples=100, deadline=None)
    @given(
        st.lists(
            st.lists(
                st.tuples(st.sampled_from(["losses", "weights", "gradients", "biases"]), st.sampled_from([None, "5"])),
                max_size=5,
            ),
            max_size=4,
        )
    )
    def test_merge_is_deterministic_and_duplicate_free(self, sources):
        requests = [
            CollectionRequest(
                f"rule '{index}'",
                tuple(CollectionConfig(name, None if interval is None else {"save_interval": interval}) for name, interval in items),
            )
            for index, items in enumerate(sources)
        ]
        # Every configured collection uses the same interval, so no conflict is possible.
        merged = merge_collections(requests)
        names = [c.name for c in merged]
        first_seen = list(dict.fromkeys(name for items in sources for name, _ in items))
        assert names == first_seen
        configured = {name for items in sources for name, interval in items if interval is not None}
        for collection in merged:
            assert (collection.parameters is not None) == (collection.name in configured)
        assert merge_collections(requests) == merged


class TestDebugHookConfig:
    def test_defaults(self):
        request = DebugHookConfig().to_request(default_s3_output_path="s3://my-bucket/output")
        assert request == {
            "S3OutputPath": "s3://my-bucket/output",
            "LocalPath": "/opt/ml/output/tensors/",
            "CollectionConfigurations": [],
        }

    def test_key_order_and_hook_parameters_as_strings(self):
        hook = DebugHookConfig(s3_output_path="s3://b/debug", hook_parameters={"save_interval": 100})
        request = hook.to_request(default_s3_output_path="s3://ignored", collections=[CollectionConfig("weights")])
        assert list(request) == ["S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations"]
        assert request["S3OutputPath"] == "s3://b/debug"
        assert request["HookParameters"] == {"save_interval": "100"}
        assert request["CollectionConfigurations"] == [{"CollectionName": "weights"}]

    def test_own_collections_when_no_merge_is_given(self):
        hook = DebugHookConfig(collection_configs=[CollectionConfig("weights")])
        assert hook.to_request(default_s3_output_path="s3://b")["CollectionConfigurations"] == [{"CollectionName": "weights"}]

    def test_needs_an_s3_path(self):
        with pytest.raises(ConfigurationError, match=r"^DebugHookConfig: s3_output_path: needs an S3 output path"):
            DebugHookConfig().to_request(default_s3_output_path=None)

    @pytest.mark.parametrize("path", ["gs://bucket/x", "bucket/x", ""])
    def test_s3_path_format(self, path):
        with pytest.raises(ConfigurationError, match=rf"^DebugHookConfig: s3_output_path: must be an S3 URI .* got '{path}'"):
            DebugHookConfig(s3_output_path=path)

    def test_local_path_must_be_absolute(self):
        with pytest.raises(ConfigurationError, match=r"^DebugHookConfig: local_path: must be an absolute path"):
            DebugHookConfig(local_path="tensors")

    def test_collection_configs_must_be_collection_configs(self):
        with pytest.raises(ConfigurationTypeError, match=r"collection_configs: item 0 is str 'losses'; wrap it as CollectionConfig\('losses'\)"):
            DebugHookConfig(collection_configs=["losses"])
        with pytest.raises(ConfigurationTypeError, match=r"collection_configs: expected a list of CollectionConfig"):
            DebugHookConfig(collection_configs=CollectionConfig("losses"))

    def test_too_many_hook_parameters(self):
        with pytest.raises(ConfigurationError, match=r"^DebugHookConfig: hook_parameters: has 21 entries"):
            DebugHookConfig(hook_parameters={f"k{i}": 1 for i in range(21)})

    def test_warnings_cover_hook_and_collections(self):
        hook = DebugHookConfig(hook_parameters={"save_steps": "1", "savesteps": "1"}, collection_configs=[CollectionConfig("a", {"include_regexp": "x"})])
        warnings = hook.warnings()
        assert len(warnings) == 2
        assert warnings[0].startswith("DebugHookConfig hook_parameters: parameter 'savesteps'")
        assert warnings[1].startswith("CollectionConfig 'a': parameter 'include_regexp'")


class TestTensorBoardOutputConfig:
    def test_matches_the_sdk(self):
        expected = SDK["examples"]["tensorboard"]["tensorboard_output_config"]
        rendered = TensorBoardOutputConfig(s3_output_path="s3://my-bucket/tb").to_request(default_s3_output_path=None)
        assert rendered == expected
        assert list(rendered) == list(expected)

    def test_default_path_follows_the_sdk_layout(self):
        config = TensorBoardOutputConfig()
        assert config.to_request(default_s3_output_path="s3://b/out/", job_name_prefix="my-job") == {
            "S3OutputPath": "s3://b/out/my-job/tensorboard-output",
            "LocalPath": "/opt/ml/output/tensorboard",
        }
        assert config.to_request(default_s3_output_path="s3://b/out")["S3OutputPath"] == "s3://b/out/tensorboard-output"

    def test_needs_an_s3_path(self):
        with pytest.raises(ConfigurationError, match=r"^TensorBoardOutputConfig: s3_output_path: needs an S3 output path"):
            TensorBoardOutputConfig().to_request(default_s3_output_path=None)

    def test_bad_paths(self):
        with pytest.raises(ConfigurationError, match=r"^TensorBoardOutputConfig: s3_output_path: must be an S3 URI"):
            TensorBoardOutputConfig(s3_output_path="/tmp/tb")
        with pytest.raises(ConfigurationError, match=r"^TensorBoardOutputConfig: local_path: must be an absolute path"):
            TensorBoardOutputConfig(local_path="tb")

    def test_tokens_pass(self):
        token = "${Token[TOKEN.7]}"
        assert TensorBoardOutputConfig(s3_output_path=token).to_request(default_s3_output_path=None)["S3OutputPath"] == token
