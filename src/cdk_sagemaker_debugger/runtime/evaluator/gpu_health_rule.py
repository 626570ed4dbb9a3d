"""GPUHealth: the sampler's per-GPU health fields (runtime/sampler/gpu_health.py), window by window.

Fires on a GPU that throttles for thermal or hardware reasons in more than ``throttle_percent`` of a window's
samples, reports an XID error, counts uncorrectable ECC errors, or has a row remap pending or failed. Power-cap
throttling (0x4) is normal under full load and only reported. Names the node and GPU; the state is counts per GPU.
"""

from __future__ import annotations

from typing import Any

from .rules import Facts, ProfilerRule, _some
from .window import WindowContext

#: NVML clock-throttle reason bits.
THROTTLE_BITS = {0x8: "hardware slowdown", 0x20: "software thermal", 0x40: "hardware thermal", 0x80: "power brake"}
POWER_CAP = 0x4
#: XIDs that are informational (13: graphics engine exception from the application; 31: MMU fault from the
#: application; 43: the application stopped) are still reported; none is ignored by default.
MAX_XIDS_KEPT = 20


class GPUHealth(ProfilerRule):
    name = "GPUHealth"
    PARAMETERS = (("throttle_percent", 10), ("max_temperature", 90), ("ignore_xids", ""))
    CLOUDWATCH_GAP = "throttling, XID and ECC come from the sampler's GPU health fields, which CloudWatch does not have"
    summary = "A GPU throttles (thermal, hardware), reports XID errors, uncorrectable ECC errors or remapped rows"

    def __init__(self, **params: Any):
        super().__init__(**params)
        #: "node/gpu" -> {"samples", "throttled", "power_capped", "max_temperature", "xids": [...], "ecc", "remap"}
        self.gpus: dict[str, dict[str, Any]] = {}
        self.ignored = {int(x) for x in str(self.params["ignore_xids"] or "").replace(";", ",").split(",")
                        if x.strip().isdigit()}

    def evaluate(self, ctx: WindowContext) -> bool:
        worst = None
        for node, gpus in ctx.system.health.items():
            for gpu, dims in gpus.items():
                share = self._judge(f"{node}/{gpu}", dims)
                worst = share if worst is None or (share is not None and share > worst) else worst
        if worst is not None:
            self.report["Gauge"] = round(worst, 1)  # the most throttled GPU of this window, percent of its samples
        self.report["Details"] = {name: dict(v, problems=sorted(v["problems"])) for name, v in sorted(self.gpus.items())}
        return self.triggered()

    def _judge(self, name: str, dims: dict[str, list[float]]) -> float | None:
        g = self.gpus.setdefault(name, {"samples": 0, "throttled": 0, "power_capped": 0, "max_temperature": None,
                                        "xids": [], "ecc": 0.0, "remap": 0.0, "problems": []})
        reasons = [int(v) for v in dims.get("GPUThrottleReasons", [])]
        bad = [r for r in reasons if any(r & bit for bit in THROTTLE_BITS)]
        g["samples"] += len(reasons)
        g["throttled"] += len(bad)
        g["power_capped"] += sum(1 for r in reasons if r & POWER_CAP)
        self.report["Datapoints"] += len(reasons)
        problems: list[str] = []
        if reasons and 100 * len(bad) / len(reasons) > self.params["throttle_percent"]:
            kinds = sorted({label for r in bad for bit, label in THROTTLE_BITS.items() if r & bit})
            problems.append(f"throttled ({', '.join(kinds)}) in {100 * len(bad) / len(reasons):.0f} % of samples")
        temperatures = dims.get("GPUTemperature", [])
        if temperatures:
            top = max(temperatures)
            g["max_temperature"] = top if g["max_temperature"] is None else max(g["max_temperature"], top)
            if top > self.params["max_temperature"]:
                problems.append(f"{top:.0f} °C")
        xids = [int(x) for x in dims.get("GPUXid", []) if int(x) not in self.ignored]
        if xids:
            g["xids"] = (g["xids"] + xids)[-MAX_XIDS_KEPT:]
            problems.append("XID " + ", ".join(str(x) for x in sorted(set(xids))))
        ecc = max(dims.get("GPUEccUncorrected", [0.0]))
        if ecc > 0:
            g["ecc"] = max(g["ecc"], ecc)
            problems.append(f"{ecc:.0f} uncorrectable ECC error(s)")
        if max(dims.get("GPURemappedRowsFailure", [0.0])) > 0:
            problems.append("row remapping failed (replace the GPU)")
        elif max(dims.get("GPURemappedRowsPending", [0.0])) > 0:
            problems.append("row remap pending (needs a GPU reset)")
        if problems:
            g["problems"] = sorted(set(g["problems"]) | set(problems))[:10]
            self._violation(len(problems))
        return 100 * len(bad) / len(reasons) if reasons else None

    def explain(self) -> str | None:
        items = [f"{name}: {'; '.join(v['problems'])}" for name, v in self.report["Details"].items() if v["problems"]]
        return "GPU health: " + _some(items)

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.system_records == 0:
            return "the job produced no system metrics"
        if not self.gpus:
            return "the job recorded no GPU health fields (no GPU, or a sampler without them)"
        return None
