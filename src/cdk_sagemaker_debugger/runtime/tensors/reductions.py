"""The per-tensor reductions, computed on the tensor's device and stacked, so a sampled step copies once per device.

Every function takes ``torch`` (imported lazily by the collector) and returns a 1-D float32/float64 tensor whose
fields are listed in the matching ``*_FIELDS`` tuple; the collector concatenates them and calls ``tolist()`` once.
"""

PARAM_FIELDS = ("sum", "sumsq", "abs_sum", "zero", "min", "max")
NONFINITE_FIELDS = ("nan", "inf")
#: Elements used for the 5th/95th percentiles of a ReLU input (torch.quantile sorts; a strided sample is enough).
QUANTILE_SAMPLE = 100_000


def local(tensor):
    """The part of ``tensor`` this process holds: a DTensor's local shard (FSDP2), else the tensor itself."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) and hasattr(tensor, "placements") else tensor


def _values(torch, tensor):
    x = local(tensor).detach()
    if x.is_complex():
        x = x.abs()
    if not x.is_floating_point():
        x = x.float()
    return x


def param_stats(torch, tensor):
    """sum, sum of squares, sum of |x|, zero count, min, max (min/max are +inf/-inf for an empty shard)."""
    x = _values(torch, tensor)
    if x.numel() == 0:
        return torch.tensor([0.0, 0.0, 0.0, 0.0, float("inf"), float("-inf")], device=x.device)
    low, high = torch.aminmax(x)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    parts = (x.sum(dtype=acc), torch.linalg.vector_norm(x, dtype=acc).square(),
             torch.linalg.vector_norm(x, 1, dtype=acc), (x == 0).sum(), low, high)
    return torch.stack([p.to(acc) for p in parts])


def nonfinite_stats(torch, tensor):
    x = _values(torch, tensor)
    return torch.stack([torch.isnan(x).sum(), torch.isinf(x).sum()]).double()


def diff_sumsq(torch, after, before):
    """Sum of squares of ``after - before`` (the update of one optimizer step)."""
    a, b = _values(torch, after), _values(torch, before)
    if a.numel() == 0:
        return torch.zeros(1, dtype=torch.float64, device=a.device)
    return torch.linalg.vector_norm(a - b).square().double().reshape(1)


def allclose_margin(torch, now, before, rtol):
    """max(|now - before| - rtol * |before|): ``allclose(now, before, rtol, atol)`` holds exactly when it is <= atol."""
    a, b = _values(torch, now), _values(torch, before)
    if a.numel() == 0:
        return torch.full((1,), float("-inf"), dtype=torch.float64, device=a.device)
    return ((a - b).abs() - rtol * b.abs()).max().double().reshape(1)


def _per_unit(torch, mask):
    """Count of True per unit: dimension 1 (features, channels), or each element of a 1-D tensor."""
    if mask.dim() < 2:
        return mask.double()
    dims = [d for d in range(mask.dim()) if d != 1]
    return mask.sum(dim=dims).double()


def units_and_count(tensor):
    """(units, samples per unit) of an activation: dimension 1 is the unit, every other dimension a sample."""
    if tensor.dim() < 2:
        return tensor.numel(), 1
    units = tensor.shape[1]
    return units, (tensor.numel() // units) if units else 0


def relu_active(torch, output):
    return _per_unit(torch, output.detach() > 0)


def within(torch, tensor, low, high):
    x = tensor.detach()
    return _per_unit(torch, (x > low) & (x < high))


def spread(torch, tensor):
    """sum, sum of squares, 5th and 95th percentile (over a strided sample of at most QUANTILE_SAMPLE elements)."""
    x = _values(torch, tensor).flatten()
    if x.numel() == 0:
        return torch.zeros(4, dtype=torch.float64, device=x.device)
    sample = x[:: max(1, x.numel() // QUANTILE_SAMPLE)].float()
    q = torch.quantile(sample, torch.tensor([0.05, 0.95], device=x.device))
    return torch.cat([torch.stack([x.double().sum(), x.double().square().sum()]), q.double()])


def channel_sums(torch, images):
    """Per channel (dimension 1): sum and sum of squares over the batch and pixels."""
    x = images.detach().double()
    dims = [d for d in range(x.dim()) if d != 1]
    return torch.cat([x.sum(dim=dims), x.square().sum(dim=dims)])


def token_counts(torch, ids, values):
    x = ids.detach()
    return torch.stack([(x == v).sum() for v in values]).double()


def pair_counts(torch, target, prediction, classes):
    """bincount of label * classes + prediction: the flattened confusion counts of one batch."""
    t = target.detach().reshape(-1).long().clamp(0, classes - 1)
    p = prediction.detach().reshape(-1).long().clamp(0, classes - 1)
    return torch.bincount(t * classes + p, minlength=classes * classes).double()
