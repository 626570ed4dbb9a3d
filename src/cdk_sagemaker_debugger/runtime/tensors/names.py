"""Stable tensor names: ``named_parameters()`` of the first module seen, without the wrappers' prefixes."""

import re

# DDP, torch.compile, FSDP1, activation checkpointing and DataParallel add these path segments.
_WRAPPERS = re.compile(r"(^|\.)(module|_orig_mod|_fsdp_wrapped_module|_checkpoint_wrapped_module|_forward_module)"
                       r"(?=\.|$)")


def clean(name):
    cleaned = _WRAPPERS.sub("", name).lstrip(".")
    return cleaned or name


def parameter_names(root):
    """id(parameter) -> clean name, for every parameter of ``root``."""
    names = {}
    for name, parameter in root.named_parameters(remove_duplicate=True):
        names.setdefault(id(parameter), clean(name))
    return names


def module_names(root):
    """id(module) -> clean path ('' for the root itself becomes 'model')."""
    return {id(module): clean(name) if name else "model" for name, module in root.named_modules()}


def fallback_names(optimizer, known):
    """Names for parameters the first module does not own: ``param_group<g>.<i>`` in the optimizer's order."""
    names = {}
    for g, group in enumerate(optimizer.param_groups):
        for i, parameter in enumerate(group["params"]):
            if id(parameter) not in known:
                names[id(parameter)] = f"param_group{g}.{i}"
    return names
