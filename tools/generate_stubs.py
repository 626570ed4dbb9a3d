#!/usr/bin/env python3
"""Write ``rules.pyi``: typed signatures for the rule classes that ``rules.py`` generates from the catalog.

``python tools/generate_stubs.py`` rewrites the stub; ``--check`` exits 1 when it is stale (the tests run that).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cdk_sagemaker_debugger.model.rules.health import HEALTH_RULE_SPECS  # noqa: E402
from cdk_sagemaker_debugger.model.rules.metric import METRIC_RULE_SPECS  # noqa: E402
from cdk_sagemaker_debugger.model.rules.profiler_catalog import PROFILER_RULE_SPECS  # noqa: E402

STUB = ROOT / "src" / "cdk_sagemaker_debugger" / "rules.pyi"

HEADER = '''"""Type stubs for the profiler rule classes generated from the catalog (written by tools/generate_stubs.py)."""

from typing import Any

from .model.rules.health import HealthRule as HealthRule
from .model.rules.metric import MetricRule as MetricRule
from .model.rules.profiler import BuiltinProfilerRule as BuiltinProfilerRule
from .model.rules.profiler import CustomProfilerRule as CustomProfilerRule
from .model.rules.profiler import ProfilerReport as ProfilerReport
from .model.rules.profiler import ProfilerRule as ProfilerRule

def from_name(rule_name: str, **parameters: Any) -> ProfilerRule: ...
'''


def render() -> str:
    parts = [HEADER]
    builtin = [(spec, "BuiltinProfilerRule") for spec in PROFILER_RULE_SPECS.values()]
    for spec, base in builtin + [(spec, "HealthRule") for spec in HEALTH_RULE_SPECS.values()]:
        params = "".join(f"        {p.name}: {p.python_type} = {p.default!r},\n" for p in spec.parameters)
        parts.append(
            f"\nclass {spec.name}({base}):\n"
            f'    """{spec.summary}"""\n\n'
            "    def __init__(\n"
            "        self,\n"
            "        *,\n"
            "        name: str | None = None,\n"
            "        local_path: str | None = None,\n"
            "        s3_output_path: str | None = None,\n"
            f"{params}"
            "    ) -> None: ...\n"
        )
    for metric_spec in METRIC_RULE_SPECS.values():
        metrics = "".join(f"        {argument}: str,\n" for argument in metric_spec.metric_arguments)
        params = "".join(f"        {p.name}: {p.python_type} = {p.default!r},\n" for p in metric_spec.parameters)
        if metric_spec.name == "StalledTraining":
            params += "        threshold_minutes: float | None = None,\n"
        parts.append(
            f"\nclass {metric_spec.name}(MetricRule):\n"
            f'    """{metric_spec.summary}"""\n\n'
            "    def __init__(\n"
            "        self,\n"
            "        *,\n"
            f"{metrics}"
            "        name: str | None = None,\n"
            "        local_path: str | None = None,\n"
            "        s3_output_path: str | None = None,\n"
            f"{params}"
            "    ) -> None: ...\n"
        )
    return "".join(parts)


def main() -> int:
    fresh = render()
    if "--check" in sys.argv:
        if not STUB.exists() or STUB.read_text() != fresh:
            print("rules.pyi is stale: run python tools/generate_stubs.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
