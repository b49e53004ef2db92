"""The shape environment: symbols, their ranges and hints, and the guards tracing records.

Decision path for every question a meta kernel or the user's code asks (the hot path):

1. constant-fold: a sympy ``true``/``false`` or a number answers itself;
2. cache: the same expression asked again gets the same answer, recorded once;
3. value ranges: if the answer is the same for every value in the symbols' ranges
   (``Ne(s0, 1)`` with ``s0`` in ``[2, oo)``), return it and record nothing;
4. otherwise take the answer at the example inputs (the hints) and record a ``Guard``
   with the user's stack and the current op. Expressions over unbacked symbols have no hint:
   ``DataDependentError``, unless the caller supplied a fallback (``guard_or_false``).

Every answer is also reported to the size-1 audit (``size_one``, a hook: see
``size_one_hook``), which tells whether it would change for a dim at 1; in a dry run (a
computation re-run with dims at 1) only steps 1-3 answer, and nothing is recorded.

Nothing here rewrites expressions with what guards imply (no replacements): the recorded
guards are checked against the spec later by ``solver.check_guards``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import sympy
import torch

from . import expr as E
from .diagnostics import DataDependentError, ExportUsageError, UserFrame
from .guards import Guard, render_expr
from .node import SymNode
from .ranges import ValueRange, bound, static_truth
from .size_one_hook import NO_SIZE_ONE, DryRunUndecided, SizeOneHook

__all__ = ["ShapeEnvironment", "SymbolInfo"]

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
        input_facts: facts over input sizes the program asserts before computing anything
                     (relations no spec can state): an input they refuse never reaches a node.
        size_one:    the size-1 audit (``unbroken.size_one``) through its hook: every answer
                     is reported to it (``audit``), and a dry run (``size_one.dry``) answers
                     only what the ranges settle. :data:`NO_SIZE_ONE` when none is given.
        on_guard:    None, or a callable given every guard as it is recorded (after it is
                     in ``guards``): the exporter watches for a ``Dim.AUTO`` adoption that
                     needs another trace (``symbolic.auto.needs_retrace``).
    """

    def __init__(self, location_provider: Callable[[], tuple[UserFrame, ...]] | None = None,
                 size_one: SizeOneHook = NO_SIZE_ONE):
        self.location_provider = location_provider
        self.size_one = size_one
        self.on_guard: Callable[[Guard], None] | None = None
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
        self.input_facts: list = []
        self._hints: dict[sympy.Symbol, int | float] = {}
        self._op_stack: list[str] = []
        self._decided: dict[tuple, bool] = {}
        self.int_nodes: dict = {}  # int -> its SymNode (SymNode.wrap_int: nodes are immutable)
        self._bound_cache: dict = {}
        self._oblivious_cache: dict = {}
        self.version = 0  # bumped whenever a range changes or a symbol is made
        # what the trace asked of the ranges, in order, while watched (``watch_ranges``)
        self._range_log: list | None = None
        self._range_asked: set = set()  # the questions logged since the ranges last changed
        self._backed_count = 0
        self._unbacked_count = 0
        # what a computation asked, while logged (``calls_logged``): replayed by another
        # environment in the same state (``replay_calls``)
        self._call_log: list | None = None

    # ----- symbols -----
    def create_symbol(self, name: str, hint: int, *, lower: int = 2,
                      upper: int | None = None, source: str = "") -> sympy.Symbol:
        """A backed symbol ``s<n>`` with value range ``[lower, upper]`` (None = unbounded).

        ``name`` is the user's name for the dimension (a ``Dim`` name) or ''; the sympy
        symbol itself is always named ``s<n>`` (PyTorch's convention for backed sizes).
        ``hint`` is the example value and must lie in the range. A size has ``lower >= 0``; a
        Python ``int`` input declared dynamic may be negative.
        """
        if upper is not None and upper < lower:
            raise ExportUsageError(
                f"empty range [{lower}, {upper}] for {source or name or 'a dimension'}")
        if not (lower <= hint and (upper is None or hint <= upper)):
            raise ExportUsageError(
                f"example size {hint} of {source or name} is outside its range [{lower}, {upper}]")
        sign = {} if lower < 0 else {"positive": True} if lower >= 1 else {"nonnegative": True}
        symbol = sympy.Symbol(f"{E.BACKED_PREFIX}{self._backed_count}", integer=True, **sign)
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
        self._log_range_event(("new", info.symbol, value_range, info.kind))

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
        self._log_range_event(("set", symbol, value_range))

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
    def bound(self, expr, *, use: str = "all") -> ValueRange:
        """An interval containing every value of ``expr`` under the current ranges.

        use: what the caller reads of it (a key of ``_RANGE_USES``: all of it, whether it is
        one value, its sign), which is all narrower ranges must leave alike
        (:meth:`replay_ranges`)."""
        expr = sympy.sympify(expr)
        value_range = bound(expr, self.var_ranges, self._bound_cache)
        if self._range_log is not None:
            self._log_range_answer(use, expr, False, value_range)
        return value_range

    def answering_state(self) -> tuple:
        """A hashable statement of everything this environment's answers to a dry run's
        questions read (``size_one``: ranges, symbols and their kinds and hints, the answers
        kept, the facts and input facts): two environments with equal states answer every
        question alike, so an outcome computed under one holds under the other."""
        return (frozenset(self.var_ranges.items()),
                frozenset((s, info.kind) for s, info in self.symbols.items()),
                frozenset(self._hints.items()), frozenset(self._decided.items()),
                tuple(self.facts), tuple(self.input_facts))

    def static_truth(self, expr, *, size_oblivious: bool = False,
                     guard_question: bool = False) -> bool | None:
        """True/False when the ranges settle ``expr`` for every admitted value, else None.

        guard_question: asked by a guard decision (``decide_expr``, not in a dry run), which
        records a guard with the example's answer when the ranges do not settle it."""
        if size_oblivious:
            value = static_truth(expr, self._oblivious_ranges(), self._oblivious_cache)
        else:
            value = static_truth(expr, self.var_ranges, self._bound_cache)
        if self._range_log is not None:
            self._log_range_answer("guard truth" if guard_question else "truth", expr,
                                   size_oblivious, value)
        return value

    def _oblivious_ranges(self) -> dict:
        """Ranges where size-like unbacked symbols are assumed >= 2 (PyTorch's
        size-oblivious reasoning: the result is then valid for sizes 0 and 1 "by audit")."""
        return _oblivious(self.var_ranges, {s: info.kind for s, info in self.symbols.items()})

    # ----- what the ranges answered: could narrower ones have answered the same? -----
    def watch_ranges(self) -> None:
        """From now on, log every answer the ranges give (``static_truth``, ``bound``) and
        every change of the ranges, in order: :meth:`replay_ranges` replays them later."""
        self._range_log = [("start", dict(self.var_ranges),
                            {s: info.kind for s, info in self.symbols.items()})]
        self._range_asked = set()

    def _log_range_answer(self, what: str, expr, size_oblivious: bool, answer) -> None:
        key = (what, expr, size_oblivious)
        if key not in self._range_asked:  # the same question under the same ranges: once
            self._range_asked.add(key)
            self._range_log.append((what, expr, size_oblivious, answer))

    def _log_range_event(self, event: tuple) -> None:
        if self._range_log is not None:
            self._range_log.append(event)
            self._range_asked = set()

    def replay_ranges(self, narrowed: Mapping) -> list[int] | None:
        """What a trace would have recorded had it started with the backed symbols of
        ``narrowed`` (``{symbol: ValueRange}``) in those ranges, replaying every answer the
        ranges gave this trace since :meth:`watch_ranges`: the indices in ``guards`` of the
        guards the narrower ranges settle (that trace answers them the same and records
        nothing), or None when some answer would differ, or nothing was watched.

        Every decision of a trace that the ranges settle goes through them (a guard they
        settle, ``statically_known_true``, a bound a kernel or the size-1 audit reads, a
        dry run's question): when all agree, the trace under the narrower ranges is this very
        trace, answer for answer, but for the guards it need not record. A guard question
        the narrower ranges settle to the answer the example gave is that case; any other
        changed answer (a ``torch._check`` fact, a bound, a known truth) is not."""
        log = self._range_log
        if log is None:
            return None
        _, start, kinds = log[0]
        ranges, kinds = dict(start), dict(kinds)
        ranges.update(narrowed)
        caches: dict = {}
        settled: list[int] = []
        flipped = None  # a guard question the narrower ranges settle: its guard comes next
        for entry in log[1:]:
            what = entry[0]
            if flipped is not None and what != "guard":
                return None
            if what == "guard":
                _, index, expr, oblivious, value = entry
                if flipped is None:  # asked earlier under these ranges: settled alike then
                    view = _oblivious(ranges, kinds) if oblivious else ranges
                    again = static_truth(expr, view, caches.setdefault(oblivious, {}))
                    if again is None:
                        continue
                elif flipped[:2] != (expr, oblivious):
                    return None
                else:
                    again = flipped[2]
                if again != value:
                    return None
                settled.append(index)
                flipped = None
                continue
            if what in ("truth", "guard truth"):
                _, expr, oblivious, answer = entry
                view = _oblivious(ranges, kinds) if oblivious else ranges
                again = static_truth(expr, view, caches.setdefault(oblivious, {}))
                if again != answer:
                    if answer is not None or what != "guard truth":
                        return None
                    flipped = (expr, oblivious, again)  # its guard comes next
                continue
            if what in _RANGE_USES:
                _, expr, oblivious, answer = entry
                view = _oblivious(ranges, kinds) if oblivious else ranges
                again = bound(expr, view, caches.setdefault(oblivious, {}))
                if _RANGE_USES[what](again) != _RANGE_USES[what](answer):
                    return None
                continue
            caches = {}
            if what == "new":
                _, symbol, value_range, kind = entry
                ranges[symbol], kinds[symbol] = value_range, kind
            elif what == "set":
                _, symbol, value_range = entry
                if symbol in narrowed:
                    return None  # set during the trace: what it would be is not known
                ranges[symbol] = value_range
            else:  # "refine": a torch._check fact narrowed a range (``_refine``)
                _, symbol, fact_range, applied, kind = entry
                current = ranges.get(symbol, ValueRange.unbounded()).intersect(fact_range)
                if current.is_empty() == applied:
                    return None
                if applied:
                    ranges[symbol] = current
                    if kinds.get(symbol) == "unbacked" and current.lower >= 0:
                        kinds[symbol] = "size"
                    if kinds.get(symbol) != kind:
                        return None
        return None if flipped is not None else settled

    # ----- a computation's questions, logged and replayed -----
    def computation_state(self, symbols) -> tuple | None:
        """What this environment's answers about expressions over ``symbols`` read: their
        ranges, kinds and hints, and the ``torch._check`` facts; None when one of them has no
        hint (an unbacked symbol: its answers also read the answers kept), or while nothing
        may be shared (a dry run of the size-1 audit, another computation logged). Two environments
        with equal states answer every question over those symbols alike (``decide_expr``:
        the constant, the ranges, else the hint), so what a computation asked of one, replayed
        on the other (:meth:`replay_calls`), has the same answers and the side effects (the
        guards, the size-1 audit's notes, the ranges' log) the computation would have there."""
        if self._call_log is not None or self.size_one.dry:
            return None  # inside another logged computation, or a dry run's answers
        state = []
        for symbol in sorted(symbols, key=_name):  # (str() prints through sympy: slow)
            info = self.symbols.get(symbol)
            if info is None or info.kind != "backed":
                return None
            state.append((symbol, self.var_ranges[symbol], self._hints[symbol]))
        return tuple(state), tuple(self.facts)

    @contextlib.contextmanager
    def calls_logged(self) -> Iterator[list | None]:
        """Log the questions asked of this environment inside (those with an answer or a side
        effect: decisions, ``torch._check``, range questions), each once at the outermost
        level, with its answer: a list, or None when this environment cannot log (another log
        is open, a dry run of the size-1 audit). A computation that makes symbols or changes
        ranges other than by a ``torch._check`` appends ``UNREPLAYABLE``."""
        if self._call_log is not None or self.size_one.dry or \
                type(self) is not ShapeEnvironment:
            yield None
            return
        log = self._call_log = []
        self.__class__ = _LoggingEnvironment  # no cost for environments not logged
        try:
            yield log
        finally:
            self.__class__ = ShapeEnvironment
            self._call_log = None

    def replay_calls(self, log: list) -> bool:
        """Ask ``log``'s questions (:meth:`calls_logged`) of this environment, in order, which
        must be in the ``computation_state`` of the one that logged them: True when every
        answer is the logged one. Stops at the first that differs (False: a state that did
        not say all the answers read): what was asked up to there, a computation here would
        have asked too."""
        for name, args, kwargs, answer in log:
            args = tuple(SymNode(a[1], self, a[2], a[3]) if type(a) is tuple and a
                         and a[0] is _NODE else a for a in args)
            try:
                if not _same_answer(getattr(self, name)(*args, **kwargs), answer):
                    return False
            except Exception:  # noqa: BLE001 - an answer the logged one was not: not replayed
                return False
        return True

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
        key = (expr, size_oblivious)
        value = self._without_hint(expr, key, kind, remember=True)
        if value is not None:
            return value
        if hint is None:
            hint = self.hint_of(expr)
        if hint is None:
            proven = self._implied_by_facts(expr)
            if proven is not None:
                self._decided[key] = proven
                self.size_one.audit(self, expr, proven, kind)
                return proven
            if fallback is not None:
                return fallback
            raise self.data_dependent_error(expr)
        value = bool(hint)
        self._record(expr, value, kind)
        if self._range_log is not None:  # recorded: ranges that settle it would not record it
            self._range_log.append(("guard", len(self.guards) - 1, expr, size_oblivious, value))
        self._decided[key] = value
        self.size_one.audit(self, expr, value, kind)
        return value

    def _without_hint(self, expr, key: tuple, kind: str, *, remember: bool) -> bool | None:
        """Steps 1-3 of the decision path for ``expr`` (``key``: its cache key, with the
        size-oblivious flag): the answer a constant, an earlier answer or the ranges give,
        reported to the size-1 audit; None when only the example inputs can answer. In a dry
        run the audit may settle it too, else ``DryRunUndecided``; nothing is kept then.

        remember: a guard question (``decide_expr``) keeps an answer the ranges give and
        reports an earlier answer again; a ``torch._check`` (``expect_true``) does neither."""
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        known = self._decided.get(key)
        if known is not None:
            if remember:
                self.size_one.answered_again(self, expr)
            return known
        size_one = self.size_one
        value = self.static_truth(expr, size_oblivious=key[1],
                                  guard_question=remember and not size_one.dry)
        if size_one.dry:
            return _settled(value if value is not None else size_one.dry_truth(self, expr))
        if value is not None:
            if remember:
                self._decided[key] = value
            size_one.audit(self, expr, value, kind)
        return value

    def _implied_by_facts(self, expr) -> bool | None:
        """A data-dependent question the ``torch._check`` facts settle (``torch._check(a == b
        + c)`` then ``if b + c == a``; ``a <= n`` then ``a > n``): asked of z3 under every
        fact and range, on the path that would otherwise refuse. The facts are run-time
        assertions of the program, so the answer holds for every run it admits."""
        if not self.facts or self.size_one.dry:
            return None
        from .solver import Solver  # the solver reads this environment: imported late

        verdict = Solver(self, smallest=False).decide(expr).verdict
        return {"true": True, "false": False}.get(verdict)

    def decide_value(self, node: SymNode):
        """Concretize an int/float node to its example value, guarding ``expr == value``."""
        expr = node.expr
        if expr.is_number:
            return E.to_python(expr) if node.pytype is not float else float(expr)
        value_range = self.bound(expr, use="singleton")
        if value_range.is_singleton():
            self.size_one.audit(self, sympy.Eq(expr, value_range.lower), True, "guard")
            return node.pytype(value_range.lower)
        if self.size_one.dry:
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
            self.size_one.audit(self, question, True, "guard")
        return hint

    def expect_true(self, node: SymNode) -> bool:
        """``torch._check(cond)``: assume ``cond`` from here on (a runtime assert).

        Returns False when ranges or the example inputs show that ``cond`` is false (PyTorch
        then raises its own error); otherwise records an ``expect_true`` guard, refines the
        ranges of simple ``symbol <op> constant`` forms, and returns True.
        """
        expr = node.expr
        value = self._without_hint(expr, (expr, False), "expect_true", remember=False)
        if value is not None:
            return value
        hint = node.hint if node.hint is not None else self.hint_of(expr)
        if hint is not None and not hint:
            return False
        self.size_one.audit(self, expr, True, "expect_true")
        self._record(expr, True, "expect_true")
        self.facts.append(expr)
        self._decided[(expr, False)] = True
        self._refine(expr)
        return True

    def known_true(self, expr) -> bool:
        """``statically_known_true``: True when the ranges prove ``expr``; code that gets
        True may skip work, so that answer must hold at size 1 too (audited)."""
        if self.static_truth(expr) is not True:
            return False
        self.size_one.audit(self, expr, True, "guard")
        return True

    def decision(self, expr, value: bool, kind: str) -> Guard:
        """The answer ``value`` to ``expr`` as a Guard with the current user stack and op."""
        op = self._op_stack[-1] if self._op_stack else None
        return Guard(expr, value, self.frames(), op, kind)

    def _record(self, expr, value: bool, kind: str) -> None:
        frames = tuple(self.location_provider()) if self.location_provider else ()
        op = self._op_stack[-1] if self._op_stack else None
        self.guards.append(Guard(expr, value, frames, op, kind))
        if self.on_guard is not None:
            self.on_guard(self.guards[-1])

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
                self._log_range_event(("refine", symbol, new_range, False, None))
                continue
            self.var_ranges[symbol] = narrowed
            info = self.symbols.get(symbol)
            if info is not None and info.kind == "unbacked" and narrowed.lower >= 0:
                self.symbols[symbol] = SymbolInfo(symbol, None, info.source, info.name, "size")
            self._invalidate()
            info = self.symbols.get(symbol)
            self._log_range_event(("refine", symbol, new_range, True,
                                   info.kind if info is not None else None))

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
        value_range = self.bound(expr, use="singleton")
        return sympy.Integer(value_range.lower) if value_range.is_singleton() else None

    def bound_sympy(self, expr, size_oblivious: bool = False) -> ValueRange:
        if size_oblivious:
            expr = sympy.sympify(expr)
            value_range = bound(expr, self._oblivious_ranges())
            if self._range_log is not None:
                self._log_range_answer("all", expr, True, value_range)
            return value_range
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


# what a caller of ``ShapeEnvironment.bound`` reads of the interval: narrower ranges must
# leave that alike for a trace under them to be the same (``replay_ranges``)
_RANGE_USES = {
    "all": lambda r: r,
    "singleton": lambda r: r.lower if r.is_singleton() else None,
    "sign": lambda r: (r.lower >= 0, r.lower > 0),
}


def _oblivious(ranges: Mapping, kinds: Mapping) -> dict:
    """``ranges`` with the size-like unbacked symbols (kind ``"size"``) assumed >= 2."""
    oblivious = dict(ranges)
    for symbol, kind in kinds.items():
        if kind == "size":
            oblivious[symbol] = oblivious[symbol].intersect(ValueRange(2, None))
    return oblivious


def _settled(value: bool | None) -> bool:
    if value is None:
        raise DryRunUndecided
    return value


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


# ----- the logging environment (``ShapeEnvironment.calls_logged``) -----
# a logged argument that was a SymNode: (_NODE, expr, pytype, hint); its hint is the one
# this environment gives it when replayed under the same ``computation_state``
_NODE = object()
UNREPLAYABLE = ("unreplayable", (), {}, None)

# the methods a computation asks answers of (SymNode's decisions, torch's helpers that reach
# into ``node.shape_env``, the recorder's and kernels' range questions)
_ANSWERING = ("decide_bool", "decide_expr", "decide_value", "expect_true", "known_true",
              "static_truth", "bound", "bound_sympy", "_maybe_evaluate_static",
              "evaluate_sym_node", "guard_or_defer_runtime_assert")
# the methods that make symbols or change ranges outside a ``torch._check``
_CHANGING = ("create_symbol", "create_unbacked_symbol", "set_range", "_constrain_range_for_size",
             "_constrain_range", "_constrain_is_bounded", "watch_ranges")


def _logged(name: str):
    method = getattr(ShapeEnvironment, name)

    def logged(self, *args, **kwargs):
        # the questions it asks in turn (``decide_bool`` asks ``decide_expr``) are its own:
        # the plain class meanwhile, so they run unlogged at no cost
        self.__class__ = ShapeEnvironment
        try:
            answer = method(self, *args, **kwargs)
        except BaseException:
            self._call_log.append(UNREPLAYABLE)  # raised: the computation is not repeated
            raise
        finally:
            self.__class__ = _LoggingEnvironment
        if len(args) == 1 and type(args[0]) is SymNode:  # most: one node to decide
            node = args[0]
            args = ((_NODE, node.expr, node.pytype, node.hint),)
        elif any(isinstance(a, SymNode) for a in args):
            args = tuple((_NODE, a.expr, a.pytype, a.hint) if isinstance(a, SymNode) else a
                         for a in args)
        self._call_log.append((name, args, kwargs, answer))
        return answer

    logged.__name__ = name
    return logged


def _unreplayable(name: str):
    method = getattr(ShapeEnvironment, name)

    def changing(self, *args, **kwargs):
        self._call_log.append(UNREPLAYABLE)
        return method(self, *args, **kwargs)

    changing.__name__ = name
    return changing


_LoggingEnvironment = type("_LoggingEnvironment", (ShapeEnvironment,), {
    **{name: _logged(name) for name in _ANSWERING},
    **{name: _unreplayable(name) for name in _CHANGING},
    "__doc__": "A ShapeEnvironment while ``calls_logged`` (its instance's class meanwhile)."})


def _name(symbol) -> str:
    """A symbol's name, which is its ``str()`` (a sort key)."""
    return symbol.name


def _same_answer(a, b) -> bool:
    return type(a) is type(b) and (a == b or a is b)
