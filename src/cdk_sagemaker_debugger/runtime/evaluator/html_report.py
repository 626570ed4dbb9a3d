"""A one-file HTML report: verdict table first, then the charts that explain the verdicts. Inline SVG, no scripts,
no fonts or images fetched, so it opens the same from S3, an email attachment or a laptop without network.
"""

from __future__ import annotations

import html
import time
from typing import Any

from .engine import STATUS_ISSUES, STATUS_NO_ISSUES, VERDICT_NOT_APPLICABLE, RuleResult
from .timeline import Timeline

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
W, H = 760, 240
PAD_L, PAD_R, PAD_T, PAD_B = 52, 120, 14, 34

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1d2329;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 4px;color:#38434f} .meta{color:#5b6775;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0} th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:left}
th{background:#f3f6f9} td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
.IssuesFound{background:#c0392b} .NoIssuesFound{background:#2e8b57} .NotApplicable{background:#8a96a3}
.InProgress{background:#2b6cb0} .Error{background:#7b341e}
svg.chart{background:#fbfcfd;border:1px solid #e4e9ee;margin:4px 0} .axis{stroke:#9aa5b1;stroke-width:1}
.grid{stroke:#e9edf1;stroke-width:1} .lbl{font-size:11px;fill:#5b6775} .empty{color:#5b6775;font-style:italic}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt_time(epoch: float, span: float = 3600.0) -> str:
    return time.strftime("%H:%M:%S" if span < 600 else "%H:%M", time.gmtime(epoch))


def line_chart(chart_id: str, title: str, series: dict[str, list[list[float]]], *, y_max: float | None = None,
               y_label: str = "%") -> str:
    """An SVG line chart of ``{label: [[epoch seconds, value], ...]}``."""
    points = [p for s in series.values() for p in s]
    if not points:
        return f'<p class="empty">{_esc(title)}: no data.</p>'
    x0 = min(p[0] for p in points)
    x1 = max(p[0] for p in points)
    if x1 <= x0:
        x1 = x0 + 1
    top = y_max if y_max is not None else max(max(p[1] for p in points), 1e-9) * 1.1
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return PAD_T + ph - min(max(y, 0.0), top) / top * ph

    parts = [f'<svg class="chart" data-chart="{_esc(chart_id)}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_esc(title)}">']
    for i in range(5):
        y = top * i / 4
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>')
        parts.append(f'<text class="lbl" x="{PAD_L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        parts.append(f'<text class="lbl" x="{sx(x):.1f}" y="{H - 12}" text-anchor="middle">{_fmt_time(x, x1 - x0)}</text>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L}" y1="{PAD_T}" y2="{PAD_T + ph}"/>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{PAD_T + ph}" y2="{PAD_T + ph}"/>')
    parts.append(f'<text class="lbl" x="10" y="{PAD_T + 10}">{_esc(y_label)}</text>')
    for n, (label, pts) in enumerate(sorted(series.items())):
        color = PALETTE[n % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        if len(pts) == 1:
            x, y = pts[0]
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>')
        else:
            parts.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="1.6" points="{coords}"/>')
        ly = PAD_T + 12 + n * 15
        if ly < H - PAD_B:
            parts.append(f'<rect x="{W - PAD_R + 10}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
            parts.append(f'<text class="lbl" x="{W - PAD_R + 25}" y="{ly + 1}">{_esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(chart_id: str, title: str, counts: list[int], edges: list[float], *, highlight_from: float | None = None,
              x_label: str = "") -> str:
    if not counts or not any(counts):
        return f'<p class="empty">{_esc(title)}: no data.</p>'
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    top = max(counts)
    bw = pw / len(counts)
    parts = [f'<svg class="chart" data-chart="{_esc(chart_id)}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_esc(title)}">']
    for i, c in enumerate(counts):
        if not c:
            continue
        h = c / top * ph
        color = "#c0392b" if highlight_from is not None and edges[i] >= highlight_from else "#1f77b4"
        parts.append(f'<rect class="bar" x="{PAD_L + i * bw:.1f}" y="{PAD_T + ph - h:.1f}" width="{max(bw - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{color}"><title>{edges[i]:.4g}..{edges[i + 1]:.4g}: {c}</title></rect>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{PAD_T + ph}" y2="{PAD_T + ph}"/>')
    for i in range(5):
        x = edges[0] + (edges[-1] - edges[0]) * i / 4
        parts.append(f'<text class="lbl" x="{PAD_L + pw * i / 4:.1f}" y="{H - 12}" text-anchor="middle">{x:.3g}</text>')
    parts.append(f'<text class="lbl" x="{PAD_L}" y="{PAD_T + 10}">{top}</text>')
    parts.append(f'<text class="lbl" x="{PAD_L + pw}" y="{H - 1}" text-anchor="end">{_esc(x_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _histogram(values: list[float], bins: int = 40) -> tuple[list[int], list[float]]:
    lo, hi = min(values), max(values)
    if hi <= lo:
        hi = lo + 1e-9
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / (hi - lo) * bins), bins - 1)] += 1
    return counts, edges


def _summary_table(results: list[RuleResult]) -> str:
    rows = ['<table class="verdicts"><tr><th>Rule</th><th>Verdict</th><th>Triggered</th><th>Violations</th>'
            '<th>Datapoints</th><th>Why</th></tr>']
    order = {STATUS_ISSUES: 0, STATUS_NO_ISSUES: 1, VERDICT_NOT_APPLICABLE: 2}
    for result in results:
        for sub in sorted(result.rules, key=lambda s: order.get(s.verdict, 3)):
            r = sub.report
            rows.append(
                f'<tr data-rule="{_esc(sub.name)}"><td>{_esc(sub.name)}</td>'
                f'<td><span class="badge {_esc(sub.verdict)}">{_esc(sub.verdict)}</span></td>'
                f'<td class="num">{r["RuleTriggered"]}</td><td class="num">{r["Violations"]}</td>'
                f'<td class="num">{r["Datapoints"]}</td><td>{_esc(sub.reason)}</td></tr>'
            )
    rows.append("</table>")
    return "".join(rows)


def _usage_table(results: list[RuleResult]) -> str:
    for result in results:
        for sub in result.rules:
            if sub.name == "OverallSystemUsage":
                details = sub.report.get("Details", {})
                rows = ['<table class="usage"><tr><th>Metric</th><th>Node</th><th>max</th><th>p99</th><th>p95</th>'
                        '<th>p50</th><th>min</th></tr>']
                for metric, nodes in details.items():
                    for node, stats in nodes.items():
                        cells = "".join(f'<td class="num">{stats.get(k)}</td>' for k in ("max", "p99", "p95", "p50", "min"))
                        rows.append(f"<tr><td>{_esc(metric)}</td><td>{_esc(node)}</td>{cells}</tr>")
                rows.append("</table>")
                return "".join(rows)
    return '<p class="empty">System usage was not evaluated.</p>'


def _usage_chart(results: list[RuleResult]) -> str:
    for result in results:
        for sub in result.rules:
            if sub.name == "OverallSystemUsage":
                series: dict[str, list[list[float]]] = {}
                details = sub.report.get("Details", {})
                for metric in ("GPU", "CPU", "GPU memory", "CPU memory", "I/O"):
                    for node, stats in details.get(metric, {}).items():
                        series[f"{metric} {node}"] = [[i, float(stats.get(k) or 0)]
                                                      for i, k in enumerate(("min", "p50", "p95", "p99", "max"))]
                if not series:
                    return ""
                chart = line_chart("system-usage-percentiles", "System usage percentiles", series, y_max=100)
                # the x axis is min, p50, p95, p99, max rather than time
                for i, label in enumerate(("min", "p50", "p95", "p99", "max")):
                    chart = chart.replace(f">{_fmt_time(i, 4)}</text>", f">{label}</text>", 1)
                return chart
    return ""


def render(results: list[RuleResult], timeline: Timeline, diagnostics: dict[str, Any], *, title: str,
           source: str) -> str:
    """The whole report as one HTML string."""
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{_esc(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{_esc(title)}</h1>",
           f'<p class="meta">Source: {_esc(source)} &middot; {diagnostics.get("windows", 0)} analysis window(s) &middot; '
           f'generated {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}</p>']
    for result in results:
        details = f' &middot; {_esc(result.status_details.strip())}' if result.status_details else ""
        out.append(f'<p><b>{_esc(result.configuration_name)}</b>: '
                   f'<span class="badge {_esc(result.status)}">{_esc(result.status)}</span>{details}</p>')
    out.append("<h2>Rules</h2>")
    out.append(_summary_table(results))

    out.append("<h2>GPU utilisation</h2>")
    gpu = timeline.series.get("gpu", {})
    if not gpu:
        out.append('<p class="empty">No GPU metrics: CPU-only instance or the profiler recorded none.</p>')
    for node, devices in sorted(gpu.items()):
        out.append(f"<h3>{_esc(node)}</h3>" + line_chart(f"gpu-utilization-{node}", f"GPU utilisation {node}", devices,
                                                         y_max=100))
    out.append("<h2>GPU memory</h2>")
    mem = timeline.series.get("gpu_memory", {})
    if not mem:
        out.append('<p class="empty">No GPU memory metrics.</p>')
    for node, devices in sorted(mem.items()):
        out.append(f"<h3>{_esc(node)}</h3>" + line_chart(f"gpu-memory-{node}", f"GPU memory {node}", devices, y_max=100))
    out.append("<h2>CPU utilisation (mean over cores)</h2>")
    cpu = timeline.series.get("cpu", {})
    if cpu:
        merged = {node: devices.get("all cores", []) for node, devices in cpu.items()}
        out.append(line_chart("cpu-utilization", "CPU utilisation", merged, y_max=100))
    else:
        out.append('<p class="empty">No CPU metrics.</p>')

    out += _steps_section(timeline)

    out.append("<h2>System usage percentiles</h2>")
    out.append(_usage_chart(results))
    out.append(_usage_table(results))

    out += _data_read(diagnostics)
    out.append("</body></html>")
    return "\n".join(out)


def _steps_section(timeline: Timeline) -> list[str]:
    out: list[str] = []
    out.append("<h2>Step durations</h2>")
    steps = timeline.steps
    if steps:
        durations = [s[1] for s in steps]
        mean = sum(durations) / len(durations)
        std = (sum((d - mean) ** 2 for d in durations) / len(durations)) ** 0.5
        cutoff = mean + 3 * std
        counts, edges = _histogram(durations)
        out.append(f'<p class="meta">{timeline.step_count} step(s); mean {mean:.4g} s, std {std:.4g} s; '
                   f"red bars lie above mean + 3 std ({cutoff:.4g} s).</p>")
        out.append(bar_chart("step-duration-histogram", "Step duration histogram", counts, edges,
                             highlight_from=cutoff, x_label="seconds"))
        by_phase: dict[str, list[list[float]]] = {}
        for end, duration, node, phase, _step in steps:
            by_phase.setdefault(f"{node} {phase.replace('Step:ModeKeys.', '')}", []).append([end, duration])
        out.append(line_chart("step-duration-over-time", "Step duration over time", by_phase, y_label="s"))
        outliers = sorted((s for s in steps if s[1] > cutoff), key=lambda s: -s[1])[:20]
        if outliers:
            out.append('<table class="outliers"><tr><th>Step</th><th>Node</th><th>Phase</th><th>Duration (s)</th></tr>')
            for _end, duration, node, phase, step in outliers:
                out.append(f"<tr><td>{_esc(step)}</td><td>{_esc(node)}</td><td>{_esc(phase)}</td>"
                           f'<td class="num">{duration:.4g}</td></tr>')
            out.append("</table>")
    else:
        out.append('<p class="empty">No step events: framework profiling was off or unsupported.</p>')
    return out


def _data_read(diagnostics: dict[str, Any]) -> list[str]:
    out: list[str] = []
    out.append("<h2>Data read</h2>")
    out.append('<table class="diagnostics">')
    for key in ("files", "records", "bytes", "bad_lines", "bad_files", "late_records", "records_before_origin",
                "misplaced_records", "skipped_windows"):
        out.append(f'<tr><th>{_esc(key.replace("_", " "))}</th><td class="num">{_esc(diagnostics.get(key, 0))}</td></tr>')
    out.append("</table>")
    problems = diagnostics.get("problems") or []
    if problems:
        out.append("<ul>" + "".join(f"<li>{_esc(p)}</li>" for p in problems) + "</ul>")
    return out
