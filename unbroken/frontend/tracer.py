"""Entry points of the frontend: trace a module call, or interpret a pure-Python function."""
from __future__ import annotations

import torch

from ..ir.recorder import Recorder
from ..symbolic.diagnostics import frame_from_code
from ..symbolic.torch_compat import export_flags
from .output import TraceContext
from .sources import LocalSource
from .trace_site import TraceSite
from .translator import InstructionTranslator, check_python_version
from .variables.builder import wrap
from .variables.containers import DictVariable, TupleVariable
from .variables.nn_module import write_back_buffers

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


def trace_call(output: TraceContext, callee, args: list, kwargs: dict, *,
               inputs_are_external: bool = True):
    """Interpret ``callee(*args, **kwargs)`` where all three are trackers (or values to wrap);
    returns the result tracker and the entry translator (for unwrapping).

    inputs_are_external: the caller keeps the input lists/dicts, so mutating them would be a
    side effect the program cannot replay (refused, UB107). ``interpret`` passes False: its
    oracle tests compare the results only.
    """
    check_python_version()
    tx = entry_translator(output, None, None, None)

    def source(name):
        return LocalSource(name) if inputs_are_external else None

    tx.locals = {"callee": wrap(tx, callee),
                 "args": TupleVariable([wrap(tx, a, source(f"args[{i}]"))
                                        for i, a in enumerate(args)]),
                 "kwargs": DictVariable({k: wrap(tx, v, source(k)) for k, v in kwargs.items()})}
    try:
        with export_flags():  # torch's code run natively asks them too
            result = tx.run()
        output.check_context_vars_restored(_definition(callee))  # before they are reset
        write_back_buffers(tx)
    finally:
        output.exit_native_contexts()
    output.overlay.check_restored()
    output.overlay.warn_changed_state()
    output.check_grad_mode_restored()
    output.check_settings_restored(_definition(callee))
    return result, tx


def _definition(callee) -> tuple:
    """The frame of the first line of ``callee``'s Python function (a module's ``forward``),
    or ``()``: where a diagnostic about the whole call points."""
    function = getattr(type(callee), "forward", None) if isinstance(callee, torch.nn.Module) \
        else callee
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is None:
        return ()
    return (frame_from_code(code.co_filename, code.co_firstlineno, code.co_name),)


def interpret(fn, *args, **kwargs):
    """Run the pure-Python function ``fn`` through the interpreter and return its result.

    This is the oracle entry used to test the interpreter against CPython: constants in,
    constants out. Tensors are not expected (use ``unbroken.export`` for models).

    Example::

        >>> interpret(lambda a, b: [a * i for i in range(b)], 3, 3)
        [0, 3, 6]
    """
    site = TraceSite()
    recorder = Recorder(frames_provider=site.user_frames,
                        module_stack_provider=site.nn_module_stack,
                        custom_provider=site.custom_meta)
    output = TraceContext(recorder, site)
    result, tx = trace_call(output, fn, list(args), dict(kwargs), inputs_are_external=False)
    return result.unwrap(tx)
