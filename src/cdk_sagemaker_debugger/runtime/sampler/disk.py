"""Never fill the training's volume: the local buffer is capped and a free-space reserve is kept for the training.

While uploads fail the finished files wait on disk. In a training container (files pruned once uploaded) the buffer
is capped at ``max_buffer_mb``; on any folder, when the volume's free space falls under ``min_free_mb`` the oldest
data files are dropped, and if that is not enough the sampler stops writing until space comes back. Every dropped
file and skipped sample is counted in the status file.
"""

from __future__ import annotations

import os

from . import layout
from .settings import Settings
from .status import Status

MIB = 1024 * 1024
DATA_DIRS = (layout.SYSTEM_DIR, layout.PEVENTS_DIR)


def free_bytes(path: str) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def data_files(root: str) -> list:
    """(mtime, size, path) of every finished data file, oldest first."""
    found = []
    for top in DATA_DIRS:
        for folder, _dirs, names in os.walk(os.path.join(root, top)):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                found.append((stat.st_mtime_ns, stat.st_size, path))
    return sorted(found)


class DiskGuard:
    def __init__(self, root: str, settings: Settings, status: Status):
        self.root = root
        self.status = status
        self.reserve = int(settings.min_free_mb * MIB)
        self.cap = int(settings.max_buffer_mb * MIB) if settings.prune_uploaded else None

    def room(self) -> bool:
        """Before a write: True when the volume keeps its reserve (after dropping old files if needed)."""
        try:
            if free_bytes(self.root) >= self.reserve:
                return True
            self.trim()
            if free_bytes(self.root) >= self.reserve:
                return True
        except OSError:
            return True  # no statvfs here: the write itself reports its failure
        self.status.count("samples_skipped_low_disk")
        self.status.warn_once("low_disk", f"less than {self.reserve // MIB} MB free under {self.root}: sampling "
                              "paused until space comes back (the training keeps that space)")
        return False

    def trim(self) -> int:
        """Drop the oldest data files while over the cap or under the reserve; returns how many were dropped."""
        files = data_files(self.root)
        total = sum(size for _mtime, size, _path in files)
        dropped = 0
        for _mtime, size, path in files:
            over_cap = self.cap is not None and total > self.cap
            if not over_cap and free_bytes(self.root) >= self.reserve:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            dropped += 1
            self.status.count("dropped_files")
            self.status.count("dropped_bytes", size)
        if dropped:
            self.status.fail("buffer_dropped", f"dropped the {dropped} oldest local file(s) (not all uploaded) to "
                             f"keep the buffer under {self.cap // MIB if self.cap else '-'} MB and {self.reserve // MIB}"
                             " MB free for the training")
        return dropped
