"""A one-file HTML report: the outcome in plain words and what to try first, then the verdict table, then the charts
that explain the verdicts. Inline SVG, no scripts, no fonts or images fetched, so it opens the same from S3, an e-mail
attachment or a laptop without network; it reads on a phone (400 px) as well as on a desktop.
"""

from __future__ import annotations

import time
from typing import Any

from . import advice
from .engine import STATUS_ISSUES, STATUS_NO_ISSUES, VERDICT_NOT_APPLICABLE, RuleResult, SubRuleResult
from .html_charts import PERCENTILES, Threshold, bar_chart, esc, histogram, line_chart, range_chart
from .timeline import Timeline

CSS = """
*{box-sizing:border-box} html{-webkit-text-size-adjust:100%}
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;padding:20px;max-width:1100px;
color:#1d2329;background:#fff;line-height:1.4}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 4px;color:#38434f} .meta{color:#5b6775;font-size:13px;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:13px;margin:6px 0} th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:left;
vertical-align:top} th{background:#f3f6f9} td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff;white-space:nowrap}
.IssuesFound{background:#c0392b} .NoIssuesFound{background:#2e8b57} .NotApplicable{background:#6b7785}
.InProgress{background:#2b6cb0} .Informational{background:#4a6c8f} .Error{background:#7b341e}
.outcome{font-size:15px;margin:10px 0} .outcome .badge{font-size:14px;padding:2px 10px}
.todo{border-left:4px solid #c0392b;background:#fdf3f2;padding:8px 12px;font-size:14px;margin:8px 0;border-radius:0 4px 4px 0}
.todo h3{margin:0 0 4px;color:#1d2329} .todo p{margin:2px 0 6px} .todo ul{margin:0;padding-left:20px}
dl.columns{font-size:13px;color:#38434f;margin:6px 0} dl.columns dt{font-weight:600;float:left;clear:left;margin-right:6px}
dl.columns dd{margin:0 0 2px}
figure.chart{margin:6px 0 14px;max-width:760px} svg.chart{display:block;width:100%;height:auto;background:#fbfcfd;
border:1px solid #e4e9ee} .axis{stroke:#9aa5b1;stroke-width:1} .grid{stroke:#e9edf1;stroke-width:1}
.lbl{font-size:12px;fill:#5b6775} .empty{color:#5b6775;font-style:italic}
ul.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:2px 14px;font-size:12px;color:#38434f}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;vertical-align:-1px}
.swatch.dashed{width:16px;height:0;border-top:2px dashed;vertical-align:3px}
@media (max-width:600px){
 body{padding:10px} h1{font-size:18px}
 table.verdicts,table.verdicts tbody,table.verdicts tr,table.verdicts td{display:block;width:100%}
 table.verdicts tr.head{display:none} table.verdicts tr{border:1px solid #dde3ea;margin:0 0 8px;border-radius:4px}
 table.verdicts td{border:0;padding:2px 8px;text-align:left} table.verdicts td.num{text-align:left}
 table.verdicts td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#5b6775}
 table.verdicts td.rule{font-weight:600;background:#f3f6f9}
 .lbl{font-size:22px}
}
"""
_VERDICT_ORDER = {STATUS_ISSUES: 0, STATUS_NO_ISSUES: 1, VERDICT_NOT_APPLICABLE: 2}


def _parameters(sub: SubRuleResult) -> dict[str, float]:
    """A rule's numeric parameters, from its report's ``RuleParameters`` (``key:value`` lines)."""
    values: dict[str, float] = {}
    for line in str(sub.report.get("RuleParameters", "")).splitlines():
        key, _, raw = line.partition(":")
        try:
            values[key.strip()] = float(raw)
        except ValueError:
            continue
    return values


def _subs(results: list[RuleResult], name: str) -> list[SubRuleResult]:
    return [s for r in results for s in r.rules if s.name == name]


def _thresholds(results: list[RuleResult], rule: str, keys: dict[str, str]) -> list[Threshold]:
    """Dashed lines for a rule's thresholds, where the rule was evaluated: ``keys`` maps parameter -> label."""
    lines: list[Threshold] = []
    for sub in _subs(results, rule)[:1]:
        params = _parameters(sub)
        lines += [(params[key], f"{rule} {label}") for key, label in keys.items() if key in params]
    return lines


def outcome_block(results: list[RuleResult], windows: int | None) -> list[str]:
    out = []
    for result in results:
        word = advice.outcome(result)
        out.append(f'<p class="outcome" data-outcome="{esc(word)}"><b>{esc(result.configuration_name)}</b>: '
                   f'<span class="badge {esc(word)}">{esc(word)}</span> {esc(advice.headline(result, windows))}</p>')
        if result.status_details:
            out.append(f'<p class="meta">SageMaker status: {esc(result.status)} &middot; '
                       f"{esc(result.status_details.strip())}</p>")
    return out


def what_to_try_section(results: list[RuleResult]) -> list[str]:
    issues = [s for r in results for s in r.rules if s.verdict == STATUS_ISSUES]
    if not issues:
        return []
    out = ["<h2>What to try</h2>"]
    for sub in issues:
        tips = "".join(f"<li>{esc(tip)}</li>" for tip in advice.what_to_try(sub))
        out.append(f'<div class="todo" data-todo="{esc(sub.name)}"><h3>{esc(sub.name)}</h3>'
                   f"<p>{esc(advice.reason(sub))}</p><ul>{tips}</ul></div>")
    return out


def _summary_table(results: list[RuleResult]) -> str:
    labels = [name for name, _ in advice.COLUMNS]
    rows = ['<table class="verdicts"><tr class="head">' + "".join(f"<th>{esc(n)}</th>" for n in labels) + "</tr>"]
    for result in results:
        for sub in sorted(result.rules, key=lambda s: _VERDICT_ORDER.get(s.verdict, 3)):
            r, shown = sub.report, advice.shown_verdict(sub)
            rows.append(
                f'<tr data-rule="{esc(sub.name)}"><td class="rule">{esc(sub.name)}</td>'
                f'<td data-label="{labels[1]}"><span class="badge {esc(shown)}">{esc(shown)}</span></td>'
                f'<td class="num" data-label="{labels[2]}">{r["RuleTriggered"]}</td>'
                f'<td class="num" data-label="{labels[3]}">{r["Violations"]}</td>'
                f'<td class="num" data-label="{labels[4]}">{r["Datapoints"]}</td>'
                f'<td data-label="{labels[5]}">{esc(advice.reason(sub))}</td></tr>'
            )
    rows.append("</table>")
    return "".join(rows)


def rules_section(results: list[RuleResult]) -> list[str]:
    columns = "".join(f"<dt>{esc(name)}</dt><dd>{esc(text)}</dd>" for name, text in advice.COLUMNS)
    return ["<h2>Rules</h2>", _summary_table(results), f'<dl class="columns">{columns}</dl>',
            f'<p class="meta">{esc(advice.WINDOWS_AND_STEPS)}</p>']


def _usage_details(results: list[RuleResult]) -> dict[str, Any] | None:
    subs = _subs(results, "OverallSystemUsage")
    return subs[0].report.get("Details", {}) if subs else None


def _usage_table(details: dict[str, Any]) -> str:
    head = "".join(f"<th>{k}</th>" for k in PERCENTILES)
    rows = [f'<div class="scroll"><table class="usage"><tr><th>#</th><th>Metric</th><th>Node</th>{head}</tr>']
    for n, (label, metric, node, stats) in enumerate(_usage_rows(details)):
        cells = "".join(f'<td class="num">{esc(stats.get(k))}</td>' for k in PERCENTILES)
        rows.append(f'<tr><td class="num">{n + 1 if label else ""}</td><td>{esc(metric)}</td><td>{esc(node)}</td>'
                    f"{cells}</tr>")
    rows.append("</table></div>")
    return "".join(rows)


def _usage_rows(details: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(chart label or "" when not charted, metric, node, percentiles): charted metrics first, in chart order."""
    charted = ("GPU", "CPU", "GPU memory", "CPU memory", "I/O")
    rows = [(f"{m} {node}", m, node, stats) for m in charted for node, stats in sorted(details.get(m, {}).items())]
    rows += [("", m, node, stats) for m, nodes in details.items() if m not in charted for node, stats in nodes.items()]
    return rows


def usage_section(results: list[RuleResult]) -> list[str]:
    out = ["<h2>System usage percentiles</h2>"]
    details = _usage_details(results)
    if details is None:
        return out + ['<p class="empty">System usage was not evaluated.</p>']
    charted = [(label, stats) for label, _m, _n, stats in _usage_rows(details) if label]
    out.append(range_chart("system-usage-percentiles", "System usage percentiles", charted))
    out.append(_usage_table(details))
    return out


def _device_charts(kind: str, title: str, series: dict[str, dict[str, list[list[float]]]],
                   thresholds: list[Threshold], empty: str) -> list[str]:
    if not series:
        return [f'<p class="empty">{esc(empty)}</p>']
    return [f"<h3>{esc(node)}</h3>" + line_chart(f"{kind}-{node}", f"{title} {node}", devices, y_max=100,
                                                 thresholds=thresholds)
            for node, devices in sorted(series.items())]


def system_section(results: list[RuleResult], timeline: Timeline) -> list[str]:
    gpu_lines = _thresholds(results, "LowGPUUtilization", {"threshold_p95": "threshold_p95 (p95 must reach it)",
                                                          "threshold_p5": "threshold_p5 (p5 must reach it)"})
    out = ["<h2>GPU utilisation</h2>"]
    out += _device_charts("gpu-utilization", "GPU utilisation", timeline.series.get("gpu", {}), gpu_lines,
                          "No GPU metrics: CPU-only instance or the profiler recorded none.")
    out.append("<h2>GPU memory</h2>")
    out += _device_charts("gpu-memory", "GPU memory", timeline.series.get("gpu_memory", {}), [],
                          "No GPU memory metrics.")
    out.append("<h2>CPU utilisation (mean over cores)</h2>")
    cpu = timeline.series.get("cpu", {})
    if cpu:
        cpu_lines = _thresholds(results, "CPUBottleneck", {"cpu_threshold": "cpu_threshold (busy above it)"})
        merged = {node: devices.get("all cores", []) for node, devices in cpu.items()}
        out.append(line_chart("cpu-utilization", "CPU utilisation", merged, y_max=100, thresholds=cpu_lines))
    else:
        out.append('<p class="empty">No CPU metrics.</p>')
    return out


def render(results: list[RuleResult], timeline: Timeline, diagnostics: dict[str, Any], *, title: str,
           source: str) -> str:
    """The whole report as one HTML string."""
    windows = int(diagnostics.get("windows", 0) or 0)
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{esc(title)}</h1>",
           f'<p class="meta">Source: {esc(source)} &middot; {windows} analysis window(s) &middot; '
           f'generated {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}</p>']
    out += outcome_block(results, windows)
    out += what_to_try_section(results)
    out += rules_section(results)
    out += system_section(results, timeline)
    out += _steps_section(timeline)
    out += usage_section(results)
    out += _data_read(diagnostics)
    out.append("</body></html>")
    return "\n".join(out)


def _steps_section(timeline: Timeline) -> list[str]:
    out = ["<h2>Step durations</h2>"]
    steps = timeline.steps
    if not steps:
        return out + ['<p class="empty">No step events: framework profiling was off or unsupported.</p>']
    durations = [s[1] for s in steps]
    mean = sum(durations) / len(durations)
    std = (sum((d - mean) ** 2 for d in durations) / len(durations)) ** 0.5
    cutoff = mean + 3 * std
    counts, edges = histogram(durations)
    out.append(f'<p class="meta">{timeline.step_count} training step(s) (iterations of the training loop); mean '
               f"{mean:.4g} s, std {std:.4g} s; red bars lie above mean + 3 std ({cutoff:.4g} s).</p>")
    out.append(bar_chart("step-duration-histogram", "Step duration histogram", counts, edges,
                         highlight_from=cutoff, x_label="step duration (seconds)", y_label="steps"))
    by_phase: dict[str, list[list[float]]] = {}
    for end, duration, node, phase, _step in steps:
        by_phase.setdefault(f"{node} {phase.replace('Step:ModeKeys.', '')}", []).append([end, duration])
    out.append(line_chart("step-duration-over-time", "Step duration over time", by_phase, y_label="s"))
    outliers = sorted((s for s in steps if s[1] > cutoff), key=lambda s: -s[1])[:20]
    if outliers:
        out.append('<div class="scroll"><table class="outliers"><tr><th>Step</th><th>Node</th><th>Phase</th>'
                   "<th>Duration (s)</th></tr>")
        for _end, duration, node, phase, step in outliers:
            out.append(f"<tr><td>{esc(step)}</td><td>{esc(node)}</td><td>{esc(phase)}</td>"
                       f'<td class="num">{duration:.4g}</td></tr>')
        out.append("</table></div>")
    return out


_DIAGNOSTICS = (
    ("files", "profiler files read"), ("records", "samples and events read"), ("bytes", "bytes read"),
    ("bad_lines", "damaged lines skipped"), ("bad_files", "damaged files skipped"),
    ("late_records", "records that arrived after their window closed"),
    ("records_before_origin", "records before the job's first window"),
    ("misplaced_records", "records far from their file's minute"), ("skipped_windows", "empty windows jumped over"),
)


def _data_read(diagnostics: dict[str, Any]) -> list[str]:
    out = ["<h2>Data read</h2>", '<table class="diagnostics">']
    for key, label in _DIAGNOSTICS:
        out.append(f'<tr><th>{esc(label)}</th><td class="num">{esc(diagnostics.get(key, 0))}</td></tr>')
    out.append("</table>")
    problems = diagnostics.get("problems") or []
    if problems:
        out.append("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")
    return out


_esc = esc  # the metric rules' report shares these
__all__ = ["CSS", "render", "line_chart", "bar_chart", "outcome_block", "what_to_try_section", "rules_section"]
