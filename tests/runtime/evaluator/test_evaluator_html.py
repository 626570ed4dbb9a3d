"""The HTML report renders in a real browser: not blank, and the charts a person looks for are there."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

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


def test_a_job_without_framework_data_says_so(page: str):
    ev = evaluate(small_spec(minutes=1), report())
    html = render(ev.results(final=True), ev.timeline, ev.diagnostics(), title="t", source="s")
    assert "No step events" in html and 'data-chart="gpu-utilization-algo-1"' in html


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(page: str, tmp_path: Path):
    html = tmp_path / "profiler-report.html"
    html.write_text(page)
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1000,1800", f"--screenshot={shot}", html.as_uri()],
                   check=True, capture_output=True, timeout=120)
    pixels = _png_pixels(shot.read_bytes())
    colours = set(pixels)
    assert len(colours) > 20  # text, badges and coloured series: far from a blank page
    non_white = sum(1 for p in pixels if p != (255, 255, 255))
    assert non_white / len(pixels) > 0.05
    # the series palette's first two colours (GPU 0 and GPU 1 lines) are drawn
    for expected in ((31, 119, 180), (255, 127, 14)):
        assert any(sum(abs(a - b) for a, b in zip(c, expected, strict=True)) < 24 for c in colours), expected


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
