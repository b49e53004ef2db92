"""Snapshots of what an export must leave unchanged: the caller's model and the process.

``ModelSnapshot.of(model)`` records, for every submodule: its attributes (``vars()``: each
value's identity, and the value itself when it is a plain constant), its training flag, its
hooks, and every parameter and buffer (identity, device, dtype, requires_grad, a copy of the
values). Two snapshots compare with ``==``; ``diff`` lists what changed, for test messages.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

_CONSTANT_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _attribute(value):
    return value if isinstance(value, _CONSTANT_TYPES) else ("object", id(value))


def _tensor(tensor) -> tuple:
    if tensor is None:
        return (None,)
    values = tensor.detach().clone() if tensor.device.type != "meta" else None
    return (id(tensor), type(tensor).__name__, tensor.device, tensor.dtype,
            tensor.requires_grad, tuple(tensor.shape), values)


def _same_tensor(a: tuple, b: tuple) -> bool:
    if a[:-1] != b[:-1]:
        return False
    return (a[-1] is None and b[-1] is None) or (
        a[-1] is not None and b[-1] is not None and torch.equal(a[-1], b[-1]))


@dataclass(frozen=True)
class ModelSnapshot:
    """modules: path -> (vars() as name -> identity or constant, training, hook counts);
    tensors: "path.name" -> (identity, class, device, dtype, requires_grad, shape, values)."""

    modules: dict
    tensors: dict

    @classmethod
    def of(cls, model) -> ModelSnapshot:
        if not isinstance(model, torch.nn.Module):
            return cls({}, {})
        modules, tensors = {}, {}
        for path, module in model.named_modules(remove_duplicate=False):
            attributes = {k: _attribute(v) for k, v in vars(module).items()}
            hooks = tuple(len(getattr(module, name)) for name in vars(module)
                          if name.endswith("hooks") and isinstance(getattr(module, name), dict))
            modules[path] = (attributes, module.training, hooks)
            for table in ("_parameters", "_buffers"):
                for name, tensor in getattr(module, table).items():
                    tensors[f"{path}.{name}" if path else name] = _tensor(tensor)
        return cls(modules, tensors)

    def diff(self, other: ModelSnapshot) -> list[str]:
        changes = [f"module {p!r}: {self.modules.get(p)} -> {other.modules.get(p)}"
                   for p in self.modules.keys() | other.modules.keys()
                   if self.modules.get(p) != other.modules.get(p)]
        for name in self.tensors.keys() | other.tensors.keys():
            a, b = self.tensors.get(name), other.tensors.get(name)
            if a is None or b is None or not _same_tensor(a, b):
                changes.append(f"tensor {name!r}: {a and a[:-1]} -> {b and b[:-1]}")
        return sorted(changes)
