"""NumPy on Python values: computed at trace time, as constants.

(NumPy on traced values, arrays from ``x.numpy()``, is ``variables.ndarray``'s.)

Library code plans with NumPy on sizes it knows (BigBird's block-sparse attention:
``np.array(plan_from_length) // from_block_size``, ``np.zeros``, ``np.stack``, ``np.sum``) and
turns the result into a tensor (``torch.tensor(plan)``). With every argument a Python constant
the result is a constant of the trace, so the call runs natively. NumPy never sees a traced
value: a tensor or a dynamic size in the arguments is refused (UB108), and so is
``numpy.random`` (its global generator is process state that eager advances on every call).

Arrays are kept read-only (a copy): an in-place write to one raises instead of changing an
array that the trace treated as a constant.
"""
from __future__ import annotations

import sys

from ...symbolic.diagnostics.catalogue import graph_break
from .base import VariableTracker
from .native import NativeCallableVariable

__all__ = ["NumpyCallVariable", "freeze", "is_numpy_callable", "is_numpy_type",
           "is_numpy_value"]


def _numpy():
    return sys.modules.get("numpy")  # no NumPy value exists unless NumPy was imported


def is_numpy_value(value) -> bool:
    """An ndarray, a NumPy scalar or a dtype (immutable: ``a.dtype == np.float32`` folds)."""
    np = _numpy()
    return np is not None and isinstance(value, (np.ndarray, np.generic, np.dtype))


def is_numpy_type(kind: type) -> bool:
    """Whether ``is_numpy_value`` holds for the instances of ``kind`` (asked of the class)."""
    np = _numpy()
    return np is not None and issubclass(kind, (np.ndarray, np.generic, np.dtype))


def is_numpy_callable(value) -> bool:
    """A NumPy function (C builtin, dispatcher, ufunc) or a bound ``numpy.random`` method."""
    if isinstance(value, type) or not callable(value):
        return False
    return (getattr(value, "__module__", None) or "").split(".")[0] == "numpy"


def freeze(value):
    """``value`` with every ndarray in it replaced by a read-only copy."""
    np = _numpy()
    if np is not None and isinstance(value, np.ndarray):
        value = value.copy()
        value.setflags(write=False)
        return value
    if type(value) in (tuple, list):
        return type(value)(freeze(v) for v in value)
    return value


class NumpyCallVariable(NativeCallableVariable):
    """A NumPy function: called natively when every argument is a Python constant."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", "?")
        module = getattr(self.fn, "__module__", None) or "numpy"
        if module.startswith("numpy.random"):
            raise graph_break("UB103", f"`numpy.random.{name}` is called: NumPy's global random "
                              "generator is process state that each eager call advances",
                              frames=tx.user_frames(),
                              details="Use torch's random functions (recorded in the graph).")
        if any(not a.is_constant() for a in [*args, *kwargs.values()]):
            # traced values: run through torch's NumPy-on-torch (variables.ndarray)
            return tx.output.call_numpy(tx, self.fn, args, kwargs)
        try:
            result = self.fn(*(a.as_constant() for a in args),
                             **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as exc:  # the program's own error (bad shapes...), at its line
            raise tx.user_exception(exc) from None
        return tx.wrap(freeze(result))
