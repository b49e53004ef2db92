"""The instruction translator: executes one code object symbolically.

State: a value stack of trackers, the locals, the cells (cell and free variables), and the
instruction pointer. Instructions are decoded once per code object (``frontend.decoding``:
jumps resolved to instruction indices) and dispatched by opcode name through the handler
table in ``frontend.opcodes``. Calls into user code create a child translator
(inlining); calls into PyTorch are leaf calls recorded by the recorder.

Exceptions the traced program raises (``TracedException``: a ``raise``, a failed ``d[k]``...)
are delivered to its own ``except``/``finally`` handlers as CPython's exception table says
(``decoding.Handler``, decoded per instruction); one that no handler catches fails the
export as UB104.
Unbroken's refusals (any other ``UnbrokenError``) are never delivered to the program's
handlers, and any other exception escaping an opcode handler is a bug in unbroken
(``InternalError``).
"""
from __future__ import annotations

import inspect

from ..symbolic.diagnostics import (
    ExportUsageError,
    InternalError,
    UnbrokenError,
    frame_from_code,
)
from ..symbolic.diagnostics.catalogue import TracedException, graph_break
from .budget import CLOCK_EVERY, TraceStopped, loop_statement_line
from .decoding import Instruction, decode
from .opcodes import HANDLERS
from .opcodes.arithmetic import apply_binary
from .opcodes.versions import python_support_error
from .sources import GlobalSource
from .trace_site import is_internal
from .variables.base import VariableTracker
from .variables.builder import wrap
from .variables.containers import GeneratorVariable, dict_key
from .variables.functions import CellVariable

__all__ = ["InstructionTranslator", "decode"]

MAX_INLINE_DEPTH = 64
_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def check_python_version() -> None:
    """Fail closed on interpreters whose bytecode we do not implement: one usage error
    (UB119), raised before any tracing."""
    problem = python_support_error()
    if problem is not None:
        raise ExportUsageError(problem, code="UB119",
                               hint="Install unbroken under a supported CPython and run it there.")


_OPCODE_HANDLERS: dict = {}


def handlers_of(code) -> list:
    """The opcode handler of each instruction of ``decode(code)`` (None where the opcode has
    none: a graph break when reached), looked up once per code object."""
    cached = _OPCODE_HANDLERS.get(code)
    if cached is None:
        cached = _OPCODE_HANDLERS[code] = [HANDLERS.get(i.name) for i in decode(code)]
    return cached


class InstructionTranslator:
    """Executes one code object. See the module docstring. It is the ``Interpreter`` that
    every tracker method receives as ``tx``.

    output:    the trace-wide context (recorder, module scopes, user stack);
    code:      the code object; f_globals: its globals;
    locals:    name -> tracker, initially the bound arguments;
    cells:     name -> CellVariable for the free variables (the closure) and, once MAKE_CELL
               ran, the cell variables;
    name:      qualified function name, for messages;
    parent:    the calling translator (None for the traced entry point).
    """

    def __init__(self, output, code, f_globals, f_locals, closure, name, parent=None):
        self.output = output
        self.code = code
        self.f_globals = f_globals
        self.locals: dict[str, VariableTracker] = dict(f_locals)
        self.cells: dict[str, CellVariable] = dict(zip(code.co_freevars, closure))
        self.name = name
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.instructions = decode(code)
        self._frames: dict = {}  # line -> UserFrame (frame())
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.lineno = code.co_firstlineno
        self.kw_names: tuple = ()
        self.returned: VariableTracker | None = None
        self.paused = False          # a generator stopped at RETURN_GENERATOR or YIELD_VALUE
        self.yielded: VariableTracker | None = None
        self.current_exception: VariableTracker | None = None  # inside an except block
        self.loop_line: int | None = None  # first line of the last loop that jumped back
        self.back_jumps = 0  # loop iterations run in this frame

    # ----------------------------------------------------------------- running
    def run(self) -> VariableTracker:
        """Run to the return; returns the returned tracker (None if a generator paused)."""
        self._loop()
        return self.returned

    def resume(self) -> VariableTracker | None:
        """Continue a paused generator until its next yield (returns the yielded tracker) or
        its return (returns None)."""
        self.paused = False
        self._loop()
        return self.yielded if self.paused else None

    def _loop(self) -> None:
        self.output.site.translators.append(self)
        # the hot loop: everything it reads per instruction is looked up once here, and the
        # instruction count is kept inline (a call per instruction was a tenth of its cost)
        instructions, handlers = self.instructions, handlers_of(self.code)
        meter = self.output.meter
        try:
            while self.returned is None and not self.paused:
                ip = self.ip
                instruction = instructions[ip]
                self.ip = ip + 1
                if instruction.lineno is not None:
                    self.lineno = instruction.lineno
                meter.count += 1
                if not meter.count % CLOCK_EVERY:
                    exhausted = meter.exhausted()
                    if exhausted is not None:
                        self._out_of_budget(exhausted)
                if instruction.target is not None and instruction.target <= ip:
                    self.loop_line = instructions[instruction.target].lineno
                    self.back_jumps += 1
                handler = handlers[ip]
                if handler is None:
                    raise graph_break("UB100", f"the instruction {instruction.name} "
                                      f"({_describe_instruction(instruction)})")
                try:
                    handler(self, instruction)
                except Exception as exc:
                    self._handle(exc, instruction)
        finally:
            self.output.site.translators.pop()
        return self.returned

    def _out_of_budget(self, exhausted: str):
        """Refuse (UB122) at the loop that used the budget: of the running frames of the
        user's code, the one that iterated most, shown at its loop's first line (a loop in
        torch's or unbroken's code, ``itertools.count``'s equivalent, is the user's call)."""
        frames = list(self.user_frames())
        looping = [tx for tx in self.output.site.translators
                   if tx.back_jumps and not is_internal(tx.code.co_filename)]
        if looping:
            tx = max(looping, key=lambda t: t.back_jumps)
            frame = tx.frame()
            lineno = loop_statement_line(tx.code.co_filename, tx.loop_line)
            line = frame_from_code(tx.code.co_filename, lineno, tx.code.co_name)
            # the stack ends at that loop: a helper it happens to be calling is not the cause
            frames = frames[:frames.index(frame)] + [line] if frame in frames else [line]
        raise graph_break("UB122", f"tracing used up its budget of {exhausted} "
                          "(a loop that does not end at export time?)", frames=tuple(frames))

    def handle_exception(self, exc: Exception, instruction) -> None:
        """``exc`` raised at ``instruction``: see :meth:`_handle` (a generator's ``throw``
        raises at the paused ``yield``)."""
        self._handle(exc, instruction)

    def _handle(self, exc: Exception, instruction) -> None:
        """An exception out of ``instruction``'s handler: delivered to the program's own
        ``except`` (a ``TracedException`` a handler covers), else raised with the user's
        location; anything but unbroken's errors is a bug in unbroken (``InternalError``). A
        requested stop passes (``TraceStopped``)."""
        if isinstance(exc, TracedException):
            if not self._unwind_to_handler(instruction, exc):
                raise exc.with_frames(self.user_frames()) from None
            return
        if isinstance(exc, UnbrokenError):
            raise exc.with_frames(self.user_frames()) from None
        if isinstance(exc, TraceStopped):
            raise exc
        if isinstance(exc, RecursionError):
            raise graph_break("UB118", "Python's recursion limit was reached",
                              frames=self.user_frames()) from None
        # a bug in unbroken: wrap it with the user's location
        raise InternalError(f"while executing {instruction.name} in `{self.name}`",
                            frames=self.user_frames(), cause=exc) from exc

    def _unwind_to_handler(self, instruction, exc: TracedException) -> bool:
        """Deliver ``exc`` to the ``except``/``finally`` handler covering ``instruction``, as
        CPython's exception table says; False when no handler covers it."""
        handler = instruction.handler
        if handler is None:
            return False
        del self.stack[handler.depth:]
        if handler.push_lasti:
            self.push(wrap(self, self.ip - 1))
        self.push(wrap(self, exc.exception))
        self.ip = handler.target
        return True

    def jump(self, instruction) -> None:
        self.ip = instruction.target

    # ----------------------------------------------------------------- stack
    def push(self, value: VariableTracker) -> None:
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    # ----------------------------------------------------------------- locations
    def frame(self):
        """The frame this translator is at (its current line); one object per line, since
        every recorded op asks for the whole stack."""
        frame = self._frames.get(self.lineno)
        if frame is None:
            code = self.code
            key = (code.co_filename, self.lineno, code.co_name)
            known = self.output.site.frames  # the trace's: a function called again (each
            frame = known.get(key)           # layer's) reads its lines once per trace
            if frame is None:
                frame = known[key] = frame_from_code(*key)
            self._frames[self.lineno] = frame
        return frame

    def user_frames(self) -> tuple:
        """The user's stack, outermost first, ending at this translator's current line."""
        return self.output.user_frames()

    def user_exception(self, exc: BaseException) -> TracedException:
        """An exception the traced program itself raises (eager would too); the program's own
        handlers may catch it."""
        return TracedException(exc, frames=self.user_frames())

    # ----------------------------------------------------------------- calls
    def call_leaf(self, fn, args, kwargs) -> VariableTracker:
        """Call ``fn`` natively on unwrapped arguments while the recorder records."""
        return self.output.call_leaf(self, fn, args, kwargs)

    def inline_call(self, code, f_globals, bound, closure, name) -> VariableTracker:
        """Run a user function's code in a child translator and return its result."""
        if code.co_flags & _ASYNC_FLAGS:
            raise graph_break("UB106", f"`{name}` is a coroutine or an async generator",
                              frames=self.user_frames())
        if self.depth >= MAX_INLINE_DEPTH:
            raise graph_break("UB118", f"calls nested deeper than {MAX_INLINE_DEPTH} levels "
                              f"(calling `{name}`)", frames=self.user_frames())
        child = InstructionTranslator(self.output, code, f_globals, bound, closure, name, self)
        if code.co_flags & inspect.CO_GENERATOR:
            child.run()  # stops at RETURN_GENERATOR: the body runs lazily, on each next()
            return GeneratorVariable(child)
        return child.run()

    def wrap(self, value, source=None) -> VariableTracker:
        """The tracker for a Python value met while running this code (see ``Interpreter``)."""
        return wrap(self, value, source)

    def binary_op(self, symbol: str, left, right) -> VariableTracker:
        return apply_binary(self, symbol, left, right)

    def key_of(self, value: VariableTracker):
        return dict_key(value, self)

    def zero_arg_super(self):
        """(class, receiver) for a bare ``super()`` call in this frame."""
        cell = self.cells.get("__class__")
        if cell is None or cell.contents is None or not self.code.co_varnames:
            raise graph_break("UB117", "`super()` outside a method", frames=self.user_frames())
        first = self.code.co_varnames[0]
        receiver = self.locals.get(first)
        if receiver is None and first in self.cells:
            receiver = self.cells[first].contents
        return cell.contents.as_constant(), receiver

    def load_global(self, name: str) -> VariableTracker:
        if name in self.f_globals:
            return wrap(self, self.f_globals[name], GlobalSource(name))
        builtins_ = self.f_globals.get("__builtins__", __builtins__)
        table = builtins_ if isinstance(builtins_, dict) else vars(builtins_)
        if name in table:
            return wrap(self, table[name])
        raise self.user_exception(NameError(f"name '{name}' is not defined"))


def _describe_instruction(instruction: Instruction) -> str:
    names = {
        "GET_AWAITABLE": "`await`", "GET_AITER": "`async for`", "BEFORE_ASYNC_WITH": "`async with`",
        "SETUP_ANNOTATIONS": "annotations", "PRINT_EXPR": "interactive printing",
        "STORE_NAME": "module-level code", "LOAD_NAME": "module-level code",
    }
    return names.get(instruction.name, "not supported yet")
