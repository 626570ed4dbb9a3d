"""Helpers shared by the tests (importable as ``helpers``: pytest puts tests/ on the path)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def scrub(template: Any) -> Any:
    """Replace asset hashes (they change with every edit of a handler or asset) so snapshots stay stable."""
    text = json.dumps(template, sort_keys=True)
    return json.loads(_ASSET_HASH.sub("<asset-hash>", text))


def task_parameters(stack: Any) -> dict[str, Any]:
    """The CreateTrainingJob Parameters of the state machine's Task state, with intrinsics flattened to markers."""
    from aws_cdk.assertions import Template

    return training_tasks(Template.from_stack(stack).to_json())[0]["Parameters"]


def training_tasks(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The CreateTrainingJob Task state of every state machine in ``template`` (in template order), with intrinsics
    flattened to markers (:func:`marker`)."""
    tasks = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        definition = resource["Properties"]["DefinitionString"]
        if isinstance(definition, dict):
            definition = "".join(p if isinstance(p, str) else marker(p) for p in definition["Fn::Join"][1])
        tasks.append(json.loads(definition)["States"]["CreateTrainingJob"])
    return tasks


def marker(intrinsic: dict[str, Any]) -> str:
    """``{"Ref": "X"}`` -> ``<Ref X>``, GetAtt -> ``<X.Arn>``, FindInMap -> ``<FindInMap Map/Region/key>``."""
    ((name, arg),) = intrinsic.items()
    if name == "Ref":
        return f"<Ref {arg}>"
    if name == "Fn::GetAtt":
        return f"<{arg[0]}.{arg[1]}>"
    if name == "Fn::FindInMap":
        return f"<FindInMap {arg[0]}/{marker(arg[1]) if isinstance(arg[1], dict) else arg[1]}/{arg[2]}>"
    return f"<{name}>"


def role_policy_statements(stack: Any, role_id_fragment: str) -> list[dict[str, Any]]:
    """Every statement of the one role whose logical id contains ``role_id_fragment``: its inline policies and every
    policy resource attached to it."""
    from aws_cdk.assertions import Template

    resources = Template.from_stack(stack).to_json()["Resources"]
    roles = [i for i, r in resources.items() if r["Type"] == "AWS::IAM::Role" and role_id_fragment in i]
    if len(roles) != 1:
        raise LookupError(f"expected one role matching {role_id_fragment!r}, found {roles}")
    inline = [
        statement
        for policy in resources[roles[0]]["Properties"].get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    return inline + [
        statement
        for resource in resources.values()
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": roles[0]} in resource["Properties"]["Roles"]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def make_stack(region: str | None = "us-east-1", *, app: Any = None, name: str = "Training") -> Any:
    """A stack of its own app (or of ``app``) in ``region`` (None: environment-agnostic), for construct tests."""
    import aws_cdk as cdk

    return cdk.Stack(app or cdk.App(), name, env=cdk.Environment(region=region) if region else None)
