"""The progress line of ``cdk-sagemaker-debugger evaluate``: a tqdm bar on standard error, only where someone watches.

tqdm is imported on the first update, inside the command line only: the Lambda asset (``runtime/``) and the sampler
never import it, and a run in a pipe or a CI log never loads it.
"""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

from .runtime.evaluator.readers import ParseStats

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} files{postfix} [{elapsed}<{remaining} left]"


def on_a_terminal(stream: TextIO, *, quiet: bool, environ: dict[str, str] | None = None) -> bool:
    """True for an interactive terminal; never with --quiet, in a pipe or file, or in CI (some CI runners fake a tty)."""
    env = os.environ if environ is None else environ
    if quiet or env.get("CI", "").strip().lower() not in ("", "0", "false"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def terminal_columns(stream: TextIO) -> int:
    """The terminal's width; 0 when it reports none (a fresh pseudo-terminal), where tqdm would draw nothing."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


class Progress:
    """Files and bytes read, records per second and the time left, redrawn in place; does nothing when disabled."""

    def __init__(self, stream: TextIO, *, enabled: bool, label: str = "reading"):
        self.stream = stream
        self.enabled = enabled
        self.label = label
        self.started = time.monotonic()
        self.bar: Any = None

    def __call__(self, done: int, total: int, stats: ParseStats) -> None:
        if not self.enabled or total <= 0:
            return
        if self.bar is None:
            from tqdm import tqdm

            width = terminal_columns(self.stream)
            self.bar = tqdm(total=total, file=self.stream, desc=self.label, unit="file", bar_format=BAR_FORMAT,
                            dynamic_ncols=width > 0, ncols=width or 80, mininterval=0.2, postfix="")
        elapsed = max(time.monotonic() - self.started, 1e-6)
        size = self.bar.format_sizeof(stats.bytes, "B", 1024)
        rate = self.bar.format_sizeof(stats.records / elapsed)
        self.bar.set_postfix_str(f"{size} read, {rate} records/s", refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
