"""Host metrics from /proc: per-core CPU and I/O wait (/proc/stat), memory, disk I/O and network, as deltas per sample.

The first sample only primes the counters. The /proc root is configurable so tests and the benchmark can feed a fake
96-core host.
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable

from .records import Formatter
from .status import Guard, Status

SECTOR_BYTES = 512
_VIRTUAL_DISK = re.compile(r"(loop|ram|zram|dm-|md|sr|fd|nbd)\d")


def read_text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as handle:
        return handle.read()


def parse_stat(text: str) -> dict:
    """``cpuN`` -> (busy, iowait, total) jiffies; the aggregate ``cpu`` line is skipped (Debugger writes per core)."""
    cores = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        fields = line.split()
        values = [int(v) for v in fields[1:9]]
        values += [0] * (8 - len(values))
        user, nice, system, idle, iowait, irq, softirq, steal = values
        total = user + nice + system + idle + iowait + irq + softirq + steal
        cores[fields[0]] = (total - idle - iowait, iowait, total)
    if not cores:
        raise ValueError("no per-core cpuN lines")
    return cores


def cpu_rows(previous: dict, current: dict) -> list:
    """CPUUtilization and I/OWaitPercentage rows per core, in core order (cpu0, cpu1, ...)."""
    utilisation, iowait = [], []
    for name in sorted(current, key=lambda n: int(n[3:])):
        before = previous.get(name)
        if before is None:
            continue
        busy, wait, total = (max(a - b, 0) for a, b in zip(current[name], before))
        busy_pct = 100.0 * busy / total if total else 0.0
        wait_pct = 100.0 * wait / total if total else 0.0
        utilisation.append(("cpu", name, "CPUUtilization", min(busy_pct, 100.0)))
        iowait.append(("cpu", name, "I/OWaitPercentage", min(wait_pct, 100.0)))
    return utilisation + iowait


def memory_used_percent(text: str) -> float:
    info = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            info[key] = int(parts[0])
    total = info["MemTotal"]
    available = info.get("MemAvailable")
    if available is None:
        available = info.get("MemFree", 0) + info.get("Buffers", 0) + info.get("Cached", 0)
    if total <= 0:
        return 0.0
    return min(max(100.0 * (total - available) / total, 0.0), 100.0)  # an inconsistent meminfo stays a percent


def network_bytes(text: str) -> tuple:
    """Received and transmitted bytes summed over every interface but loopback."""
    received = transmitted = 0
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name.strip() == "lo" or len(fields) < 9:
            continue
        received += int(fields[0])
        transmitted += int(fields[8])
    return received, transmitted


def disk_counters(text: str) -> tuple:
    """(operations, bytes read, bytes written) over whole physical disks (no partitions, loops or device mappers)."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 10 and not _VIRTUAL_DISK.match(fields[2]):
            rows[fields[2]] = fields
    ops = read = written = 0
    for name, fields in rows.items():
        if _is_partition(name, rows):
            continue
        ops += int(fields[3]) + int(fields[7])
        read += int(fields[5]) * SECTOR_BYTES
        written += int(fields[9]) * SECTOR_BYTES
    return ops, read, written


def _is_partition(name: str, names: dict) -> bool:
    stripped = name.rstrip("0123456789")
    if stripped == name:
        return False
    return stripped in names or (stripped.endswith("p") and stripped[:-1] in names)


class HostSource:
    """Samples the host; each group (i/o, cpu, memory, network) is read and stamped on its own, as Debugger does."""

    def __init__(self, proc_root: str, formatter: Formatter, status: Status, clock: Callable[[], float]):
        self.proc_root = proc_root
        self.formatter = formatter
        self.clock = clock
        self.previous: dict = {}
        self.guards = {kind: Guard(kind, status) for kind in ("proc_stat", "proc_meminfo", "proc_net", "proc_disk")}

    def path(self, name: str) -> str:
        return os.path.join(self.proc_root, name)

    def _rates(self, key: str, counters: tuple) -> tuple | None:
        """Per-second deltas of ``counters`` since the last call (None the first time)."""
        now = time.monotonic()
        before = self.previous.get(key)
        self.previous[key] = (now, counters)
        if before is None or now <= before[0]:
            return None
        elapsed = now - before[0]
        return tuple(max(c - p, 0) / elapsed for c, p in zip(counters, before[1]))

    def io(self) -> str:
        rates = self._rates("disk", disk_counters(read_text(self.path("diskstats"))))
        if rates is None:
            return ""
        rows = [("i/o", "IOPS", "", rates[0]), ("i/o", "ReadThroughputInBytesPerSecond", "", rates[1]),
                ("i/o", "WriteThroughputInBytesPerSecond", "", rates[2])]
        return self.formatter.group(self.clock(), rows)

    def cpu(self) -> str:
        current = parse_stat(read_text(self.path("stat")))
        previous = self.previous.get("cpu")
        self.previous["cpu"] = current
        if previous is None:
            return ""
        return self.formatter.group(self.clock(), cpu_rows(previous, current))

    def memory(self) -> str:
        used = memory_used_percent(read_text(self.path("meminfo")))
        return self.formatter.group(self.clock(), [("memory", "MemoryUsedPercent", "", used)])

    def network(self) -> str:
        rates = self._rates("net", network_bytes(read_text(self.path("net/dev"))))
        if rates is None:
            return ""
        rows = [("network", "ReceiveBytesPerSecond", "Algorithm", rates[0]),
                ("network", "TransmitBytesPerSecond", "Algorithm", rates[1])]
        return self.formatter.group(self.clock(), rows)

    def before_gpu(self) -> str:
        guards = self.guards
        return guards["proc_disk"].run(self.io) + guards["proc_stat"].run(self.cpu) + guards["proc_meminfo"].run(
            self.memory)

    def after_gpu(self) -> str:
        return self.guards["proc_net"].run(self.network)
