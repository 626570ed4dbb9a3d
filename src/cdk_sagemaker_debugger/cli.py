"""``cdk-sagemaker-debugger``: evaluate the profiler rules on a laptop or in CI, and list the rule catalog.

    cdk-sagemaker-debugger evaluate (PATH_OR_S3_URI | --training-job NAME) --out DIR [--rule NAME[:param=value,...]]...
        [--fail-on STATUS] [--format text|json] [--quiet] [--region REGION] [--profile PROFILE]
    cdk-sagemaker-debugger rules [--format text|json]
    cdk-sagemaker-debugger --version
    cdk-sagemaker-debugger sample --out DIR [--interval-ms 100] [--duration SECONDS] [--node algo-1] [--s3-uri URI]

This module never imports aws_cdk, so the command starts in well under a second; boto3 and tqdm load only when used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .cli_aws import AwsClients, AwsSetupError, access_hint, evaluate_cloudwatch, explain, find_job_data
from .cli_progress import Progress, on_a_terminal
from .cli_tensors import TENSOR_RULES, evaluate_tensors, split_configs, tensor_config
from .model.errors import ConfigurationError, did_you_mean
from .model.rules.health import HEALTH_RULE_CLASSES, HEALTH_RULE_SPECS
from .model.rules.profiler_catalog import OVERRIDABLE_BY_PROFILER_REPORT, PROFILER_REPORT, PROFILER_RULE_SPECS
from .rules import RULE_CLASSES, from_name
from .runtime.evaluator import cloudwatch
from .runtime.evaluator.advice import OUTCOMES, outcome
from .runtime.evaluator.caps import instance_count
from .runtime.evaluator.engine import (
    Evaluator,
    RuleConfig,
    RuleResult,
)
from .runtime.evaluator.html_report import render
from .runtime.evaluator.mlflow_export import MlflowExportError, MlflowTarget, export
from .runtime.evaluator.reading import evaluate_store
from .runtime.evaluator.report import HTML_NAME, SUMMARY_NAME, report_files, summary, verdict_table
from .runtime.evaluator.rules import RuleConfigError, coerce_parameter
from .runtime.evaluator.storage import EvaluationInputError, Store, open_profiler_output

EXIT_OK = 0
EXIT_FAILED = 1  # --fail-on STATUS: a rule reached a status the caller fails on
EXIT_USAGE = 2
EXIT_UNREADABLE = 3
EXIT_UNWRITABLE = 4

EXIT_CODES = """exit status:
  0  the rules were evaluated (issues found or not)
  1  --fail-on STATUS: at least one rule ended with that outcome
  2  usage error: unknown flag or rule, bad parameter, --out not a folder, unknown --profile, no region
  3  the profiler data could not be read: no such folder, job or data, access denied, no AWS credentials
  4  the report (evaluate) or the samples (sample) could not be written to --out, or to the --mlflow-run
"""
SAMPLE_EXIT_CODES = """exit status:
  0  the samples were written to --out (and uploaded, with --s3-uri)
  2  usage error: a bad option value, or --s3-uri without a job name
  4  --out is held by another sampler, or cannot be written
"""
EVALUATE_USAGE = """%(prog)s (PATH_OR_S3_URI | --training-job NAME) --out DIR
        [--rule NAME[:param=value,...]]... [--fail-on STATUS[,STATUS]] [--format text|json] [--quiet]
        [--mlflow-run RUN_ID [--mlflow-tracking-uri URI]] [--region REGION] [--profile PROFILE]"""
#: The outcomes the evaluator gives a configured rule (the words the table prints); --fail-on accepts these.
RULE_STATUSES = OUTCOMES


class UsageError(Exception):
    """A value on the command line that cannot work (exit 2); the message says which and how to fix it."""


def parse_rule_option(option: str) -> RuleConfig:
    """``LowGPUUtilization:patience=100,window=60`` -> a validated RuleConfig (validated by the model layer)."""
    name, _, spec = option.partition(":")
    name = name.strip()
    known = [*RULE_CLASSES, *HEALTH_RULE_CLASSES, *TENSOR_RULES]
    if name not in known:
        raise UsageError(f"--rule {option!r}: unknown rule {name!r}.{did_you_mean(name, known)} "
                         f"Run 'cdk-sagemaker-debugger rules' for the catalog.")
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--rule {option!r}: {item!r} is not param=value (e.g. {name}:patience=100,window=60).")
        if key.strip() in params:
            raise UsageError(f"--rule {option!r}: {key.strip()} is given twice ({key.strip()}={params[key.strip()]!r} "
                             f"and {item}); give each parameter once.")
        params[key.strip()] = coerce_parameter(value)
    if name in TENSOR_RULES:
        try:
            check_tensor_parameters(name, params)
            return tensor_config(name, params)
        except (ConfigurationError, RuleConfigError) as exc:
            raise UsageError(f"--rule {option!r}: {exc}") from exc
    try:
        rule = HEALTH_RULE_CLASSES[name](**params) if name in HEALTH_RULE_CLASSES else from_name(name, **params)
    except ConfigurationError as exc:
        raise UsageError(f"--rule {option!r}: {exc}") from exc
    except TypeError as exc:
        raise UsageError(f"--rule {option!r}: {exc}") from exc
    return RuleConfig(rule.name, rule.rule_to_invoke, dict(rule.parameters))


def check_tensor_parameters(name: str, params: dict[str, Any]) -> None:
    """Check a tensor rule's --rule values with the parameter specs ProfiledTrainingJob(debugger_rules=...) uses.

    A value the command line read as a number or a boolean is checked as the text it was where the spec takes text
    (``tensor_regex=0``, ``token_values=0``)."""
    from .model.rules.debugger import RULE_CLASSES as DEBUGGER_RULE_CLASSES

    specs = {p.name: p for p in DEBUGGER_RULE_CLASSES[name].spec.parameters}
    as_given = {key: str(value) if key in specs and "str" in specs[key].python_type and not isinstance(value, str)
                else value for key, value in params.items()}
    unknown = [key for key in as_given if key not in specs]
    if not unknown:  # the evaluator names unknown parameters with the whole list it accepts
        DEBUGGER_RULE_CLASSES[name](**as_given)


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


class CommandFailure(Exception):
    """A failure already put in words, with the exit status it maps to."""

    def __init__(self, exit_code: int, message: str):
        super().__init__(message)
        self.exit_code = exit_code


def fail_on_statuses(text: str) -> tuple[str, ...]:
    """``--fail-on IssuesFound,Error``: rule outcomes, spelled exactly (a CI gate must not pass on a typo)."""
    statuses = tuple(s.strip() for s in text.split(",") if s.strip())
    for status in statuses or ("",):
        if status not in RULE_STATUSES:
            raise argparse.ArgumentTypeError(f"{status!r} is not a rule outcome; use one of "
                                             f"{', '.join(RULE_STATUSES)}.{did_you_mean(status, RULE_STATUSES)}")
    return statuses


def check_out(text: str) -> Path:
    """Refuse an --out that cannot be written before spending a minute on the evaluation."""
    out = Path(text).expanduser()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {text}: exists and is not a folder; pass a folder (it is created when missing)")
    existing = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not existing.is_dir():
        raise UsageError(f"--out {text}: {existing} is a file, so no folder can be created under it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--out {text}: {existing} is not writable by you; pick a folder you can write to")
    return out


@dataclass
class Evaluation:
    """What was evaluated and from where: enough to write the reports and decide the exit status."""

    evaluator: Evaluator
    results: list[RuleResult]
    source: str  # where the data came from, as the HTML report names it


def evaluate_location(location: str, configs: list[RuleConfig], aws: AwsClients, progress: Progress) -> Evaluation:
    s3 = aws.client("s3") if location.startswith("s3://") else None
    configs, tensor_configs = split_configs(configs)
    results: list[RuleResult] = []
    source = ""
    if tensor_configs:  # the tensor collector's files, next to (or instead of) the profiler files
        results, _tensors, tensor_store = evaluate_tensors(location, tensor_configs, s3_client=s3)
        source = tensor_store.describe()
        if not configs:
            return Evaluation(Evaluator([], strict=False), results, source)
    store: Store = open_profiler_output(location, s3_client=s3)
    evaluator = evaluate_store(store, configs, progress=progress)
    return Evaluation(evaluator, evaluator.results(final=True) + results, store.describe())


def evaluate_training_job(job: str, configs: list[RuleConfig], aws: AwsClients, progress: Progress,
                          note: TextIO | None) -> Evaluation:
    """The job's profiler data where DescribeTrainingJob says it is, else its CloudWatch instance metrics."""
    found = find_job_data(job, aws)
    if found.store is not None:
        if note:
            for unreadable in found.unreadable:
                note.write(f"{job}: could not read {unreadable}; trying the next location\n")
            note.write(f"{job}: reading the profiler data at {found.store.describe()}\n")
        evaluator = evaluate_store(found.store, configs, progress=progress, nodes=instance_count(found.description))
        return Evaluation(evaluator, evaluator.results(final=True), found.store.describe())
    if note:
        where = f" at {', '.join(found.empty)}" if found.empty else " (the profiler is off)"
        note.write(f"{job}: no profiler data{where}; evaluating SageMaker's CloudWatch instance metrics instead\n")
    evaluator, final = evaluate_cloudwatch(found.description, configs, aws)
    return Evaluation(evaluator, evaluator.results(final=final), cloudwatch.source_label(job))


def evaluate_input(args: argparse.Namespace, configs: list[RuleConfig], stderr: TextIO) -> Evaluation:
    """Read and evaluate; every failure comes out as a CommandFailure with its exit status, never a traceback."""
    aws = AwsClients(args.profile, args.region)
    progress = Progress(stderr, enabled=on_a_terminal(stderr, quiet=args.quiet))
    try:
        if args.training_job:
            return evaluate_training_job(args.training_job, configs, aws, progress, None if args.quiet else stderr)
        return evaluate_location(args.path, configs, aws, progress)
    except (RuleConfigError, AwsSetupError) as exc:
        raise CommandFailure(EXIT_USAGE, str(exc)) from exc
    except EvaluationInputError as exc:
        raise CommandFailure(EXIT_UNREADABLE, f"{exc}{access_hint(str(exc))}") from exc
    except Exception as exc:  # S3, SageMaker, CloudWatch, credentials, network: say what failed and how to fix it
        message = explain(exc, job=args.training_job, region=aws.region_name)
        raise CommandFailure(EXIT_UNREADABLE, message or f"could not read {args.path or args.training_job}: "
                                                         f"{type(exc).__name__}: {exc}") from exc
    finally:
        progress.close()


def write_outputs(evaluation: Evaluation, out: Path) -> str:
    """Write the reports and return the summary JSON exactly as written (``--format json`` prints the same text)."""
    results, diagnostics = evaluation.results, evaluation.evaluator.diagnostics()
    out.mkdir(parents=True, exist_ok=True)
    for relative, text in report_files(results).items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    summary_text = json.dumps(summary(results, diagnostics), indent=2)
    (out / SUMMARY_NAME).write_text(summary_text)
    title = "Profiler report: " + ", ".join(r.configuration_name for r in results)
    html = render(results, evaluation.evaluator.timeline, diagnostics, title=title, source=evaluation.source)
    (out / HTML_NAME).write_text(html)
    return summary_text


def show(args: argparse.Namespace, evaluation: Evaluation, out: Path, summary_text: str, stdout: TextIO,
         stderr: TextIO) -> None:
    """Text: the verdict table and notes on stdout. JSON: the summary alone on stdout, notes on stderr."""
    if args.format == "json":
        stdout.write(summary_text + "\n")
        notes: TextIO | None = None if args.quiet else stderr
    else:
        windows = int(evaluation.evaluator.diagnostics().get("windows", 0) or 0)
        stdout.write(verdict_table(evaluation.results, windows) + "\n")
        notes = stdout
    diagnostics = evaluation.evaluator.diagnostics()
    if diagnostics["bad_lines"] or diagnostics["bad_files"]:
        (notes or stderr).write(f"warning: skipped {diagnostics['bad_lines']} damaged line(s) in "
                                f"{diagnostics['bad_files']} file(s); see {SUMMARY_NAME}\n")
    if notes:
        notes.write(f"wrote {out / 'profiler-reports'}/*.json, {out / SUMMARY_NAME} and {out / HTML_NAME}\n")


def fail_on_exit(args: argparse.Namespace, results: list[RuleResult], stderr: TextIO) -> int:
    wanted = {status for group in args.fail_on or () for status in group}
    hits = [(r, outcome(r)) for r in results if outcome(r) in wanted]
    for result, word in hits:
        stderr.write(f"--fail-on {word}: {result.configuration_name} reached {word}\n")
    return EXIT_FAILED if hits else EXIT_OK


def cmd_evaluate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        configs = resolve_rules(args.rule or [])
        out = check_out(args.out)
        evaluation = evaluate_input(args, configs, stderr)
    except UsageError as exc:
        stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except CommandFailure as exc:
        stderr.write(f"error: {exc}\n")
        return exc.exit_code
    try:
        summary_text = write_outputs(evaluation, out)
    except OSError as exc:
        stderr.write(f"error: the rules were evaluated but the report could not be written to {out}: {exc}. "
                     f"Free some space or pass another --out\n")
        return EXIT_UNWRITABLE
    show(args, evaluation, out, summary_text, stdout, stderr)
    if args.mlflow_run:
        try:
            where = export_to_mlflow(args, evaluation, out)
        except MlflowExportError as exc:
            stderr.write(f"error: the rules were evaluated and the report written to {out}, but not to MLflow: {exc}\n")
            return EXIT_UNWRITABLE
        if not args.quiet:
            stderr.write(f"wrote the verdicts, metrics and report to {where}\n")
    return fail_on_exit(args, evaluation.results, stderr)


def export_to_mlflow(args: argparse.Namespace, evaluation: Evaluation, out: Path) -> str:
    """The verdicts as tags and metrics, the HTML report and the summary as artifacts, into ``--mlflow-run``."""
    target = MlflowTarget(args.mlflow_run, args.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
    windows = int(evaluation.evaluator.diagnostics().get("windows", 0) or 0)
    files = {"": {HTML_NAME: (out / HTML_NAME).read_bytes(), SUMMARY_NAME: (out / SUMMARY_NAME).read_bytes()}}
    return export(target, evaluation.results, windows, files)


def rules_catalog() -> dict[str, Any]:
    """``rules --format json``: what tooling needs to build or check a --rule option: every rule the command evaluates
    with every parameter (scan_interval_us included), its default, type and accepted values, from the model's one
    parameter vocabulary; and the metric rules, which only the RuleEvaluator runs."""
    from .model.rules.debugger_catalog import DEBUGGER_RULE_SPECS
    from .model.rules.metric import METRIC_RULE_SPECS

    rules: list[dict[str, Any]] = [
        {"name": name, "summary": spec.summary, "parameters": [p.describe() for p in spec.parameters]}
        for name, spec in {**PROFILER_RULE_SPECS, **HEALTH_RULE_SPECS}.items()
    ]
    rules.append({"name": PROFILER_REPORT, "summary": "Runs every rule above with its defaults and writes the HTML "
                  "report; override a rule's parameter with <RuleName>_<parameter>=<value>.", "parameters": [],
                  "overridable": list(OVERRIDABLE_BY_PROFILER_REPORT)})
    tensor_rules = [
        {"name": name, "summary": DEBUGGER_RULE_SPECS[name].summary,
         "parameters": [p.describe() for p in DEBUGGER_RULE_SPECS[name].parameters]}
        for name in TENSOR_RULES
    ]
    metric_rules = [
        {"name": name, "summary": spec.summary, "metrics": list(spec.metric_arguments),
         "parameters": [p.describe() for p in spec.parameters], "replaces": spec.debugger_rule}
        for name, spec in METRIC_RULE_SPECS.items()
    ]
    return {"rules": rules, "tensor_rules": tensor_rules, "metric_rules": metric_rules}


def cmd_rules(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    catalog = rules_catalog()
    if args.format == "json":
        stdout.write(json.dumps(catalog, indent=2) + "\n")
        return EXIT_OK
    stdout.write("Profiler rules (evaluate --rule NAME[:param=value,...]; RuleEvaluator; ProfiledTrainingJob)\n\n")
    for rule in catalog["rules"][:-1]:
        _write_rule(stdout, rule)
    stdout.write(f"{PROFILER_REPORT}\n    Runs every rule above with its defaults and writes the HTML report; override with "
                 f"<RuleName>_<parameter>, e.g. --rule {PROFILER_REPORT}:LowGPUUtilization_window=60\n"
                 f"    overridable: {', '.join(OVERRIDABLE_BY_PROFILER_REPORT)}\n\n")
    stdout.write("Tensor rules (evaluate --rule NAME[:param=value,...] on the tensor collector's output; RuleEvaluator; "
                 "debugger_rules= of a ProfiledTrainingJob; a parameter without a default is not set)\n\n")
    for rule in catalog["tensor_rules"]:
        _write_rule(stdout, rule)
    stdout.write("Metric rules (RuleEvaluator only: they read the job's training metrics from CloudWatch, named by "
                 "its metric_definitions)\n\n")
    for rule in catalog["metric_rules"]:
        _write_rule(stdout, rule, note=f"metrics: {', '.join(rule['metrics'])}; in place of Debugger's "
                                       f"{rule['replaces']}")
    return EXIT_OK


def _write_rule(stdout: TextIO, rule: dict[str, Any], note: str | None = None) -> None:
    stdout.write(f"{rule['name']}\n    {rule['summary']}\n")
    if note:
        stdout.write(f"    {note}\n")
    for p in rule["parameters"]:
        doc = f"  # {p['description']}" if p["description"] else ""
        stdout.write(f"    {p['name']} = {p['default']!r}  ({p['accepts']}){doc}\n")


def cmd_sample(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Sample this host into --out in Debugger's layout, exactly as the sampler does inside a training container."""
    from .runtime.sampler import __main__ as sampler_main
    from .runtime.sampler.layout import log_file
    from .runtime.sampler.settings import SettingsError, settings_from_arguments
    from .runtime.sampler.status import FileLog

    try:
        settings = settings_from_arguments(args, end_marker=True)
    except SettingsError as exc:
        stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    if settings.s3_uri and not settings.job_name:
        stderr.write("error: --s3-uri uploads to <S3_URI>/<job name>/profiler-output/; pass --job-name or set "
                     "TRAINING_JOB_NAME\n")
        return EXIT_USAGE
    log = FileLog(os.path.join(settings.local_dir, log_file(settings.node)), stderr)
    if sampler_main.run(settings, args.duration, log=log, stderr=stderr) != sampler_main.EXIT_OK:
        return EXIT_UNWRITABLE  # another sampler holds --out (it said which)
    stdout.write(f"wrote {settings.local_dir} (evaluate it with: cdk-sagemaker-debugger evaluate "
                 f"{settings.local_dir} --out REPORT)\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdk-sagemaker-debugger",
        description="Evaluate SageMaker profiler rules on profiler output, without SageMaker Debugger.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="evaluate profiler rules on a job's profiler output (folder, s3:// or job name)",
                        usage=EVALUATE_USAGE, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_evaluate_arguments(ev)
    ev.set_defaults(func=cmd_evaluate)
    rl = sub.add_parser("rules", help="list the profiler rules and their parameters")
    rl.add_argument("--format", choices=("text", "json"), default="text", help="json: the catalog for tooling")
    rl.set_defaults(func=cmd_rules)
    from .runtime.sampler.settings import add_arguments as add_sample_arguments

    sm = sub.add_parser("sample", help="sample this host (CPU, memory, network, GPUs) into DIR in Debugger's layout",
                        description="Sample this host's CPU, memory, network, I/O and GPUs (nvidia-smi, when present) "
                        "into --out in SageMaker Debugger's profiler layout, as the sampler does inside a training "
                        "container; then evaluate the folder with 'cdk-sagemaker-debugger evaluate DIR --out REPORT'. "
                        "Stops after --duration seconds, or on Ctrl-C.",
                        epilog=SAMPLE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_arguments(sm, out_required=True)
    sm.set_defaults(func=cmd_sample)
    return parser


def add_evaluate_arguments(ev: argparse.ArgumentParser) -> None:
    source = ev.add_mutually_exclusive_group(required=True)
    source.add_argument("path", metavar="PATH_OR_S3_URI", nargs="?",
                        help="profiler-output/ folder of a job (or the job folder above it), or its s3:// URI")
    source.add_argument("--training-job", metavar="NAME",
                        help="a SageMaker training job: its profiler data is found from DescribeTrainingJob, and its "
                             "CloudWatch instance metrics are used when it has none")
    ev.add_argument("--out", required=True, metavar="DIR", help="folder for profiler-reports/*.json, "
                    f"{SUMMARY_NAME} and {HTML_NAME} (created when missing)")
    ev.add_argument("--rule", action="append", metavar="NAME[:param=value,...]",
                    help="rule to evaluate (repeatable); default: ProfilerReport with every rule at its defaults")
    ev.add_argument("--fail-on", action="append", type=fail_on_statuses, metavar="STATUS[,STATUS]",
                    help=f"exit 1 when any rule ends with one of these outcomes ({', '.join(RULE_STATUSES)}; "
                         "NotApplicable: nothing could be judged, e.g. a CPU-only host); repeatable, "
                         "e.g. --fail-on IssuesFound,Error,NotApplicable")
    ev.add_argument("--format", choices=("text", "json"), default="text",
                    help=f"json: print only the evaluation summary (as in {SUMMARY_NAME}) on stdout")
    ev.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no notes on stderr")
    ev.add_argument("--mlflow-run", metavar="RUN_ID", help="also write the verdicts (tags), per-rule metrics and the "
                    "report (artifacts) into this MLflow run; needs pip install 'cdk-sagemaker-debugger[mlflow]'")
    ev.add_argument("--mlflow-tracking-uri", metavar="URI", help="the run's tracking server: a URL, or a SageMaker "
                    "tracking server ARN (with sagemaker-mlflow); default: MLFLOW_TRACKING_URI")
    ev.add_argument("--region", help="AWS region of the training job and its clients (as in the AWS CLI)")
    ev.add_argument("--profile", help="AWS profile from ~/.aws/config to use (as in the AWS CLI)")


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and --version (0), usage errors (2): a status, so callers need no try
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.func(args, stdout, stderr))
    except BrokenPipeError:  # `cdk-sagemaker-debugger rules | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed stream for interpreter shutdown
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
