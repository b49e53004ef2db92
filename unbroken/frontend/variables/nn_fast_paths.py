"""torch.nn's fast paths, decided in the trace as eager decides them.

``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``
(``NN_FAST_PATH_FORWARDS``) choose between their differentiable path and a fused one
(``torch._native_multi_head_attention``, ``torch._transformer_encoder_layer_fwd``, the input
converted to a nested tensor by the padding mask) with a chain of predicates. Inside those
forwards the trace answers each predicate as eager does, so the program records eager's path
under the export's grad mode:

- ``torch.overrides.has_torch_function*``: False, unless a torch-function mode of the user's is
  active (the trace's tensors stand for plain dense tensors; the recorder's own mode is not
  eager's), everywhere; ``_check_arg_device`` and ``_arg_requires_grad`` are interpreted, so
  that they read the user's device and eager's ``requires_grad``;
- ``MultiheadAttention``'s ``_is_make_fx_tracing()`` and ``TransformerEncoder``'s
  ``torch.compiler.is_compiling()`` / ``is_exporting()``: False, as in eager (elsewhere they
  answer as under torch.export): the fused kernels have meta kernels, so the program records the
  kernel eager runs, bit for bit;
- ``torch._nested_tensor_from_mask_left_aligned(src, mask)`` reads the mask's data: the trace
  follows the side where it is True, and the program computes the answer at run time (below).
  If a later condition keeps the dense path (grad on, a parameter requiring grad), both sides
  of the check lead there: the answer did not matter;
- the nested tensor ``TransformerEncoder`` then builds (grad off) is held densely
  (``PaddedNestedVariable``): its values padded to the input's shape, the positions it holds
  (the first ``mask.sum(1)`` of each row), and whether eager converted at all (with
  ``mask_check``, only when the mask pads on the right: else eager keeps the dense path with
  the mask). Each layer's fused kernel runs on the dense values with a key-padding mask that
  hides exactly the positions the nested tensor lacks (the mask eager's dense path passes where
  it did not convert), and ``to_padded_tensor`` sets the positions it lacks to the padding
  value. The program computes eager's result for every mask, up to the rounding of the nested
  kernels (a different blocking of the same sums, ~1e-7 relative); anything else done to the
  nested tensor (another layer's Python path, an op on it) is refused (UB108);
- ``torch.is_grad_enabled()``: the export's mode, noted as a ``GradModeDecision``
  (``unbroken.ir.input_checks``). Eager takes the other path in the other mode;
  ``ExportedProgram.module()`` refuses a call in which it would.

Outside those forwards the compiling predicates keep their torch.export answer, and the mask
check, which reads data, is refused (UB105). ``torch._native_multi_head_attention`` returns
``(out, None)`` without ``need_weights``, as eager's kernel (its meta kernel gives an empty
tensor).
"""
from __future__ import annotations

import inspect

import torch

from ...ir.devices import is_trace_mode
from ...ir.input_checks import GradModeDecision
from ...symbolic.diagnostics.catalogue import graph_break
from ...symbolic.node import sym_expr
from ...symbolic.torch_compat import (
    ENCODER_LAYER_FORWARD,
    EXPORT_PREDICATES,
    MAKE_FX_TRACING,
    NATIVE_MULTI_HEAD_ATTENTION,
    NESTED_FROM_MASK,
    NESTED_FROM_MASK_LEFT_ALIGNED,
    NESTED_TENSOR_BUILDERS,
    NN_FAST_PATH_FORWARDS,
    NN_FAST_PATH_HELPERS,
    export_predicate,
    function_modes,
)
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import SequenceVariable, TupleVariable
from .tensor import TensorVariable

__all__ = ["PaddedNestedVariable", "fast_path_handlers"]



def _codes(code):
    """``code`` and the code objects nested in it (its generator expressions)."""
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _codes(const)


#: code object -> the torch.nn class: each fast-path forward and its generator expressions
#: (``all(_check_arg_device(x) for x in tensor_args)`` asks inside one)
_FORWARDS = {code: fn.__qualname__.rsplit(".", 1)[0]
             for fn in NN_FAST_PATH_FORWARDS for code in _codes(fn.__code__)}


def _fast_path_module(tx) -> str | None:
    """The torch.nn class whose fast-path forward ``tx`` runs, or None."""
    return _FORWARDS.get(tx.code)


def _eager_or(default):
    """A predicate that answers False (eager's answer) inside a fast-path forward and calls
    ``default(tx, args, kwargs)`` elsewhere."""
    def handler(tx, args, kwargs):
        if _fast_path_module(tx) is not None:
            return ConstantVariable(False)
        return default(tx, args, kwargs)

    return handler


def _has_torch_function(fn):
    """``has_torch_function*``: eager's answer for the trace's tensors (they stand for plain
    tensors): True only under a torch-function mode of the user's. The recorder's own mode
    made the native call answer True (a path eager does not take)."""
    def handler(tx, args, kwargs):
        if _plain_tensors(tx, args) and not kwargs:
            return ConstantVariable(any(not is_trace_mode(m) for m in function_modes()))
        return tx.call_leaf(fn, args, kwargs)

    return handler


def _plain_tensors(tx, args) -> bool:
    """The arguments hold the trace's tensors and None only (a tuple of them, or one)."""
    items = args[0].items(tx) if len(args) == 1 and isinstance(args[0], SequenceVariable) \
        else args
    return all(isinstance(a, (TensorVariable, PaddedNestedVariable))
               or (a.is_constant() and a.as_constant() is None) for a in items)


def _left_aligned(tx, args, kwargs):
    if _fast_path_module(tx) is not None:
        return ConstantVariable(True)
    raise graph_break("UB105", "`torch._nested_tensor_from_mask_left_aligned` reads the values "
                      "of the mask", frames=tx.user_frames())


def _nested_refused(tx, what: str):
    """UB108 for a nested tensor the program cannot hold (or a use of one it cannot
    follow)."""
    return graph_break(
        "UB108", f"{what}; an exported program holds no nested tensor, and eager's result "
        "differs from the dense path's (zeros at the padded positions)",
        frames=tx.user_frames(),
        hint="Build the encoder with `enable_nested_tensor=False` (eager then runs the same "
             "layers without the conversion, and export records them), or export and run "
             "the program with grad mode on and parameters requiring grad (eager's "
             "differentiable path).")


def _nested_tensor(fn):
    def handler(tx, args, kwargs):
        if fn is NESTED_FROM_MASK and _fast_path_module(tx) == "TransformerEncoder":
            held = _held_densely(tx, args, kwargs)
            if held is not None:
                return held
        module = _fast_path_module(tx)
        raise _nested_refused(
            tx, f"`torch.nn.{module}` converts its input to a nested tensor here (its fast "
                "path: eval mode, no gradient recorded, a padding mask that pads on the right)"
            if module else f"`{fn.__name__}` builds a nested tensor")

    return handler


class PaddedNestedVariable(VariableTracker):
    """The nested tensor ``TransformerEncoder`` builds from its input and padding mask, held
    densely (see the module docstring).

    dense:     the values, padded to the input's shape (B, L, E); valid where ``keep``;
    keep:      (B, L) bool, the positions the nested tensor holds (the first ``mask.sum(1)``
               of each row);
    converted: a 0-d bool tensor, whether eager converted (every row of the mask pads on
               the right, an empty row included), or None when it converts for every mask
               (``mask_check=False``);
    layer_mask: the float key-padding mask each layer's fused kernel runs with: ``-inf``
               outside ``keep`` where eager converted, eager's own mask where it did not."""

    __slots__ = ("dense", "keep", "converted", "layer_mask")

    def __init__(self, dense, keep, converted, layer_mask):
        super().__init__(None)
        self.dense, self.keep = dense, keep
        self.converted, self.layer_mask = converted, layer_mask

    def python_type(self) -> type:
        return torch.Tensor

    def describe(self) -> str:
        return "the nested tensor `TransformerEncoder` builds"

    def unwrap(self, tx):
        raise _nested_refused(tx, f"{self.describe()} is passed to a PyTorch function")

    def with_values(self, dense) -> PaddedNestedVariable:
        return PaddedNestedVariable(dense, self.keep, self.converted, self.layer_mask)

    def getattr(self, tx, name: str) -> VariableTracker:
        """What the layers' fast-path checks read (eager's answers for a nested tensor of
        the input's dtype and device, built under no_grad) and ``to_padded_tensor``."""
        if name == "is_nested":
            return ConstantVariable(True)
        if name in ("requires_grad", "is_meta"):
            return ConstantVariable(False)
        if name in ("dtype", "device", "is_cpu", "is_cuda"):
            return self.dense.getattr(tx, name)
        if name == "__class__":
            return tx.wrap(torch.Tensor)
        if name in ("dim", "to_padded_tensor"):
            return _NestedMethod(self, name)
        raise _nested_refused(tx, f"`.{name}` of {self.describe()} is read")

    def to_padded_tensor(self, tx, padding, output_size=None) -> VariableTracker:
        if not padding.is_constant() or not isinstance(padding.as_constant(), (int, float)) \
                or not _is_shape_of(tx, output_size, self.dense):
            raise _nested_refused(tx, f"{self.describe()} is padded to another shape")
        # eager's `to_padded_tensor` raises when every row is empty
        held = _leaf(tx, torch.Tensor.any, self.keep)
        if self.converted is not None:
            held = _leaf(tx, torch.logical_or, held, _leaf(tx, torch.logical_not,
                                                           self.converted))
        tx.call_leaf(torch.ops.aten._assert_async.msg, [held, ConstantVariable(
            "TransformerEncoder converted its input to a nested tensor and every row of the "
            "padding mask is padded: eager's to_padded_tensor raises here (at least one "
            "constituent tensor should have non-zero numel)")], {})
        fill = _leaf(tx, torch.logical_not, self.keep)
        if self.converted is not None:
            fill = _leaf(tx, torch.logical_and, fill, self.converted)
        fill = _leaf(tx, torch.Tensor.unsqueeze, fill, ConstantVariable(-1))
        return _leaf(tx, torch.Tensor.masked_fill, self.dense, fill, padding)


class _NestedMethod(VariableTracker):
    __slots__ = ("nested", "name")

    def __init__(self, nested: PaddedNestedVariable, name: str):
        super().__init__(None)
        self.nested, self.name = nested, name

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.name == "dim" and not args and not kwargs:
            return ConstantVariable(self.nested.dense.meta.dim())
        if self.name == "to_padded_tensor" and 1 <= len(args) + len(kwargs) <= 2:
            bound = dict(zip(("padding", "output_size"), args)) | kwargs
            if set(bound) <= {"padding", "output_size"} and "padding" in bound:
                return self.nested.to_padded_tensor(tx, **bound)
        raise _nested_refused(tx, f"`.{self.name}()` of {self.nested.describe()} is called "
                                  "with arguments the trace does not follow")


def _leaf(tx, fn, *args, **kwargs):
    return tx.call_leaf(fn, list(args), kwargs)


def _is_shape_of(tx, size, tensor: TensorVariable) -> bool:
    """``size`` is None or the sizes of ``tensor`` (the same symbols)."""
    if size is None or (size.is_constant() and size.as_constant() is None):
        return True
    if not isinstance(size, SequenceVariable):
        return False
    items = size.items(tx)
    return len(items) == tensor.meta.dim() and all(
        sym_expr(item.unwrap(tx)) == sym_expr(dim)
        for item, dim in zip(items, tensor.meta.shape))


def _held_densely(tx, args, kwargs):
    """``torch._nested_tensor_from_mask(src, valid, mask_check=False)`` inside
    ``TransformerEncoder.forward``: a ``PaddedNestedVariable``, or None when the call is not
    the one torch.nn makes (then refused)."""
    bound = dict(zip(("t", "mask", "mask_check"), args)) | kwargs
    src, valid, checked = bound.get("t"), bound.get("mask"), bound.get("mask_check")
    if len(bound) != 3 or not (isinstance(src, TensorVariable)
                               and isinstance(valid, TensorVariable)
                               and checked.is_constant() and checked.as_constant() is False):
        return None  # torch.nn's call checked the alignment itself (below), not in the kernel
    eager_mask = tx.locals.get("src_key_padding_mask")  # eager's canonical (float) mask
    mask_check = tx.locals.get("do_mask_check")
    if not (isinstance(eager_mask, TensorVariable) and eager_mask.meta.dtype == src.meta.dtype
            and src.meta.dim() == 3 and valid.meta.dtype == torch.bool
            and valid.meta.dim() == 2 and isinstance(mask_check, ConstantVariable)
            and isinstance(mask_check.as_constant(), bool)):
        return None
    const = ConstantVariable
    # the nested tensor holds the first valid.sum(1) positions of each row
    lengths = _leaf(tx, torch.Tensor.sum, valid, const(1))
    positions = _leaf(tx, torch.Tensor.cumsum,
                      _leaf(tx, torch.ones_like, valid, dtype=const(torch.long)), const(1))
    keep = _leaf(tx, torch.le, positions, _leaf(tx, torch.Tensor.unsqueeze, lengths, const(1)))
    hidden = _leaf(tx, torch.Tensor.masked_fill, _leaf(tx, torch.zeros_like, eager_mask),
                   _leaf(tx, torch.logical_not, keep), const(float("-inf")))
    if not mask_check.as_constant():
        return PaddedNestedVariable(src, keep, None, hidden)
    # eager converted only if the mask pads on the right: every row is its first positions,
    # none included (`torch._nested_tensor_from_mask_left_aligned`)
    aligned = _leaf(tx, torch.Tensor.all, _leaf(tx, torch.eq, keep, valid))
    return PaddedNestedVariable(src, keep, aligned,
                                _leaf(tx, torch.where, aligned, hidden, eager_mask))


#: ``_transformer_encoder_layer_fwd``'s mask and mask type (its last two positions)
_LAYER_MASK, _LAYER_MASK_TYPE = 18, 19


def _encoder_layer(tx, args, kwargs):
    """The fused encoder layer: on the nested tensor (the no-mask call torch.nn makes), the
    dense values with the nested tensor's key-padding mask, held again densely."""
    nested = args[0] if args else None
    if not isinstance(nested, PaddedNestedVariable):
        return tx.call_leaf(ENCODER_LAYER_FORWARD, args, kwargs)
    if kwargs or len(args) != _LAYER_MASK_TYPE + 1 or not all(
            a.is_constant() and a.as_constant() is None for a in args[_LAYER_MASK:]):
        raise _nested_refused(tx, "the fused encoder layer runs on the nested tensor "
                                  "`TransformerEncoder` builds with a mask of its own")
    dense_args = [nested.dense, *args[1:_LAYER_MASK], nested.layer_mask, ConstantVariable(1)]
    return nested.with_values(tx.call_leaf(ENCODER_LAYER_FORWARD, dense_args, {}))


def _native_attention(tx, args, kwargs):
    """The fused attention kernel, recorded; without ``need_weights`` its weights are None, as
    eager's kernel returns them (its meta kernel returns an empty tensor there)."""
    result = tx.call_leaf(NATIVE_MULTI_HEAD_ATTENTION, args, kwargs)
    need_weights = kwargs.get("need_weights", args[10] if len(args) > 10 else None)
    if need_weights is not None and need_weights.is_constant() and \
            not need_weights.as_constant():
        return TupleVariable([result.items(tx)[0], ConstantVariable(None)])
    return result


def _grad_enabled(default):
    def handler(tx, args, kwargs):
        module = _fast_path_module(tx)
        if module is not None and not tx.output.grad_regions_open:  # the caller's mode
            output = tx.output
            output.grad_mode_decisions.append(GradModeDecision(
                module, tx.user_frames(), output.grad_enabled, output.any_requires_grad()))
        return default(tx, args, kwargs)

    return handler


def _interpreted(fn):
    """A helper of torch.nn, interpreted rather than called as a leaf: ``_check_arg_device``
    reads ``x.device`` (the user's device to the trace, ``meta`` natively),
    ``_arg_requires_grad`` eager's ``requires_grad`` (not the stand-in's)."""
    def handler(tx, args, kwargs):
        bound = inspect.signature(fn).bind(*args, **kwargs)
        return tx.inline_call(fn.__code__, fn.__globals__, bound.arguments, (), fn.__qualname__)

    return handler


def fast_path_handlers(is_grad_enabled) -> dict:
    """``{torch callable: handler(tx, args, kwargs)}`` for every predicate above, given the
    trace's usual handler of ``torch.is_grad_enabled``."""
    handlers = {fn: _interpreted(fn) for fn in NN_FAST_PATH_HELPERS}
    handlers.update({MAKE_FX_TRACING: _eager_or(lambda tx, a, k: ConstantVariable(True)),
                NESTED_FROM_MASK_LEFT_ALIGNED: _left_aligned,
                NATIVE_MULTI_HEAD_ATTENTION: _native_attention,
                ENCODER_LAYER_FORWARD: _encoder_layer,
                torch.is_grad_enabled: _grad_enabled(is_grad_enabled)})
    for fn in (torch.overrides.has_torch_function, torch.overrides.has_torch_function_unary,
               torch.overrides.has_torch_function_variadic):
        handlers[fn] = _has_torch_function(fn)
    for fn in NESTED_TENSOR_BUILDERS:
        handlers[fn] = _nested_tensor(fn)
    for module, name, answer in EXPORT_PREDICATES:
        if answer is True and module == "torch.compiler":
            fn = getattr(torch.compiler, name, None)
            if fn is not None and export_predicate(fn)[0]:
                handlers[fn] = _eager_or(lambda tx, a, k, answer=answer:
                                         ConstantVariable(answer))
    return handlers
