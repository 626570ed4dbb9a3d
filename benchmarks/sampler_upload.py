#!/usr/bin/env python3
"""What the sampler's upload format costs per minute of one node: bytes sent and the uploader's CPU, plain against gzip.

    python benchmarks/sampler_upload.py [--cores 192] [--gpus 8] [--interval-ms 100] [--repeat 3]

One minute of system metrics of the node (the synthetic writer of the evaluator tests, the records Debugger and the
sampler write) is uploaded by the sampler's real Uploader and standard-library S3 client (SigV4 over urllib) to a
local HTTP sink in a child process, so this process's CPU (time.process_time: sha256, gzip, the socket writes) is
the uploader's alone. TLS, which a real upload adds in proportion to the bytes, is not counted. The plain upload is
the baseline of the ratios.
"""

from __future__ import annotations

import argparse
import http.server
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, write_job  # noqa: E402
from cdk_sagemaker_debugger.runtime.sampler import upload  # noqa: E402
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings  # noqa: E402
from cdk_sagemaker_debugger.runtime.sampler.status import Status  # noqa: E402


class _Sink(http.server.BaseHTTPRequestHandler):
    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        remaining = int(self.headers.get("Content-Length", 0))
        while remaining:
            remaining -= len(self.rfile.read(min(remaining, 1 << 20)))
        self.send_response(200)
        self.send_header("ETag", '"x"')
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _serve(port: multiprocessing.Value) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Sink)
    port.value = server.server_port
    server.serve_forever()


def one_minute(root: Path, cores: int, gpus: int, interval_ms: int) -> Path:
    spec = JobSpec(minutes=1, cores=cores, gpus=gpus, interval_ms=interval_ms, partial_last_minute_s=0,
                   end_marker=False)
    return write_job(root, spec)


def measure(root: Path, endpoint: str, upload_format: str, level: int, repeat: int) -> tuple[int, float]:
    """(bytes sent for the minute, best CPU seconds of ``repeat`` uploads of it)."""
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1")
    upload.GZIP_LEVEL = level
    best, sent = float("inf"), 0
    for _ in range(repeat):
        settings = Settings(local_dir=str(root), s3_uri="s3://bench-bucket/p", job_name="bench-job",
                            endpoint_url=endpoint, upload_format=upload_format).validated()
        status = Status("algo-1", lambda message: None)
        uploader = upload.Uploader(str(root), settings, status)
        start = time.process_time()
        count = uploader.cycle(force=True)
        best = min(best, time.process_time() - start)
        if not count or status.failures:
            raise SystemExit(f"the upload failed: {status.messages}")
        sent = status.counts["upload_bytes"]
    return sent, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=192)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    port = multiprocessing.Value("i", 0)
    sink = multiprocessing.Process(target=_serve, args=(port,), daemon=True)
    sink.start()
    try:
        while not port.value:
            time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{port.value}"
        with tempfile.TemporaryDirectory() as tmp:
            root = one_minute(Path(tmp) / "profiler-output", args.cores, args.gpus, args.interval_ms)
            plain_bytes = sum(p.stat().st_size for p in root.rglob("*.json"))
            print(f"one minute of one node: {args.cores} cores, {args.gpus} GPUs, {args.interval_ms} ms: "
                  f"{plain_bytes / 1e6:.1f} MB of JSON")
            print(f"{'upload format':<16}{'bytes sent':>14}{'vs plain':>10}{'CPU s/minute':>14}{'vs plain':>10}"
                  f"{'% of 1 core':>13}")
            base = None
            for name, fmt, level in (("plain", "plain", 6), ("gzip level 1", "gzip", 1), ("gzip level 6", "gzip", 6)):
                sent, cpu = measure(root, endpoint, fmt, level, args.repeat)
                base = base or (sent, cpu)
                print(f"{name:<16}{sent / 1e6:>11.2f} MB{sent / base[0]:>9.3f}x{cpu:>14.3f}{cpu / base[1]:>9.2f}x"
                      f"{cpu / 60 * 100:>12.2f}%")
    finally:
        sink.terminate()
        sink.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
