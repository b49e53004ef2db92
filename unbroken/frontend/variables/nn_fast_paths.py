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
- ``torch._nested_tensor_from_mask_left_aligned(src, mask)`` reads the mask's data; eager
  answers True for an input every spec admits (a mask without padding), so the trace follows
  that side. If the forward then builds a nested tensor (grad off), export refuses (UB108): a
  program holds no nested tensor, and eager returns zeros at the padded positions. If a later
  condition keeps the differentiable path (grad on, a parameter requiring grad), both sides of
  the check lead there: the answer did not matter;
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
from ...symbolic.torch_compat import (
    EXPORT_PREDICATES,
    MAKE_FX_TRACING,
    NATIVE_MULTI_HEAD_ATTENTION,
    NESTED_FROM_MASK_LEFT_ALIGNED,
    NESTED_TENSOR_BUILDERS,
    NN_FAST_PATH_FORWARDS,
    NN_FAST_PATH_HELPERS,
    export_predicate,
    function_modes,
)
from .constant import ConstantVariable
from .containers import SequenceVariable, TupleVariable
from .tensor import TensorVariable

__all__ = ["fast_path_handlers"]



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
    return all(isinstance(a, TensorVariable) or (a.is_constant() and a.as_constant() is None)
               for a in items)


def _left_aligned(tx, args, kwargs):
    if _fast_path_module(tx) is not None:
        return ConstantVariable(True)
    raise graph_break("UB105", "`torch._nested_tensor_from_mask_left_aligned` reads the values "
                      "of the mask", frames=tx.user_frames())


def _nested_tensor(fn):
    def handler(tx, args, kwargs):
        module = _fast_path_module(tx)
        where = f"`torch.nn.{module}` converts its input to a nested tensor here (its fast " \
                "path: eval mode, no gradient recorded, a padding mask that pads on the right)" \
            if module else f"`{fn.__name__}` builds a nested tensor"
        raise graph_break(
            "UB108", f"{where}; an exported program holds no nested tensor, and eager's result "
            "differs from the dense path's (zeros at the padded positions)",
            frames=tx.user_frames(),
            hint="Build the encoder with `enable_nested_tensor=False` (eager then runs the same "
                 "layers without the conversion, and export records them), or export and run "
                 "the program with grad mode on and parameters requiring grad (eager's "
                 "differentiable path).")

    return handler


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
