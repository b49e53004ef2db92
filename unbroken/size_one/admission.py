"""The admission half of the size-1 feature (see :mod:`unbroken.size_one`): the dims the audit
found sensitive (whose spec admits 1: ``min=1``, ``Dim.AUTO``, ``Dim.DYNAMIC``, a named Dim's
default) are traced again at size 1, up to ``MAX_SYMBOLS`` of them (those declared ``min=1``
first), and admitted when the first program, with the dim set to 1, runs exactly the ops of
the second; the refused ones get their reason for the run-time checks and, when declared
``min=1``, a warning.
"""
from __future__ import annotations

import dataclasses
import operator
import warnings
from collections.abc import Callable

import sympy
import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..ir.meta_keys import SIZE_ONE_REFUSED
from ..ir.parts import ProgramParts
from ..program import ExportedProgram
from ..symbolic.diagnostics import UnbrokenError
from ..symbolic.node import sym_expr
from ..symbolic.ranges import ValueRange, static_truth
from ..symbolic.torch_compat import OpOverload, op_schema
from .at_one import at_values, sets_at_one
from .settle import RefusedAtOne
from .unit_meta import (
    LAYOUT_FOLLOWING,
    STRIDE_READING_PRODUCTS,
    VIEWS_WITH_SIZES,
    contiguous_at,
)

__all__ = ["SizeOneWarning", "admit_size_one", "same_program"]

MAX_SYMBOLS = 2


class SizeOneWarning(UserWarning):
    """A dim declared ``min=1`` keeps ``[2, ...]``: at size 1 the model's code takes another
    path (the message names the line), so size 1 needs its own export."""


@dataclasses.dataclass(frozen=True, slots=True)
class Retrace:
    """A trace at size 1: its program (the graph alone is compared: ``ProgramParts`` with
    unbroken's values), a renaming of its symbols to the first trace's, and the symbols
    (first trace's names) some answer of it depends on being >= 2."""

    program: ExportedProgram | ProgramParts
    rename: dict
    sensitive: frozenset


def admit_size_one(ep: ExportedProgram, audit, env, leaf_dims: dict, args, kwargs,
                   trace_at: Callable) -> ExportedProgram:
    """``ep`` (whose ranges already start at 1 for the dims the audit cleared) with
    ``[1, ...]`` also for the sensitive dims that traces at size 1 show to give the same
    program (up to ``MAX_SYMBOLS``, those declared ``min=1`` first: what ``Dim.AUTO`` does
    in torch, whose programs run size 1 unchecked, is checked here); the others' reasons
    recorded for the run-time checks.

    audit: the first trace's ``SizeOneAudit`` (its ``requested`` candidates, whose spec says
        ``min=1``, are warned about when refused); env: its environment;
    leaf_dims: ``id(example tensor) -> dims`` (ints / sympy expressions) of the first trace;
    trace_at(args, kwargs, forced) exports the resized inputs with ``forced``
    (``(id(tensor), dim)`` pairs) static and returns a ``Retrace``, or None when that needs
    another spec.
    """
    free = audit.settle(env)
    requested = audit.requested
    sensitive = sorted((s for s in audit.admits_one if s in audit.sensitive
                        and s in ep.range_constraints
                        and int(ep.range_constraints[s].lower) == 2), key=str)
    ep = _lift_refused_patterns(ep, audit, env, free, leaf_dims, args, kwargs, trace_at)
    if not sensitive:
        return ep
    tried = sorted((s for s in sensitive if s not in audit.final),
                   key=lambda s: s not in requested)[:MAX_SYMBOLS]
    admitted, patterns = _same_at_one(ep, audit, env, tried, free, leaf_dims, args, kwargs,
                                      trace_at)
    refused = {str(s): _reason(env, s, audit.sensitive[s], s in tried, audit.why.get(s))
               for s in sensitive if s not in admitted}
    for symbol in sensitive:
        if symbol not in admitted and symbol in requested:
            warnings.warn(_requested_refused(env, symbol, refused[str(symbol)]),
                          SizeOneWarning, stacklevel=5)
    result = ep
    if admitted:
        ranges = dict(ep.range_constraints)
        for symbol in admitted:
            ranges[symbol] = type(ranges[symbol])(1, ranges[symbol].upper)
        parts = ep.parts()
        if patterns:
            _assert_patterns(parts.graph_module, patterns, env)
        result = type(ep).from_parts(dataclasses.replace(parts, range_constraints=ranges))
    if refused:
        result.graph_module.meta[SIZE_ONE_REFUSED] = refused
    return result


def _lift_refused_patterns(ep, audit, env, free, leaf_dims, args, kwargs, trace_at):
    """``ep`` without the run-time assertions of the audit's refused patterns (sets of dims at
    1 under which a node's metadata differs, ``settle.RefusedAtOne``) that a trace at exactly
    that pattern shows to give the same program (the metadata differed in strides only
    nothing reads, say); up to ``MAX_SYMBOLS`` patterns."""
    lifted = []
    for pattern in audit.refused_sets[:MAX_SYMBOLS]:
        if pattern.ones <= free and _traces_the_same(
                ep, tuple(sorted(pattern.ones, key=str)), free - pattern.ones, leaf_dims,
                env.hint_of, args, kwargs, trace_at):
            lifted.append(pattern.describe(env.source_of))
    if not lifted:
        return ep
    parts = ep.parts()
    graph = parts.graph_module.graph
    for node in list(graph.nodes):
        if node.target is torch.ops.aten._assert_scalar.default and node.args[1] in lifted:
            condition = node.args[0]
            graph.erase_node(node)
            _erase_unread(graph, condition)
    parts.graph_module.recompile()
    return type(ep).from_parts(parts)


def _erase_unread(graph: fx.Graph, node) -> None:
    """``node`` and the size computations only it read, once nothing reads it."""
    if not isinstance(node, fx.Node) or node.users or node.op != "call_function":
        return
    inputs = list(node.all_input_nodes)
    graph.erase_node(node)
    for source in inputs:
        _erase_unread(graph, source)


# symbols traced at 1 together with those the input facts force to 1 with them
_CLOSED_MAX = 3


def _same_at_one(ep, audit, env, tried, free, leaf_dims, args, kwargs, trace_at):
    """``(admitted, patterns)``: the symbols of ``tried`` -- with those the program's input
    facts force to 1 with them (a mask's batch ``b`` with the batch ``n`` it must equal or
    broadcast to: ``n == b or b == 1``), up to ``_CLOSED_MAX`` -- such that some set of them
    at 1 traces to ``ep``'s program (with ``free`` still free of size-1 dependent answers),
    and the sets of them at 1 that do not (``RefusedAtOne``), to assert against at run time.

    Every set of the admitted symbols at 1 that an input reaches (the others >= 2, the
    input facts true) is traced: the same program, or refused by its pattern; a symbol every
    reached set containing it fails keeps ``[2, ...]``."""
    group = set(tried)
    for symbol in tried:
        group |= _forced_to_one(audit, env, {symbol})
    group = sorted((s for s in group if s in audit.admits_one and s not in free), key=str)
    if len(group) > _CLOSED_MAX:
        group = sorted(tried, key=str)
    same, failed = [], []
    for subset in sets_at_one(group):
        # the free symbols they force to 1 go to 1 with them (a mask's seq that must equal
        # the input's), the other free ones stay free
        closed = _forced_to_one(audit, env, subset)
        if closed - free != subset or _unreached(audit, env, closed, free - closed):
            continue  # no admitted input has exactly these at 1
        if _traces_the_same(ep, tuple(sorted(closed, key=str)), free - closed, leaf_dims,
                            env.hint_of, args, kwargs, trace_at):
            same.append(subset)
        else:
            failed.append(subset)
    admitted = {s for s in group if any(s in subset for subset in same)}
    patterns = [RefusedAtOne(subset, frozenset(admitted) - subset,
                             _guard_of(audit, subset))
                for subset in failed if subset <= admitted]
    return admitted, patterns


def _forced_to_one(audit, env, ones) -> frozenset:
    """``ones`` and the symbols whose spec admits 1 that the input facts force to 1 once
    ``ones`` are 1 (repeatedly): a fact with one alternative left that can hold, ``t == 1``
    (the others false whatever the sizes whose spec admits 1, taken from 1)."""
    ranges = dict(env.var_ranges)
    for symbol in audit.admits_one:
        ranges[symbol] = ValueRange(1, ranges[symbol].upper)
    ones, cache = set(ones), {}
    while True:
        values = {s: sympy.Integer(1) for s in ones}
        more = set()
        for fact in env.input_facts:
            try:
                options = sympy.Or.make_args(at_values(fact, values))
            except ArithmeticError:  # undefined there (``x % (s - 1)``): forces nothing
                continue
            left = [option for option in options
                    if static_truth(option, ranges, cache) is not False]
            if len(left) == 1 and isinstance(left[0], sympy.Eq) and 1 in left[0].args:
                more |= {t for t in left[0].free_symbols if t in audit.admits_one} - ones
        if not more:
            return frozenset(ones)
        ones |= more


def _unreached(audit, env, subset, free) -> bool:
    """Whether an input fact is false with ``subset`` at 1, the other candidates >= 2 and
    the ``free`` symbols (admitted without a trace) >= 1."""
    ones = {s: sympy.Integer(1) for s in subset}
    ranges = dict(env.var_ranges)
    for symbol in free:
        ranges[symbol] = ValueRange(1, ranges[symbol].upper)
    cache: dict = {}
    return any(_false_at(fact, ones, ranges, cache) for fact in env.input_facts)


def _false_at(fact, ones: dict, ranges: dict, cache: dict) -> bool:
    """Whether ``fact`` with ``ones`` put in is false for every size in ``ranges`` (not when
    it is undefined there: the set is then traced, not skipped)."""
    try:
        return static_truth(at_values(fact, ones), ranges, cache) is False
    except ArithmeticError:
        return False


def _guard_of(audit, subset):
    return next(audit.sensitive[s] for s in sorted(subset, key=str) if s in audit.sensitive)


def _assert_patterns(graph_module: fx.GraphModule, patterns: list, env) -> None:
    """An ``aten._assert_scalar`` per refused pattern after the placeholders, reading the
    sizes of the inputs (the input checks of ``module()`` read them too)."""
    graph = graph_module.graph
    sizes: dict = {}
    for node in graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor):
            for dim, size in enumerate(value.shape):
                sizes.setdefault(sym_expr(size), (node, dim, size))
    first = next(n for n in graph.nodes if n.op != "placeholder")
    with graph.inserting_before(first):
        for pattern in patterns:
            terms = []
            for symbol, test, op in (
                    *((s, sympy.Ne(s, 1), operator.ne) for s in sorted(pattern.ones, key=str)),
                    *((s, sympy.Eq(s, 1), operator.eq) for s in sorted(pattern.others,
                                                                       key=str))):
                node, dim, size = sizes[symbol]
                read = graph.call_function(torch.ops.aten.sym_size.int, (node, dim))
                read.meta["val"] = size
                term = graph.call_function(op, (read, 1))
                term.meta["val"] = env.symbool(test)
                terms.append((term, test))
            condition, expr = terms[0]
            for term, test in terms[1:]:
                expr = sympy.Or(expr, test)
                condition = graph.call_function(operator.or_, (condition, term))
                condition.meta["val"] = env.symbool(expr)
            check = graph.call_function(torch.ops.aten._assert_scalar.default,
                                        (condition, pattern.describe(env.source_of)))
            check.meta["val"] = None
    graph_module.recompile()


def _traces_the_same(ep, subset, free, leaf_dims, hints, args, kwargs, trace_at) -> bool:
    values = {s: sympy.Integer(1) for s in subset}
    resized = _resize((args, kwargs), leaf_dims, values, hints)
    if resized is None:
        return False
    (new_args, new_kwargs), forced = resized
    try:
        retrace = trace_at(new_args, new_kwargs, forced)
    except UnbrokenError:
        return False  # the code refuses size 1 (or needs a different spec for it)
    return retrace is not None and not retrace.sensitive & free and same_program(
        ep, retrace.program, values, retrace.rename)


def _reason(env, symbol, guard, traced: bool, why: str | None = None) -> str:
    """Why ``symbol`` keeps ``[2, ...]``: the answer that depends on it being >= 2 (and
    ``why`` that answer matters, when the guard alone does not say it)."""
    where = guard.location
    place = ""
    if where is not None:
        source = f" ({where.source.strip()})" if where.source else ""
        place = f" at {where.filename}:{where.lineno}{source}"
    op = f" in {guard.op}" if guard.op else ""
    then = ("a trace at size 1 gives a different program" if traced else
            f"checking size 1 needs a trace at size 1, done for {MAX_SYMBOLS} dims per export "
            "(those declared min=1 first): declare this one Dim.AUTO(min=1) or "
            "Dim(..., min=1), and others static or min=2, to have it checked")
    if why:  # a trace at size 1 would record the other program: no use offering one
        return f"the program relies on {guard.describe(env.source_of)}{op}{place}: {why}"
    return (f"the program relies on {guard.describe(env.source_of)}{op}{place}, which "
            f"may not hold at {env.source_of(symbol)} = 1, and {then}")


def _requested_refused(env, symbol, reason: str) -> str:
    return (f"{env.source_of(symbol)} is declared min=1 but the program admits it from 2: "
            f"{reason}. Calls with size 1 are refused; declare min=2, or "
            f"export a separate program from an example of size 1 (that dim then static).")


def _resize(inputs, leaf_dims: dict, values: dict, hints: Callable):
    """The example inputs cut down so that ``values`` hold, and the dims that then are static;
    None when a size cannot be reached by cutting."""
    forced: set = set()
    failed = []

    def cut(leaf):
        dims = leaf_dims.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
        if dims is None:
            return leaf
        new, pins = leaf, []
        for index, expr in enumerate(dims):
            if isinstance(expr, int) or not (expr.free_symbols & set(values)):
                continue
            try:
                size = hints(at_values(expr, values))
            except ArithmeticError:  # undefined there (``x // (s - 1)``)
                size = None
            if size is None or not 1 <= size <= leaf.shape[index]:
                failed.append(index)
                return leaf
            new = new.narrow(index, 0, int(size))
            pins.append(index)
        new = new.clone()
        forced.update((id(new), index) for index in pins)
        return new

    resized = pytree.tree_map(cut, inputs)
    return None if failed else (resized, frozenset(forced))


def same_program(general: ExportedProgram, special: ExportedProgram | ProgramParts, values: dict,
                 rename=None) -> bool:
    """Whether ``general`` with its symbols set to ``values`` runs exactly the ops of
    ``special``: the same tensor ops in the same order with the same arguments (sizes compared
    as numbers or expressions), the same outputs and the same constants. ``rename`` maps
    ``special``'s symbols to ``general``'s."""
    sides = _Sides(values, rename or {})
    if set(general.constants) != set(special.constants) or any(
            not _same_tensor(general.constants[k], special.constants[k])
            for k in general.constants):
        return False
    return _same_graph(general.graph_module, special.graph_module, sides)


def _same_graph(left_module: fx.GraphModule, right_module: fx.GraphModule,
                sides: _Sides) -> bool:
    """The node-by-node comparison of ``same_program``; subgraphs (grad-mode regions,
    ``torch.cond`` branches) read by ``get_attr`` are compared the same way."""
    left, right = _ops(left_module, sides.general), _ops(right_module, sides.special)
    if len(left[0]) != len(right[0]):
        return False
    outer, sides.skipped = sides.skipped, (left[1], right[1])
    try:
        mapping: dict = {}
        for a, b in zip(left[0], right[0]):
            if a.op != b.op or (a.op == "placeholder" and a.name != b.name):
                return False
            if a.op == "get_attr":
                if not _same_attribute(getattr(left_module, a.target),
                                       getattr(right_module, b.target), sides):
                    return False
            elif not _same_target(a, b) or not (
                    _same_arg(a.args, b.args, mapping, sides)
                    and _same_arg(a.kwargs, b.kwargs, mapping, sides)
                    and _same_value(a.meta.get("val"), b.meta.get("val"), sides)):
                return False
            mapping[a] = b
        return True
    finally:
        sides.skipped = outer


def _same_target(a: fx.Node, b: fx.Node) -> bool:
    """The same op; ``view`` and ``_unsafe_view`` (a reshape's view of its copy) compute the
    same values and alias their input alike, as ``reshape`` and the ``view`` it is at 1."""
    return a.target == b.target or {a.target, b.target} <= VIEWS_WITH_SIZES \
        or {a.target, b.target} <= _RESHAPE_OR_VIEW


# ``reshape`` recorded whole (``SizeOneAudit.note_layout_at_one``) views at 1 where the trace
# copied: the trace at 1 records its view there.
_RESHAPE_OR_VIEW = frozenset({torch.ops.aten.reshape.default, torch.ops.aten.view.default})


def _aliasing_observed(node: fx.Node) -> bool:
    """Whether ``node``'s result, or a view of it (through ops returning an alias of their
    input, and ``_unsafe_view``), or what pointwise ops and copies make of it (their outputs
    take its layout), is returned, read by a subgraph, written in place, or read by another
    op: a matmul or a reduction may round differently on a copy than on the strided view
    eager reads at size 1 (the order of its sums follows the layout), so only pointwise
    readers, whose values do not depend on it, let the copy count as its input."""
    return _reaches(node, _aliasing_reader)


def _aliasing_reader(user: fx.Node):
    schema = _schema(user.target)
    if user.op != "call_function" or (schema is None and user.target is not operator.getitem):
        return True  # returned, or a subgraph / anything unknown: it may observe
    if schema is not None and schema.is_mutable:
        return True
    if user.target is operator.getitem or user.target in VIEWS_WITH_SIZES or any(
            ret.alias_info is not None for ret in schema.returns) \
            or torch.Tag.pointwise in getattr(user.target, "tags", ()) \
            or user.target in LAYOUT_FOLLOWING:
        return _FOLLOW  # a pointwise op's output (a copy's) takes its layout
    return True


_FOLLOW = "follow"


def _reaches(node: fx.Node, judge) -> bool:
    """Whether ``judge`` says True of a reader of ``node``, or of a reader of the readers it
    says ``_FOLLOW`` of (anything else: that reader is fine, not followed)."""
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for user in current.users:
            verdict = judge(user)
            if verdict is True:
                return True
            if verdict == _FOLLOW:
                stack.append(user)
    return False


def _schema(target):
    """The schema of an aten op target (None for Python functions and subgraph calls)."""
    return op_schema(target) if isinstance(target, OpOverload) else None


def _same_attribute(a, b, sides: _Sides) -> bool:
    if isinstance(a, fx.GraphModule) and isinstance(b, fx.GraphModule):
        return _same_graph(a, b, sides)
    return _same_tensor(a, b)


def _ops(graph_module, substitute) -> tuple[list, dict]:
    """The nodes that compute tensors (size arithmetic, size assertions, whole-dim slices and
    unobserved copies left out), and ``{skipped node: its input}``; ``substitute`` puts the
    comparison's sizes into an expression of this side (``_Sides``).

    A whole-dim slice (``x[:]``: start 0, step 1, end at or past the size) is the identity;
    indexing records it or not depending on whether the size is static (at size 1) or not.
    A copy (``clone``) has its input's values: ``contiguous()`` and ``reshape`` copy or not
    depending on the layout, which a dim of size 1 changes (it merges with any other). Only
    the aliasing differs, which nothing can observe unless the copy, or a view of it, is
    returned or written in place (``_aliasing_observed``), or the program writes anything
    in place (the copy's input then may change after it): those copies are compared. A
    copy whose input is contiguous at the compared sizes (``contiguous()`` copies at >= 2 and
    returns its input at 1: ``x.transpose(1, 2).contiguous()`` over a dim of 1) has its
    input's layout there too, and any reader computes the same values from either
    (``_copy_of_contiguous``)."""
    nodes, skipped = [], {}
    graph = graph_module.graph
    functional = not any(_schema(node.target) is not None and _schema(node.target).is_mutable
                         for node in graph.nodes if node.op == "call_function")
    for node in graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._assert_scalar.default:
            continue
        if isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat)):
            continue
        if _is_whole_slice(node) or (functional and (
                _is_unobserved_copy(node) or _copy_of_contiguous(node, substitute))):
            skipped[node] = skipped.get(node.args[0], node.args[0])
            continue
        nodes.append(node)
    return nodes, skipped


def _is_unobserved_copy(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target is not torch.ops.aten.clone.default:
        return False
    layout = node.kwargs.get("memory_format")
    return layout in (None, torch.contiguous_format, torch.preserve_format) \
        and not _aliasing_observed(node)


def _copy_of_contiguous(node: fx.Node, substitute) -> bool:
    """Whether ``node`` is a copy (``clone``, contiguous or layout-preserving) of a tensor
    that is contiguous at the compared sizes, whose aliasing nothing observes.

    Contiguous as torch decides it (strides of dims of size 1 are not read): at those sizes
    the copy and its input hold the same elements in the same order and differ at most in
    the strides of dims of size 1, which kernels skip as ``is_contiguous()`` does -- the
    op-by-op comparison at 1 found eager's ``x.transpose(1, 2).contiguous()`` a no-op there,
    read by a matmul. What could still tell them apart is the aliasing (``_layout_escapes``:
    returned, written, read by a subgraph or an unknown call) and ops that read the strides
    themselves (``as_strided``, a stride query)."""
    if node.op != "call_function" or node.target is not torch.ops.aten.clone.default:
        return False
    if node.kwargs.get("memory_format") not in (None, torch.contiguous_format,
                                                torch.preserve_format):
        return False
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, fx.Node) else None
    return isinstance(value, torch.Tensor) and contiguous_at(value, substitute) \
        and not _layout_escapes(node)


# Ops that read a tensor's strides or storage offset, not only its elements.
_LAYOUT_READING = frozenset({"as_strided", "as_strided_", "as_strided_copy",
                             "as_strided_scatter", "sym_stride", "sym_storage_offset",
                             "stride", "storage_offset", "is_contiguous",
                             "is_non_overlapping_and_dense", "set_", "_reshape_alias",
                             *STRIDE_READING_PRODUCTS})


def _layout_escapes(node: fx.Node) -> bool:
    """Whether ``node``'s result, or a view of it, is returned, written in place, read by a
    subgraph or a call without a schema, or read by an op that reads strides
    (``_LAYOUT_READING``); other readers see its elements only."""
    return _reaches(node, _layout_reader)


def _layout_reader(user: fx.Node):
    if user.op != "call_function":
        return True
    if user.target is operator.getitem:
        return _FOLLOW
    schema = _schema(user.target)
    if schema is None or schema.is_mutable \
            or user.target.overloadpacket.__name__ in _LAYOUT_READING:
        return True
    if user.target in VIEWS_WITH_SIZES or any(ret.alias_info is not None
                                              for ret in schema.returns):
        return _FOLLOW
    return False


def _is_whole_slice(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target is not torch.ops.aten.slice.Tensor:
        return False
    defaults = (None, 0, None, None, 1)  # slice.Tensor(self, dim=0, start=None, end=None, step=1)
    source, _, start, end, step = tuple(node.args) + defaults[len(node.args):]
    value, before = node.meta.get("val"), getattr(source, "meta", {}).get("val")
    whole = end is None or (isinstance(end, int) and end >= _INT64_MAX)
    return (start in (0, None) and step == 1 and whole and isinstance(value, torch.Tensor)
            and isinstance(before, torch.Tensor)
            and [sym_expr(x) for x in value.shape] == [sym_expr(x) for x in before.shape])


_INT64_MAX = 2**63 - 1


def _same_arg(a, b, mapping: dict, sides: _Sides) -> bool:
    if isinstance(a, fx.Node):
        a = sides.skipped[0].get(a, a)
    if isinstance(b, fx.Node):
        b = sides.skipped[1].get(b, b)
    if isinstance(a, fx.Node) and a in mapping:
        return b is mapping[a]
    if isinstance(a, fx.Node) or isinstance(b, fx.Node):
        return _same_size(a, b, sides)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_arg(x, y, mapping, sides) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_arg(a[k], b[k], mapping, sides) for k in a)
    return type(a) is type(b) and a == b


class _Sides:
    """The substitutions of one comparison: ``values`` on the general program's side,
    ``rename`` on the special one's."""

    def __init__(self, values: dict, rename: dict):
        self.values, self.rename = values, rename
        self.skipped: tuple[dict, dict] = ({}, {})  # per side: whole-dim slice -> its input

    def general(self, expr):
        return sympy.expand(sympy.sympify(expr).xreplace(self.values))

    def special(self, expr):
        return sympy.expand(sympy.sympify(expr).xreplace(self.rename))


def _same_size(a, b, sides: _Sides) -> bool:
    left, right = _size_of(a, sides.general), _size_of(b, sides.special)
    return left is not None and left == right


def _size_of(arg, substitute):
    """A size argument as a sympy expression, substituted; None if not a size."""
    if isinstance(arg, fx.Node):
        value = arg.meta.get("val")
        if not isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return None
        return substitute(sym_expr(value))
    if isinstance(arg, (int, float, bool)):
        return sym_expr(arg)
    return None


def _same_value(a, b, sides: _Sides) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
            sides.general(sym_expr(x)) == sides.special(sym_expr(y))
            for x, y in zip(a.shape, b.shape))
    return type(a) is type(b)


def _same_tensor(a, b) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
        and a.dtype == b.dtype and torch.equal(a, b)
