"""Calls into PyTorch functions: leaf calls, with the few functions that need special meaning
during export."""
from __future__ import annotations

import torch

from ..graph_breaks import graph_break
from .constant import ConstantVariable

__all__ = ["call_torch_function"]


def _constant(value):
    return lambda tx, args, kwargs: ConstantVariable(value)


def _refuse_control_flow(name):
    def handler(tx, args, kwargs):
        raise graph_break("UB113", f"`{name}` (control-flow operators are not supported yet)",
                          frames=tx.user_frames())

    return handler


def _check(tx, args, kwargs):
    """``torch._check(cond, msg)``: a constant condition is checked now; a symbolic one is
    recorded by the shape environment as a fact (``expect_true``)."""
    condition = args[0]
    if isinstance(condition, ConstantVariable):
        if not condition.as_constant():
            message = kwargs.get("message") or (args[1] if len(args) > 1 else None)
            text = "torch._check failed"
            if message is not None and hasattr(message, "call"):
                try:
                    text = message.call(tx, [], {}).as_constant()
                except Exception:  # the message itself failed: keep the generic text
                    pass
            raise tx.user_exception(RuntimeError(text))
        return ConstantVariable(None)
    return tx.call_leaf(torch._check, [condition], {})


def _contains_tensor(tracker) -> bool:
    from .tensor import TensorVariable

    if isinstance(tracker, TensorVariable):
        return True
    elements = getattr(tracker, "elements", None)
    return elements is not None and any(_contains_tensor(e) for e in elements)


def _tensor_from_data(name):
    def handler(tx, args, kwargs):
        if args and _contains_tensor(args[0]):
            raise graph_break(
                "UB105", f"`{name}()` of a list that holds tensors reads their values",
                frames=tx.user_frames(),
                details="Use torch.stack([...]) (then .to(dtype) if needed) to build a tensor "
                        "from tensors without reading their values.")
        return tx.call_leaf(getattr(torch, name), args, kwargs)

    return handler


def _global_state(name):
    def handler(tx, args, kwargs):
        raise graph_break("UB107", f"`{name}()` changes PyTorch's global state, which an "
                          "exported program cannot replay", frames=tx.user_frames(),
                          details="Set it before calling the model (and before export).")

    return handler


_GLOBAL_STATE_SETTERS = ("manual_seed", "seed", "set_rng_state", "set_default_dtype",
                         "set_default_device", "set_default_tensor_type",
                         "use_deterministic_algorithms", "set_num_threads",
                         "set_num_interop_threads", "set_printoptions",
                         "set_float32_matmul_precision", "set_flush_denormal")

_SPECIAL = {
    torch.tensor: _tensor_from_data("tensor"),
    torch.as_tensor: _tensor_from_data("as_tensor"),
    torch.compiler.is_compiling: _constant(True),
    torch.compiler.is_exporting: _constant(True),
    torch.jit.is_scripting: _constant(False),
    torch.jit.is_tracing: _constant(False),
    torch._check: _check,
    torch._check_is_size: _check,
    torch.cond: _refuse_control_flow("torch.cond"),
}
for _name in _GLOBAL_STATE_SETTERS:
    for _owner in (torch, torch.random):
        if hasattr(_owner, _name):
            _SPECIAL[getattr(_owner, _name)] = _global_state(f"torch.{_name}")
for _name in ("cond", "map", "while_loop", "scan", "associative_scan"):
    _op = getattr(torch.ops.higher_order, _name, None)
    if _op is not None:
        _SPECIAL[_op] = _refuse_control_flow(f"torch.ops.higher_order.{_name}")


def call_torch_function(tx, fn, args, kwargs):
    """Call the PyTorch callable ``fn`` on trackers."""
    handler = _special(fn)
    if handler is not None:
        return handler(tx, args, kwargs)
    if getattr(fn, "__qualname__", "") == "Function.apply":
        raise graph_break("UB113", "a custom torch.autograd.Function", frames=tx.user_frames())
    return tx.call_leaf(fn, args, kwargs)


def _special(fn):
    """The special handler of ``fn``, looking through wrappers: importing torch._dynamo
    replaces some functions (``torch.manual_seed``) by wrappers with ``__wrapped__``."""
    while fn is not None and _hashable(fn):
        if fn in _SPECIAL:
            return _SPECIAL[fn]
        fn = getattr(fn, "__wrapped__", None)
    return None


def _hashable(fn) -> bool:
    try:
        hash(fn)
    except TypeError:
        return False
    return True
