"""One system file per node per minute, written whole or not at all.

The current minute is appended to ``.partial/<minute>.<node>.json`` and renamed into
``system/incremental/<hour>/<minute>.<node>.json`` when the minute ends, so a crash loses at most that minute and a
reader never sees half a file. A sampler restarted within a minute continues the minute its predecessor left.

A clock that steps back into a minute already completed never replaces that minute's file (it may be uploaded and
pruned already): the new samples go to a second file of that minute (its name's second moves by one, see
layout.system_file), counted as ``clock_steps_back``.
"""

from __future__ import annotations

import os

from . import layout
from .status import Status, write_atomic


def _complete_lines(data: bytes) -> bytes:
    """Drop a torn last line (a crash mid-write), so every line parses."""
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


class MinuteFiles:
    def __init__(self, root: str, node: str, status: Status):
        self.root = root
        self.node = node
        self.status = status
        self.minute: int | None = None
        self.generation = 0
        self.handle = None
        self.failed_minute: int | None = None
        self.first_minute: int | None = None
        #: minute -> the last generation completed in this run
        self.completed: dict = {}

    def partial_path(self, minute: int, generation: int | None = None) -> str:
        generation = self.generation if generation is None else generation
        return os.path.join(self.root, layout.partial_file(f"{minute + generation}.{self.node}.json"))

    def final_path(self, minute: int, generation: int | None = None) -> str:
        generation = self.generation if generation is None else generation
        return os.path.join(self.root, layout.system_file(minute, self.node, generation))

    def _generation_for(self, minute: int) -> int:
        """0, unless this minute was completed before in this run, or lies before this run's first minute (a
        predecessor may have uploaded it): then the first free generation after it."""
        if self.first_minute is None:
            self.first_minute = minute
        if minute in self.completed:
            start = self.completed[minute] + 1
        elif minute < self.first_minute:
            start = 1
        else:
            return 0
        self.status.count("clock_steps_back")
        generation = start
        while generation < 59 and (os.path.exists(self.final_path(minute, generation)) or
                                   os.path.exists(self.partial_path(minute, generation))):
            generation += 1
        return generation

    def append(self, epoch_s: float, text: str) -> int | None:
        """Add a sample's lines; returns the minute that was just completed, if this sample started a new one."""
        minute = int(epoch_s // 60) * 60
        finished = None
        if minute != self.minute:
            finished = self.minute if self.finish() else None
            self.minute = minute
            self.generation = self._generation_for(minute)
        if not text or minute == self.failed_minute:
            return finished
        try:
            if self.handle is None:
                self.handle = self._open(minute)
            self.handle.write(text)
        except OSError as exc:
            self.status.fail("write", f"cannot write the system file of minute {minute}: {exc}; this minute is lost")
            self._discard()
            self.failed_minute = minute
        return finished

    def _open(self, minute: int):
        partial = self.partial_path(minute)
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        final = self.final_path(minute)
        if not os.path.exists(partial) and os.path.exists(final):
            with open(final, "rb") as source:  # a previous sampler already closed part of this minute
                write_atomic(partial, _complete_lines(source.read()))
        return open(partial, "a", encoding="utf-8")

    def _discard(self) -> None:
        if self.handle is not None:
            try:
                self.handle.close()
            except OSError:
                pass
        self.handle = None

    def finish(self) -> bool:
        """Close the current minute and move it into place; True when a file was completed."""
        if self.handle is None or self.minute is None:
            return False
        try:
            self.handle.close()
            self.handle = None
            final = self.final_path(self.minute)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(self.partial_path(self.minute), final)
            self.completed[self.minute] = self.generation
        except OSError as exc:
            self.status.fail("write", f"cannot complete the system file of minute {self.minute}: {exc}")
            self._discard()
            return False
        self.status.count("system_files")
        return True

    def checkpoint(self) -> None:
        """Publish what the current minute holds so far (on a flush request); sampling continues in the same minute."""
        if self.handle is None or self.minute is None:
            return
        try:
            self.handle.flush()
            with open(self.partial_path(self.minute), "rb") as source:
                write_atomic(self.final_path(self.minute), _complete_lines(source.read()))
        except OSError as exc:
            self.status.fail("write", f"cannot publish the current minute {self.minute}: {exc}")

    def recover(self, before_minute: int) -> None:
        """Move minutes a crashed sampler left in .partial/ into place (their complete lines)."""
        folder = os.path.join(self.root, layout.PARTIAL_DIR)
        suffix = f".{self.node}.json"
        try:
            names = [n for n in os.listdir(folder) if n.endswith(suffix) and n[: -len(suffix)].isdigit()]
        except OSError:
            return
        for name in names:
            second = int(name[: -len(suffix)])
            minute, generation = second - second % 60, second % 60
            final = self.final_path(minute, generation)
            if minute >= before_minute or os.path.exists(final):
                continue
            try:
                with open(os.path.join(folder, name), "rb") as source:
                    write_atomic(final, _complete_lines(source.read()))
                os.unlink(os.path.join(folder, name))
                self.status.count("recovered_files")
            except OSError as exc:
                self.status.fail("write", f"cannot recover {name}: {exc}")
