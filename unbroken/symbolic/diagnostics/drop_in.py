"""unbroken's errors, as they leave unbroken, are also torch's: ``except`` clauses written for
``torch.export`` keep working.

Each error class names the torch exception classes that ``torch.export`` raises in the same
situation (:attr:`UnbrokenError.torch_equivalents`; the table is ``docs/user-guide.md``,
"Errors", and ``tests/symbolic/test_drop_in_errors.py`` checks every row against what torch
raises). :func:`torch_compatible` turns one error into an instance of a subclass of its own
class and of those torch classes, made once per combination::

    try:
        ep = unbroken.export(model, args, dynamic_shapes=spec)
    except torch._dynamo.exc.UserError as err:  # an unbroken.ConstraintViolationError
        assert err.error_type == torch._dynamo.exc.UserErrorType.CONSTRAINT_VIOLATION

Why at the boundary and not in the class statement:

- *Import time.* torch's classes live in ``torch._dynamo.exc``, whose import loads
  ``torch._dynamo`` (about 1.4 s cold). The subclass is made when the first error leaves, by
  which time an export has loaded it anyway.
- *Soundness inside.* unbroken and torch catch ``RuntimeError``, ``AssertionError`` and
  ``GuardOnDataDependentSymNode`` internally (torch's meta kernels fall back on the latter).
  Were a graph break a ``RuntimeError`` from the start, such a handler could swallow it on the
  way out. The public entry points (``export``, ``ExportedProgram.module()``'s checks,
  ``save``/``load``...) convert with :func:`torch_compatible_errors`; inside, the classes are
  unbroken's own.

``isinstance(err, unbroken.ConstraintViolationError)`` and every ``except`` of unbroken's
classes behave as before; ``type(err).__name__`` is unchanged; the error pickles (back to the
same compatible class). The attributes torch's classes carry are there: ``error_type``
(``UserError``), ``msg``, ``real_stack`` (the user's frames), ``cond`` (None: unbroken's
conditions are not torch's sympy expressions).
"""
from __future__ import annotations

import functools
import traceback

from ..torch_compat import torch_exception_class, user_error_type
from . import UnbrokenError, _restore

__all__ = ["torch_compatible", "torch_compatible_errors"]

_CLASSES: dict[tuple, type] = {}


def torch_compatible(error: BaseException) -> BaseException:
    """Make ``error`` (an :class:`UnbrokenError`; anything else is returned as is) an instance
    of the torch exception classes of its :meth:`~UnbrokenError.torch_equivalents` too, in
    place; returns it."""
    if not isinstance(error, UnbrokenError) or type(error).__dict__.get("_torch_compatible"):
        return error
    equivalents = error.torch_equivalents()
    if not equivalents:
        return error
    key = (type(error), equivalents)
    if key not in _CLASSES:
        _CLASSES[key] = _compatible_class(type(error), equivalents)
    try:
        error.__class__ = _CLASSES[key]
    except TypeError:  # a layout the class cannot take (never for the classes in the table)
        pass
    return error


def torch_compatible_errors(function):
    """Decorate a public entry point: an :class:`UnbrokenError` it raises leaves
    :func:`torch_compatible`."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except UnbrokenError as error:
            torch_compatible(error)
            raise

    return wrapper


def _compatible_class(cls: type, equivalents: tuple) -> type:
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                 "__doc__": cls.__doc__, "_torch_compatible": True, **_TORCH_ATTRIBUTES}
    bases: list[type] = []
    for entry in equivalents:
        base, error_type = _resolve(entry)
        if error_type is not None:
            namespace["error_type"] = error_type
        if issubclass(cls, base) or base in bases:
            continue
        try:  # a user's exception type (UB104) may not combine (OSError's layout): leave it out
            type("_Probe", (cls, *bases, base), {})
        except TypeError:
            continue
        bases.append(base)
    return type(cls.__name__, (cls, *bases), namespace)


def _resolve(entry) -> tuple[type, object]:
    """``(class, UserErrorType member or None)`` of a :attr:`torch_equivalents` entry: a
    class, a name of ``torch_compat.torch_exception_class``, or ``"UserError:KIND"``."""
    if isinstance(entry, type):
        return entry, None
    name, _, kind = entry.partition(":")
    return torch_exception_class(name), (user_error_type(kind) if kind else None)


def _reduce(error):
    """Pickle as the plain class, restored as a compatible one (the class made here is not
    importable by name)."""
    plain = next(c for c in type(error).__mro__ if not c.__dict__.get("_torch_compatible"))
    return _restore_compatible, (plain, error.args, dict(error.__dict__))


def _restore_compatible(cls, args, state: dict):
    return torch_compatible(_restore(cls, args, state))


def _real_stack(error) -> traceback.StackSummary:
    return traceback.StackSummary.from_list(
        [(f.filename, f.lineno, f.function, f.source) for f in error.frames])


#: What torch's classes set in their ``__init__`` (never run for ours), as class defaults.
_TORCH_ATTRIBUTES = {
    "__reduce__": _reduce,
    "msg": property(lambda self: self.render(), doc="The full message (torch's ``msg``)."),
    "real_stack": property(_real_stack, doc="The user's frames (torch's ``real_stack``)."),
    "gb_type": property(lambda self: self.code, doc="The diagnostic id (torch's ``gb_type``)."),
    "case_name": None, "skip_frame": False, "logged": False, "category": None, "cond": None,
    "_torch_dynamo_tracer_output": None, "frame_exec_strategy": None,
}
