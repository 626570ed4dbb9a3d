"""Concrete values for a synthesized template, as a deployment of it in one account and region would have them.

The interpreter and end-to-end tests feed the *synthesized* configuration (state machine definitions, Lambda
environments, event patterns, table keys) to independent engines and to the real runtime code; this module turns the
template's intrinsics into the names and ARNs a deployment would give them, so that nothing is copied by hand.
Anything it does not know raises: a placeholder could hide exactly the kind of mistake these tests are for.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

ACCOUNT = "123456789012"


class UnresolvableIntrinsic(AssertionError):
    """The template uses an intrinsic (or references a resource type) the resolver does not know: teach it."""


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


#: resource type -> (what Ref returns: "name", "arn" or "url", the property that names it, the ARN GetAtt Arn returns)
_RESOURCE_NAMES: dict[str, tuple[str, str, str]] = {
    "AWS::S3::Bucket": ("name", "BucketName", "arn:{partition}:s3:::{name}"),
    "AWS::IAM::Role": ("name", "RoleName", "arn:{partition}:iam::{account}:role{path}{name}"),
    "AWS::Lambda::Function": ("name", "FunctionName", "arn:{partition}:lambda:{region}:{account}:function:{name}"),
    "AWS::SNS::Topic": ("arn", "TopicName", "arn:{partition}:sns:{region}:{account}:{name}"),
    "AWS::Logs::LogGroup": ("name", "LogGroupName", "arn:{partition}:logs:{region}:{account}:log-group:{name}:*"),
    "AWS::DynamoDB::Table": ("name", "TableName", "arn:{partition}:dynamodb:{region}:{account}:table/{name}"),
    "AWS::Events::EventBus": ("name", "Name", "arn:{partition}:events:{region}:{account}:event-bus/{name}"),
    "AWS::KMS::Key": ("name", "KeyId", "arn:{partition}:kms:{region}:{account}:key/{name}"),
    "AWS::SQS::Queue": ("url", "QueueName", "arn:{partition}:sqs:{region}:{account}:{name}"),
    "AWS::StepFunctions::StateMachine": ("arn", "StateMachineName",
                                         "arn:{partition}:states:{region}:{account}:stateMachine:{name}"),
}


class TemplateResolver:
    """Resolves Ref, Fn::GetAtt (Arn), Fn::Join, Fn::Sub and Fn::FindInMap in one synthesized template to the values
    a deployment of it to ``region`` in account 123456789012 would have. Anything else raises UnresolvableIntrinsic:
    a placeholder could hide exactly the kind of mistake this test is for."""

    def __init__(self, stack_name: str, template: dict[str, Any], region: str, account: str = ACCOUNT) -> None:
        self.stack_name = stack_name
        self.template = template
        self.region = region
        self.account = account
        self.partition = partition_of(region)
        self.pseudo_parameters = {
            "AWS::AccountId": account,
            "AWS::Region": region,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com",
            "AWS::StackName": stack_name,
        }

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, argument),) = value.items()
                if key == "Ref" or key.startswith("Fn::"):
                    handler = {
                        "Ref": self._ref,
                        "Fn::GetAtt": self._get_att,
                        "Fn::Join": self._join,
                        "Fn::Sub": self._sub,
                        "Fn::FindInMap": self._find_in_map,
                    }.get(key)
                    if handler is None:
                        raise UnresolvableIntrinsic(f"{self.stack_name}: no resolver for {key}: {json.dumps(value)}")
                    return handler(argument)
            return {key: self.resolve(item) for key, item in value.items()}
        return value

    def _resource(self, logical_id: str) -> tuple[str, dict[str, Any]]:
        resource = self.template.get("Resources", {}).get(logical_id)
        if resource is None:
            raise UnresolvableIntrinsic(f"{self.stack_name}: {logical_id} is neither a resource nor a pseudo parameter")
        if resource["Type"] not in _RESOURCE_NAMES:
            raise UnresolvableIntrinsic(f"{self.stack_name}: no physical name for {logical_id} ({resource['Type']})")
        return resource["Type"], resource.get("Properties", {})

    def physical_name(self, logical_id: str) -> str:
        """The resource's own name property, or a name like the one CloudFormation generates."""
        resource_type, properties = self._resource(logical_id)
        name_property = _RESOURCE_NAMES[resource_type][1]
        if name_property in properties:
            return self.resolve(properties[name_property])
        suffix = hashlib.sha256(f"{self.stack_name}/{logical_id}".encode()).hexdigest()[:12]
        if resource_type == "AWS::S3::Bucket":
            return f"{self.stack_name}-{logical_id}"[:50].lower() + "-" + suffix
        return f"{self.stack_name}-{logical_id}"[:51] + "-" + suffix.upper()

    def arn(self, logical_id: str) -> str:
        resource_type, properties = self._resource(logical_id)
        return _RESOURCE_NAMES[resource_type][2].format(
            partition=self.partition,
            region=self.region,
            account=self.account,
            path=self.resolve(properties.get("Path", "/")),
            name=self.physical_name(logical_id),
        )

    def _ref(self, target: str) -> str:
        if target in self.pseudo_parameters:
            return self.pseudo_parameters[target]
        if target.startswith("AWS::") or target in self.template.get("Parameters", {}):
            raise UnresolvableIntrinsic(f"{self.stack_name}: no value for the parameter {target}")
        resource_type, _ = self._resource(target)
        kind = _RESOURCE_NAMES[resource_type][0]
        if kind == "url":  # a queue's Ref is its URL
            _, _, _, region, account, name = self.arn(target).split(":", 5)
            return f"https://sqs.{region}.amazonaws.com/{account}/{name}"
        return self.arn(target) if kind == "arn" else self.physical_name(target)

    def _get_att(self, argument: list[str] | str) -> str:
        logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
        if attribute != "Arn":
            raise UnresolvableIntrinsic(f"{self.stack_name}: no resolver for Fn::GetAtt {logical_id}.{attribute}")
        return self.arn(logical_id)

    def _join(self, argument: list[Any]) -> str:
        delimiter, items = argument
        parts = self.resolve(items)
        if not all(isinstance(part, str) for part in parts):
            raise UnresolvableIntrinsic(f"{self.stack_name}: Fn::Join of non-strings {parts!r}")
        return delimiter.join(parts)

    def _sub(self, argument: str | list[Any]) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = self.resolve(variables)

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):  # ${!Literal} is the literal text ${Literal}
                return "${" + name[1:] + "}"
            if name in variables:
                return variables[name]
            if "." in name:
                return self._get_att(name)
            return self._ref(name)

        return re.sub(r"\$\{([^}]*)\}", substitute, text)

    def _find_in_map(self, argument: list[Any]) -> Any:
        if len(argument) != 3:
            raise UnresolvableIntrinsic(f"{self.stack_name}: Fn::FindInMap with a default value {argument!r}")
        map_name, top_key, second_key = self.resolve(argument)
        try:
            return self.template["Mappings"][map_name][top_key][second_key]
        except KeyError as missing:
            raise UnresolvableIntrinsic(
                f"{self.stack_name}: Fn::FindInMap {[map_name, top_key, second_key]} has no value ({missing})"
            ) from None

    # -- lookups ------------------------------------------------------------------------------------------------------
    def find(self, resource_type: str, where: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        """Resources of ``resource_type`` (whose properties satisfy ``where``), by logical id, unresolved."""
        return {logical_id: resource for logical_id, resource in self.template.get("Resources", {}).items()
                if resource["Type"] == resource_type and (where is None or where(resource.get("Properties", {})))}

    def one(self, resource_type: str, where: Callable[[dict[str, Any]], bool] | None = None
            ) -> tuple[str, dict[str, Any]]:
        """The one resource of ``resource_type`` matching ``where``: its logical id and unresolved properties."""
        found = self.find(resource_type, where)
        if len(found) != 1:
            raise LookupError(f"{self.stack_name}: expected one {resource_type}, found {sorted(found)}")
        ((logical_id, resource),) = found.items()
        return logical_id, resource.get("Properties", {})

    def function_environment(self, handler: str) -> dict[str, str]:
        """The resolved environment variables of the one Lambda function running ``handler``."""
        _, properties = self.one("AWS::Lambda::Function", lambda p: p.get("Handler") == handler)
        return {key: str(value) for key, value in self.resolve(properties["Environment"]["Variables"]).items()}
