"""A small local IAM evaluator for resource-policy statements of synthesized templates (tests only).

It resolves the intrinsics a policy of this library uses (Ref to pseudo parameters and resources, Fn::GetAtt Arn,
Fn::Join) for one account and region, and decides a request the way IAM does for the operators used here: an explicit
Deny wins, then any Allow, else implicit deny. Unknown condition operators fail loudly rather than allow.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

ACCOUNT = "111111111111"
REGION = "us-east-1"


def resolve(value: Any, template: Mapping[str, Any], *, account: str = ACCOUNT, region: str = REGION) -> Any:
    """``value`` with pseudo parameters and resource references replaced by deploy-time values."""
    pseudo = {"AWS::AccountId": account, "AWS::Region": region, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
    if isinstance(value, list):
        return [resolve(v, template, account=account, region=region) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        name = value["Ref"]
        return pseudo.get(name, f"arn:aws:ref:{region}:{account}:{name}")
    if set(value) == {"Fn::GetAtt"}:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"arn:aws:getatt:{region}:{account}:{logical_id}/{attribute}"
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(p) for p in resolve(parts, template, account=account, region=region))
    return {k: resolve(v, template, account=account, region=region) for k, v in value.items()}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, Any]) -> bool:
    base = operator.removesuffix("IfExists")
    if key not in context:
        return operator.endswith("IfExists") or base.startswith(("StringNot", "ArnNot"))
    actual = context[key]
    patterns = [str(e) for e in _as_list(expected)]
    if base in ("StringEquals", "ArnEquals"):
        return any(actual == p for p in patterns)
    if base in ("StringNotEquals", "ArnNotEquals"):
        return all(actual != p for p in patterns)
    if base in ("StringLike", "ArnLike"):
        return any(fnmatch.fnmatchcase(actual, p) for p in patterns)
    if base in ("StringNotLike", "ArnNotLike"):
        return not any(fnmatch.fnmatchcase(actual, p) for p in patterns)
    if base == "Bool":
        return any(str(actual).lower() == p.lower() for p in patterns)
    raise NotImplementedError(f"condition operator {operator}")


def _matches(statement: Mapping[str, Any], *, principal: Mapping[str, str], action: str, resource: str,
             context: Mapping[str, Any]) -> bool:
    stated = statement.get("Principal")
    if stated != "*" and not any(principal.get(kind) in _as_list(values) for kind, values in (stated or {}).items()):
        return False
    if not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _as_list(statement.get("Action", []))):
        return False
    if not any(fnmatch.fnmatchcase(resource, r) for r in _as_list(statement.get("Resource", "*"))):
        return False
    return all(_condition_holds(op, key, expected, context)
               for op, keys in statement.get("Condition", {}).items() for key, expected in keys.items())


def decide(statements: list[Mapping[str, Any]], *, principal: Mapping[str, str], action: str, resource: str,
           context: Mapping[str, Any]) -> str:
    """"Deny" (explicit), "Allow", or "ImplicitDeny" for one request against resolved statements."""
    matching = [s for s in statements
                if _matches(s, principal=principal, action=action, resource=resource, context=context)]
    if any(s["Effect"] == "Deny" for s in matching):
        return "Deny"
    return "Allow" if any(s["Effect"] == "Allow" for s in matching) else "ImplicitDeny"
