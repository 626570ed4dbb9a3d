"""Concrete values for a synthesized template, as CloudFormation would give them in one account and region.

The end-to-end tests feed the *synthesized* configuration (Lambda environments, event patterns, table keys, requests)
to the real runtime code; this module turns the template's intrinsics into the names and ARNs a deployment would have,
so that nothing is copied by hand. Unknown intrinsics raise: a test must never run on a silent placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass
class Deployment:
    """One template deployed in ``region`` of ``ACCOUNT``: physical names by logical id, derived deterministically."""

    template: dict[str, Any]
    region: str = "us-east-1"
    overrides: dict[str, str] = field(default_factory=dict)

    @property
    def partition(self) -> str:
        return "aws-cn" if self.region.startswith("cn-") else "aws"

    @property
    def resources(self) -> dict[str, Any]:
        return self.template["Resources"]

    def pseudo(self, name: str) -> str:
        values = {"AWS::AccountId": ACCOUNT, "AWS::Region": self.region, "AWS::Partition": self.partition,
                  "AWS::URLSuffix": "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com",
                  "AWS::StackName": "Stack", "AWS::NoValue": ""}
        if name not in values:
            raise KeyError(f"pseudo parameter {name} is not modelled")
        return values[name]

    def physical_name(self, logical_id: str) -> str:
        """What ``Ref`` returns: the name CloudFormation would generate (lower case where the service needs it)."""
        if logical_id in self.overrides:
            return self.overrides[logical_id]
        if logical_id.startswith("AWS::"):
            return self.pseudo(logical_id)
        resource = self.resources[logical_id]
        kind = resource["Type"]
        props = resource.get("Properties", {})
        if kind == "AWS::S3::Bucket":
            return props.get("BucketName") or f"stack-{logical_id.lower()}"[:63]
        if kind == "AWS::Events::EventBus":
            return self.resolve(props["Name"])
        if kind == "AWS::SNS::Topic":
            return self.arn("sns", logical_id)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT}/{logical_id}"
        if kind == "AWS::StepFunctions::StateMachine":
            return self.arn("states", f"stateMachine:{logical_id}")
        return props.get("TableName") or props.get("RoleName") or props.get("FunctionName") or logical_id

    def arn(self, service: str, resource: str) -> str:
        region = "" if service in ("iam", "s3") else self.region
        account = "" if service == "s3" else ACCOUNT
        return f"arn:{self.partition}:{service}:{region}:{account}:{resource}"

    def attribute(self, logical_id: str, name: str) -> str:
        kind = self.resources[logical_id]["Type"]
        physical = self.physical_name(logical_id)
        if name == "Arn":
            services = {"AWS::IAM::Role": ("iam", f"role/{physical}"), "AWS::S3::Bucket": ("s3", physical),
                        "AWS::DynamoDB::Table": ("dynamodb", f"table/{physical}"),
                        "AWS::Lambda::Function": ("lambda", f"function:{physical}"),
                        "AWS::SQS::Queue": ("sqs", logical_id), "AWS::Events::EventBus": ("events", f"event-bus/{physical}"),
                        "AWS::KMS::Key": ("kms", f"key/{logical_id}"), "AWS::Logs::LogGroup": ("logs", f"log-group:{logical_id}:*")}
            if kind in services:
                return self.arn(*services[kind])
        if kind == "AWS::SQS::Queue" and name == "QueueName":
            return logical_id
        if kind == "AWS::Events::EventBus" and name == "Name":
            return physical
        if kind == "AWS::SNS::Topic" and name == "TopicName":
            return logical_id
        raise KeyError(f"Fn::GetAtt {logical_id}.{name} ({kind}) is not modelled")

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic replaced by its concrete value."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.physical_name(arg)
            if key == "Fn::GetAtt":
                return self.attribute(*(arg.split(".", 1) if isinstance(arg, str) else arg))
            if key == "Fn::Join":
                return arg[0].join(str(self.resolve(part)) for part in arg[1])
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(self.resolve(arg[0]))]
            if key == "Fn::Split":
                return self.resolve(arg[1]).split(arg[0])
            if key == "Fn::FindInMap":
                name, first, second = (self.resolve(a) for a in arg)
                return self.template["Mappings"][name][first][second]
            if key == "Fn::Sub":
                return self._sub(arg)
            if key.startswith("Fn::") or key == "Condition":
                raise KeyError(f"intrinsic {key} is not modelled")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name:
                return self.attribute(*name.split(".", 1))
            return self.physical_name(name)

        return _SUB_VARIABLE.sub(replace, text)

    # -- lookups the end-to-end tests need ---------------------------------------------------------------------------
    def find(self, kind: str, where: Any = None) -> dict[str, dict[str, Any]]:
        """Resources of ``kind`` (whose properties satisfy ``where(properties)``), by logical id."""
        return {logical_id: resource for logical_id, resource in self.resources.items()
                if resource["Type"] == kind and (where is None or where(resource.get("Properties", {})))}

    def one(self, kind: str, where: Any = None) -> tuple[str, dict[str, Any]]:
        found = self.find(kind, where)
        if len(found) != 1:
            raise LookupError(f"expected one {kind}, found {sorted(found)}")
        ((logical_id, resource),) = found.items()
        return logical_id, resource.get("Properties", {})

    def function_environment(self, handler: str) -> dict[str, str]:
        """The resolved environment of the one Lambda function with this handler."""
        _, props = self.one("AWS::Lambda::Function", lambda p: p.get("Handler") == handler)
        return {k: str(v) for k, v in self.resolve(props["Environment"]["Variables"]).items()}
