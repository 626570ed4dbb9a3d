"""Inline SVG charts for the HTML report: a line chart over time, a histogram and a percentile range chart.

Each chart scales to its container (``viewBox`` with ``width: 100%``), so it fits a phone as well as a desktop, and its
legend is HTML below the chart, where long labels wrap instead of being cut off. Times are UTC and the axis says so.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
THRESHOLD_COLOUR = "#b03a2e"
W, H = 720, 270
PAD_L, PAD_R, PAD_T, PAD_B = 60, 16, 30, 56
PERCENTILES = ("min", "p50", "p95", "p99", "max")

#: A horizontal line across a chart: (value, label), e.g. (70, "LowGPUUtilization threshold_p95").
Threshold = tuple[float, str]


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt_time(epoch: float, span: float = 3600.0) -> str:
    return time.strftime("%H:%M:%S" if span < 600 else "%H:%M", time.gmtime(epoch))


def _open_svg(chart_id: str, title: str, height: int = H) -> str:
    return (f'<svg class="chart" data-chart="{esc(chart_id)}" viewBox="0 0 {W} {height}" preserveAspectRatio="xMinYMin '
            f'meet" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(title)}">')


def legend(entries: Sequence[tuple[str, str]], *, dashed: Sequence[tuple[str, str]] = ()) -> str:
    """The chart's legend as wrapping HTML: ``[(label, colour)]``, then threshold lines drawn dashed."""
    items = [f'<li><span class="swatch" style="background:{c}"></span>{esc(label)}</li>' for label, c in entries]
    items += [f'<li><span class="swatch dashed" style="border-color:{c}"></span>{esc(label)}</li>' for label, c in dashed]
    return f'<ul class="legend">{"".join(items)}</ul>' if items else ""


def _y_grid(parts: list[str], top: float, sy: Any, pw: float) -> None:
    for i in range(5):
        y = top * i / 4
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>')
        parts.append(f'<text class="lbl" x="{PAD_L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')


def line_chart(chart_id: str, title: str, series: dict[str, list[list[float]]], *, y_max: float | None = None,
               y_label: str = "%", thresholds: Sequence[Threshold] = ()) -> str:
    """An SVG line chart of ``{label: [[epoch seconds, value], ...]}`` with dashed threshold lines and a legend."""
    points = [p for s in series.values() for p in s]
    if not points:
        return f'<p class="empty">{esc(title)}: no data.</p>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    x1 = x1 if x1 > x0 else x0 + 1
    highest = max([p[1] for p in points] + [t[0] for t in thresholds])
    top = y_max if y_max is not None else max(highest, 1e-9) * 1.1
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return PAD_T + ph - min(max(y, 0.0), top) / top * ph

    parts = [_open_svg(chart_id, title)]
    _y_grid(parts, top, sy, pw)
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text class="lbl" x="{sx(x):.1f}" y="{H - 30}" text-anchor="{anchor}">{fmt_time(x, x1 - x0)}'
                     "</text>")
    parts.append(f'<text class="lbl" x="{PAD_L + pw / 2:.1f}" y="{H - 6}" text-anchor="middle">time (UTC)</text>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L}" y1="{PAD_T}" y2="{PAD_T + ph}"/>')
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{PAD_T + ph}" y2="{PAD_T + ph}"/>')
    parts.append(f'<text class="lbl unit" x="4" y="{PAD_T - 12}">{esc(y_label)}</text>')
    entries = []
    for n, (label, pts) in enumerate(sorted(series.items())):
        color = PALETTE[n % len(PALETTE)]
        entries.append((label, color))
        if len(pts) == 1:
            parts.append(f'<circle cx="{sx(pts[0][0]):.1f}" cy="{sy(pts[0][1]):.1f}" r="3" fill="{color}"/>')
        else:
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            parts.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="1.6" points="{coords}"/>')
    for value, label in thresholds:
        parts.append(f'<line class="threshold" data-threshold="{esc(label)}" x1="{PAD_L}" x2="{PAD_L + pw}" '
                     f'y1="{sy(value):.1f}" y2="{sy(value):.1f}" stroke="{THRESHOLD_COLOUR}" stroke-width="1.4" '
                     'stroke-dasharray="6 4"/>')
    parts.append("</svg>")
    dashed = [(f"{label}: {value:g}{y_label if y_label == '%' else ''}", THRESHOLD_COLOUR) for value, label in thresholds]
    return '<figure class="chart">' + "".join(parts) + legend(entries, dashed=dashed) + "</figure>"


def bar_chart(chart_id: str, title: str, counts: list[int], edges: list[float], *, highlight_from: float | None = None,
              x_label: str = "", y_label: str = "count") -> str:
    """A histogram: ``counts[i]`` values lie in ``edges[i]..edges[i + 1]``; bars from ``highlight_from`` up are red."""
    if not counts or not any(counts):
        return f'<p class="empty">{esc(title)}: no data.</p>'
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    top = max(counts) * 1.1
    bw = pw / len(counts)

    def sy(y: float) -> float:
        return PAD_T + ph - y / top * ph

    parts = [_open_svg(chart_id, title)]
    _y_grid(parts, top, sy, pw)
    for i, c in enumerate(counts):
        if not c:
            continue
        color = "#c0392b" if highlight_from is not None and edges[i] >= highlight_from else "#1f77b4"
        parts.append(f'<rect class="bar" x="{PAD_L + i * bw:.1f}" y="{sy(c):.1f}" width="{max(bw - 1, 1):.1f}" '
                     f'height="{PAD_T + ph - sy(c):.1f}" fill="{color}"><title>{edges[i]:.4g}..{edges[i + 1]:.4g}: '
                     f"{c}</title></rect>")
    parts.append(f'<line class="axis" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{PAD_T + ph}" y2="{PAD_T + ph}"/>')
    for i in range(5):
        x = edges[0] + (edges[-1] - edges[0]) * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text class="lbl" x="{PAD_L + pw * i / 4:.1f}" y="{H - 30}" text-anchor="{anchor}">{x:.3g}</text>')
    parts.append(f'<text class="lbl" x="{PAD_L + pw / 2:.1f}" y="{H - 6}" text-anchor="middle">{esc(x_label)}</text>')
    parts.append(f'<text class="lbl unit" x="4" y="{PAD_T - 12}">{esc(y_label)}</text>')
    parts.append("</svg>")
    return '<figure class="chart">' + "".join(parts) + "</figure>"


def range_chart(chart_id: str, title: str, rows: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per (label, percentiles): a grey bar from min to max, a thick bar from p50 to p95, ticks at p99,
    on a 0-100 % axis. Reads left to right like the table beside it (min, p50, p95, p99, max)."""
    rows = [(label, stats) for label, stats in rows if stats.get("max") is not None]
    if not rows:
        return f'<p class="empty">{esc(title)}: no data.</p>'
    row_h, left = 30, 40
    height = PAD_T + row_h * len(rows) + 56
    pw = W - left - PAD_R - 10

    def sx(v: Any) -> float:
        return left + min(max(float(v or 0), 0.0), 100.0) / 100 * pw

    parts = [_open_svg(chart_id, title, height)]
    for i in range(5):
        x = left + pw * i / 4
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T - 10}" y2="{height - 56}"/>')
        parts.append(f'<text class="lbl" x="{x:.1f}" y="{height - 30}" text-anchor="middle">{25 * i}</text>')
    parts.append(f'<text class="lbl" x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                 "percent of capacity</text>")
    for n, (_label, stats) in enumerate(rows):
        y = PAD_T - 10 + n * row_h + row_h / 2
        color = PALETTE[n % len(PALETTE)]
        parts.append(f'<text class="lbl" x="{left - 8}" y="{y + 5:.1f}" text-anchor="end">{n + 1}</text>')
        parts.append(f'<line x1="{sx(stats.get("min")):.1f}" x2="{sx(stats.get("max")):.1f}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" stroke="#9aa5b1" stroke-width="2"/>')
        p50, p95 = sx(stats.get("p50")), sx(stats.get("p95"))
        parts.append(f'<line x1="{p50 - 2:.1f}" x2="{p95 + 2:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" '
                     'stroke-width="11"/>')
        p99 = sx(stats.get("p99"))
        parts.append(f'<line x1="{p99:.1f}" x2="{p99:.1f}" y1="{y - 9:.1f}" y2="{y + 9:.1f}" stroke="{color}" '
                     'stroke-width="2"/>')
    parts.append("</svg>")
    entries = [(f"{n + 1}: {label}", PALETTE[n % len(PALETTE)]) for n, (label, _) in enumerate(rows)]
    key = ('<p class="meta">Grey line: min to max; thick bar: median (p50) to p95; tick: p99.</p>')
    return '<figure class="chart">' + "".join(parts) + key + legend(entries) + "</figure>"


def histogram(values: list[float], bins: int = 40) -> tuple[list[int], list[float]]:
    lo, hi = min(values), max(values)
    if hi <= lo:
        hi = lo + 1e-9
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / (hi - lo) * bins), bins - 1)] += 1
    return counts, edges
