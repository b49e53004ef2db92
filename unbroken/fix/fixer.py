"""Fix one case: rewrite its breaks round by round, then verify the patched program.

:func:`fix_case` asks :func:`unbroken.find_graph_breaks` for the case's breaks, proposes a
rewrite for each (:mod:`unbroken.fix.rewrites`), applies the edits to scratch copies of the
files (:mod:`unbroken.fix.scratch`), and looks for breaks again in the patched program: a
``torch.cond`` traces both branches, so breaks on the side the example did not take appear
in the next round, and get their own rewrite. When no break is left, a ``dynamic_shapes``
that does not hold is replaced by the solver's proven spec in the declaration, and the
result is verified (:mod:`unbroken.fix.verify`). ``torch.where`` is tried first where it
applies; if the patch does not verify, the whole search runs again with ``torch.cond`` only.
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import sys
import warnings
from dataclasses import dataclass, field

import torch

from ..cases import ExportCase
from ..check.execute import case_id, relative
from ..check.spec_edits import SuggestError, dim_name, spec_argument, spec_node
from ..frontend.overlay import StateWriteWarning
from ..symbolic.diagnostics import ConstraintViolationError, RefusalError, frame_from_code
from ..symbolic.diagnostics.catalogue import GraphBreakError
from .rewrites import NoRewrite, Rewrite, rewrites_for
from .scratch import PatchedModules
from .source import Edit, SourceFile, apply_edits, unified_diff
from .verify import Verification, decision_sites, observe, verify_patch

__all__ = ["BreakRecord", "CaseFix", "fix_case"]

MAX_ROUNDS = 6


@dataclass(frozen=True, slots=True)
class BreakRecord:
    """A break as the fix report shows it (paths relative to the run's root).

    code, message: the catalogue id and the one-line message.
    file, line:    the user's innermost frame (in the text of the round that found it).
    source:        that line's text.
    round:         1 for the original program; 2+ for breaks found in a patched one.
    """

    code: str
    message: str
    file: str
    line: int
    source: str
    round: int = 1

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "file": self.file,
                "line": self.line, "source": self.source, "round": self.round}


@dataclass
class CaseFix:
    """What ``unbroken fix`` did for one case.

    status:    ``verified`` (the patch exports and matches eager), ``unverified`` (a patch,
               shown as a hint with ``verification.reason``), ``no-fix`` (breaks without a
               rewrite), ``clean`` (nothing to fix).
    breaks:    every break met, the original program's and the patched rounds'.
    rewrites:  the rewrites applied (:class:`Rewrite`, paths as given).
    hints:     breaks without a rewrite (:class:`NoRewrite`) and why.
    texts:     ``{path: (original text, patched text)}`` of every file the patch changes.
    encodings: ``{path: encoding}`` of those files.
    sources:   ``{path: check.source_files.SourceFile}``: those files as read from disk
               (what ``--write`` writes through).
    """

    id: str
    name: str
    file: str
    line: int
    status: str = "clean"
    breaks: list = field(default_factory=list)
    rewrites: list = field(default_factory=list)
    hints: list = field(default_factory=list)
    texts: dict = field(default_factory=dict)
    encodings: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    verification: Verification = field(default_factory=Verification)
    root: str = ""

    def diffs(self) -> dict[str, str]:
        """``{relative path: unified diff}``."""
        return {relative(p, self.root): unified_diff(relative(p, self.root), old, new)
                for p, (old, new) in sorted(self.texts.items()) if old != new}

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "file": self.file, "line": self.line,
            "status": self.status,
            "breaks": [b.to_dict() for b in self.breaks],
            "rewrites": [{"rule": r.rule, "file": relative(r.path, self.root), "line": r.line,
                          "summary": r.summary} for r in self.rewrites],
            "hints": [{"file": relative(h.path, self.root), "line": h.line, "reason": h.reason}
                      for h in self.hints],
            "diffs": self.diffs(),
            "verification": self.verification.to_dict(),
        }


def fix_case(case: ExportCase, root: str | None = None) -> CaseFix:
    """Find the case's breaks, rewrite them, verify; see the module docstring."""
    root = root or os.getcwd()
    first = _attempt(case, root, prefer_where=True)
    if first.status == "unverified" and any(r.rule in _FIRST_CHOICES for r in first.rewrites):
        second = _attempt(case, root, prefer_where=False)
        if second.status == "verified":
            return second
    return first


#: Rewrites tried first, with torch.cond as the alternative when they do not verify.
_FIRST_CHOICES = ("where", "unguard")


def _attempt(case: ExportCase, root: str, prefer_where: bool) -> CaseFix:
    result = CaseFix(case_id(case, root), case.name, relative(case.filename, root),
                     case.lineno, root=root)
    files: dict[str, SourceFile] = {}
    texts: dict[str, str] = {}
    seen_breaks: set = set()
    for round_ in range(1, MAX_ROUNDS + 1):
        with PatchedModules(texts, {p: f.encoding for p, f in files.items()},
                            _buffers(result)) as patched:
            model = patched.patched_model(case.model)
            breaks = _find_breaks(model, case)
            records = [_locate(b, patched, texts, files) for b in breaks]
            key = frozenset((r[0], r[1], r[2].code) for r in records if r is not None)
            for b, r in zip(breaks, records):
                result.breaks.append(_record(b, r, root, round_))
            if not breaks or key in seen_breaks:
                break
            seen_breaks.add(key)
            chosen = _plan_round(case, model, patched, records, files, texts, result,
                                 prefer_where)
        if not chosen:
            break
        for path, edits in chosen.items():
            texts[path] = apply_edits(_current(path, texts, files).text, edits)
    remaining = breaks
    if not result.breaks:
        result.status = "clean"
    spec = case.dynamic_shapes
    if not remaining:
        texts, spec = _fix_dynamic_shapes(case, texts, files, result)
    result.texts = {p: (files[p].text, t) for p, t in texts.items() if files[p].text != t}
    result.encodings = {p: files[p].encoding for p in result.texts}
    result.sources = {p: files[p].disk for p in result.texts}
    if not result.texts:
        if result.breaks or result.hints:
            result.status = "no-fix"
        return result
    if remaining:
        result.status = "unverified"
        left = remaining[0]
        where = left.location.short() if left.location is not None else "?"
        result.verification.reason = (f"the patched model is still refused: {left.code} at "
                                      f"{where} ({len(remaining)} break(s) left without a "
                                      "verified rewrite)")
        return result
    result.verification = _verify(case, texts, files, spec, _buffers(result))
    result.status = "verified" if result.verification.verified else "unverified"
    return result


def _current(path, texts, files) -> SourceFile:
    if path not in files:
        files[path] = SourceFile.read(path)
    base = files[path]
    return SourceFile(path, texts.get(path, base.text), base.encoding)


def _find_breaks(model, case) -> list:
    """The breaks of ``model``, and each :class:`StateWriteWarning` (state the export would
    not keep) as a UB107 record at the line that changes it."""
    from ..exporter.pipeline import find_graph_breaks

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StateWriteWarning)
        try:
            breaks = find_graph_breaks(model, case.args, case.kwargs,
                                       dynamic_shapes=case.dynamic_shapes)
        except RefusalError as err:
            breaks = [err]
    for w in caught:
        if issubclass(w.category, StateWriteWarning):
            found = _state_break(str(w.message), model)
            if found is not None:
                breaks.append(found)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return breaks


_STATE = re.compile(r"reads `(\w+)\.(\w+)` and then changes it at ([^:\s]+):(\d+)")


def _state_break(message: str, model):
    """The UB107 record of a StateWriteWarning, at the user's file and line (or None)."""
    match = _STATE.search(message)
    if match is None or not isinstance(model, torch.nn.Module):
        return None
    cls, attribute, base, line = match.groups()
    for sub in model.modules():
        if type(sub).__name__ == cls:
            try:
                file = inspect.getsourcefile(type(sub))
            except TypeError:
                continue
            if file and os.path.basename(file) == base:
                frame = frame_from_code(file, int(line), "forward")
                return GraphBreakError(
                    "UB107", f"`{cls}.{attribute}` changes on every call and the export does "
                    "not keep it (StateWriteWarning)", frames=[frame])
    return None


def _user_frame(error):
    for frame in reversed(error.frames):
        name = frame.filename
        if os.path.isfile(name) and "site-packages" not in name and \
                os.sep + "torch" + os.sep not in name and \
                not name.startswith(os.path.dirname(os.path.dirname(__file__))):
            return frame
    return None


def _locate(error, patched, texts, files):
    """``(original path, line in the current text, error)`` or None without a user frame."""
    frame = _user_frame(error)
    if frame is None:
        return None
    path = patched.original_path(frame.filename)
    _current(path, texts, files)
    return path, frame.lineno, error


def _record(error, located, root, round_) -> BreakRecord:
    message = getattr(error, "message", str(error)).splitlines()[0]
    if located is None:
        return BreakRecord(error.code, message, "", 0, "", round_)
    path, line, _ = located
    source = error.location.source if error.location is not None else ""
    return BreakRecord(error.code, message, relative(path, root), line, source, round_)


def _plan_round(case, model, patched, records, files, texts, result, prefer_where):
    """Rewrites for this round's breaks: ``{path: [edits]}`` (non-overlapping)."""
    by_path: dict[str, list] = {}
    for r in records:
        if r is not None:
            by_path.setdefault(r[0], []).append(r)
    chosen: dict[str, list[Edit]] = {}
    for path, located in by_path.items():
        src = _current(path, texts, files)
        questions = {line: [] for _, line, _ in located}
        filename = patched.scratch.get(path, path)
        with patched.recording():
            tensors, _ = observe(lambda: model(*case.args, **(case.kwargs or {})),
                                      filename, questions)
        for _, line, err in located:
            if err.code is None:
                continue
            found = rewrites_for(src, err.code, line, err.message,
                                 tensors.get(line, frozenset()))
            if isinstance(found, NoRewrite):
                _hint(result, found)
                continue
            if not prefer_where:
                found = [r for r in found if r.rule not in _FIRST_CHOICES] or found
            rewrite = found[0]
            taken = chosen.setdefault(path, [])
            if any(e.start < t.end and t.start < e.end or (e.start == t.start)
                   for e in rewrite.edits for t in taken):
                continue  # overlaps a rewrite of this round: the next round sees it again
            taken.extend(rewrite.edits)
            result.rewrites.append(rewrite)
    return {p: e for p, e in chosen.items() if e}


def _hint(result: CaseFix, hint: NoRewrite) -> None:
    """Keep one hint per reason and file (a later round meets the same break again)."""
    if not any(h.path == hint.path and h.reason == hint.reason for h in result.hints):
        result.hints.append(hint)


def _fix_dynamic_shapes(case, texts, files, result):
    """When the patched case exports but its ``dynamic_shapes`` does not hold: the solver's
    proven spec written into the declaration (as ``unbroken suggest --write`` would)."""
    if case.dynamic_shapes is None:
        return texts, None
    with PatchedModules(texts, {p: f.encoding for p, f in files.items()}) as patched:
        model = patched.patched_model(case.model)
        from ..exporter.pipeline import export

        try:
            export(model, case.args, case.kwargs, dynamic_shapes=case.dynamic_shapes)
            return texts, case.dynamic_shapes
        except ConstraintViolationError as err:
            code = err.suggested_code
        except RefusalError:
            return texts, case.dynamic_shapes
    if not code:
        return texts, case.dynamic_shapes
    src = _current(case.filename, texts, files)
    lineno = _map_line(files[case.filename].text, src.text, case.lineno)
    try:
        value = spec_argument(src.tree, case.filename, lineno)
        text = ast.unparse(spec_node(code, dim_name(src.tree)))
    except SuggestError as err:
        result.hints.append(NoRewrite(case.filename, case.lineno, str(err)))
        return texts, case.dynamic_shapes
    edit = Edit(*src.span(value), text)
    rewrite = Rewrite("dynamic-shapes", case.filename, case.lineno, (edit,),
                      "dynamic_shapes → the proven spec")
    result.rewrites.append(rewrite)
    texts = dict(texts)
    texts[case.filename] = apply_edits(src.text, [edit])
    return texts, _spec_from(texts[case.filename], case, lineno)


def _map_line(old: str, new: str, line: int) -> int:
    """Where line ``line`` of ``old`` is in ``new`` (``new`` made by edits elsewhere)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal" and i1 < line <= i2:
            return j1 + line - i1
    return line


def _spec_from(text: str, case: ExportCase, lineno: int):
    """The ``dynamic_shapes`` of the case declared at ``lineno`` of the new text."""
    import torch

    tree = ast.parse(text)
    value = spec_argument(tree, case.filename, lineno)
    module = sys.modules.get(case.model.__class__.__module__)
    namespace = dict(vars(module)) if module is not None else {}
    namespace.setdefault("torch", torch)
    namespace.setdefault("Dim", torch.export.Dim)
    return eval(compile(ast.Expression(value), case.filename, "eval"), namespace)


def _buffers(result: CaseFix) -> frozenset[str]:
    return frozenset(b for r in result.rewrites for b in r.buffers)


def _verify(case, texts, files, spec, buffers=frozenset()) -> Verification:
    from ..exporter.pipeline import export

    with PatchedModules(texts, {p: f.encoding for p, f in files.items()}, buffers) as patched:
        sites = {p: decision_sites(p, files[p].text, t) for p, t in texts.items()}
        return verify_patch(case, patched, sites,
                            lambda m: export(m, case.args, case.kwargs, dynamic_shapes=spec),
                            spec, calls=2 if buffers else 1)
