"""The trace-wide context shared by every translator of one export.

It owns the recorder, the stack of running translators (from which the user's stack is read
for every recorded op, guard and error), the ``nn_module_stack`` scopes, the map from module
objects to their qualified names, and the leaf-call machinery.
"""
from __future__ import annotations

import contextlib
import os
import types

import torch

from ..symbolic.diagnostics import (DataDependentError, InternalError, UnbrokenError,
                                    UnsupportedError)
from .graph_breaks import GraphBreakError, TracedException, graph_break
from .overlay import Overlay
from .variables.base import CREATION_ORDER
from .variables.builder import wrap
from .variables.containers import IteratorVariable

__all__ = ["TraceContext"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_UNBROKEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _is_internal(filename: str) -> bool:
    return filename.startswith((_TORCH_DIR, _UNBROKEN_DIR))


# Exceptions PyTorch's Python code raises as ordinary Python control flow (a missing attribute
# or key), which the traced program may catch like eager code would. Errors of the operators
# themselves (RuntimeError...) are not caught: they are reported as UB120.
_PYTHON_LEVEL = (AttributeError, KeyError, IndexError, StopIteration)
# What PyTorch raises when it rejects a program (operator errors, bad arguments, a failed
# torch._check): reported at the user's line. Any other exception escaping a leaf call is a
# bug in unbroken, reported as InternalError where the instruction is executed.
_PROGRAM_ERRORS = (RuntimeError, TypeError, ValueError, ArithmeticError, LookupError,
                   AssertionError, AttributeError, StopIteration)


def _raised_inside_unbroken(exc: BaseException) -> bool:
    """True when the innermost frame of ``exc``'s traceback is unbroken's own code (a bug
    in unbroken, not an error PyTorch raised for the user's program)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_UNBROKEN_DIR)


class TraceContext:
    """State of one trace.

    recorder:       the ``ir.recorder.Recorder`` building the graph;
    root:           the exported module (or None when a plain function is traced);
    translators:    the running translators, outermost first;
    module_stack:   ``(fqn, type)`` of the modules being called, outermost first;
    branch_starts:  creation stamps at which the open ``torch.cond`` branches began;
    find_all:       "find them all" mode (``find_graph_breaks``): breaks are collected in
                    ``breaks`` and tracing goes on along the path the example inputs take;
    breaks:         the graph breaks collected in that mode, in program order;
    overlay:        writes to objects outside the trace, undone when the trace ends;
    private:        module id -> qualified name (``_paths``), ids of the meta tensors standing
                    for parameters (``_parameters``) and their eager ``requires_grad``
                    (``_requires_grad``), see ``mark_state``.
    """

    def __init__(self, recorder, root=None):
        self.recorder = recorder
        self.root = root
        self.translators: list = []
        self.module_stack: list[tuple[str, type]] = []
        self.branch_starts: list[int] = []  # creation stamps at which open branches began
        # "find them all" mode: breaks are collected here and tracing goes on along the path
        # the example inputs take (the recorder's shadow knows their real values)
        self.find_all = False
        self.breaks: list = []
        self.overlay = Overlay()  # writes to outside objects, to be undone by the trace
        self._paths = {}
        self._parameters: set[int] = set()
        self._requires_grad: dict[int, bool] = {}
        if root is not None:
            for name, module in root.named_modules(remove_duplicate=False):
                self._paths.setdefault(id(module), name)

    # ----------------------------------------------------------------- bookkeeping
    def mark_state(self, meta: torch.Tensor, *, parameter: bool, requires_grad: bool) -> None:
        """Remember what the eager tensor behind ``meta`` was (a Parameter? requires grad?)."""
        if parameter:
            self._parameters.add(id(meta))
        self._requires_grad[id(meta)] = requires_grad

    def is_parameter(self, meta) -> bool:
        return id(meta) in self._parameters

    def requires_grad(self, meta) -> bool:
        return self._requires_grad.get(id(meta), False)

    def module_path(self, module, source) -> str:
        if id(module) in self._paths:
            return self._paths[id(module)]
        return source.path() if source is not None else ""

    # ----------------------------------------------------------------- locations
    def user_frames(self) -> tuple:
        """The user's stack: the frames of running translators outside torch and unbroken."""
        frames = [tx.frame() for tx in self.translators]
        user = tuple(f for f in frames if not _is_internal(f.filename))
        return user or tuple(frames[-1:])

    def nn_module_stack(self) -> dict:
        stack = {}
        for fqn, cls in self.module_stack:
            if not fqn:
                continue  # the exported module itself is not part of the stack (as in torch)
            key = "L__self___" + fqn.replace(".", "_")
            stack[key] = (fqn, f"{cls.__module__}.{cls.__qualname__}")
        return stack

    def recover(self, error) -> bool:
        """In "find them all" mode, note ``error`` and tell the caller to go on with the real
        value; otherwise False (the caller raises)."""
        if not self.find_all:
            return False
        error.with_frames(self.user_frames())
        self.breaks.append(error)
        return True

    def real_value(self, meta):
        """The real tensor behind a meta tensor in "find them all" mode, or None."""
        shadow = self.recorder.shadow
        return None if shadow is None else shadow.value_of(meta)

    @contextlib.contextmanager
    def branch(self):
        """While a torch.cond branch is traced: state created before it is read-only (both
        branches are traced, but only one runs)."""
        self.branch_starts.append(next(CREATION_ORDER))
        try:
            yield
        finally:
            self.branch_starts.pop()

    def created_outside_branch(self, stamp: int) -> bool:
        """True when something stamped ``stamp`` predates the innermost open branch."""
        return bool(self.branch_starts) and stamp < self.branch_starts[-1]

    @contextlib.contextmanager
    def module_scope(self, module_var):
        self.module_stack.append((module_var.fqn, type(module_var.module)))
        try:
            yield
        finally:
            self.module_stack.pop()

    # ----------------------------------------------------------------- leaf calls
    def call_leaf(self, tx, fn, args, kwargs):
        """Call ``fn`` natively on the unwrapped arguments while the recorder records."""
        values = [a.unwrap(tx) for a in args]
        named = {k: v.unwrap(tx) for k, v in kwargs.items()}
        with self.leaf_errors(fn), self.recorder.recording():
            result = fn(*values, **named)
            if isinstance(result, types.GeneratorType):
                result = list(result)
                return IteratorVariable([wrap(tx, v) for v in result])
        return wrap(tx, result)

    @contextlib.contextmanager
    def leaf_errors(self, fn=None):
        """Turn failures inside PyTorch into errors at the user's line."""
        try:
            yield
        except GraphBreakError as exc:
            raise exc.with_frames(self.user_frames())
        except DataDependentError as exc:
            raise graph_break("UB105", exc.message, frames=exc.frames or self.user_frames(),
                              details=exc.details, hint=exc.hint) from None
        except UnsupportedError as exc:
            if exc.code in ("UB114", "UB117", "UB121"):
                raise graph_break(exc.code, exc.message, frames=exc.frames or self.user_frames(),
                                  details=exc.details) from None
            raise exc.with_frames(self.user_frames())
        except UnbrokenError as exc:
            raise exc.with_frames(self.user_frames())
        except _PROGRAM_ERRORS as exc:
            if _raised_inside_unbroken(exc):
                raise InternalError("a leaf call failed inside unbroken",
                                    frames=self.user_frames(), cause=exc) from exc
            if isinstance(exc, _PYTHON_LEVEL):  # e.g. nn.Module.__getattr__: may be caught
                raise TracedException(exc, frames=self.user_frames()) from None
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
            first_line = (str(exc).strip().splitlines() or [""])[0]
            raise graph_break(
                "UB120", f"`{name}` raised {type(exc).__name__}: {first_line}",
                frames=self.user_frames(),
                details=f"{type(exc).__name__}: {exc}\n\nIf the model runs eagerly on these "
                        "inputs, this is a bug in unbroken: please report it.") from exc
