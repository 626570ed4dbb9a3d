"""The PyTorch tensor collector: global optimizer-step and module hooks, reductions on sampled steps only.

On every ``save_interval``-th optimizer step (0, 500, 1000, ... by default, as Debugger) it records per-tensor
reductions of the gradients and weights of the first optimizer that steps, and, only for the collections configured,
activation counts from the modules' forward hooks. The reductions stay on the device until the step ends, are copied
once, and a background thread writes and uploads them (writer.py). Any failure stops the collector and is counted in
its status file; nothing here raises into the training loop.
"""

import time

from . import names as naming
from .batch import Batch
from .reductions import (
    NONFINITE_FIELDS,
    PARAM_FIELDS,
    allclose_margin,
    channel_sums,
    diff_sumsq,
    local,
    nonfinite_stats,
    pair_counts,
    param_stats,
    relu_active,
    spread,
    token_counts,
    units_and_count,
    within,
)

ACTIVATION_COLLECTIONS = ("relu_output", "saturation", "relu_input", "images", "tokens", "labels")


def is_sharded(root, optimizer):
    """FSDP (1 or 2): parameters are DTensors or the model holds FullyShardedDataParallel modules."""
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if hasattr(parameter, "placements") and hasattr(parameter, "to_local"):
                return True
    if root is not None:
        for module in root.modules():
            if type(module).__name__ in ("FullyShardedDataParallel", "FSDPModule") or any(
                    base.__name__ == "FSDPModule" for base in type(module).__mro__):
                return True
    return False


class Collector:
    def __init__(self, torch, config, writer, *, rank=0, local_rank=0):
        self.torch = torch
        self.config = config
        self.writer = writer
        self.rank, self.local_rank = rank, local_rank
        self.interval = config["save_interval"]
        self.handles = []
        self.root = None
        self.param_names = {}
        self.module_names = {}
        self.optimizer_id = None
        self.mode = None  # "replicated" (records on local rank 0) or "sharded" (every rank records partial sums)
        self.step = 0  # completed optimizer steps of the first optimizer
        self.batch = Batch()
        self.snapshots = {}  # id(parameter) -> weights before this sampled step (updates)
        self.previous = {}  # id(parameter) -> weights at the last sampled step (unchanged)
        self.seen = {"images": 0, "labels": 0}
        self.embedding = None
        self.stopped = False
        self.stopped_by_failure = False
        self.activations = any(key in config for key in ACTIVATION_COLLECTIONS)

    # ---- lifecycle
    def install(self):
        import importlib

        optim = importlib.import_module("torch.optim.optimizer")
        modules = importlib.import_module("torch.nn.modules.module")
        self.handles.append(optim.register_optimizer_step_pre_hook(self._guard(self._on_step_pre)))
        self.handles.append(optim.register_optimizer_step_post_hook(self._guard(self._on_step_post)))
        self._names_handle = modules.register_module_forward_pre_hook(self._guard(self._on_first_forward))
        self.handles.append(self._names_handle)
        if self.activations:
            self.handles.append(modules.register_module_forward_hook(self._guard(self._on_forward)))
        return self

    def remove_hooks(self):
        for handle in self.handles:
            try:
                handle.remove()
            except Exception:  # a hook dictionary torn down at interpreter exit
                pass
        self.handles = []
        self.snapshots, self.previous = {}, {}

    def stop(self, reason=None):
        if not self.stopped:
            self.stopped = True
            self.remove_hooks()
            if reason:
                self.stopped_by_failure = True
                self.writer.status.fail("collector", reason)

    def _guard(self, function):
        compiler = getattr(self.torch, "compiler", None)
        compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

        def hook(*args, **kwargs):
            # Inside torch.compile's tracing the hook is a no-op (checked first, so nothing else is traced): the graph
            # stays whole and the compiled code records nothing (docs/tensor-rules.md, torch.compile).
            if compiling() or self.stopped:
                return None
            try:
                function(*args, **kwargs)
            except Exception as exc:  # never into training: count it, stop collecting
                self.stop(f"{function.__name__}: {type(exc).__name__}: {exc}")
            return None
        hook.__name__ = function.__name__
        return hook

    # ---- which step records what
    def sampled(self):
        return self.step % self.interval == 0

    def wants(self, key):
        section = self.config.get(key)
        if section is None:
            return False
        if key == "relu_input":
            return self.step < section["steps"]
        if key in ("images", "labels"):
            return self.sampled() or self.seen[key] < section["samples"]
        return self.sampled()

    # ---- module hooks
    def _on_first_forward(self, module, args):
        self.root = module
        self.param_names = naming.parameter_names(module)
        self.module_names = naming.module_names(module)
        self._names_handle.remove()
        self.handles.remove(self._names_handle)

    def _name(self, module, suffix):
        path = self.module_names.get(id(module))
        if path is None:
            path = f"{type(module).__name__}_{len(self.module_names)}"
            self.module_names[id(module)] = path
        return f"{path}.{suffix}" if suffix else path

    def _on_forward(self, module, args, output):
        if self.mode == "off":
            return
        torch = self.torch
        nn = torch.nn
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if module is self.root and first is not None and first.dim() == 4 and first.is_floating_point():
            if self.wants("images"):
                self._record_images(module, first)
        if isinstance(module, nn.ReLU) and isinstance(output, torch.Tensor):
            if self.wants("relu_output"):
                self._record_units("relu", self._name(module, "relu_output"), output, relu_active(torch, output))
            if first is not None and self.wants("relu_input"):
                self._record_spread(self._name(module, "relu_input"), first)
        elif isinstance(module, (nn.Tanh, nn.Sigmoid)) and first is not None and self.wants("saturation"):
            kind = "tanh" if isinstance(module, nn.Tanh) else "sigmoid"
            low, high = self.config["saturation"][kind]
            self._record_units("saturation", self._name(module, f"{kind}_input"), first,
                               within(torch, first, low, high))
        elif isinstance(module, nn.Embedding) and first is not None and self.wants("tokens"):
            if self.embedding is None:
                self.embedding = id(module)
            if self.embedding == id(module):
                self._record_tokens(module, first)
        elif isinstance(module, nn.modules.loss._Loss) and len(args) >= 2 and self.wants("labels"):
            self._record_loss(module, args[0], args[1])

    def _record_units(self, kind, name, tensor, counts):
        units, per_unit = units_and_count(tensor)
        self.batch.add({"step": self.step, "kind": kind, "name": name, "n": per_unit}, counts, "counts")

    def _record_spread(self, name, tensor):
        record = {"step": self.step, "kind": "relu_input", "name": name, "n": local(tensor).numel()}
        self.batch.add(record, spread(self.torch, tensor), ("sum", "sumsq", "p5", "p95"))

    def _record_images(self, module, images):
        self.seen["images"] += images.shape[0]
        record = {"step": self.step, "kind": "images", "name": self._name(module, "input_0"),
                  "images": images.shape[0], "n": images.numel() // max(images.shape[1], 1)}
        self.batch.add(record, channel_sums(self.torch, images), "sums")

    def _record_tokens(self, module, ids):
        values = self.config["tokens"]["values"]
        record = {"step": self.step, "kind": "tokens", "name": self._name(module, "input_0"), "n": ids.numel(),
                  "values": values}
        self.batch.add(record, token_counts(self.torch, ids, values), "counts")

    def _record_loss(self, module, prediction, target):
        torch = self.torch
        if not isinstance(prediction, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        if target.is_floating_point() and target.dim() == prediction.dim() and prediction.dim() >= 2:
            target = target.argmax(1)  # one-hot or probability targets
        if prediction.dim() >= 2 and prediction.shape[1] >= 2 and not target.is_floating_point():
            self.record_labels(target, prediction.argmax(1), prediction.shape[1], self._name(module, ""))
        elif prediction.dim() <= 1 or prediction.shape[-1] == 1:  # binary: logits, labels 0/1
            self.record_labels(target.reshape(-1).round(), (prediction.reshape(-1) > 0), 2, self._name(module, ""))

    def record_labels(self, target, prediction, classes, name="labels"):
        self.seen["labels"] += target.numel()
        record = {"step": self.step, "kind": "labels", "name": name, "classes": classes}
        self.batch.add(record, pair_counts(self.torch, target, prediction, classes), "pairs")

    # ---- optimizer hooks
    def _on_step_pre(self, optimizer, args, kwargs):
        if self.optimizer_id is None:
            self.optimizer_id = id(optimizer)
            self._choose_mode(optimizer)
        if id(optimizer) != self.optimizer_id or self.mode == "off" or not self.sampled():
            return
        for parameter, name in self._parameters(optimizer):
            self._record_parameter(parameter, name)

    def _choose_mode(self, optimizer):
        self.mode = "sharded" if is_sharded(self.root, optimizer) else "replicated"
        self.param_names.update(naming.fallback_names(optimizer, self.param_names))
        if self.mode == "replicated" and self.local_rank != 0:
            self.mode = "off"  # DDP: the gradients are all-reduced, local rank 0 of each node records them
            self.remove_hooks()
        self.writer.status.set("mode", self.mode)

    def _parameters(self, optimizer):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                name = self.param_names.get(id(parameter))
                if name is None:
                    name = self.param_names[id(parameter)] = f"param_{len(self.param_names)}"
                yield parameter, name

    def _record_parameter(self, parameter, name):
        torch = self.torch
        shard = self.mode == "sharded"
        size = local(parameter).numel()
        if parameter.grad is not None and "gradients" in self.config:
            record = {"step": self.step, "kind": "gradient", "name": name, "n": size, "shard": shard}
            self.batch.add(record, param_stats(torch, parameter.grad), PARAM_FIELDS)
        if "weights" in self.config:
            record = {"step": self.step, "kind": "weight", "name": name, "n": size, "shard": shard}
            self.batch.add(record, param_stats(torch, parameter), PARAM_FIELDS)
        if "updates" in self.config or "unchanged" in self.config:
            self.snapshots[id(parameter)] = local(parameter).detach().clone()

    def _on_step_post(self, optimizer, args, kwargs):
        if id(optimizer) != self.optimizer_id:
            return
        if self.mode != "off" and self.sampled():
            self._record_updates(optimizer)
        if len(self.batch):
            self._flush()
        self.step += 1
        self.writer.status.set("steps", self.step)

    def _record_updates(self, optimizer):
        torch = self.torch
        shard = self.mode == "sharded"
        rtol = self.config.get("unchanged", {}).get("rtol")
        for parameter, name in self._parameters(optimizer):
            before = self.snapshots.pop(id(parameter), None)
            if before is None:
                continue
            now = local(parameter).detach()
            record = {"step": self.step, "kind": "update", "name": name, "n": now.numel(), "shard": shard}
            self.batch.add(record, diff_sumsq(torch, now, before), ("sumsq",))
            if rtol is None:
                continue
            previous = self.previous.get(id(parameter))
            if previous is not None:
                record = {"step": self.step, "kind": "unchanged", "name": name, "n": now.numel(), "shard": shard,
                          "rtol": rtol}
                self.batch.add(record, allclose_margin(torch, now, previous, rtol), ("margin",))
            self.previous[id(parameter)] = now.clone()

    def _flush(self):
        started = time.perf_counter()
        records = self.batch.resolve(self.torch)
        self._add_nonfinite(records)
        self.writer.submit(self.step, records)
        self.writer.status.add("collect_seconds", time.perf_counter() - started)

    def _add_nonfinite(self, records):
        """NaN/Inf counts for the tensors whose sums are not finite: a second copy only when something diverged."""
        nonfinite = {id(r) for r in records if r["kind"] in ("gradient", "weight") and isinstance(r.get("sumsq"), str)}
        if not nonfinite:
            for record in records:
                if record["kind"] in ("gradient", "weight"):
                    record["nan"] = record["inf"] = 0
            return
        # The parameters of this step are still alive: look them up by name.
        by_name = {}
        if self.optimizer_id is not None and self.root is not None:
            for parameter in self.root.parameters():
                by_name[self.param_names.get(id(parameter))] = parameter
        pending = Batch()
        for record in records:
            if record["kind"] not in ("gradient", "weight"):
                continue
            if id(record) not in nonfinite:
                record["nan"] = record["inf"] = 0
                continue
            parameter = by_name.get(record["name"])
            tensor = None if parameter is None else (parameter.grad if record["kind"] == "gradient" else parameter)
            if tensor is None:
                record["nan"], record["inf"] = "unknown", "unknown"
                continue
            pending.add(record, nonfinite_stats(self.torch, tensor), NONFINITE_FIELDS)
        pending.resolve(self.torch)
