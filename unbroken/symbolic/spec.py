"""Parse and validate ``dynamic_shapes``: one symbol or constant per input dimension.

Accepted spec (the same as ``torch.export.export``):

* ``None``: every dimension static;
* a dict keyed by the forward's parameter names, or a tuple/list in parameter order;
* nested like the inputs (lists/tuples/dicts/namedtuples/registered pytrees); ``None`` for a
  whole subtree makes it static;
* per tensor: a dict ``{dim_index: entry}`` or a tuple/list with one entry per dimension;
* entries: ``None`` or an ``int`` (static; the int must equal the example size), a named
  ``Dim("name", min=, max=)``, a derived dim (``2*dx``, ``dx + 1``), ``Dim.AUTO``,
  ``Dim.DYNAMIC``, ``Dim.STATIC`` (optionally ``Dim.AUTO(min=, max=)``).

Semantics:

* the same ``Dim`` object, or two ``Dim``s with the same name, is one symbol: the example
  sizes must be equal;
* a derived dim ``A*d + B`` is that expression of ``d``'s symbol; ``d`` need not appear
  itself (its example value is then solved from the derived one);
* ``Dim.AUTO`` and ``Dim.DYNAMIC`` are fresh symbols for each dimension.

Sizes 0 and 1 (PyTorch 2.13 specializes them silently): a dimension whose example size is
0 or 1 takes different paths in kernels (broadcasting, squeeze, contiguity), so one graph
cannot serve it and sizes >= 2 soundly. Every dynamic dimension therefore has the range
``[max(min, 2), max]``. ``Dim.AUTO`` with an example size of 0 or 1 becomes static (as in
PyTorch); a named ``Dim`` or ``Dim.DYNAMIC`` with such an example raises ``ExportUsageError``
asking for an example of size >= 2 (PyTorch would fail later with a constraint violation).
A dim whose spec admits 1 (``min=1``, a named Dim's default ``min=0``, ``Dim.AUTO``,
``Dim.DYNAMIC``) is still traced from 2; its symbol is admitted to the size-1 audit
(``env.size_one.admit``), and
``unbroken.size_one`` widens its range to 1 when no decision of the trace depends on it being
>= 2, or a trace at size 1 gives the same program.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export.dynamic_shapes import Dim

from .diagnostics import ExportUsageError
from .env import ShapeEnvironment
from .torch_compat import DerivedDim, DimHint, DimHintType, StaticDim, int_oo

__all__ = ["INT_INPUT_MIN", "resolve_dynamic_shapes"]

# the least value of a Python int input declared dynamic without ``min``: int64's
INT_INPUT_MIN = -(2 ** 63)

_DOC = "See the dynamic-shapes guide (docs/dynamic-shapes.md)."


@dataclass(frozen=True, slots=True)
class _Occurrence:
    """One tensor dimension and the spec entry given for it.

    source: ``x.shape[0]``-style description; size: the example size; entry: the spec value.
    """

    source: str
    size: int
    entry: Any
    integer: bool = False  # a Python int input, not a tensor's size


def resolve_dynamic_shapes(combined_args: dict[str, Any], dynamic_shapes,
                           env: ShapeEnvironment, auto_refinements=None,
                           forced_static=frozenset()) -> dict[str, Any]:
    """Return ``combined_args`` with every tensor replaced by a tuple of dim entries.

    Each entry is an ``int`` (static) or a sympy expression over symbols created in ``env``
    (with their ranges and example values). Raises ``ExportUsageError`` for any malformed
    spec or an example input that the spec does not admit.

    ``auto_refinements`` adopts what a previous trace found the code requires of ``Dim.AUTO``
    and ``Dim.DYNAMIC`` dims (``symbolic.auto``): ``{source: "static"}`` makes an AUTO dim
    static, ``{source: other_source}`` makes it the same symbol as another (earlier) dim,
    ``{source: ("range", lower, upper)}`` narrows its range, ``{source: ("expr", e)}`` makes it
    the expression ``e`` whose symbols are named after earlier dims' sources (``x.shape[0] *
    y.shape[0]``). Sources are ``x.shape[0]``-style descriptions.

    ``forced_static``: ``(id(tensor), dim)`` pairs that are static whatever the spec says
    (the second trace that checks whether a program also serves size 1).
    """
    specs = _top_level(combined_args, dynamic_shapes)
    occurrences: list[_Occurrence] = []
    shaped = {name: _walk(value, specs[name], name, occurrences, forced_static)
              for name, value in combined_args.items()}
    resolved = _Resolver(env, auto_refinements or {}).resolve(occurrences)
    return {name: _fill(value, resolved) for name, value in shaped.items()}


# ----- structure -----
def _top_level(combined_args: dict[str, Any], dynamic_shapes) -> dict[str, Any]:
    names = list(combined_args)
    if dynamic_shapes is None:
        return {name: None for name in names}
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise ExportUsageError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries but forward takes "
                f"{len(names)} inputs ({', '.join(names)}).",
                hint="Give one entry per input, in order (None for inputs without dynamic dims), "
                     "or use a dict keyed by parameter name.")
        return dict(zip(names, dynamic_shapes))
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in combined_args]
        if unknown:
            raise ExportUsageError(
                f"dynamic_shapes has key(s) {', '.join(map(repr, unknown))} that are not "
                f"parameters of forward (parameters: {', '.join(names)}).",
                hint="Key dynamic_shapes by forward's parameter names.")
        missing = [n for n in names if n not in dynamic_shapes]
        if missing:
            raise ExportUsageError(
                f"dynamic_shapes is missing key(s) {', '.join(map(repr, missing))}.",
                hint="Add an entry for every parameter, e.g. "
                     + ", ".join(f"{n!r}: None" for n in missing) + " for inputs that are static.")
        return dict(dynamic_shapes)
    raise ExportUsageError(
        f"dynamic_shapes must be None, a dict keyed by parameter name, or a tuple/list; "
        f"got {type(dynamic_shapes).__name__}.", hint=_DOC)


def _walk(value, spec, path: str, occurrences: list, forced=frozenset()) -> Any:
    """Mirror ``value``; tensors become lists of occurrence indices or static ints."""
    if isinstance(value, torch.Tensor):
        return _tensor(value, spec, path, occurrences, forced)
    if pytree.tree_is_leaf(value):
        static = isinstance(spec, DimHint) and spec.type is DimHintType.STATIC
        if type(value) is int and isinstance(spec, DimHint) and not static:
            return _integer(value, spec, path, occurrences)
        if type(value) is int and isinstance(spec, Dim):
            raise ExportUsageError(
                f"dynamic_shapes[{path}] is {spec!r}, but input {path} is an int: a named Dim "
                "stands for a tensor dimension.",
                hint=f"Use Dim.AUTO or Dim.DYNAMIC for {path} (optionally with min=/max=) to "
                     "make the int dynamic, or None to specialize the program on its value.")
        if spec is not None and not static:
            raise ExportUsageError(
                f"dynamic_shapes[{path}] is {spec!r}, but input {path} is a "
                f"{type(value).__name__}, not a tensor.",
                hint=f"Use None for {path}: only tensor dimensions can be dynamic.")
        return value
    children, context = _flatten_one(value)
    child_specs = _child_specs(value, spec, path, len(children))
    keys = _child_keys(value, len(children))
    mirrored = [_walk(c, s, f"{path}{k}", occurrences, forced)
                for c, s, k in zip(children, child_specs, keys)]
    return _Rebuild(pytree._get_node_type(value), context, mirrored)


def _flatten_one(value):
    node = pytree.SUPPORTED_NODES[pytree._get_node_type(value)]
    children, context = node.flatten_fn(value)
    return list(children), context


def _child_keys(value, n: int) -> list[str]:
    if isinstance(value, dict):
        return [f"[{k!r}]" for k in value]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [f".{f}" for f in value._fields]
    return [f"[{i}]" for i in range(n)]


def _child_specs(value, spec, path: str, n: int) -> list:
    if spec is None:
        return [None] * n
    if isinstance(value, dict):
        if not isinstance(spec, dict):
            raise ExportUsageError(
                f"dynamic_shapes[{path}] is a {type(spec).__name__}, but input {path} is a dict.",
                hint=f"Give a dict with the same keys ({', '.join(map(repr, value))}) or None.")
        unknown = [k for k in spec if k not in value]
        missing = [k for k in value if k not in spec]
        if unknown or missing:
            raise ExportUsageError(
                f"dynamic_shapes[{path}] has keys {sorted(map(repr, spec))} but input {path} has "
                f"keys {sorted(map(repr, value))}.",
                hint="Use exactly the input's keys (None for entries without dynamic dims).")
        return [spec[k] for k in value]
    if isinstance(spec, (list, tuple)) and not isinstance(spec, DimHint):
        if len(spec) != n:
            raise ExportUsageError(
                f"dynamic_shapes[{path}] has {len(spec)} entries but input {path} "
                f"({type(value).__name__}) has {n}.",
                hint="Give one entry per element (None for elements without dynamic dims).")
        return list(spec)
    raise ExportUsageError(
        f"dynamic_shapes[{path}] is {spec!r}, but input {path} is a {type(value).__name__} "
        f"of {n} elements.",
        hint="Mirror the input's structure: a list/tuple (or dict) of per-element specs, or None.")


@dataclass(frozen=True, slots=True)
class _Rebuild:
    """A container to rebuild once tensors are resolved (``cls``: its pytree node type)."""

    cls: type
    context: Any
    children: list


def _fill(value, resolved: dict[int, Any]):
    """The dims tree: containers PyTorch registers are rebuilt; a class registered by the
    program or a library becomes the list of its children (rebuilding it would run its
    constructor on dims), as ``dynamic_shapes`` states it."""
    if isinstance(value, _Rebuild):
        children = [_fill(c, resolved) for c in value.children]
        module = getattr(value.cls, "__module__", "") or ""
        if module.split(".")[0] not in ("builtins", "collections", "torch"):
            return children
        return pytree.SUPPORTED_NODES[value.cls].unflatten_fn(children, value.context)
    if isinstance(value, _TensorDims):
        return tuple(resolved[e] if isinstance(e, _Ref) else e for e in value.dims)
    if isinstance(value, _IntegerValue):
        return resolved[value.ref]
    return value


@dataclass(frozen=True, slots=True)
class _Ref:
    """Index of an occurrence in the resolver's list."""

    index: int


@dataclass(frozen=True, slots=True)
class _TensorDims:
    dims: tuple


@dataclass(frozen=True, slots=True)
class _IntegerValue:
    """A Python ``int`` input declared ``Dim.AUTO``/``Dim.DYNAMIC``: its value's entry."""

    ref: _Ref


def _integer(value: int, spec: DimHint, path: str, occurrences: list) -> _IntegerValue:
    """An ``int`` input declared dynamic: one occurrence whose symbol is the value itself (as
    in torch.export, a ``SymInt`` input)."""
    occurrences.append(_Occurrence(path, value, spec, integer=True))
    return _IntegerValue(_Ref(len(occurrences) - 1))


# ----- one tensor -----
def _tensor(tensor: torch.Tensor, spec, path: str, occurrences: list,
            forced=frozenset()) -> _TensorDims:
    ndim = tensor.dim()
    entries = _per_dim(spec, ndim, path)
    dims = []
    for index, entry in enumerate(entries):
        size = int(tensor.shape[index])
        source = f"{path}.shape[{index}]"
        if entry is None or _is_static_hint(entry) or (id(tensor), index) in forced:
            dims.append(size)
        elif isinstance(entry, int) and not isinstance(entry, bool):
            if entry != size:
                raise ExportUsageError(
                    f"dynamic_shapes gives the static size {entry} for {source}, but the example "
                    f"input has size {size}.",
                    hint=f"Use {size} (or None) for {source}, or pass an example of size {entry}.")
            dims.append(size)
        elif isinstance(entry, (Dim, DimHint)):
            occurrences.append(_Occurrence(source, size, entry))
            dims.append(_Ref(len(occurrences) - 1))
        else:
            raise ExportUsageError(
                f"dynamic_shapes entry for {source} is {entry!r} ({type(entry).__name__}); "
                "expected "
                f"a Dim, Dim.AUTO/DYNAMIC/STATIC, an int or None.",
                hint='Write e.g. Dim("batch", min=2, max=64) for a dynamic dimension, None for a '
                     "static one.")
    return _TensorDims(tuple(dims))


def _is_static_hint(entry) -> bool:
    return isinstance(entry, DimHint) and entry.type is DimHintType.STATIC


def _per_dim(spec, ndim: int, path: str) -> list:
    if spec is None:
        return [None] * ndim
    if isinstance(spec, dict):
        entries = [None] * ndim
        for key, entry in spec.items():
            if not isinstance(key, int) or isinstance(key, bool):
                raise ExportUsageError(
                    f"dynamic_shapes[{path}] has key {key!r}; dimension keys must be ints.",
                    hint=f"Key by dimension index, e.g. {{0: Dim('batch')}} for {path}.shape[0].")
            if not 0 <= key < ndim:
                raise ExportUsageError(
                    f"dynamic_shapes[{path}] names dimension {key}, but {path} has {ndim} "
                    f"dimension(s) (valid: 0..{ndim - 1}).",
                    hint=f"Use a dimension index between 0 and {ndim - 1}.")
            entries[key] = entry
        return entries
    if isinstance(spec, (list, tuple)):
        if len(spec) != ndim:
            raise ExportUsageError(
                f"dynamic_shapes[{path}] has {len(spec)} entries, but {path} has {ndim} "
                "dimension(s).",
                hint=f"Give exactly {ndim} entries (None for static dimensions), or a dict "
                     "{dim_index: Dim}.")
        return list(spec)
    if isinstance(spec, (Dim, DimHint)):
        raise ExportUsageError(
            f"dynamic_shapes[{path}] is a single {spec!r}, but {path} is a tensor with {ndim} "
            "dimension(s).",
            hint=f"Say which dimension it is: {{0: {spec!r}}} for {path}.shape[0].")
    raise ExportUsageError(
        f"dynamic_shapes[{path}] is {spec!r} ({type(spec).__name__}), but {path} is a tensor.",
        hint="Give a dict {dim_index: Dim}, a tuple with one entry per dimension, or None.")


# ----- symbols -----
class _Resolver:
    """Turns occurrences into symbols: groups named Dims, solves roots, checks examples."""

    def __init__(self, env: ShapeEnvironment, auto_refinements: dict):
        self.env = env
        self.auto_refinements = auto_refinements
        self._by_source: dict[str, Any] = {}

    def resolve(self, occurrences: list[_Occurrence]) -> dict[_Ref, Any]:
        roots = self._group_roots(occurrences)
        symbols = {name: self._root_symbol(name, dim, uses) for name, (dim, uses) in roots.items()}
        for name, (_, uses) in roots.items():  # AUTO dims refined to a named dim find it here
            for occ, derived in uses:
                if derived is None:
                    self._by_source[occ.source] = symbols[name]
        out = {}
        # a dim Dim.AUTO made an expression of others (``x.shape[0] = 2 * y.shape[0]``) is
        # resolved once the dims it names are, whichever input comes first
        pending = list(enumerate(occurrences))
        while pending:
            ready = [(i, occ) for i, occ in pending if self._names_resolved(occ)]
            if not ready:
                raise AssertionError(f"Dim.AUTO refinements name each other: {pending}")
            for index, occ in ready:
                out[_Ref(index)] = self._by_source[occ.source] = self._entry(occ, symbols)
            pending = [(i, occ) for i, occ in pending if _Ref(i) not in out]
        return out

    def _names_resolved(self, occ: _Occurrence) -> bool:
        refinement = self.auto_refinements.get(occ.source)
        if isinstance(refinement, tuple) and refinement[0] == "expr":
            return all(s.name in self._by_source for s in refinement[1].free_symbols)
        if isinstance(refinement, str) and refinement != "static":
            return refinement in self._by_source
        return True

    def _entry(self, occ: _Occurrence, symbols: dict):
        entry = occ.entry
        if isinstance(entry, DimHint):
            return self._hint_symbol(occ, entry)
        if isinstance(entry, DerivedDim):
            symbol = symbols[entry.root.__name__]
            return sympy.expand(entry.fn(symbol))
        if isinstance(entry, StaticDim):
            return occ.size
        return symbols[entry.__name__]

    def _hint_symbol(self, occ: _Occurrence, hint: DimHint):
        label = "Dim.DYNAMIC" if hint.type is DimHintType.DYNAMIC else "Dim.AUTO"
        auto = hint.type is DimHintType.AUTO
        if occ.integer:
            lower, upper = _integer_bounds(hint.min, hint.max, f"{label} at {occ.source}")
        else:
            lower, upper = _bounds(hint.min, hint.max, f"{label} at {occ.source}")
        if occ.size in (0, 1) and not occ.integer:
            if auto:
                return occ.size
            raise _small_example(occ, "Dim.DYNAMIC")
        _check_in_range(occ, occ.size, lower, upper, label)
        refinement = self.auto_refinements.get(occ.source)
        if refinement == "static" and auto:
            return occ.size
        if isinstance(refinement, tuple) and refinement[0] == "expr":  # z.shape[0] == x0 * y0
            expr = refinement[1]
            return sympy.expand(expr.xreplace(
                {s: sympy.sympify(self._by_source[s.name]) for s in expr.free_symbols}))
        if isinstance(refinement, tuple):  # ("range", lower, upper): a narrower range
            lower, upper = refinement[1], refinement[2]
        elif isinstance(refinement, str) and refinement != "static":
            return self._by_source[refinement]
        symbol = self.env.create_symbol("", occ.size, lower=lower, upper=upper, source=occ.source)
        if lower == 2 and (hint.min is None or hint.min <= 1) and not occ.integer:
            self.env.size_one.admit(symbol, requested=hint.min == 1)
        self.env.auto_symbols[symbol] = occ.source
        if not auto:
            self.env.dynamic_symbols.add(symbol)
        return symbol

    def _group_roots(self, occurrences):
        """``{root name: (root Dim, [(occurrence, derived Dim or None)])}``."""
        roots: dict[str, tuple[Dim, list]] = {}
        for occ in occurrences:
            entry = occ.entry
            if isinstance(entry, DimHint) or isinstance(entry, StaticDim):
                continue
            root, derived = (entry.root, entry) if isinstance(entry, DerivedDim) else (entry, None)
            name = root.__name__
            if name in roots:
                _check_same_dim(roots[name][0], root, occ)
            else:
                roots[name] = (root, [])
            roots[name][1].append((occ, derived))
        return roots

    def _root_symbol(self, name: str, dim: Dim, uses: list):
        lower, upper = _bounds(dim.min, dim.max, f"Dim {name!r}")
        hint = self._root_hint(name, uses)
        for occ, derived in uses:
            value = int(derived.fn(sympy.Integer(hint))) if derived is not None else hint
            label = f"Dim {name!r}" if derived is None else f"derived dim {derived.__name__}"
            if value != occ.size:
                raise ExportUsageError(
                    f"{occ.source} has example size {occ.size}, but {label} requires {value} "
                    f"(with {name} = {hint} from the other inputs).",
                    hint="Pass example inputs whose sizes satisfy the relations in dynamic_shapes, "
                         "or use separate Dims.")
            if occ.size in (0, 1):
                raise _small_example(occ, label)
            if derived is None:
                _check_in_range(occ, occ.size, lower, upper, label)
            else:
                lower = max(lower, _least_root(derived, dim))
        _check_root_range(name, hint, lower, upper, uses)
        first = uses[0][0]
        source = next((o.source for o, d in uses if d is None), f"{name} (via {first.source})")
        symbol = self.env.create_symbol(name, hint, lower=lower, upper=upper, source=source)
        if lower == 2 and dim.min <= 1 and all(
                derived is None or derived.fn(sympy.Integer(1)) >= 1 for _, derived in uses):
            self.env.size_one.admit(symbol, requested=dim.min == 1)
        return symbol

    def _root_hint(self, name: str, uses: list) -> int:
        direct = [(occ.source, occ.size) for occ, derived in uses if derived is None]
        sizes = {size for _, size in direct}
        if len(sizes) > 1:
            listing = ", ".join(f"{src} = {size}" for src, size in direct)
            raise ExportUsageError(
                f"Dim {name!r} is used for dimensions with different example sizes: {listing}.",
                hint="One Dim means equal sizes: pass equal example sizes, or use different Dims.")
        if sizes:
            return sizes.pop()
        occ, derived = uses[0]
        a = derived.fn(sympy.Integer(1)) - derived.fn(sympy.Integer(0))
        b = derived.fn(sympy.Integer(0))
        root_value = sympy.Rational(occ.size - b, a)
        if not root_value.is_Integer:
            raise ExportUsageError(
                f"{occ.source} has example size {occ.size}, which is not of the form "
                f"{derived.__name__} for any integer {name}.",
                hint=f"Pass an example size that {derived.__name__} can take.")
        return int(root_value)


def _bounds(min_value, max_value, label: str) -> tuple[int, int | None]:
    """``[max(min, 2), max]`` of a Dim (``None`` = unbounded above)."""

    lower = 0 if min_value is None or min_value is -int_oo else int(min_value)
    upper = None if max_value is None or max_value is int_oo else int(max_value)
    if upper is not None and upper < lower:
        raise ExportUsageError(f"{label} has min={lower} > max={upper}.", hint="Make min <= max.")
    if upper is not None and upper < 2:
        raise ExportUsageError(
            f"{label} has max={upper}, but a dynamic dimension takes sizes >= 2.",
            hint="Use a static size (None or the int) for a dimension that is always 0 or 1, or "
                 "raise max to at least 2.")
    return max(lower, 2), upper


def _integer_bounds(min_value, max_value, label: str) -> tuple[int, int | None]:
    """``[min, max]`` of an ``int`` input declared dynamic (upper None: unbounded): unlike a
    size, an int may be 0, 1 or negative, and the trace treats those like any other value
    (every decision on it is a guard). Unbounded below is the least int64 (what a kernel
    takes; :data:`INT_INPUT_MIN`, shown as ``-int_oo`` in the program's ranges)."""
    lower = INT_INPUT_MIN if min_value is None or min_value is -int_oo else \
        max(int(min_value), INT_INPUT_MIN)
    upper = None if max_value is None or max_value is int_oo else int(max_value)
    if upper is not None and upper < lower:
        raise ExportUsageError(f"{label} has min={lower} > max={upper}.", hint="Make min <= max.")
    return lower, upper


def _least_root(derived: DerivedDim, dim: Dim) -> int:
    """Smallest root value for which the derived dim is >= 2 (derived dims are A*x + B, A > 0)."""
    a = int(derived.fn(sympy.Integer(1)) - derived.fn(sympy.Integer(0)))
    b = int(derived.fn(sympy.Integer(0)))
    return -((b - 2) // a)  # ceil((2 - b) / a)


def _check_same_dim(first: Dim, other: Dim, occ: _Occurrence) -> None:
    if first is other:
        return
    if (first.min, first.max) != (other.min, other.max):
        raise ExportUsageError(
            f"two different Dims named {first.__name__!r} are used ({first!r} and {other!r}, the "
            f"second at {occ.source}); the same name means the same dimension.",
            hint="Create the Dim once and reuse the object, or give the Dims different names.")


def _check_in_range(occ: _Occurrence, size: int, lower: int | None, upper: int | None,
                    label: str) -> None:
    if (lower is not None and size < lower) or (upper is not None and size > upper):
        low, high = "-inf" if lower is None else lower, "inf" if upper is None else upper
        what = "value" if occ.integer else "size"
        raise ExportUsageError(
            f"{occ.source} has example {what} {size}, outside the range [{low}, {high}] "
            f"of {label}.",
            hint=f"Pass an example within [{low}, {high}], or widen the Dim's min/max.")


def _check_root_range(name: str, hint: int, lower: int, upper: int | None, uses) -> None:
    if upper is not None and lower > upper:
        raise ExportUsageError(
            f"Dim {name!r} has an empty range [{lower}, {upper}] once every dimension derived "
            "from it must be >= 2.", hint=f"Raise the max of {name!r} or change the derived dims.")
    if hint < lower or (upper is not None and hint > upper):
        shown = "inf" if upper is None else upper
        sources = ", ".join(o.source for o, _ in uses)
        raise ExportUsageError(
            f"the example sizes of {sources} give Dim {name!r} the value {hint}, outside its range "
            f"[{lower}, {shown}].",
            hint=f"Pass examples with {name} in [{lower}, {shown}] or widen the Dim.")


def _small_example(occ: _Occurrence, label: str) -> ExportUsageError:
    return ExportUsageError(
        f"{occ.source} is marked dynamic ({label}) but the example input has size {occ.size}. "
        "Sizes 0 and 1 take special paths in PyTorch kernels, so they cannot stand for other "
        "sizes.",
        hint=f"Pass an example with {occ.source} >= 2 (the exported program still accepts every "
             f"size in the Dim's range >= 2), or mark the dimension static (None).")
