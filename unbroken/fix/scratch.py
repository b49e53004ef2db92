"""Patched copies of the user's modules, and the patched model built from the original one.

The patched text of a file is written to a scratch directory (never over the original) and
imported as a new module beside the original (same package, so relative imports resolve; the
original's directory on ``sys.path`` meanwhile, so neighbours import). The patched model is
a deep copy of the case's model whose classes defined in a patched file are swapped for the
patched classes of the same qualified name: parameters, buffers and every Python attribute
are the original's, only the code is new. A model that is a function is the patched
module's function of the same name.

While the eager model runs, :class:`DecisionRecorder` stands in for ``torch`` in the patched
module's globals: it records the value of every ``torch.cond`` / ``torch.where`` /
``torch._check`` predicate at the lines a rewrite wrote, and runs ``torch.cond`` eagerly (the
branch the predicate picks: eager semantics) so that no compiler is involved.
"""
from __future__ import annotations

import copy
import importlib.util
import itertools
import os
import sys
import tempfile
import types
from contextlib import contextmanager
from pathlib import Path

import torch

from ..cases import _REGISTRY

__all__ = ["DecisionRecorder", "PatchedModules", "module_of_file"]

_COUNTER = itertools.count()


def module_of_file(path: str):
    """The imported module whose ``__file__`` is ``path`` (None when there is none)."""
    real = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) == real:
            return module
    return None


class DecisionRecorder:
    """A stand-in for the ``torch`` module inside patched code: every attribute is torch's,
    except ``cond``, ``where``, ``_check`` and ``_check_is_size``, which record their
    predicate per line of ``filename`` before doing what torch does.

    seen:   ``{line: {True, False}}``: the predicate values met at each line.
    failed: lines whose ``torch._check`` failed during the last call.
    """

    def __init__(self, filename: str):
        self._filename = filename
        self.seen: dict[int, set[bool]] = {}
        self.failed: set[int] = set()

    def __getattr__(self, name):
        return getattr(torch, name)

    def _record(self, value) -> None:
        frame = sys._getframe(2)
        if frame.f_code.co_filename != self._filename:
            return
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                return
            value = bool(value)
        self.seen.setdefault(frame.f_lineno, set()).add(bool(value))

    def cond(self, pred, true_fn, false_fn, operands=()):
        self._record(pred)
        return (true_fn if bool(pred) else false_fn)(*operands)

    def where(self, condition, *rest, **kwargs):
        if rest:
            self._record(condition)
        return torch.where(condition, *rest, **kwargs)

    def _check(self, cond, message=None):
        self._record(cond)
        if not bool(cond):
            self.failed.add(sys._getframe(1).f_lineno)
        return torch._check(cond, message)

    def _check_is_size(self, value, message=None):
        self._record(value >= 0)
        if not value >= 0:
            self.failed.add(sys._getframe(1).f_lineno)
        return torch._check_is_size(value, message)


class PatchedModules:
    """The patched text of some files, imported from a scratch directory.

    texts:   ``{original path: patched text}``.
    modules: ``{original path: patched module}``.
    scratch: ``{original path: scratch path}`` (and :meth:`original_path` the way back).
    """

    def __init__(self, texts: dict[str, str], encodings: dict[str, str] | None = None,
                 buffers=frozenset()):
        self.texts = dict(texts)
        self.buffers = frozenset(buffers)  # "Class.attr": Python attributes made buffers
        self._dir = tempfile.TemporaryDirectory(prefix="unbroken-fix-")
        self.modules, self.scratch, self._names = {}, {}, []
        for index, (path, text) in enumerate(sorted(self.texts.items())):
            folder = Path(self._dir.name, str(index))
            folder.mkdir()
            target = folder / Path(path).name
            encoding = (encodings or {}).get(path, "utf-8")
            target.write_bytes(text.encode(encoding))
            self.scratch[path] = str(target)
        for path in sorted(self.texts):
            self.modules[path] = self._import(path)

    def close(self) -> None:
        for name in self._names:
            sys.modules.pop(name, None)
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def original_path(self, path: str) -> str:
        for original, scratch in self.scratch.items():
            if os.path.realpath(scratch) == os.path.realpath(path):
                return original
        return path

    def _import(self, path: str):
        original = module_of_file(path)
        base = original.__name__ if original is not None else Path(path).stem
        name = f"{base}__unbroken_fix_{next(_COUNTER)}"
        spec = importlib.util.spec_from_file_location(name, self.scratch[path])
        module = importlib.util.module_from_spec(spec)
        if original is not None and original.__package__:
            module.__package__ = original.__package__
        sys.modules[name] = module
        self._names.append(name)
        folder = str(Path(path).resolve().parent)
        sys.path.insert(0, folder)
        declared = len(_REGISTRY)
        try:
            with torch.random.fork_rng(devices=[]):
                spec.loader.exec_module(module)
        finally:
            del _REGISTRY[declared:]
            if folder in sys.path:
                sys.path.remove(folder)
        return module

    def _patched_class(self, cls):
        module = sys.modules.get(cls.__module__)
        file = getattr(module, "__file__", None)
        if file is None:
            return None
        for path, patched in self.modules.items():
            if os.path.realpath(path) == os.path.realpath(file):
                found = patched
                for part in cls.__qualname__.split("."):
                    found = getattr(found, part, None)
                return found if isinstance(found, type) else None
        return None

    def patched_model(self, model):
        """A copy of ``model`` running the patched code (see the module docstring)."""
        if isinstance(model, torch.nn.Module):
            twin = copy.deepcopy(model)
            for sub in twin.modules():
                new = self._patched_class(type(sub))
                if new is not None:
                    sub.__class__ = new
                    self._to_buffers(sub)
            return twin
        if isinstance(model, types.FunctionType):
            file = model.__code__.co_filename
            for path, patched in self.modules.items():
                if os.path.realpath(path) == os.path.realpath(file):
                    found = patched
                    for part in model.__qualname__.split("."):
                        found = getattr(found, part, None)
                    if found is not None:
                        return found
        return model

    def _to_buffers(self, sub) -> None:
        """The attributes a ``counter`` rewrite made buffers, converted on this copy as the
        patched ``__init__`` would have registered them."""
        for entry in self.buffers:
            qualname, _, name = entry.rpartition(".")
            if type(sub).__qualname__ == qualname and name in vars(sub) and \
                    not isinstance(vars(sub)[name], torch.Tensor):
                value = vars(sub).pop(name)
                sub.register_buffer(name, torch.tensor(value))

    @contextmanager
    def recording(self):
        """Install a :class:`DecisionRecorder` as ``torch`` in every patched module (one
        recorder per file, yielded as ``{original path: recorder}``)."""
        recorders, saved = {}, {}
        for path, module in self.modules.items():
            names = [k for k, v in vars(module).items() if v is torch]
            recorder = DecisionRecorder(self.scratch[path])
            recorders[path] = recorder
            saved[path] = names
            for k in names:
                setattr(module, k, recorder)
        try:
            yield recorders
        finally:
            for path, module in self.modules.items():
                for k in saved[path]:
                    setattr(module, k, torch)
