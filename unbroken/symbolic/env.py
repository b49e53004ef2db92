"""The shape environment: symbols, their ranges and hints, and the guards tracing records.

Decision path for every question a meta kernel or the user's code asks (the hot path):

1. constant-fold: a sympy ``true``/``false`` or a number answers itself;
2. cache: the same expression asked again gets the same answer, recorded once;
3. value ranges: if the answer is the same for every value in the symbols' ranges
   (``Ne(s0, 1)`` with ``s0`` in ``[2, oo)``), return it and record nothing;
4. otherwise take the answer at the example inputs (the hints) and record a ``Guard``
   with the user's stack and the current op. Expressions over unbacked symbols have no hint:
   ``DataDependentError``, unless the caller supplied a fallback (``guard_or_false``).

Nothing here rewrites expressions with what guards imply (no replacements): the recorded
guards are checked against the spec later by ``solver.check_guards``.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import sympy
import torch

from . import expr as E
from .diagnostics import DataDependentError, ExportUsageError, UserFrame
from .guards import Guard, render_expr
from .node import SymNode
from .ranges import ValueRange, bound, static_truth
from .settle_one import forced_equalities, sets_at_one, settle_check, smallest_first

__all__ = ["AnswersAtOne", "DryRunUndecided", "ShapeEnvironment", "SymbolInfo",
           "flipped_at_one", "holds_at_one"]

_AT_ONE_MAX = 3  # symbols checked together at 1 (2**n - 1 checks); beyond, they count


def holds_at_one(symbols, check: Callable[[dict], bool], within=None) -> bool:
    """Whether ``check(ones)`` holds for every non-empty set of ``symbols`` put at 1
    (``ones``: ``{symbol: 1}``); False beyond ``_AT_ONE_MAX`` symbols.

    within: when given, the only sets that may fail (``AnswersAtOne.flips``: the sets under
    which an answer changed); the others are known to hold and are not checked."""
    return all(check({s: sympy.Integer(1) for s in subset})
               for subset in _sets_at_one(symbols, within))


def flipped_at_one(symbols, holds: Callable[[dict], bool]) -> list[frozenset] | None:
    """The non-empty sets of ``symbols`` which, put at 1, make ``holds(ones)`` False; None
    beyond ``_AT_ONE_MAX`` symbols (every set counts then)."""
    if len(symbols) > _AT_ONE_MAX:
        return None
    return [frozenset(subset) for subset in _sets_at_one(symbols, None)
            if not holds({s: sympy.Integer(1) for s in subset})]


def _sets_at_one(symbols, within) -> list:
    """The sets of ``symbols`` to put at 1, smallest first (name order within a size); a
    single impossible set (``(None,)``) beyond ``_AT_ONE_MAX`` symbols, so that checks fail."""
    if within is not None:
        free = set(symbols)
        return smallest_first(subset for subset in within if subset <= free)
    if len(symbols) > _AT_ONE_MAX:
        return [(None,)]
    return list(sets_at_one(symbols))


class AnswersAtOne(dict):
    """The size-1 sensitive answers given inside one node's meta computation (or one leaf
    call): ``{symbol: Guard}``, and ``flips``, the sets of symbols which, put at 1, change one
    of those answers (None once an answer had too many symbols to enumerate: every set
    counts). A set no answer changes under gives the same computation, so only ``flips``
    need the metadata compared at 1."""

    __slots__ = ("flips",)

    def __init__(self):
        super().__init__()
        self.flips: set | None = set()

    def note(self, symbols, guard, flips) -> None:
        for symbol in symbols:
            self.setdefault(symbol, guard)
        if flips is None or self.flips is None:
            self.flips = None
        else:
            self.flips.update(flips)


@functools.lru_cache(maxsize=8192)
def _put_ones(expr, symbols: tuple):
    """``expr`` with each of ``symbols`` replaced by 1. Cached for the process: substituting
    re-evaluates the expression (most of an audit's cost), and every export of a model audits
    the same questions."""
    return expr.xreplace({s: sympy.Integer(1) for s in symbols})


@dataclass(frozen=True, slots=True)
class SymbolInfo:
    """What the environment knows about one symbol.

    symbol:   the sympy symbol (``s0`` backed, ``u0`` unbacked int, ``zuf0`` unbacked float).
    hint:     the example value (backed symbols), or None (unbacked).
    source:   human description used in messages, e.g. ``x.shape[0]`` or ``y.item()``.
    name:     the user's name for it (a ``Dim`` name such as ``batch``), or '' when none.
    kind:     ``"backed"``, ``"unbacked"`` (any int), ``"size"`` (unbacked, >= 0) or ``"float"``.
    """

    symbol: sympy.Symbol
    hint: int | float | None
    source: str
    name: str
    kind: str


class ShapeEnvironment:
    """Owns the symbols of one export, their value ranges, and the recorded guards.

    Attributes:
        location_provider: zero-arg callable returning the current user stack (a tuple of
            ``UserFrame``, innermost last) or ``()``; set by the frontend. Guards and errors
            store what it returns at the moment they are born.
        symbols:     ``{symbol: SymbolInfo}`` in creation order.
        var_ranges:  ``{symbol: ValueRange}``: the current ranges (spec ranges refined by
                     ``torch._check`` facts).
        spec_ranges: ``{symbol: ValueRange}``: the ranges as created (the user's spec).
        guards:      every recorded decision, in order, deduplicated.
        facts:       the booleans asserted by ``torch._check`` (also in ``guards`` with
                     ``kind == "expect_true"``).
    """

    def __init__(self, location_provider: Callable[[], tuple[UserFrame, ...]] | None = None):
        self.location_provider = location_provider
        self.symbols: dict[sympy.Symbol, SymbolInfo] = {}
        self.var_ranges: dict[sympy.Symbol, ValueRange] = {}
        self.spec_ranges: dict[sympy.Symbol, ValueRange] = {}
        self.guards: list[Guard] = []
        self.facts: list[sympy.Basic] = []
        # Dim.AUTO and Dim.DYNAMIC symbols: the spec lets export adopt what the code requires
        # of them (symbolic.auto). symbol -> the source of its dimension (``x.shape[0]``), the
        # key of a refinement. ``dynamic_symbols``: those of Dim.DYNAMIC, never made static.
        self.auto_symbols: dict[sympy.Symbol, str] = {}
        self.dynamic_symbols: set[sympy.Symbol] = set()
        # symbols whose spec admits 1 although tracing gives them [2, ...] (``min=1``,
        # Dim.AUTO, Dim.DYNAMIC, a named Dim's default min): export checks whether the program
        # also serves size 1 (see unbroken.size_one). ``one_sensitive``: those of them on which
        # some decision of the trace would have gone otherwise at 1 -> that decision (a Guard)
        self.admits_one: set[sympy.Symbol] = set()
        self.one_sensitive: dict[sympy.Symbol, Guard] = {}
        self.one_requested: set[sympy.Symbol] = set()  # of admits_one: declared min=1
        self.one_why: dict[sympy.Symbol, str] = {}  # of one_sensitive: why its answer matters
        self._aligned_broadcast = 0  # > 0 inside a pointwise op whose operands align
        # one dict per meta computation of a recorded node (innermost last): its "is this size
        # 1?" questions that the audit found sensitive, settled by the recorder comparing the
        # node's output metadata at 1 (see unit_scope)
        self._unit_scopes: list[dict] = []
        self._dry = 0  # > 0: answer only what ranges or earlier answers settle (see dry)
        self._dry_ones: list[dict] = []  # the symbols each open dry run puts at 1
        # (pending answers of one node, check(ones) -> bool): run once the trace ends and the
        # input facts are known, for the symbols nothing else has made sensitive by then (see
        # settle_size_one)
        self._deferred_checks: list[tuple[dict, Callable]] = []
        # facts over input sizes the program asserts before computing anything (relations no
        # spec can state): an input they refuse never reaches a node (see settle_size_one)
        self.input_facts: list = []
        # sets of sizes at 1 under which a node computes something else, refused at run time
        # by an assertion (settle_one.RefusedAtOne) the pipeline adds to the program
        self.one_refused_sets: list = []
        # sensitive answers -> (Guard, symbols): a cached answer reused by a later node (or
        # outside any) counts there too
        self._sensitive_answers: dict = {}
        self._hints: dict[sympy.Symbol, int | float] = {}
        self._op_stack: list[str] = []
        self._decided: dict[tuple, bool] = {}
        self._bound_cache: dict = {}
        self._oblivious_cache: dict = {}
        self.version = 0  # bumped whenever a range changes or a symbol is made
        self._backed_count = 0
        self._unbacked_count = 0

    # ----- symbols -----
    def create_symbol(self, name: str, hint: int, *, lower: int = 2, upper: int | None = None,
                      source: str = "") -> sympy.Symbol:
        """A backed size symbol ``s<n>`` with value range ``[lower, upper]`` (None = unbounded).

        ``name`` is the user's name for the dimension (a ``Dim`` name) or ''; the sympy
        symbol itself is always named ``s<n>`` (PyTorch's convention for backed sizes).
        ``hint`` is the example size and must lie in the range.
        """
        if upper is not None and upper < lower:
            raise ExportUsageError(
                f"empty range [{lower}, {upper}] for {source or name or 'a dimension'}")
        if not (lower <= hint and (upper is None or hint <= upper)):
            raise ExportUsageError(
                f"example size {hint} of {source or name} is outside its range [{lower}, {upper}]")
        symbol = sympy.Symbol(f"{E.BACKED_PREFIX}{self._backed_count}", integer=True,
                              **({"positive": True} if lower >= 1 else {"nonnegative": True}))
        self._backed_count += 1
        self._register(SymbolInfo(symbol, hint, source, name, "backed"), ValueRange(lower, upper))
        self._hints[symbol] = hint
        return symbol

    def create_unbacked_symbol(self, kind: str = "int", source: str = "") -> sympy.Symbol:
        """A symbol with no example value (``.item()``, ``nonzero`` sizes, ...).

        kind: ``"int"`` (range (-oo, oo)), ``"size"`` (range [0, oo); treated as >= 2 by
        size-oblivious decisions) or ``"float"``.
        """
        symbol = E.make_unbacked_symbol(self._unbacked_count, kind)
        self._unbacked_count += 1
        value_range = ValueRange(0, None) if kind == "size" else ValueRange.unbounded()
        origin = "unbacked" if kind == "int" else kind
        self._register(SymbolInfo(symbol, None, source, "", origin), value_range)
        return symbol

    def _register(self, info: SymbolInfo, value_range: ValueRange) -> None:
        self.symbols[info.symbol] = info
        self.var_ranges[info.symbol] = value_range
        self.spec_ranges[info.symbol] = value_range
        self._invalidate()

    def source_of(self, symbol: sympy.Symbol) -> str:
        """The human description of a symbol (``x.shape[0]``), or its name."""
        info = self.symbols.get(symbol)
        return (info.source or info.name or symbol.name) if info else symbol.name

    def is_unbacked(self, symbol: sympy.Symbol) -> bool:
        info = self.symbols.get(symbol)
        return info.hint is None if info else E.is_unbacked_symbol(symbol)

    def set_range(self, symbol: sympy.Symbol, value_range: ValueRange, *,
                  spec: bool = False) -> None:
        """Replace a symbol's range (``spec=True`` also changes the spec range)."""
        self.var_ranges[symbol] = value_range
        if spec:
            self.spec_ranges[symbol] = value_range
        self._invalidate()

    def _invalidate(self) -> None:
        self.version += 1  # what ranges settle may change: caches keyed on it start over
        self._bound_cache.clear()
        self._oblivious_cache.clear()

    # ----- values -----
    def symint(self, expr) -> torch.SymInt | int:
        """A ``torch.SymInt`` for an integer expression; a plain int when it is constant."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        return torch.SymInt(SymNode(expr, self, int, self.hint_of(expr)))

    def symbool(self, expr) -> torch.SymBool | bool:
        """A ``torch.SymBool`` for a boolean expression; a plain bool when it is constant."""
        expr = sympy.sympify(expr)
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        return torch.SymBool(SymNode(expr, self, bool, self.hint_of(expr)))

    def sym_value(self, expr) -> torch.SymInt | torch.SymFloat | int:
        """The value of a size-arithmetic expression: a ``torch.SymInt`` when it is an integer,
        a ``torch.SymFloat`` when it is real (``IntTrueDiv(s0, 3)``, ``ToFloat(s0)``: sympy
        cannot prove them integers, every symbol being declared integer or real)."""
        expr = sympy.sympify(expr)
        return self.symint(expr) if expr.is_integer else self.symfloat(expr)

    def symfloat(self, expr) -> torch.SymFloat:
        """A ``torch.SymFloat`` for a real expression."""
        expr = sympy.sympify(expr)
        hint = self.hint_of(expr)
        return torch.SymFloat(SymNode(expr, self, float, None if hint is None else float(hint)))

    def make_meta_tensor(self, example: torch.Tensor, dims: Sequence) -> torch.Tensor:
        """A meta tensor like ``example`` (dtype, requires_grad) with sizes ``dims``.

        ``dims``: one entry per dimension, an ``int`` (static) or a sympy expression.
        Strides are contiguous, laid out in the same dim order as the example's strides
        (a channels-last example gives a channels-last meta tensor).
        """
        if len(dims) != example.dim():
            raise ExportUsageError(
                f"{len(dims)} dimension entries given for a tensor with {example.dim()} dimensions")
        exprs = [sympy.sympify(d) for d in dims]
        order = sorted(range(len(exprs)), key=lambda d: (example.stride(d), -d))
        strides: list = [None] * len(exprs)
        running = sympy.Integer(1)
        for d in order:
            strides[d] = running
            running = running * exprs[d]
        return torch.empty_strided(
            [self.symint(e) for e in exprs], [self.symint(s) for s in strides],
            dtype=example.dtype, device="meta", requires_grad=example.requires_grad)

    def hint_of(self, expr):
        """The value of ``expr`` at the example inputs, or None if it mentions an unbacked
        symbol."""
        try:
            return self.evaluate_at_hints(expr)
        except (KeyError, TypeError):
            return None

    def evaluate_at_hints(self, expr):
        """Like ``hint_of`` but raises ``KeyError`` when an unbacked symbol has no value."""
        if isinstance(expr, (bool, int, float)):
            return expr
        free = expr.free_symbols
        if not free:
            return E.to_python(expr)
        return E.evaluate_at(expr, {s: self._hints[s] for s in free})

    # ----- static reasoning -----
    def bound(self, expr) -> ValueRange:
        """An interval containing every value of ``expr`` under the current ranges."""
        return bound(sympy.sympify(expr), self.var_ranges, self._bound_cache)

    def static_truth(self, expr, *, size_oblivious: bool = False) -> bool | None:
        """True/False when the ranges settle ``expr`` for every admitted value, else None."""
        if size_oblivious:
            return static_truth(expr, self._oblivious_ranges(), self._oblivious_cache)
        return static_truth(expr, self.var_ranges, self._bound_cache)

    def _oblivious_ranges(self) -> dict:
        """Ranges where size-like unbacked symbols are assumed >= 2 (PyTorch's
        size-oblivious reasoning: the result is then valid for sizes 0 and 1 "by audit")."""
        ranges = dict(self.var_ranges)
        for symbol, info in self.symbols.items():
            if info.kind == "size":
                ranges[symbol] = ranges[symbol].intersect(ValueRange(2, None))
        return ranges

    # ----- decisions -----
    @contextlib.contextmanager
    def op_context(self, op_name: str) -> Iterator[None]:
        """Guards recorded inside this block store ``op=op_name``."""
        self._op_stack.append(op_name)
        try:
            yield
        finally:
            self._op_stack.pop()

    def decide_bool(self, node: SymNode, *, kind: str = "guard", size_oblivious: bool = False,
                    fallback: bool | None = None) -> bool:
        """Answer a boolean node (see the module docstring for the order of steps)."""
        return self.decide_expr(node.expr, kind=kind, size_oblivious=size_oblivious,
                                fallback=fallback, hint=node.hint)

    def decide_expr(self, expr, *, kind: str = "guard", size_oblivious: bool = False,
                    fallback: bool | None = None, hint=None) -> bool:
        """Answer a sympy boolean; records a guard unless constant or settled by ranges.

        fallback: when given, an undecidable (data-dependent) question returns it instead of
        raising (``guard_or_false``/``guard_or_true``); nothing is recorded then.
        """
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        key = (expr, size_oblivious)
        known = self._decided.get(key)
        if known is not None:
            if expr in self._sensitive_answers and not self._dry:
                value, kind, symbols, flips = self._sensitive_answers[expr]
                self._note_sensitive(expr, self._here(expr, value, kind), symbols, flips)
            return known
        value = self.static_truth(expr, size_oblivious=size_oblivious)
        if self._dry:
            return _settled(value if value is not None else self._dry_truth(expr))
        if value is not None:
            self._decided[key] = value
            self._audit_size_one(expr, value, kind)
            return value
        if hint is None:
            hint = self.hint_of(expr)
        if hint is None:
            if fallback is not None:
                return fallback
            raise self.data_dependent_error(expr)
        value = bool(hint)
        self._record(expr, value, kind)
        self._decided[key] = value
        self._audit_size_one(expr, value, kind)
        return value

    def decide_value(self, node: SymNode):
        """Concretize an int/float node to its example value, guarding ``expr == value``."""
        expr = node.expr
        if expr.is_number:
            return E.to_python(expr) if node.pytype is not float else float(expr)
        value_range = self.bound(expr)
        if value_range.is_singleton():
            if not self._dry:
                self._audit_size_one(sympy.Eq(expr, value_range.lower), True, "guard")
            return node.pytype(value_range.lower)
        if self._dry:
            raise DryRunUndecided(expr)
        hint = node.hint if node.hint is not None else self.hint_of(expr)
        if hint is None:
            raise self.data_dependent_error(expr, concretize=True)
        if node.pytype is bool:
            return self.decide_bool(node)
        hint = node.pytype(hint)
        question = sympy.Eq(expr, hint)
        key = (question, False)
        if key not in self._decided:
            self._record(question, True, "guard")
            self._decided[key] = True
            self._audit_size_one(question, True, "guard")
        return hint

    def expect_true(self, node: SymNode) -> bool:
        """``torch._check(cond)``: assume ``cond`` from here on (a runtime assert).

        Returns False when ranges or the example inputs show that ``cond`` is false (PyTorch
        then raises its own error); otherwise records an ``expect_true`` guard, refines the
        ranges of simple ``symbol <op> constant`` forms, and returns True.
        """
        expr = node.expr
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        known = self._decided.get((expr, False))
        if known is not None:
            return known
        value = self.static_truth(expr)
        if self._dry:
            return _settled(value if value is not None else self._dry_truth(expr))
        if value is not None:
            self._audit_size_one(expr, value, "expect_true")
            return value
        hint = node.hint if node.hint is not None else self.hint_of(expr)
        if hint is not None and not hint:
            return False
        self._audit_size_one(expr, True, "expect_true")
        self._record(expr, True, "expect_true")
        self.facts.append(expr)
        self._decided[(expr, False)] = True
        self._refine(expr)
        return True

    @contextlib.contextmanager
    def aligned_broadcast(self, active: bool) -> Iterator[None]:
        """Inside a pointwise op whose operands' sizes agree at every (right-aligned) position
        up to literal 1s (``x + y`` of equal shapes, ``x * w`` with ``w`` broadcast): its
        "is this size 1?" / "are there fewer than 2 elements?" questions only pick the
        broadcast source or the layout shortcut. The output size is the same expression either
        way and the op recorded the same, so those answers do not make the program depend on
        a size being >= 2: not audited."""
        if not active:
            yield
            return
        self._aligned_broadcast += 1
        try:
            yield
        finally:
            self._aligned_broadcast -= 1

    def known_true(self, expr) -> bool:
        """``statically_known_true``: True when the ranges prove ``expr``; code that gets
        True may skip work, so that answer must hold at size 1 too (audited)."""
        if self.static_truth(expr) is not True:
            return False
        if not self._dry:
            self._audit_size_one(expr, True, "guard")
        return True

    @contextlib.contextmanager
    def unit_scope(self) -> Iterator[AnswersAtOne]:
        """Around the meta computation of one recorded node: the sensitive answers the ranges
        give inside go to the yielded ``AnswersAtOne`` instead of ``one_sensitive``. Such
        an answer only shapes the node's output metadata (the node recorded is the same); the
        recorder compares that metadata with the one computed at 1 (``ir.unit_meta``) and
        calls ``mark_size_one_sensitive`` when they differ."""
        pending = AnswersAtOne()
        self._unit_scopes.append(pending)
        try:
            yield pending
        finally:
            self._unit_scopes.pop()

    def mark_size_one_sensitive(self, decisions: dict, why: str = "") -> None:
        """``decisions``: ``{symbol: the Guard that depends on it being >= 2}``; ``why``: what
        makes that answer matter, when the guard alone does not say it (``one_why``)."""
        for symbol, guard in decisions.items():
            if symbol not in self.one_sensitive:
                self.one_sensitive[symbol] = guard
                if why:
                    self.one_why[symbol] = why

    def defer_size_one_check(self, pending: dict, check: Callable) -> None:
        """``check(ones)``: whether the answers of ``pending`` (one node's, see ``unit_scope``)
        are harmless with ``ones`` (``{symbol: 1}``) put in; run by ``settle_size_one`` only
        for the symbols still free then (most nodes need none: a dim the model's own code
        branches on is sensitive anyway)."""
        self._deferred_checks.append((pending, check))

    def settle_size_one(self) -> set:
        """Run the deferred checks (``symbolic.settle_one``): the ``admits_one`` symbols no
        answer depends on being >= 2 (the ones the program admits at 1 without another
        trace). Call it once the program's input facts are known (after the guards are
        checked), under the Python dispatcher (the checks re-run meta kernels); the sets of
        sizes at 1 refused by a run-time assertion instead are in ``one_refused_sets``."""
        checks, self._deferred_checks = self._deferred_checks, []
        for pending, check in checks:
            refused = settle_check(self, pending, check)
            self.one_refused_sets.extend(refused)
            self.input_facts.extend(r.fact for r in refused)
        return {s for s in self.admits_one if s not in self.one_sensitive}

    def _dry_truth(self, expr) -> bool | None:
        """A dry run's question the ranges leave open, settled once exact polynomial divisions
        are carried out (``Eq(4*s1**2, 4*s1*((s1**2)//s1))``, a view's ``-1`` at size 1), or
        by an equality the input facts force (``settle_one.forced_equalities``)."""
        simpler = E.exact_divisions(expr)
        value = None if simpler is expr else self.static_truth(simpler)
        if value is None and self.input_facts:
            ones = self._dry_ones[-1] if self._dry_ones else {}
            equalities = forced_equalities(self, ones)
            if equalities:
                value = self.static_truth(simpler.xreplace(equalities))
        return value

    @contextlib.contextmanager
    def dry(self, ones: dict | None = None) -> Iterator[None]:
        """A hypothetical computation (metadata with ``ones``, ``{symbol: 1}``, put in):
        questions are answered only from the ranges, earlier answers and the input facts,
        nothing is recorded or audited, and a question they do not settle raises
        ``DryRunUndecided``."""
        self._dry += 1
        self._dry_ones.append(ones or {})
        try:
            yield
        finally:
            self._dry -= 1
            self._dry_ones.pop()

    def _audit_size_one(self, expr, value: bool, kind: str) -> None:
        """Mark the ``admits_one`` symbols of ``expr`` on which the answer ``value`` might
        change when some of them are 1 instead of >= 2: for each non-empty set of them set to
        1, the ranges must still give ``value``. Up to ``_AT_ONE_MAX`` symbols per question;
        beyond, all count as sensitive (``holds_at_one``)."""
        if not self.admits_one:
            return
        candidates = [s for s in expr.free_symbols
                      if s in self.admits_one and s not in self.one_sensitive]
        if not candidates:
            return
        flips = flipped_at_one(candidates, lambda ones: self._holds_at_one(expr, ones, value))
        if flips == []:
            return
        self._sensitive_answers[expr] = (value, kind, tuple(candidates), flips)
        self._note_sensitive(expr, self._here(expr, value, kind), candidates, flips)

    def _holds_at_one(self, expr, ones: dict, value: bool) -> bool:
        """Whether the ranges give ``expr`` the answer ``value`` with ``ones`` put in (False
        when it is undefined there: ``x % (s0 // 8)``)."""
        try:
            at_one = _put_ones(expr, tuple(sorted(ones, key=str)))
        except ArithmeticError:
            return False
        return static_truth(at_one, self.var_ranges, self._bound_cache) is value

    def _here(self, expr, value: bool, kind: str) -> Guard:
        """The decision as a Guard with the current user stack and op."""
        op = self._op_stack[-1] if self._op_stack else None
        return Guard(expr, value, self.frames(), op, kind)

    def _note_sensitive(self, expr, guard: Guard, symbols, flips) -> None:
        """``symbols`` depend on being >= 2 through ``expr`` (``flips``: the sets of them at 1
        that change the answer, None when too many to enumerate). An answer given inside the meta
        computation of one recorded node (a unit scope) only shaped that node's output
        metadata: it goes to the scope, for the recorder to compare that metadata at 1. Any
        other (the model's own decisions, torch's indexing code choosing which ops to run)
        marks them for the whole program. An "is this size 1?" inside an aligned broadcast
        marks nothing (see ``aligned_broadcast``).

        A guard recorded inside a kernel holds for ``[2, ...]`` (the solver checks it against
        the spec) and only chose that node's metadata; nothing at run time reads it, so the
        metadata comparison covers it too."""
        if self._aligned_broadcast and _is_unit_question(expr):
            return
        free = [s for s in symbols if s not in self.one_sensitive]
        if self._unit_scopes:
            self._unit_scopes[-1].note(free, guard, flips)
            return
        for symbol in free:
            self.one_sensitive.setdefault(symbol, guard)

    def _record(self, expr, value: bool, kind: str) -> None:
        frames = tuple(self.location_provider()) if self.location_provider else ()
        op = self._op_stack[-1] if self._op_stack else None
        self.guards.append(Guard(expr, value, frames, op, kind))

    def _refine(self, expr) -> None:
        """Narrow a symbol's range from a fact of the form ``symbol <op> constant``."""
        for fact in sympy.And.make_args(expr):
            parsed = _symbol_vs_constant(fact)
            if parsed is None:
                continue
            symbol, new_range = parsed
            current = self.var_ranges.get(symbol, ValueRange.unbounded())
            narrowed = current.intersect(new_range)
            if narrowed.is_empty():
                continue
            self.var_ranges[symbol] = narrowed
            info = self.symbols.get(symbol)
            if info is not None and info.kind == "unbacked" and narrowed.lower >= 0:
                self.symbols[symbol] = SymbolInfo(symbol, None, info.source, info.name, "size")
            self._invalidate()

    # ----- errors -----
    def frames(self) -> tuple[UserFrame, ...]:
        return tuple(self.location_provider()) if self.location_provider else ()

    def describe(self, expr) -> str:
        """Readable text of ``expr`` using the symbols' sources."""
        return render_expr(expr, self.source_of)

    def data_dependent_error(self, expr, *, concretize: bool = False) -> DataDependentError:
        unbacked = sorted(E.free_unbacked_symbols(expr) or expr.free_symbols, key=str)
        sources = ", ".join(f"{s} = {self.source_of(s)}" for s in unbacked)
        text = self.describe(expr)
        unbounded = ValueRange.unbounded()
        ranges = "; ".join(f"{self.source_of(s)} in {self.var_ranges.get(s, unbounded)}"
                           for s in unbacked)
        if concretize:
            message = (f"Could not turn `{text}` into a Python number: it depends on tensor data "
                       f"({sources}).")
            hint = ("Avoid converting the value to a Python number inside forward (keep it a "
                    "tensor), or bound it with torch._check(...) so its value is fixed.")
        else:
            message = f"Could not decide `{text}`: it depends on tensor data ({sources})."
            hint = (f"Add `torch._check({text})` (or `torch._check(not ({text}))`) before this "
                    "line to state which way it goes; it becomes a runtime assert. Or use "
                    "torch.cond for "
                    "data-dependent control flow.")
        return DataDependentError(message, frames=self.frames(), details=f"Known ranges: {ranges}",
                                  hint=hint)

    # ----- compatibility with PyTorch helpers that reach into node.shape_env -----
    def evaluate_sym_node(self, node: SymNode, size_oblivious: bool = False, fallback_value=None):
        if node.pytype is bool:
            kind = "size_oblivious" if size_oblivious else "guard"
            return self.decide_bool(node, kind=kind, size_oblivious=size_oblivious,
                                    fallback=fallback_value)
        return self.decide_value(node)

    def _maybe_evaluate_static(self, expr, *args, **kwargs):
        if isinstance(expr, sympy.logic.boolalg.Boolean):
            value = self.static_truth(expr, size_oblivious=kwargs.get("size_oblivious", False))
            return None if value is None else sympy.true if value else sympy.false
        value_range = self.bound(expr)
        return sympy.Integer(value_range.lower) if value_range.is_singleton() else None

    def bound_sympy(self, expr, size_oblivious: bool = False) -> ValueRange:
        if size_oblivious:
            return bound(sympy.sympify(expr), self._oblivious_ranges())
        return self.bound(expr)

    def optimization_hint(self, expr, fallback=None):
        hint = self.hint_of(expr)
        return hint if hint is not None else (fallback if fallback is not None else 8192)

    def size_hint(self, expr, *, allow_none: bool = False):
        hint = self.hint_of(expr)
        if hint is None and not allow_none:
            raise self.data_dependent_error(expr, concretize=True)
        return hint

    def is_unbacked_symint(self, symbol) -> bool:
        return isinstance(symbol, sympy.Symbol) and self.is_unbacked(symbol)

    def _constrain_range_for_size(self, symbol, min=None, max=None) -> None:
        self._refine(sympy.Ge(symbol, 0 if min is None else min))
        if max is not None:
            self._refine(sympy.Le(symbol, max))

    def _constrain_range(self, symbol, min, max) -> None:
        self._refine(sympy.And(sympy.Ge(symbol, min), sympy.Le(symbol, max)))

    def _constrain_is_bounded(self, symbol, upper_bound) -> None:
        self._refine(sympy.Le(symbol, upper_bound))

    def guard_or_defer_runtime_assert(self, expr, msg="", fx_node=None) -> bool:
        return self.expect_true(SymNode(expr, self, bool, self.hint_of(expr)))

    def create_unbacked_symint(self, source=None) -> torch.SymInt:
        symbol = self.create_unbacked_symbol("int", str(source or ""))
        return torch.SymInt(SymNode(symbol, self, int, None))

    def create_unbacked_symfloat(self) -> torch.SymFloat:
        return torch.SymFloat(SymNode(self.create_unbacked_symbol("float"), self, float, None))


_FLIP = {sympy.Ge: sympy.Le, sympy.Gt: sympy.Lt, sympy.Le: sympy.Ge, sympy.Lt: sympy.Gt,
         sympy.Eq: sympy.Eq}


class DryRunUndecided(Exception):
    """A question of a dry run (``ShapeEnvironment.dry``) the ranges do not settle."""


def _settled(value: bool | None) -> bool:
    if value is None:
        raise DryRunUndecided
    return value


def _is_unit_question(expr) -> bool:
    """``Eq(e, 1)``/``Ne(e, 1)`` (is this size 1?) or ``e < 2`` (fewer than 2 elements?)."""
    if isinstance(expr, (sympy.Eq, sympy.Ne)):
        return sympy.Integer(1) in expr.args
    return isinstance(expr, sympy.StrictLessThan) and expr.rhs == 2


def _symbol_vs_constant(fact):
    """``(symbol, range)`` for facts like ``u0 >= 3``, ``5 > u0``, ``Eq(u0, 4)``; else None."""
    cls = type(fact)
    if cls not in _FLIP:
        return None
    lhs, rhs = fact.args
    if lhs.is_number and rhs.is_Symbol:
        lhs, rhs, cls = rhs, lhs, _FLIP[cls]
    if not (lhs.is_Symbol and rhs.is_number and rhs.is_finite):
        return None
    integer = bool(lhs.is_integer)
    c = rhs
    if cls is sympy.Eq:
        if integer and not c.is_Integer:
            return None
        return lhs, ValueRange(c, c)
    if cls in (sympy.Ge, sympy.Gt):
        low = (sympy.floor(c) + 1 if (cls is sympy.Gt and integer)
               else sympy.ceiling(c) if integer else c)
        return lhs, ValueRange(low, None)
    high = (sympy.ceiling(c) - 1 if (cls is sympy.Lt and integer)
            else sympy.floor(c) if integer else c)
    return lhs, ValueRange(None, high)
