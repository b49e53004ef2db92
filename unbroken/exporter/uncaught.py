"""An uncaught exception of the traced program (UB104), checked against eager execution.

When the interpreter reports that the traced program raised an exception none of its own
``except`` clauses caught, that is the model's failure only if eager execution fails too.
It may instead be unbroken's: a construct the interpreter models differently from CPython
(a method wrapped by ``torch._export.wrap_method``, a ``forward`` replaced on the instance, a
tensor subclass). So before the error reaches the user, the model is run eagerly on copies of
the example inputs and of the model (nothing the user owns changes, the global random state
is restored):

- eager raises too: the error says so ("checked");
- eager returns: the exception is unbroken's bug, raised as ``InternalError``;
- the model or inputs cannot be copied: the error says the claim was not checked.
"""
from __future__ import annotations

import copy

import torch

from ..symbolic.diagnostics import InternalError, UnbrokenError
from ..symbolic.diagnostics.catalogue import TracedException

__all__ = ["checked_against_eager"]

# What deepcopy raises for objects that cannot be copied (pickling protocol refusals,
# non-leaf tensors, C extension objects).
_UNCOPYABLE = (TypeError, RuntimeError, copy.Error, AttributeError, NotImplementedError)


def checked_against_eager(error: TracedException, mod, args, kwargs) -> UnbrokenError:
    """``error`` with what eager execution does on the same inputs in its details, or an
    ``InternalError`` when eager does not fail (see the module docstring)."""
    try:
        model, (eager_args, eager_kwargs) = copy.deepcopy((mod, (args, kwargs)))
    except _UNCOPYABLE as exc:
        return error.add_details(
            f"Whether eager execution fails too was not checked: the model or its inputs "
            f"cannot be copied to run it ({type(exc).__name__}: {exc}).")
    with torch.random.fork_rng(devices=[]):
        try:
            model(*eager_args, **eager_kwargs)
        except Exception as eager:  # the model's own failure, whatever its type
            return error.add_details(
                f"Checked: running the model eagerly on the same inputs fails too "
                f"({type(eager).__name__}: {eager}).")
    raised = error.exception
    return InternalError(
        f"the traced program raised {type(raised).__name__}: {raised}, which eager execution "
        "on the same inputs does not raise", frames=error.frames, cause=raised)
