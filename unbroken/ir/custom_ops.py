"""Custom operators whose fake kernel asks ``torch.library.get_ctx()`` for a size only tensor
data decides (``ctx.new_dynamic_size()``: a custom ``nonzero``, a ragged gather): the kernel
runs under a context whose sizes are the trace's unbacked symbols, with the bounds it states,
and the op is recorded as a data-dependent one (its output sizes read from its node).

torch runs such kernels under its fake tensor mode only; on plain meta tensors (torch's Meta
kernel for the op) ``get_ctx()`` raises. Ops whose fake kernel never asks are traced as any
other op.
"""
from __future__ import annotations

import torch

from ..symbolic.ranges import ValueRange
from ..symbolic.torch_compat import custom_fake_kernel, fake_ctx

__all__ = ["record_custom_dynamic"]


class _Context:
    """What ``torch.library.get_ctx()`` returns to a fake kernel during the trace (the
    methods of torch's ``FakeImplCtx`` a fake kernel calls)."""

    def __init__(self, recorder, op):
        self.recorder, self.op, self.made = recorder, op, []

    def new_dynamic_size(self, *, min=0, max=None) -> torch.SymInt:  # noqa: A002 (torch's)
        """A size only tensor data decides, in ``[min, max]``."""
        if min < 0:
            raise ValueError(f"new_dynamic_size(): min={min} must be >= 0 (it is a size)")
        size = self.recorder.unbacked_size(f"{self.op} size")
        symbol = size.node.expr
        self.recorder.env.set_range(symbol, ValueRange(min, max), spec=True)
        self.made.append(symbol)
        return size

    def create_unbacked_symint(self, *, min=2, max=None) -> torch.SymInt:  # noqa: A002
        """The deprecated name of :meth:`new_dynamic_size` (torch's default ``min=2``)."""
        return self.new_dynamic_size(min=min, max=max)


def record_custom_dynamic(recorder, func, args, kwargs, compute_args, compute_kwargs, device):
    """The output of the custom op ``func`` when its fake kernel made data-dependent sizes
    (recorded, with those sizes read from its node); None when it has no fake kernel or made
    none (the op is then traced as any other)."""
    kernel = custom_fake_kernel(func)
    if kernel is None:
        return None
    context = _Context(recorder, func)
    with fake_ctx(context):
        out = kernel(*compute_args, **compute_kwargs)
    if not context.made:
        return None
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    node = recorder._record(func, args, kwargs, out)
    recorder._bind_outputs(node, out, device)
    made = set(context.made)
    for tensor in outputs:
        if isinstance(tensor, torch.Tensor):
            for dim, size in enumerate(tensor.shape):
                if isinstance(size, torch.SymInt) and size.node.expr in made:
                    recorder.builder.bind_symbol(size.node.expr, recorder.node_of(tensor),
                                                 dim, tensor)
    return out
