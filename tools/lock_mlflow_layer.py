#!/usr/bin/env python3
"""Write the pinned requirements of ``MlflowLayer``: mlflow-skinny and sagemaker-mlflow with every dependency pinned
to one version and one sha256, resolved for the evaluator's platform (Lambda, Python 3.14, arm64, manylinux).

    python tools/lock_mlflow_layer.py [--mlflow-skinny 3.17.2] [--sagemaker-mlflow 0.5.0] [--measure]

Resolves with pip against the package index (network needed; the synth itself then installs exactly these files).
``--measure`` also installs the layer into a temporary folder and prints its unzipped and zipped sizes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cdk_sagemaker_debugger.constructs.mlflow_layer import (  # noqa: E402
    LOCK,
    PLATFORMS,
    PYTHON_VERSION,
    pip_platform_arguments,
)


def resolve(tops: list[str]) -> list[tuple[str, str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                        "--report", str(report), *pip_platform_arguments(), *tops], check=True)
        installs = json.loads(report.read_text())["install"]
    pins = [(i["metadata"]["name"].lower(), i["metadata"]["version"], i["download_info"]["archive_info"]["hashes"]["sha256"])
            for i in installs]
    return sorted(pins)


def render(tops: list[str], pins: list[tuple[str, str, str]]) -> str:
    lines = [
        "# MlflowLayer's pinned requirements: the MLflow client the RuleEvaluator writes verdicts with, and the",
        "# sagemaker-mlflow plugin that signs requests to SageMaker's managed tracking servers, with every dependency",
        f"# pinned to one version and one file (sha256) for Lambda Python {PYTHON_VERSION} ({', '.join(PLATFORMS)}).",
        f"# Top-level: {', '.join(tops)}. Written by tools/lock_mlflow_layer.py; do not edit by hand.",
    ]
    for name, version, sha256 in pins:
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha256}")
    return "\n".join(lines) + "\n"


def measure(lock: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, "python")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--require-hashes",
                        "--target", str(target), *pip_platform_arguments(), "-r", str(lock)], check=True)
        files = [p for p in Path(tmp).rglob("*") if p.is_file()]
        unzipped = sum(p.stat().st_size for p in files)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, os.path.relpath(path, tmp))
        print(f"{len(files)} files, {unzipped / 2**20:.1f} MiB unzipped, {len(buffer.getvalue()) / 2**20:.1f} MiB zipped")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-skinny", default="3.17.2")
    parser.add_argument("--sagemaker-mlflow", default="0.5.0")
    parser.add_argument("--measure", action="store_true", help="install the lock and print the layer's size")
    args = parser.parse_args()
    tops = [f"mlflow-skinny=={args.mlflow_skinny}", f"sagemaker-mlflow=={args.sagemaker_mlflow}"]
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    LOCK.write_text(render(tops, resolve(tops)))
    print(f"wrote {LOCK.relative_to(ROOT)}")
    if args.measure:
        measure(LOCK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
