"""Entry points of the frontend: trace a module call, or interpret a pure-Python function."""
from __future__ import annotations

from ..ir.recorder import Recorder
from .output import TraceContext
from .translator import InstructionTranslator, check_python_version
from .variables.builder import wrap
from .variables.containers import DictVariable, TupleVariable

__all__ = ["trace_call", "interpret", "entry_translator"]


def _entry(callee, args, kwargs):
    return callee(*args, **kwargs)


def entry_translator(output: TraceContext, callee, args, kwargs) -> InstructionTranslator:
    """A translator that calls ``callee(*args, **kwargs)``; its own frame is internal to
    unbroken and never shown in the user's stack."""
    code = _entry.__code__
    return InstructionTranslator(output, code, _entry.__globals__,
                                 {"callee": callee, "args": args, "kwargs": kwargs}, (),
                                 "export")


def trace_call(output: TraceContext, callee, args: list, kwargs: dict):
    """Interpret ``callee(*args, **kwargs)`` where all three are trackers (or values to wrap);
    returns the result tracker and the entry translator (for unwrapping)."""
    check_python_version()
    tx = entry_translator(output, None, None, None)
    tx.locals = {"callee": wrap(tx, callee), "args": TupleVariable([wrap(tx, a) for a in args]),
                 "kwargs": DictVariable({k: wrap(tx, v) for k, v in kwargs.items()})}
    return tx.run(), tx


def interpret(fn, *args, **kwargs):
    """Run the pure-Python function ``fn`` through the interpreter and return its result.

    This is the oracle entry used to test the interpreter against CPython: constants in,
    constants out. Tensors are not expected (use ``unbroken.export`` for models).

    Example::

        >>> interpret(lambda a, b: [a * i for i in range(b)], 3, 3)
        [0, 3, 6]
    """
    recorder = Recorder()
    output = TraceContext(recorder)
    recorder.frames_provider = output.user_frames
    recorder.module_stack_provider = output.nn_module_stack
    result, tx = trace_call(output, fn, list(args), dict(kwargs))
    return result.unwrap(tx)
