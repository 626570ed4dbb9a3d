"""The HTML report renders in a real browser: not blank, and the charts a person looks for are there."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from evaluator_jobs import evaluate, report, small_spec

from cdk_sagemaker_debugger.runtime.evaluator.html_report import render
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import DataloaderSpec, StepSpec

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.fixture(scope="module")
def page() -> str:
    spec = small_spec(nodes=2, gpu_util=lambda n, d, s, t: 30.0 + 20 * d + (s % 10),
                      steps=StepSpec(count=300, slow_steps={150 + i: 2.0 for i in range(12)}),
                      dataloader=DataloaderSpec(workers=3))
    ev = evaluate(spec, report())
    return render(ev.results(final=True), ev.timeline, ev.diagnostics(), title="Profiler report: test", source="test")


def test_report_is_self_contained(page: str):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page and "@import" not in page and "url(" not in page


def test_report_has_the_verdict_table_and_every_chart(page: str):
    for rule in ("LowGPUUtilization", "StepOutlier", "CPUBottleneck", "Dataloader"):
        assert f'data-rule="{rule}"' in page
    for chart in ("gpu-utilization-algo-1", "gpu-utilization-algo-2", "gpu-memory-algo-1", "cpu-utilization",
                  "step-duration-histogram", "step-duration-over-time", "system-usage-percentiles"):
        assert f'data-chart="{chart}"' in page, chart
    assert page.count("<polyline") >= 8  # 2 nodes x 2 GPUs utilisation + memory, CPU, steps


def test_a_rule_with_issues_says_what_to_try(page: str):
    section = page[page.index("<h2>What to try</h2>"):page.index("<h2>Rules</h2>")]
    for rule in ("LowGPUUtilization", "StepOutlier"):
        assert f'data-todo="{rule}"' in section
    assert "num_workers" in section and "pin_memory" in section  # LowGPUUtilization's first two things to try
    assert "slow steps" in section  # StepOutlier's


def test_the_report_explains_its_words(page: str):
    assert "analysis window" in page and "iteration of the training loop" in page
    for column in ("Windows met", "Violations", "Datapoints"):
        assert f"<dt>{column}</dt>" in page
    assert "RuleEvaluationConditionMet" not in page.split("<h2>")[0].split('class="outcome"')[1].split("</p>")[0]
    assert "time (UTC)" in page
    assert 'data-threshold="LowGPUUtilization threshold_p95 (p95 must reach it)"' in page
    assert 'data-threshold="CPUBottleneck cpu_threshold (busy above it)"' in page


def test_informational_rules_say_so(page: str):
    row = page[page.index('data-rule="OverallFrameworkMetrics"'):].split("</tr>")[0]
    assert "informational, never triggers" in row and "no issue over 0 datapoints" not in row


def test_a_job_without_framework_data_says_so(page: str):
    ev = evaluate(small_spec(minutes=1), report())
    html = render(ev.results(final=True), ev.timeline, ev.diagnostics(), title="t", source="s")
    assert "No step events" in html and 'data-chart="gpu-utilization-algo-1"' in html


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install -y "
                                                          "chromium)")
#: Set to a folder to keep the screenshots for a person to look at (they are written to tmp_path otherwise).
SHOTS = os.environ.get("REPORT_SCREENSHOTS")


@pytest.fixture(scope="module")
def cpu_only_page() -> str:
    """A CPU-only host sampled without framework profiling (``cdk-sagemaker-debugger sample``): no rule can judge."""
    ev = evaluate(small_spec(gpus=0), report())
    return render(ev.results(final=True), ev.timeline, ev.diagnostics(), title="Profiler report: cpu-job",
                  source="test")


def chromium(page: str, tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    html = tmp_path / f"{name}.html"
    html.write_text(page)
    profile = tmp_path / f"profile-{name}"  # a fresh profile each run: nothing cached from another test or user
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, html.as_uri()],
                          check=True, capture_output=True, timeout=120, text=True)


def screenshot(page: str, tmp_path: Path, name: str, width: int, height: int | None = None) -> list[tuple[int, int, int]]:
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / f"{name}-{width}.png"
    height = height or (5600 if width > 800 else 11000)  # the whole page: the charts come after the rules
    chromium(page, tmp_path, f"{name}-{width}", f"--window-size={width},{height}", f"--screenshot={shot}")
    return _png_pixels(shot.read_bytes())


def layout_width(page: str, tmp_path: Path, name: str, width: int) -> dict[str, Any]:
    """The laid-out page's width and its widest element, measured by Chromium in a frame ``width`` pixels wide (headless
    windows are at least 500 px wide, so the page is framed; the report itself has no script)."""
    probe = (f'<iframe id="f" style="width:{width}px;height:3000px;border:0" srcdoc="{html_lib.escape(page)}"></iframe>'
             "<script>f.onload=()=>{const d=f.contentDocument;let widest=0,who='';"
             "for(const e of d.querySelectorAll('body *')){if(e.closest('.scroll'))continue;"
             "const r=e.getBoundingClientRect();if(r.right>widest){widest=Math.ceil(r.right);"
             "who=e.tagName+' '+(e.getAttribute('class')||'')+' '+(e.textContent||'').slice(0,40)}}"
             "document.title=JSON.stringify({inner:f.contentWindow.innerWidth,scroll:d.documentElement.scrollWidth,"
             "widest,who})}</script>")
    done = chromium(probe, tmp_path, f"{name}-probe-{width}", "--window-size=1000,1000", "--virtual-time-budget=5000",
                    "--dump-dom")
    measured = json.loads(html_lib.unescape(re.search(r"<title>(.*?)</title>", done.stdout).group(1)))
    assert measured["inner"] == width, measured
    return measured


def _near(colours: set[tuple[int, int, int]], expected: tuple[int, int, int], within: int = 24) -> bool:
    return any(sum(abs(a - b) for a, b in zip(c, expected, strict=True)) < within for c in colours)


@needs_chromium
@pytest.mark.parametrize("width", [1400, 400])
def test_report_renders_in_headless_chromium(page: str, tmp_path: Path, width: int):
    pixels = screenshot(page, tmp_path, "gpu-job", width)
    colours = set(pixels)
    assert len(colours) > 20  # text, badges and coloured series: far from a blank page
    non_white = sum(1 for p in pixels if p != (255, 255, 255))
    assert non_white / len(pixels) > 0.05
    # the series palette's first two colours (GPU 0 and GPU 1 lines), the IssuesFound badge and the threshold lines
    for expected in ((31, 119, 180), (255, 127, 14), (192, 57, 43), (176, 58, 46)):
        assert _near(colours, expected), expected


@needs_chromium
@pytest.mark.parametrize("name", ["gpu-job", "cpu-job"])
def test_nothing_overflows_a_400_px_phone(page: str, cpu_only_page: str, tmp_path: Path, name: str):
    measured = layout_width(page if name == "gpu-job" else cpu_only_page, tmp_path, name, 400)
    assert measured["scroll"] <= 400, measured
    assert measured["widest"] <= 400, measured


@needs_chromium
def test_cpu_only_report_shows_not_applicable(cpu_only_page: str, tmp_path: Path):
    assert 'data-outcome="NotApplicable"' in cpu_only_page and "not a clean bill of health" in cpu_only_page
    for width in (1400, 400):
        colours = set(screenshot(cpu_only_page, tmp_path, "cpu-job", width))
        assert _near(colours, (107, 119, 133), 12)  # the grey NotApplicable badge
        assert not _near(colours, (46, 139, 87), 12)  # and no green NoIssuesFound badge anywhere


def _png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """Decode an 8-bit RGB/RGBA PNG with the standard library (no imaging package needed)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour = header[0], header[1], header[2], header[3]
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    previous = bytearray(stride)
    pixels = []
    for row in range(height):
        filt = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1:(row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + left) & 255
            elif filt == 2:
                line[i] = (line[i] + up) & 255
            elif filt == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif filt == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        previous = line
        if row % 4 == 0:  # every 4th row is plenty for colour statistics
            pixels += [tuple(line[i:i + 3]) for i in range(0, stride, channels * 2)]
    return pixels
