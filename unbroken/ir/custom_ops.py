"""Custom operators the recorder treats apart.

**Ops that write their arguments** (``torch.library.custom_op(..., mutates_args=...)``,
other than the ``self``-writing in-place form functionalization already rewrites): recorded,
as torch's functionalization records them, as ``higher_order.auto_functionalized(op,
**arguments)``, whose results are the op's outputs and the new values of the written
arguments; each new value is then written into its argument with ``copy_``, which the
recorder records as any in-place write (a user-input or buffer mutation once functionalized,
views of it updated). The written arguments must be tensors (a list of tensors, or ``None``
for an optional one, is refused, UB121).

**Ops whose fake kernel asks ``torch.library.get_ctx()`` for a size only tensor
data decides (``ctx.new_dynamic_size()``: a custom ``nonzero``, a ragged gather): the kernel
runs under a context whose sizes are the trace's unbacked symbols, with the bounds it states,
and the op is recorded as a data-dependent one (its output sizes read from its node).

torch runs such kernels under its fake tensor mode only; on plain meta tensors (torch's Meta
kernel for the op) ``get_ctx()`` raises. Ops whose fake kernel never asks are traced as any
other op.
"""
from __future__ import annotations

import torch

from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.ranges import ValueRange
from ..symbolic.torch_compat import auto_functionalized, custom_fake_kernel, fake_ctx, op_schema
from .ops import inplace_written_index, written_arguments

__all__ = ["custom_meta_kernel", "is_mutable_custom", "record_custom_dynamic",
           "record_mutable_custom"]


def is_mutable_custom(func) -> bool:
    """A custom op (outside aten/prims) whose schema writes some argument other than in
    ``self``-writing in-place form."""
    if getattr(func, "namespace", "aten") in ("aten", "prims", "prim"):
        return False
    return bool(written_arguments(func)) and inplace_written_index(func) is None


def record_mutable_custom(recorder, func, args, kwargs):
    """Record the custom op ``func`` that writes its arguments (see the module docstring) and
    return its outputs; the written arguments then hold the new values."""
    schema = op_schema(func)
    arguments = {}
    for index, argument in enumerate(schema.arguments):
        if index < len(args):
            arguments[argument.name] = args[index]
        elif argument.name in kwargs:
            arguments[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            arguments[argument.name] = argument.default_value
    written = [schema.arguments[i].name for i in written_arguments(func)]
    for name in written:
        if not isinstance(arguments.get(name), torch.Tensor):
            raise UnsupportedError(
                f"`{func}` writes its argument `{name}`, which is not one tensor "
                f"({type(arguments.get(name)).__name__}): not supported.", code="UB121",
                frames=recorder.frames_provider(),
                hint="pass one tensor for each argument the op writes.")
    # no mode is active inside the recorder's dispatch: the fake kernel runs on the meta
    # tensors (writing nothing) and the new values are made, neither recorded
    meta_kernel = custom_meta_kernel(func)
    out = func(*args, **kwargs) if meta_kernel is None else meta_kernel(args, kwargs)
    new = [torch.empty_strided(arguments[n].shape, arguments[n].stride(),
                               dtype=arguments[n].dtype, device="meta") for n in written]
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    value = (*outputs, *new)
    operator = auto_functionalized()
    node = recorder._record(operator, (func,), arguments, value)
    recorder._bind_outputs(node, value, recorder.device_of(arguments[written[0]]))
    with recorder:
        for name, fresh in zip(written, new):
            arguments[name].copy_(fresh)
    return out


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


def custom_meta_kernel(func):
    """``(args, kwargs) -> meta output`` of a custom op with a fake kernel (torch installs it
    as the op's Meta kernel): the kernel itself, called on the meta tensors with the tensors
    its factories make (``torch.empty(n)``, no device given) on the meta device, as torch's
    fake tensor mode makes them fake; None for other ops."""
    fake = custom_fake_kernel(func)
    if fake is None:
        return None

    def kernel(args, kwargs):
        with fake_ctx(_NoDynamicSizes(func)), torch.device("meta"):
            return fake(*args, **kwargs)
    return kernel


class _NoDynamicSizes:
    """``torch.library.get_ctx()`` for a fake kernel that made no data-dependent size when
    it first ran (:func:`record_custom_dynamic`): asked for one now, it did not then."""

    def __init__(self, op):
        self.op = op

    def new_dynamic_size(self, *, min=0, max=None) -> torch.SymInt:  # noqa: A002 (torch's)
        raise RuntimeError(f"the fake kernel of {self.op} asks for a data-dependent size on "
                           "some calls only")

    create_unbacked_symint = new_dynamic_size


def record_custom_dynamic(recorder, func, args, kwargs, compute_args, compute_kwargs, device):
    """The output of the custom op ``func`` when its fake kernel made data-dependent sizes
    (recorded, with those sizes read from its node); None when it has no fake kernel or made
    none (the op is then traced as any other)."""
    kernel = custom_fake_kernel(func)
    if kernel is None:
        return None
    context = _Context(recorder, func)
    with fake_ctx(context), torch.device("meta"):  # its factories: as under fake tensors
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
