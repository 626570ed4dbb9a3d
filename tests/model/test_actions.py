"""Actions: byte-exact ``action_json`` text, validation of addresses and prefixes, immutability."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdk_sagemaker_debugger.model.actions import (
    SMS,
    Action,
    ActionList,
    Email,
    StopTraining,
    check_actions,
    profiler_rule_actions_error,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

# --- Outputs printed by the SageMaker Python SDK (smdebug-rulesconfig 1.0.1), copied verbatim -----------------------
# Raw string values, i.e. the characters backslash and quote appear literally.
SDK_LIST_WITH_JOB_PREFIX = (
    r'[{\"name\": \"stoptraining\", \"training_job_prefix\": \"my-job\"}, '
    r'{\"endpoint\": \"abc@example.com\", \"name\": \"email\"}, '
    r'{\"endpoint\": \"+15555550100\", \"name\": \"sms\"}]'
)
SDK_SINGLE_STOP_WITH_JOB_PREFIX = r'{\"name\": \"stoptraining\", \"training_job_prefix\": \"my-job\"}'
SDK_SINGLE_STOP_WITH_USER_PREFIX = r'{\"training_job_prefix\": \"custom-prefix\", \"name\": \"stoptraining\"}'
SDK_CUSTOM_RULE_ACTIONS = r'[{\"training_job_prefix\": \"other-prefix\", \"name\": \"stoptraining\"}]'


class TestSdkExamples:
    def test_action_list_with_prefix_filled_from_the_job(self):
        actions = ActionList(StopTraining(), Email("abc@example.com"), SMS("+15555550100"))
        assert actions.with_job_prefix("my-job").serialize() == SDK_LIST_WITH_JOB_PREFIX

    def test_the_sdk_text_is_178_characters(self):
        actions = ActionList(StopTraining(), Email("abc@example.com"), SMS("+15555550100"))
        assert len(actions.with_job_prefix("my-job").serialize()) == 178

    def test_single_stop_training_is_a_bare_object(self):
        assert StopTraining().with_job_prefix("my-job").serialize() == SDK_SINGLE_STOP_WITH_JOB_PREFIX

    def test_user_prefix_comes_before_name(self):
        assert StopTraining("custom-prefix").serialize() == SDK_SINGLE_STOP_WITH_USER_PREFIX

    def test_user_prefix_is_kept_when_the_job_fills_in_its_own(self):
        filled = ActionList(StopTraining("other-prefix")).with_job_prefix("my-job")
        assert filled.serialize() == SDK_CUSTOM_RULE_ACTIONS

    def test_empty_list(self):
        assert ActionList().serialize() == "[]"

    def test_unfilled_stop_training_has_only_its_name(self):
        assert StopTraining().serialize() == r"{\"name\": \"stoptraining\"}"

    def test_text_is_json_once_backslashes_are_stripped(self):
        text = ActionList(StopTraining(), Email("abc@example.com")).with_job_prefix("my-job").serialize()
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        assert json.loads(text.replace('\\"', '"')) == [
            {"name": "stoptraining", "training_job_prefix": "my-job"},
            {"endpoint": "abc@example.com", "name": "email"},
        ]


# --- An independent model of the SDK's algorithm, written from its description ---------------------------------------
class SdkAction:
    """How smdebug-rulesconfig builds an action: given params, then ``name`` appended, None values dropped."""

    def __init__(self, class_name: str, **params: str | None):
        merged = dict(params)
        merged["name"] = class_name.lower()
        self.params = {key: value for key, value in merged.items() if value is not None}
        self.default_prefix = class_name == "StopTraining" and params.get("training_job_prefix") is None

    def fill_prefix(self, job_name: str) -> None:
        if self.default_prefix:
            self.params["training_job_prefix"] = job_name

    def serialize(self) -> str:
        body = ", ".join('\\"' + key + '\\": \\"' + value + '\\"' for key, value in self.params.items())
        return "{" + body + "}"


def sdk_serialize_list(actions: list[SdkAction]) -> str:
    return "[" + ", ".join(action.serialize() for action in actions) + "]"


prefixes = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=63)
phones = st.builds(
    lambda first, rest: f"+{first}{rest}",
    st.sampled_from("123456789"),
    st.text(alphabet="0123456789", max_size=14),
)
# Hypothesis' own generator of RFC 5322 addresses, independent of the pattern under test.
emails = st.emails()

action_specs = st.one_of(
    st.tuples(st.just("StopTraining"), st.none() | prefixes),
    st.tuples(st.just("Email"), emails),
    st.tuples(st.just("SMS"), phones),
)


def build_both(spec: tuple[str, str | None]) -> tuple[Action, SdkAction]:
    kind, value = spec
    if kind == "StopTraining":
        return StopTraining(value), SdkAction("StopTraining", training_job_prefix=value)
    if kind == "Email":
        return Email(value), SdkAction("Email", endpoint=value)
    return SMS(value), SdkAction("SMS", endpoint=value)


class TestAgainstReferenceImplementation:
    @settings(max_examples=200, deadline=None)
    @given(specs=st.lists(action_specs, max_size=6), job_name=prefixes)
    def test_random_action_lists(self, specs, job_name):
        pairs = [build_both(spec) for spec in specs]
        ours = ActionList(*(action for action, _ in pairs))
        reference = [sdk for _, sdk in pairs]
        assert ours.serialize() == sdk_serialize_list(reference)
        for sdk in reference:
            sdk.fill_prefix(job_name)
        assert ours.with_job_prefix(job_name).serialize() == sdk_serialize_list(reference)

    @settings(max_examples=100, deadline=None)
    @given(spec=action_specs, job_name=prefixes)
    def test_random_single_actions(self, spec, job_name):
        ours, reference = build_both(spec)
        assert ours.serialize() == reference.serialize()
        reference.fill_prefix(job_name)
        assert ours.with_job_prefix(job_name).serialize() == reference.serialize()


class TestEmail:
    @pytest.mark.parametrize(
        "address",
        [
            "abc@example.com",
            "first.last@example.com",
            "abc+alerts@example.com",
            "a_b@example.com",
            "ABC@Example.COM",
            "abc@example.co.uk",
            "abc@sub.example.com",
            "abc@ex-ample.com",
            "abc@example.info",
            "ml-team@example.com",
            "o'brien@example.ie",
            "abc@xn--bcher-kva.example",
        ],
    )
    def test_real_addresses_are_accepted(self, address):
        assert Email(address).endpoint == address
        assert Email(address=address).address == address

    @pytest.mark.parametrize(
        "address",
        [
            "",
            "abc",
            "abc@",
            "@example.com",
            "abc@example",
            "abc@@example.com",
            "a..b@example.com",
            ".abc@example.com",
            "abc.@example.com",
            "abc@-example.com",
            "abc@example-.com",
            "abc@example..com",
            "abc@example.c",
            "abc@example.123",
            "a b@example.com",
            "abc@exa mple.com",
            'a"b@example.com',
            "a\\b@example.com",
            " abc@example.com",
            "abc@example.com\n",
            "a" * 65 + "@example.com",
            "abc@" + "a" * 64 + ".com",
            "a" * 64 + "@" + ".".join(["b" * 60] * 4) + ".com",
        ],
    )
    def test_garbage_is_rejected_with_the_field_and_an_example(self, address):
        with pytest.raises(ConfigurationError) as raised:
            Email(address)
        message = str(raised.value)
        assert message.startswith("Email: address: ")
        assert repr(address) in message
        assert "first.last+alerts@ml.example.com" in message

    @settings(max_examples=100, deadline=None)
    @given(address=emails)
    def test_every_rfc_address_from_hypothesis_is_accepted(self, address):
        assert Email(address).endpoint == address

    def test_non_string_is_a_type_error(self):
        with pytest.raises(ConfigurationTypeError, match=r"Email: address: expected a string .* got int 42"):
            Email(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            Email(None)  # type: ignore[arg-type]

    def test_unresolved_token_is_not_validated(self):
        token = "${Token[TOKEN.123]}"
        assert Email(token).endpoint == token


class TestSms:
    @pytest.mark.parametrize("number", ["+15555550100", "+1", "+123456789012345", "+447700900123"])
    def test_e164_numbers_are_accepted(self, number):
        assert SMS(number).endpoint == number
        assert SMS(phone_number=number).phone_number == number

    @pytest.mark.parametrize(
        "number",
        ["15555550100", "+1234567890123456", "+1 555 555", "+", "+0123", "+1-555-555-0100", "++15555550100", "+1555a"],
    )
    def test_other_numbers_are_rejected(self, number):
        with pytest.raises(ConfigurationError) as raised:
            SMS(number)
        message = str(raised.value)
        assert message.startswith("SMS: phone_number: ")
        assert repr(number) in message
        assert "E.164" in message and "+15555550100" in message

    def test_non_string_is_a_type_error(self):
        with pytest.raises(ConfigurationTypeError, match=r"SMS: phone_number: expected a string"):
            SMS(15555550100)  # type: ignore[arg-type]


class TestStopTraining:
    @pytest.mark.parametrize("prefix", ["my_job", "my job", "job.1", "", "jöb"])
    def test_invalid_user_prefix(self, prefix):
        with pytest.raises(ConfigurationError, match=r"StopTraining: training_job_prefix: .*letters, digits and hyphens"):
            StopTraining(prefix)

    def test_prefix_longer_than_a_job_name(self):
        with pytest.raises(ConfigurationError, match=r"64 characters long, but training job names are at most 63"):
            StopTraining("a" * 64)
        assert StopTraining("a" * 63).training_job_prefix == "a" * 63

    def test_invalid_job_prefix_names_the_other_field(self):
        with pytest.raises(ConfigurationError, match=r"StopTraining: job_name_prefix: 'bad_name'"):
            StopTraining().with_job_prefix("bad_name")

    def test_non_string_prefix_is_a_type_error(self):
        with pytest.raises(ConfigurationTypeError, match=r"training_job_prefix: expected a string"):
            StopTraining(7)  # type: ignore[arg-type]

    def test_prefix_attribute_and_needs_job_prefix(self):
        assert StopTraining().training_job_prefix is None
        assert StopTraining().needs_job_prefix
        filled = StopTraining().with_job_prefix("job-a")
        assert filled.training_job_prefix == "job-a"
        assert not filled.needs_job_prefix

    def test_filling_in_returns_a_copy_and_leaves_the_original_unset(self):
        original = StopTraining()
        original.with_job_prefix("job-a")
        assert original.training_job_prefix is None

    def test_a_filled_prefix_is_not_replaced_by_a_second_job(self):
        filled = StopTraining().with_job_prefix("job-a")
        assert filled.with_job_prefix("job-b").training_job_prefix == "job-a"


class TestActionList:
    def test_members_must_be_actions(self):
        with pytest.raises(ConfigurationTypeError, match=r"ActionList: actions: item 1 is str 'abc@example.com'"):
            ActionList(StopTraining(), "abc@example.com")  # type: ignore[arg-type]

    def test_nested_lists_are_rejected(self):
        with pytest.raises(ConfigurationTypeError, match=r"item 0 is ActionList"):
            ActionList(ActionList(StopTraining()))  # type: ignore[arg-type]

    def test_only_stop_training_members_are_filled(self):
        actions = ActionList(Email("abc@example.com"), StopTraining(), StopTraining("mine"))
        filled = actions.with_job_prefix("job-a")
        assert [getattr(action, "training_job_prefix", None) for action in filled] == [None, "job-a", "mine"]
        assert filled.actions[0] is actions.actions[0]
        assert [getattr(action, "training_job_prefix", None) for action in actions] == [None, None, "mine"]

    def test_single_email_and_sms_accept_a_job_prefix(self):
        # The SDK crashes here with AttributeError; ours is a no-op.
        assert Email("abc@example.com").with_job_prefix("job-a") == Email("abc@example.com")
        assert SMS("+15555550100").with_job_prefix("job-a") == SMS("+15555550100")

    def test_iam_flags(self):
        assert ActionList(Email("abc@example.com")).notifies
        assert not ActionList(Email("abc@example.com")).stops_training
        assert ActionList(SMS("+1")).notifies
        assert ActionList(StopTraining()).stops_training
        assert not ActionList(StopTraining()).notifies
        assert not ActionList().notifies and not ActionList().stops_training

    def test_decoded_forms(self):
        actions = ActionList(StopTraining("p"), SMS("+1"))
        assert actions.to_list() == [{"training_job_prefix": "p", "name": "stoptraining"}, {"endpoint": "+1", "name": "sms"}]
        assert len(actions) == 2

    def test_value_equality(self):
        assert ActionList(Email("abc@example.com")) == ActionList(Email("abc@example.com"))
        assert ActionList(Email("abc@example.com")) != ActionList(Email("xyz@example.com"))
        assert StopTraining("p") != StopTraining().with_job_prefix("p")
        assert len({Email("abc@example.com"), Email("abc@example.com")}) == 1


class TestImmutability:
    @pytest.mark.parametrize(
        ("action", "attribute"),
        [(Email("abc@example.com"), "endpoint"), (SMS("+1"), "endpoint"), (StopTraining(), "training_job_prefix")],
    )
    def test_attributes_cannot_be_set(self, action, attribute):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(action, attribute, "x")


class TestCheckActions:
    def test_accepts_actions_lists_and_none(self):
        single = Email("abc@example.com")
        many = ActionList(single)
        assert check_actions(single) is single
        assert check_actions(many) is many
        assert check_actions(None) is None

    def test_python_list_gets_a_hint(self):
        with pytest.raises(ConfigurationTypeError, match=r"LossNotDecreasing: actions: .*got list\. Wrap the items as ActionList"):
            check_actions([StopTraining()], where="LossNotDecreasing")

    def test_other_types_are_rejected(self):
        with pytest.raises(ConfigurationTypeError, match=r"got str"):
            check_actions("email")


def test_profiler_rule_actions_error_explains_the_alternative():
    error = profiler_rule_actions_error(where="rule 'LowGPUUtilization'")
    assert isinstance(error, ConfigurationError)
    assert str(error).startswith("rule 'LowGPUUtilization': actions: SageMaker runs Email, SMS and StopTraining actions only")
    assert "RuleAlarm" in str(error)
