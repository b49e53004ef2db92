"""Export cases: the one-line declaration that ``unbroken check`` runs.

A user's Python file declares what it wants exported, one line per model::

    import torch, unbroken

    model = MyModel().eval()
    unbroken.case(model, (torch.randn(8, 100),))
    unbroken.case(model, (torch.randn(8, 100),), dynamic_shapes={"x": {0: Dim("batch")}},
                  name="MyModel-dynamic-batch")

``unbroken check models/`` imports every such file, collects the cases it declared, and exports
each one. The arguments of :func:`case` are those of :func:`unbroken.export`, plus ``name``.

Collection rules (see :func:`collect_cases`):

- a file is imported under a unique module name (``__name__`` is not ``"__main__"``, so the
  file's ``if __name__ == "__main__":`` block does not run), with the file's directory first on
  ``sys.path`` so that it can import its neighbours;
- a directory is walked recursively for ``*.py`` files, in sorted order; files and directories
  whose name starts with ``_`` or ``.`` are skipped (``__init__.py``, private helpers,
  ``__pycache__``, ``.venv``);
- a file that fails to import is a collection error (:class:`CaseCollectionError`) that
  carries a short traceback of the user's frames, never a crash of the command;
- a ``module:callable`` target (:func:`load_target`) imports ``module`` the normal way and calls
  ``callable()``, which returns one case or a list of cases;
- every case gets a name unique within the file that declares it: the ``name=`` given, else
  the model's class or function name, and repeats of one name (a declaration in a loop) are
  numbered in declaration order: ``Head``, ``Head[1]``, ``Head[2]`` (:func:`unique_names`).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["ExportCase", "CaseCollectionError", "case", "collect_cases", "declared_cases",
           "load_target", "python_files", "unique_names"]

#: Every case declared in this process, in declaration order. :func:`collect_cases` reads the
#: slice that one import added.
_REGISTRY: list[ExportCase] = []


@dataclass(frozen=True, slots=True)
class ExportCase:
    """One model to export, as declared by :func:`case`.

    name:           a label for reports: the ``name=`` given, else the model's class name
                    (``nn.Module``) or function name.
    model:          the ``nn.Module`` or callable to export.
    args:           the example positional arguments (a tuple).
    kwargs:         the example keyword arguments, or None.
    dynamic_shapes: the ``dynamic_shapes`` spec passed to ``export``, or None.
    declared_at:    ``"path/to/file.py:LINE"`` of the ``unbroken.case(...)`` call.
    base_name:      the name before numbering repeats (:func:`unique_names`); ``name`` is
                    ``base_name`` or ``base_name[k]``.
    """

    name: str
    model: Any
    args: tuple
    kwargs: dict | None
    dynamic_shapes: Any
    declared_at: str
    base_name: str = ""

    def __post_init__(self):
        if not self.base_name:
            object.__setattr__(self, "base_name", self.name)

    @property
    def filename(self) -> str:
        """The file part of ``declared_at``."""
        return self.declared_at.rsplit(":", 1)[0]

    @property
    def lineno(self) -> int:
        """The line part of ``declared_at``."""
        return int(self.declared_at.rsplit(":", 1)[1])

    def short_location(self) -> str:
        """``file.py:12`` — for tables."""
        return f"{os.path.basename(self.filename)}:{self.lineno}"

    def export(self):
        """Run :func:`unbroken.export` on this case and return the ``ExportedProgram``."""
        import unbroken

        return unbroken.export(self.model, self.args, self.kwargs,
                               dynamic_shapes=self.dynamic_shapes)

    def find_graph_breaks(self) -> list:
        """Every graph break of this case, in one run (:func:`unbroken.find_graph_breaks`)."""
        import unbroken

        return unbroken.find_graph_breaks(self.model, self.args, self.kwargs,
                                          dynamic_shapes=self.dynamic_shapes)


class CaseCollectionError(Exception):
    """A path given to ``unbroken check`` could not be read for cases (a usage error).

    path:    the file or directory at fault.
    summary: what went wrong; for an import failure, the traceback restricted to user frames.
    """

    def __init__(self, path: str | os.PathLike, summary: str):
        self.path = str(path)
        self.summary = summary
        super().__init__(f"{self.path}: {summary}")


def case(model, args, kwargs=None, *, dynamic_shapes=None, name=None) -> ExportCase:
    """Declare that ``model`` should export with these example inputs.

    Args:
        model: an ``nn.Module`` or a function, as given to :func:`unbroken.export`.
        args: a tuple of example positional arguments (``(x,)`` for one input).
        kwargs: optional dict of example keyword arguments.
        dynamic_shapes: optional ``dynamic_shapes`` spec, as for :func:`unbroken.export`.
        name: label in reports; defaults to the model's class or function name.

    Returns:
        The recorded :class:`ExportCase` (``.export()`` runs it).

    Example::

        unbroken.case(MLP().eval(), (torch.randn(4, 16),))
    """
    if not isinstance(args, tuple):
        raise TypeError(
            f"unbroken.case(): args must be a tuple of example inputs, got {type(args).__name__}; "
            "write (x,) for a single input")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError("unbroken.case(): kwargs must be a dict or None, "
                        f"got {type(kwargs).__name__}")
    caller = sys._getframe(1)
    declared = ExportCase(
        name=name or _default_name(model),
        model=model,
        args=args,
        kwargs=kwargs,
        dynamic_shapes=dynamic_shapes,
        declared_at=f"{caller.f_code.co_filename}:{caller.f_lineno}",
    )
    _REGISTRY.append(declared)
    return declared


def declared_cases() -> list[ExportCase]:
    """Every case declared so far in this process (a copy)."""
    return list(_REGISTRY)


def _default_name(model) -> str:
    import torch

    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__qualname__", None) or getattr(model, "__name__", None) \
        or type(model).__name__


def collect_cases(path: str | os.PathLike) -> list[ExportCase]:
    """Import a file, or every eligible file under a directory, and return their cases, each
    with a name unique within its declaring file (:func:`unique_names`).

    Raises:
        CaseCollectionError: the path does not exist, is not a ``.py`` file, or a file failed
            to import (the message holds the user's part of the traceback).
    """
    root = Path(path)
    if not root.exists():
        raise CaseCollectionError(path, "no such file or directory")
    if root.is_dir():
        return _dedupe([c for file in python_files(root) for c in _collect_file(file)])
    if root.suffix != ".py":
        raise CaseCollectionError(path, "not a Python file (expected *.py or a directory)")
    return _collect_file(root)


def is_import_target(target: str) -> bool:
    """Whether ``target`` names ``package.module:callable`` rather than a path."""
    module, sep, attr = target.partition(":")
    return bool(sep) and not os.path.exists(target) and all(
        part.isidentifier() for part in module.split(".") + attr.split("."))


def load_target(target: str) -> list[ExportCase]:
    """The cases of one target: a ``.py`` file, a directory, or ``module:callable``.

    For ``module:callable`` the module is imported the normal way (``sys.path`` as it is; the
    command puts the current directory first) and ``callable()`` must return an
    :class:`ExportCase` or a list of them.
    """
    if not is_import_target(target):
        return collect_cases(target)
    module_name, _, attr = target.partition(":")
    try:
        value = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
        made = value()
    except (Exception, SystemExit) as exc:
        raise CaseCollectionError(target, "failed to load:\n" + _user_traceback(exc)) from exc
    made = [made] if isinstance(made, ExportCase) else made
    if not isinstance(made, (list, tuple)) or not all(isinstance(c, ExportCase) for c in made):
        raise CaseCollectionError(
            target, f"{attr}() must return an unbroken.case(...) or a list of them, "
                    f"got {type(made).__name__}")
    return unique_names(list(made))


def unique_names(cases: list[ExportCase]) -> list[ExportCase]:
    """Give repeats of one name in one declaring file a number, in declaration order.

    ``for b in (8, 1): unbroken.case(Head(), (torch.randn(b, 3),))`` declares ``Head`` and
    ``Head[1]``; a case that already went through this keeps its name (idempotent).
    """
    seen: dict[tuple[str, str], int] = {}
    named = []
    for c in cases:
        key = (c.filename, c.base_name)
        count = seen.get(key, 0)
        seen[key] = count + 1
        name = c.base_name if count == 0 else f"{c.base_name}[{count}]"
        named.append(c if name == c.name else replace(c, name=name))
    return named


def python_files(directory: Path) -> list[Path]:
    """The ``*.py`` files under ``directory`` that :func:`collect_cases` imports, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        found += [Path(dirpath, f) for f in sorted(filenames)
                  if f.endswith(".py") and not f.startswith(("_", "."))]
    return found


def _dedupe(cases: list[ExportCase]) -> list[ExportCase]:
    """Drop repeats of one declaration (a file imported by another file that is also collected):
    after :func:`unique_names`, one declaration has one (place, name) everywhere."""
    seen, unique = set(), []
    for c in cases:
        key = (c.declared_at, c.name)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def _collect_file(file: Path) -> list[ExportCase]:
    file = file.resolve()
    start = len(_REGISTRY)
    _import_file(file)
    return unique_names(list(_REGISTRY[start:]))


def _module_name(file: Path) -> str:
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:12]
    return f"_unbroken_cases_{file.stem}_{digest}"


def _import_file(file: Path) -> None:
    """Execute ``file`` as a fresh module; its directory is first on ``sys.path`` meanwhile."""
    name = _module_name(file)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CaseCollectionError(file, "cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise CaseCollectionError(file, "failed to import:\n" + _user_traceback(exc)) from exc
    finally:
        _remove_first(sys.path, str(file.parent))


def _remove_first(items: list, value) -> None:
    try:
        items.remove(value)
    except ValueError:
        pass


def _user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without importlib's and this module's own frames."""
    tb = traceback.TracebackException.from_exception(exc)
    tb.stack = traceback.StackSummary.from_list(
        [f for f in tb.stack if not _is_machinery(f.filename)])
    return "".join(tb.format()).rstrip()


def _is_machinery(filename: str) -> bool:
    return filename.startswith("<frozen importlib") or filename == __file__ \
        or filename == importlib.__file__
