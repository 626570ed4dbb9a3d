"""``cdk-sagemaker-debugger``: evaluate the profiler rules on a laptop, and list the rule catalog.

    cdk-sagemaker-debugger evaluate PATH_OR_S3_URI --out DIR [--rule NAME[:param=value,...]]...
    cdk-sagemaker-debugger rules

This module never imports aws_cdk, so the command starts in well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .model.errors import ConfigurationError, did_you_mean
from .model.profiler_catalog import OVERRIDABLE_BY_PROFILER_REPORT, PROFILER_REPORT, PROFILER_RULE_SPECS
from .rules import RULE_CLASSES, from_name
from .runtime.evaluator.engine import Evaluator, RuleConfig, evaluate_store
from .runtime.evaluator.html_report import render
from .runtime.evaluator.report import HTML_NAME, SUMMARY_NAME, report_files, summary, verdict_table
from .runtime.evaluator.rules import RuleConfigError
from .runtime.evaluator.storage import EvaluationInputError, open_profiler_output

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    pass


def _parse_value(text: str) -> Any:
    text = text.strip()
    if text == "None":
        return None
    if text in ("true", "True", "false", "False"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_rule_option(option: str) -> RuleConfig:
    """``LowGPUUtilization:patience=100,window=60`` -> a validated RuleConfig (validated by the model layer)."""
    name, _, spec = option.partition(":")
    name = name.strip()
    if name not in RULE_CLASSES:
        raise UsageError(f"--rule {option!r}: unknown rule {name!r}.{did_you_mean(name, RULE_CLASSES)} "
                         f"Run 'cdk-sagemaker-debugger rules' for the catalog.")
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--rule {option!r}: {item!r} is not param=value (e.g. {name}:patience=100,window=60).")
        params[key.strip()] = _parse_value(value)
    try:
        rule = from_name(name, **params)
    except ConfigurationError as exc:
        raise UsageError(f"--rule {option!r}: {exc}") from exc
    except TypeError as exc:
        raise UsageError(f"--rule {option!r}: {exc}") from exc
    return RuleConfig(rule.name, rule.rule_to_invoke, dict(rule.parameters))


def resolve_rules(options: Sequence[str]) -> list[RuleConfig]:
    if not options:
        return [RuleConfig(PROFILER_REPORT, PROFILER_REPORT, {})]
    configs = [parse_rule_option(o) for o in options]
    produced: dict[str, str] = {}
    for config in configs:
        names = list(PROFILER_RULE_SPECS) if config.rule_to_invoke == PROFILER_REPORT else [config.rule_to_invoke]
        for rule in names:
            if rule in produced:
                hint = ""
                if PROFILER_REPORT in (config.rule_to_invoke, produced[rule]):
                    hint = (f" ProfilerReport already evaluates {rule}; pass its parameters as "
                            f"--rule ProfilerReport:{rule}_<parameter>=<value> instead.")
                raise UsageError(f"{rule} would be evaluated twice and both would write profiler-reports/{rule}.json."
                                 f"{hint}")
            produced[rule] = config.rule_to_invoke
    return configs


class Progress:
    """A one-line progress bar on a terminal; silent when output is redirected."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.enabled = stream.isatty()
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = int(30 * done / total)
        if filled == self.last and done != total:
            return
        self.last = filled
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} files")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.last >= 0:
            self.stream.write("\n")
            self.stream.flush()


def write_outputs(evaluator: Evaluator, out: Path, *, source: str) -> list[Any]:
    results = evaluator.results(final=True)
    diagnostics = evaluator.diagnostics()
    for relative, text in report_files(results).items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (out / SUMMARY_NAME).write_text(json.dumps(summary(results, diagnostics), indent=2))
    title = "Profiler report: " + ", ".join(r.configuration_name for r in results)
    (out / HTML_NAME).write_text(render(results, evaluator.timeline, diagnostics, title=title, source=source))
    return results


def output_problem(out: Path) -> str | None:
    """Why the reports could not be written to ``out`` (tried by creating and removing a file there, or in the
    nearest existing folder above it), or None."""
    if out.exists() and not out.is_dir():
        return "exists and is not a folder"
    probe_in = out
    while not probe_in.exists():
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        return f"{probe_in} is a file, so the folder cannot be created; pass a folder path"
    try:
        with tempfile.TemporaryFile(dir=probe_in):
            pass
    except OSError as exc:
        return f"cannot write in {probe_in} ({exc.strerror or exc}); pass a folder you can write to"
    return None


def cmd_evaluate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        configs = resolve_rules(args.rule or [])
    except UsageError as exc:
        stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    out = Path(args.out)
    problem = output_problem(out)
    if problem:  # checked before the evaluation, which can take minutes
        stderr.write(f"error: --out {out}: {problem}\n")
        return EXIT_USAGE
    progress = Progress(stderr)
    try:
        store = open_profiler_output(args.path)
        evaluator = evaluate_store(store, configs, progress=progress)
    except EvaluationInputError as exc:
        progress.close()
        stderr.write(f"error: {exc}\n")
        return EXIT_FAILED
    except RuleConfigError as exc:
        progress.close()
        stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except Exception as exc:  # S3 access, credentials, network: say what failed instead of a traceback
        progress.close()
        name = type(exc).__name__
        stderr.write(f"error: could not read {args.path}: {name}: {exc}\n")
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            stderr.write("hint: configure AWS credentials (aws configure, AWS_PROFILE) to read from S3\n")
        return EXIT_FAILED
    progress.close()
    try:
        out.mkdir(parents=True, exist_ok=True)
        results = write_outputs(evaluator, out, source=store.describe())
    except OSError as exc:  # the disk filled up or the folder went away during the evaluation
        stderr.write(f"error: --out {out}: could not write the reports: {exc}\n")
        return EXIT_FAILED
    stdout.write(verdict_table(results) + "\n")
    diagnostics = evaluator.diagnostics()
    if diagnostics["bad_lines"] or diagnostics["bad_files"]:
        stdout.write(f"warning: skipped {diagnostics['bad_lines']} damaged line(s) in {diagnostics['bad_files']} "
                     f"file(s); see {SUMMARY_NAME}\n")
    stdout.write(f"wrote {out / 'profiler-reports'}/*.json and {out / HTML_NAME}\n")
    return EXIT_OK


def cmd_rules(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for name, spec in PROFILER_RULE_SPECS.items():
        stdout.write(f"{name}\n    {spec.summary}\n")
        params = [p for p in spec.parameters if p.name != "scan_interval_us"]
        for p in params:
            stdout.write(f"    {p.name} = {p.default!r}\n")
        if not params:
            stdout.write("    (no parameters)\n")
    stdout.write(f"{PROFILER_REPORT}\n    Runs every rule above with its defaults and writes the HTML report; override with "
                 f"<RuleName>_<parameter>, e.g. --rule {PROFILER_REPORT}:LowGPUUtilization_window=60\n"
                 f"    overridable: {', '.join(OVERRIDABLE_BY_PROFILER_REPORT)}\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdk-sagemaker-debugger",
        description="Evaluate SageMaker profiler rules on profiler output, without SageMaker Debugger.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="evaluate profiler rules on a profiler-output/ tree (folder or s3:// URI)")
    ev.add_argument("path", metavar="PATH_OR_S3_URI", help="profiler-output/ folder of a job, or its s3:// URI")
    ev.add_argument("--out", required=True, metavar="DIR", help="folder for profiler-reports/*.json and the HTML report")
    ev.add_argument("--rule", action="append", metavar="NAME[:param=value,...]",
                    help="rule to evaluate (repeatable); default: ProfilerReport with every rule at its defaults")
    ev.set_defaults(func=cmd_evaluate)
    rl = sub.add_parser("rules", help="list the profiler rules and their parameters")
    rl.set_defaults(func=cmd_rules)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args, stdout or sys.stdout, stderr or sys.stderr))
    except BrokenPipeError:  # `cdk-sagemaker-debugger rules | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed stream for interpreter shutdown
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
