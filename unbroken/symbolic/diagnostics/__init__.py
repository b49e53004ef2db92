"""Error types and user locations shared by every stage.

This module sits in the lowest layer (``symbolic``) so that every other layer can raise and
format the same errors. A user-facing error always prints, in this order:

1. ``[UBxxx] <what went wrong>`` — the stable id and a one-line explanation;
2. the user's stack — file, line and source text for every user frame, innermost last;
3. details (guards, counterexamples, the original exception text, ...);
4. ``Fix:`` — how to make the export work.

Internal class names (trackers, nodes) never appear in a message.
"""
from __future__ import annotations

import linecache
import zipfile
from dataclasses import dataclass, field

__all__ = [
    "UserFrame",
    "PathCondition",
    "describe_path",
    "UnbrokenError",
    "RefusalError",
    "ExportUsageError",
    "InputMismatchError",
    "ConstraintViolationError",
    "ViolatedGuard",
    "DataDependentError",
    "UnsupportedError",
    "InternalError",
    "SerializationError",
    "frame_from_code",
]

BUG_NOTE = (
    "This is a bug in unbroken, not in your model. Please report it with the stack above "
    "and a small model that reproduces it."
)


@dataclass(frozen=True, slots=True)
class UserFrame:
    """One frame of the user's code that was executing when something happened.

    filename: absolute path of the user's source file.
    lineno:   1-based line number in that file.
    function: the name of the function (``co_name``).
    source:   the stripped source text of that line ('' when the file cannot be read).
    """

    filename: str
    lineno: int
    function: str
    source: str = ""

    def format(self) -> str:
        head = f'  File "{self.filename}", line {self.lineno}, in {self.function}'
        return f"{head}\n    {self.source}" if self.source else head

    def short(self) -> str:
        """``file.py:12`` — for tables."""
        return f"{self.filename.rsplit('/', 1)[-1]}:{self.lineno}"


@dataclass(frozen=True, slots=True)
class PathCondition:
    """One decision on tensor data on the path to a finding (``find_graph_breaks`` explores
    both sides of each; see ``docs/ci.md``, "Every path").

    source_text: the condition as written in the user's code (``x.sum() > 0``).
    taken:       the side the path takes: True for the ``if`` body, the loop's next iteration,
                 the assert passing; False for the other side.
    file, line:  where the condition is (the user's file, 1-based line).
    occurrence:  which evaluation of that condition on the path (1 for the first; a loop's
                 second test is 2).
    """

    source_text: str
    taken: bool
    file: str
    line: int
    occurrence: int = 1

    def describe(self) -> str:
        """```x.sum() > 0`` is False` (``(evaluation 2)`` added after the first)."""
        again = f" (evaluation {self.occurrence})" if self.occurrence > 1 else ""
        return f"`{self.source_text}` is {self.taken}{again}"

    def to_dict(self) -> dict:
        return {"condition": self.source_text, "taken": self.taken, "file": self.file,
                "line": self.line, "occurrence": self.occurrence}


def describe_path(conditions) -> str:
    """``on the path where `a` is True and `b` is False`` ('' for no condition)."""
    if not conditions:
        return ""
    where = [f"{c.describe()} ({c.file.rsplit('/', 1)[-1]}:{c.line})" for c in conditions]
    return "on the path where " + " and ".join(where)


def frame_from_code(filename: str, lineno: int | None, function: str) -> UserFrame:
    """Build a :class:`UserFrame`, reading the source line through ``linecache``."""
    line = linecache.getline(filename, lineno).strip() if lineno else ""
    return UserFrame(filename, lineno or 0, function, line)


def format_stack(frames) -> str:
    """A user stack in Python's traceback style, innermost frame last."""
    return "\n".join(f.format() for f in frames)


class UnbrokenError(Exception):
    """Root of every error unbroken raises: ``except unbroken.UnbrokenError`` catches them all.

    It has exactly two kinds of subclass, and code that must tell them apart catches one:

    - :class:`RefusalError`: raised on purpose; the model, the call or a file is outside what
      unbroken accepts, and the message says how to change it;
    - :class:`InternalError`: a bug in unbroken itself (never the user's fault).

    Attributes:
        code:    stable diagnostic id (``UB001`` ...); see ``docs/graph-breaks.md``.
        message: one or two sentences: what went wrong, in the user's terms.
        frames:  the user's stack (``UserFrame`` tuple, innermost last); may be empty when the
                 error is about the call itself (wrong arguments) rather than a line of model code.
        details: extra lines printed after the stack (guards, counterexamples, causes).
        hint:    how to fix it.

    ``torch_also`` (constructor only): exception classes torch.export raises for this
    occurrence besides the class's own (``_torch_equivalents``), e.g. ``TypeError`` for
    example inputs that do not bind to ``forward``'s signature.
    """

    default_code = "UB000"
    path_conditions: tuple = ()  # PathCondition tuple: the path it was found on (see on_path)

    #: The exception classes ``torch.export`` raises in this error's situation: classes, names
    #: of ``torch_compat.torch_exception_class`` or ``"UserError:<UserErrorType>"``. The error
    #: is also an instance of them once it leaves unbroken (:mod:`.drop_in`).
    _torch_equivalents: tuple = ()

    def __init__(self, message: str, *, code: str | None = None, frames=(), details: str = "",
                 hint: str = "", torch_also: tuple = ()):
        if torch_also:  # this occurrence is also what torch raises here (TypeError...)
            self._torch_equivalents = type(self)._torch_equivalents + tuple(torch_also)
        self.code = code or self.default_code
        self.message = message
        self.frames = tuple(frames)
        self.details = details
        self.hint = hint
        super().__init__(self.render())

    def torch_equivalents(self) -> tuple:
        """The torch exception classes of this error's situation (see ``_torch_equivalents``;
        a subclass may answer per occurrence, e.g. by catalogue id)."""
        return self._torch_equivalents

    def __reduce__(self):
        return _restore, (type(self), self.args, dict(self.__dict__))

    @property
    def location(self) -> UserFrame | None:
        """The innermost user frame, or None."""
        return self.frames[-1] if self.frames else None

    def with_frames(self, frames) -> UnbrokenError:
        """Attach a user stack when the error was raised without one; returns self."""
        if not self.frames and frames:
            self.frames = tuple(frames)
            self.args = (self.render(),)
        return self

    def on_path(self, conditions) -> UnbrokenError:
        """Set the decisions on tensor data of the path this was found on (``PathCondition``
        tuple, outermost first; empty: no such decision leads to it); returns self."""
        self.path_conditions = tuple(conditions)
        self.args = (self.render(),)
        return self

    def add_details(self, text: str) -> UnbrokenError:
        """Append a paragraph to the details; returns self."""
        self.details = f"{self.details}\n\n{text}" if self.details else text
        self.args = (self.render(),)
        return self

    def render(self) -> str:
        parts = [f"[{self.code}] {self.message}"]
        if self.path_conditions:
            parts.append(f"Found {describe_path(self.path_conditions)}.")
        if self.frames:
            parts.append(format_stack(self.frames))
        if self.details:
            parts.append(self.details)
        if self.hint:
            parts.append(f"Fix: {self.hint}")
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict:
        """Machine-readable form, used by the CLI's JSON report (``path_conditions`` only when
        the error was found on a path with decisions on tensor data)."""
        data = {
            "code": self.code,
            "kind": type(self).__name__,
            "message": self.message,
            "frames": [
                {"file": f.filename, "line": f.lineno, "function": f.function, "source": f.source}
                for f in self.frames
            ],
            "details": self.details,
            "hint": self.hint,
        }
        if self.path_conditions:
            data["path_conditions"] = [c.to_dict() for c in self.path_conditions]
        return data


def _restore(cls, args, state: dict):
    """Unpickle an :class:`UnbrokenError` (its ``__init__`` takes other arguments than
    ``args``): its ``args`` and ``__dict__`` as they were."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class RefusalError(UnbrokenError):
    """Base of every error unbroken raises on purpose: export (or loading, or running a
    program) refused, with the user's location and the fix. Graph breaks, constraint
    violations, usage errors, input mismatches and unreadable files are refusals; an
    :class:`InternalError` is not."""

    default_code = "UB000"


class ExportUsageError(RefusalError):
    """The call to ``export()`` (or to a program it returned) was malformed: wrong argument
    count, a ``dynamic_shapes`` spec that does not match the inputs, an unsupported input type."""

    default_code = "UB001"
    _torch_equivalents = ("UserError:INVALID_INPUT",)


class InputMismatchError(RefusalError):
    """An input given to ``ExportedProgram.module()`` violates what the program was exported for
    (count, dtype, a specialized size, a dynamic dim's range)."""

    default_code = "UB002"
    _torch_equivalents = (AssertionError,)  # torch's module(): "Guard failed: ..."


@dataclass(frozen=True, slots=True)
class ViolatedGuard:
    """One guard on input sizes that the ``dynamic_shapes`` spec does not imply.

    guard:          the condition in the user's terms (``"w.shape[1] == 5"``).
    counterexample: sizes the spec admits for which the guard fails (source text -> value);
                    empty when the solver gave none.
    frames:         the user's stack where the guard was made (``UserFrame`` tuple).
    """

    guard: str
    counterexample: dict = field(default_factory=dict)
    frames: tuple = ()

    def to_dict(self) -> dict:
        where = self.frames[-1] if self.frames else None
        return {"guard": self.guard, "counterexample": dict(self.counterexample),
                "file": where.filename if where else None, "line": where.lineno if where else None,
                "source": where.source if where else None}


class ConstraintViolationError(RefusalError):
    """The model's code constrains a dimension that ``dynamic_shapes`` declared dynamic.

    Besides the message, the error carries its content as data:

    violations:               the guards the spec does not imply (``ViolatedGuard`` tuple).
    suggested_dynamic_shapes: a spec that ``export`` accepts as is and that has been proven and
                              verified by exporting again, or None when none was found.
    suggested_code:           the same spec as Python code to paste ('' when None).
    """

    default_code = "UB003"
    _torch_equivalents = ("UserError:CONSTRAINT_VIOLATION", "ConstraintViolationError")

    def __init__(self, message: str, *, violations=(), suggested_dynamic_shapes=None,
                 suggested_code: str = "", **kwargs):
        self.violations = tuple(violations)
        self.suggested_dynamic_shapes = suggested_dynamic_shapes
        self.suggested_code = suggested_code
        super().__init__(message, **kwargs)

    def to_dict(self) -> dict:
        data = UnbrokenError.to_dict(self)
        data["violations"] = [v.to_dict() for v in self.violations]
        data["suggested_dynamic_shapes"] = self.suggested_code or None
        return data


class DataDependentError(RefusalError):
    """A decision depends on the value inside a tensor, which is unknown at export time."""

    default_code = "UB004"
    _torch_equivalents = ("UserError:ANTI_PATTERN", "GuardOnDataDependentSymNode")


class UnsupportedError(RefusalError):
    """A construct that is valid Python/PyTorch but that unbroken cannot capture soundly yet."""

    default_code = "UB005"
    _torch_equivalents = ("Unsupported",)


class SerializationError(RefusalError):
    """A saved program is corrupt, from an unknown format version, or names an unknown op."""

    default_code = "UB006"
    _torch_equivalents = (RuntimeError, zipfile.BadZipFile)


class InternalError(UnbrokenError):
    """A failure inside unbroken itself; always carries the user location and the bug note.

    Not a :class:`RefusalError`: no caller may treat it as "the model is unsupported" (list
    it as a graph break, drop it as a failed attempt, or report it as a corrupt file)."""

    default_code = "UB999"

    def __init__(self, message: str, *, frames=(), cause: BaseException | None = None):
        details = f"Cause: {type(cause).__name__}: {cause}" if cause is not None else ""
        super().__init__(f"Internal error in unbroken: {message}", frames=frames, details=details,
                         hint=BUG_NOTE)
