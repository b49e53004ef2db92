"""Pure helpers of the corpus benchmark: flatten model outputs, compare them with eager, describe
an error in one line, and read which ``Dim.AUTO`` dims an exported program kept dynamic.

Nothing here exports or builds a model; ``tests/benchmarks/test_corpus_compare.py`` covers it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

# A float output "matches" eager when every element is within this of eager's
# (torch.allclose(rtol, atol)); the table still shows the exact max difference.
RTOL, ATOL = 1e-4, 1e-5
_MAX_DEPTH = 6


def flatten_outputs(value, path: str = "out", depth: int = 0) -> list[tuple[str, object]]:
    """``(path, leaf)`` for every tensor and Python scalar in a model's output.

    Containers and registered pytree nodes (``ModelOutput`` included) are walked with pytree;
    other objects holding tensors (a ``transformers`` cache, a dataclass not registered) are
    walked through their ``vars()``. ``None`` and strings are skipped: they carry no values.
    """
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (bool, int, float)):
        return [(path, value)]
    if value is None or isinstance(value, (str, bytes)) or depth > _MAX_DEPTH:
        return []
    try:
        leaves = [(pytree.keystr(key), leaf)
                  for key, leaf in pytree.tree_flatten_with_path(value)[0]]
    except ValueError:  # a node registered without key paths (diffusers' BaseOutput)
        leaves = [(f"[{i}]", leaf) for i, leaf in enumerate(pytree.tree_leaves(value))]
    if not (len(leaves) == 1 and leaves[0][1] is value):
        return [item for key, leaf in leaves
                for item in flatten_outputs(leaf, path + key, depth + 1)]
    fields = getattr(value, "__dict__", None)
    if not isinstance(fields, dict) or isinstance(value, torch.nn.Module):
        return []
    return [item for name in sorted(fields)
            for item in flatten_outputs(fields[name], f"{path}.{name}", depth + 1)]


@dataclass(frozen=True, slots=True)
class Match:
    """How an output compares with eager's.

    status: ``exact`` (every leaf equal, bit for bit), ``close`` (floats within RTOL/ATOL),
    ``differs`` (a value outside tolerance) or ``structure`` (different leaves, shapes or dtypes);
    max_abs_diff: the largest absolute difference over float leaves (0.0 when exact, None when the
    structures differ); detail: the first leaf that differs, for the report.
    """

    status: str
    max_abs_diff: float | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("exact", "close")

    def to_dict(self) -> dict:
        return {"status": self.status, "max_abs_diff": self.max_abs_diff, "detail": self.detail}


def compare(reference, output) -> Match:
    """Compare an exported program's output with eager's (see :class:`Match`)."""
    ref, out = flatten_outputs(reference), flatten_outputs(output)
    if [p for p, _ in ref] != [p for p, _ in out]:
        if len(ref) != len(out):
            return Match("structure", None, f"{len(out)} output leaves, eager has {len(ref)}")
        # same count, different containers (e.g. a tuple for a ModelOutput): compare in order
    worst, status, detail = 0.0, "exact", ""
    for (path, a), (_, b) in zip(ref, out):
        leaf = _compare_leaf(a, b)
        if leaf.status == "structure":
            return Match("structure", None, f"{path}: {leaf.detail}")
        if leaf.max_abs_diff is not None and (leaf.max_abs_diff > worst or math.isnan(
                leaf.max_abs_diff)):
            worst = leaf.max_abs_diff
        if _rank(leaf.status) > _rank(status):
            status, detail = leaf.status, f"{path}: {leaf.detail}"
    return Match(status, worst, detail)


def _rank(status: str) -> int:
    return ("exact", "close", "differs").index(status)


def _compare_leaf(a, b) -> Match:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return Match("structure", None, f"{type(b).__name__}, eager has {type(a).__name__}")
        return Match("exact", 0.0) if a == b else Match("differs", _scalar_diff(a, b),
                                                          f"{b!r}, eager {a!r}")
    if a.shape != b.shape or a.dtype != b.dtype:
        return Match("structure", None,
                     f"{b.dtype}{list(b.shape)}, eager {a.dtype}{list(a.shape)}")
    if torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                             and torch.equal(a.nan_to_num(), b.nan_to_num())):
        return Match("exact", 0.0)
    if not a.is_floating_point() and not a.is_complex():
        return Match("differs", float((a.long() - b.long()).abs().max()), "integer values differ")
    diff = float((a - b).abs().nan_to_num(nan=math.inf).max())
    if torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
        return Match("close", diff)
    return Match("differs", diff, f"max abs diff {diff:.3g}")


def _scalar_diff(a, b) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b))
    return None


def describe_error(error: BaseException) -> dict:
    """The first error of an export or a run, in one line: type, unbroken's ``UB`` id when it
    has one, the first line of the message, and the user location unbroken names."""
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) if isinstance(code, str) else None
    text = message if isinstance(message, str) else str(error)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    location = getattr(error, "location", None) if isinstance(code, str) else None
    where = f"{short_path(location.filename)}:{location.lineno}" if location is not None else None
    return {
        "type": f"{type(error).__module__}.{type(error).__qualname__}",
        "code": code if isinstance(code, str) else None,
        "line": first[:300],
        "where": where,
        "source": getattr(location, "source", None) if location is not None else None,
    }


def short_path(filename: str) -> str:
    """A file name relative to its installed package root (``transformers/models/...``)."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def input_shapes(example_leaves, placeholder_shapes) -> dict[str, list]:
    """``{input path: [size or symbol name, ...]}`` pairing the example's tensor inputs (pytree
    order) with the program's user-input placeholder shapes (same order)."""
    if len(example_leaves) != len(placeholder_shapes):
        return {}
    return {path: [_size(s) for s in shape]
            for (path, _), shape in zip(example_leaves, placeholder_shapes)}


def _size(size) -> int | str:
    """An int for a static size (torch may keep one as a constant ``SymInt``), else the
    symbolic expression's text."""
    text = str(size)
    return int(text) if isinstance(size, int) or text.isdigit() else text


def pinned_dims(shapes: dict[str, list], auto_dims: dict[str, tuple]) -> list[str]:
    """The ``Dim.AUTO`` dims the program made static: ``["input_ids.shape[1] = 12", ...]``.

    ``shapes`` is :func:`input_shapes`' result, ``auto_dims`` maps an input path to the dims
    marked ``Dim.AUTO``. A dim is pinned when its placeholder size is an int, not a symbol.
    """
    pinned = []
    for path, dims in auto_dims.items():
        sizes = shapes.get(path)
        if sizes is None:
            continue
        pinned += [f"{path}.shape[{d}] = {sizes[d]}" for d in dims
                   if d < len(sizes) and isinstance(sizes[d], int)]
    return pinned
