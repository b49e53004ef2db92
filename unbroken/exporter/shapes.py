"""Stage 2 of an export: settle the shapes (see ``docs/architecture.md``).

:func:`settle_shapes` decides every guard the trace recorded against the spec
(``symbolic.solver``: ranges, then z3). A ``torch._check`` on data-dependent values becomes a
run-time assert in the graph; one on input sizes must be implied by the spec too. What the code
requires of ``Dim.AUTO`` dims is adopted: in place when it only narrows ranges, else by
:class:`AdoptAuto` (the caller traces again). A violation the spec cannot absorb is
:class:`ShapeViolation`, with the fix the solver suggests (``symbolic.fixes``); the caller
verifies the fix by running the stages again with it and raises the constraint error.
"""
from __future__ import annotations

from collections.abc import Mapping

import sympy

from ..symbolic import guard_log
from ..symbolic.auto import Adoption, narrow_in_place, plan_adoption
from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.fixes import Fix, suggest_fix
from ..symbolic.ranges import finite_bound
from ..symbolic.solver import Solver, Violation, check_guards
from .options import ExportOptions
from .trace import Trace

__all__ = ["AdoptAuto", "ShapeViolation", "settle_shapes"]


class AdoptAuto(Exception):
    """The trace found what the code requires of ``Dim.AUTO``/``Dim.DYNAMIC`` dims, and it
    changes their symbols (``adoption.refinements``): adopt it and trace again.
    ``auto_refinements``: the refinements this trace had in effect (narrowed in place too)."""

    def __init__(self, adoption: Adoption, auto_refinements: Mapping):
        super().__init__(adoption.refinements)
        self.adoption = adoption
        self.auto_refinements = dict(auto_refinements)


class ShapeViolation(Exception):
    """Guards the spec does not imply: ``violations`` (with the smallest counterexamples,
    what the refusal shows) and the solver's ``fix`` for them (None when there is none)."""

    def __init__(self, violations: list, fix: Fix | None):
        super().__init__(len(violations))
        self.violations = violations
        self.fix = fix


def settle_shapes(trace: Trace, options: ExportOptions) -> dict:
    """Decide the guards of ``trace`` (adding the graph's run-time asserts); returns the
    ``Dim.AUTO`` refinements in effect (those of ``options``, and any narrowed in place).
    Raises :class:`AdoptAuto` or :class:`ShapeViolation`."""
    settling = _Settling(trace, options)
    settling.check_guards()
    return settling.auto_refinements


class _Settling:
    """The state of settling one trace's shapes: the refinements in effect and, per node,
    the last run-time assert placed after it."""

    def __init__(self, trace: Trace, options: ExportOptions):
        self.env, self.builder = trace.env, trace.builder
        self.options = options
        self.auto_refinements = dict(options.auto_refinements)
        self._asserts_after: dict = {}

    def check_guards(self, undecided=None) -> None:
        """Every guard must be implied by the spec (assuming the program's torch._check facts);
        a torch._check on data-dependent values becomes a runtime assert, one on input sizes
        must be implied by the spec too.

        undecided: after ranges narrowed in place, the guards the wider ranges did not imply;
        every other guard still holds (a fact true on a range is true on any part of it)."""
        env = self.env
        if not env.guards:
            self._log_guards(())
            return
        guards = env.guards if undecided is None else undecided
        # counterexamples are only shown when export refuses: minimized then (_shown)
        violations = check_guards(env, Solver(env, assume_checks=True, smallest=False), guards)
        strict = Solver(env, assume_checks=False, smallest=False)
        for guard in guards:
            if guard.kind != "expect_true":
                continue
            if _mentions_unbacked(guard.expr, env):
                self._runtime_assert(guard)
            else:
                decision = strict.decide(guard.as_fact())
                if decision.verdict != "true":
                    violations.append(Violation(guard, decision, decision.counterexample))
        if violations:
            self._adopt_or_refuse(violations)
            return
        self._log_guards(())

    def _adopt_or_refuse(self, violations: list) -> None:
        if self.options.defer_unstated:  # prefer_deferred_runtime_asserts_over_guards
            deferred = [v.guard for v in violations if self._deferrable(v.guard.as_fact())]
            for guard in deferred:
                self._input_assert(guard)
            violations = [v for v in violations if v.guard not in deferred]
            if not violations:
                self._log_guards(deferred)
                return None
        adoption = plan_adoption(self.env, violations)
        if adoption is not None and adoption.refinements:
            if self.options.narrow_in_place and narrow_in_place(self.env, adoption):
                self.auto_refinements = {**self.auto_refinements, **adoption.refinements}
                # each call narrows a range: it terminates
                return self.check_guards([v.guard for v in violations])
            raise AdoptAuto(adoption, self.auto_refinements)
        if adoption is not None:  # the symbols have settled: what is left is asserted
            for guard in adoption.asserted:
                self._input_assert(guard)
            self._log_guards(adoption.asserted)
            return None
        violations = self._shown(violations)
        raise ShapeViolation(violations, _suggest_fix(self.env, violations))

    def _deferrable(self, fact) -> bool:
        """A violated fact deferred to a run-time assertion under
        ``prefer_deferred_runtime_asserts_over_guards``: over named dims only (a
        ``Dim.AUTO`` dim adopts what the code requires), and not one a ``Dim`` states
        directly (a bound or value of one size, two sizes equal or one derived from the
        other: those are refused with the fix, as torch)."""
        auto = set(self.env.auto_symbols)
        return not (fact.free_symbols & auto) and not all(
            _stated_by_a_dim(part) for part in sympy.And.make_args(fact))

    def _shown(self, violations: list) -> list:
        """``violations`` decided again with the smallest counterexamples (deterministic,
        what the refusal shows)."""
        solvers = {kind: Solver(self.env, assume_checks=kind) for kind in (True, False)}
        shown = []
        for violation in violations:
            guard = violation.guard
            decision = solvers[guard.kind != "expect_true"].decide(guard.as_fact())
            shown.append(Violation(guard, decision, decision.counterexample))
        return shown

    def _log_guards(self, asserted) -> None:
        """The guard log (``UNBROKEN_LOG=guards``): each guard and how it was decided."""
        if not guard_log.enabled():
            return
        env = self.env
        solver = Solver(env)
        run_time = {g.as_fact() for g in asserted}
        decided = []
        for guard in env.guards:
            fact = guard.as_fact()
            if guard.kind == "expect_true" and _mentions_unbacked(guard.expr, env):
                how = "run-time assert (torch._check on data-dependent values)"
            elif fact in run_time or set(sympy.And.make_args(fact)) & run_time:
                how = "checked at run time (a relation no dynamic_shapes can state)"
            else:
                decision = solver.decide(fact)
                how = f"proven by {decision.reason}" if decision.verdict == "true" \
                    else f"assumed ({guard.kind})"
            decided.append((guard, how))
        guard_log.log_guards(decided, self.options.specializations, env.source_of,
                             self.auto_refinements)

    def _input_assert(self, guard) -> None:
        """``aten._assert_scalar`` of a fact over input sizes that no spec can state, right
        after the placeholders: the program refuses, before computing anything, the inputs
        for which the graph would not compute what eager does."""
        self.env.input_facts.append(guard.as_fact())
        text = (f"the exported program requires {guard.describe(self.env.source_of)}"
                + (f" (from {guard.frames[-1].short()})" if guard.frames else ""))
        self.builder.assert_at_inputs(guard.as_fact(), text, guard.frames)

    def _runtime_assert(self, guard) -> None:
        """``aten._assert_scalar`` of a torch._check fact on data-dependent values: the
        program raises, like eager, when a run breaks it."""
        builder = self.builder
        fact = guard.as_fact()
        text = f"Runtime assertion failed for expression {guard.describe(self.env.source_of)}"
        order = {n: i for i, n in enumerate(builder.graph.nodes)}
        defined = [d for d in map(builder.definition_of, fact.free_symbols) if d is not None]
        if not defined:  # values read inside a torch.cond branch or a loop body
            if builder.assert_in_subgraph(fact, text, guard.frames) is None:
                raise UnsupportedError(
                    f"`torch._check({guard.describe(self.env.source_of)})` relates values "
                    "read in different subgraphs (a torch.cond branch or a loop body and the "
                    "code around it)", code="UB113", frames=guard.frames,
                    hint="Check the values where they are read: inside the branch for values "
                         "the branch reads, outside it for the others.")
            return
        known = max(defined, key=order.__getitem__)  # as early as its values are known,
        after = self._asserts_after.get(known, known)  # after earlier asserts there
        node = builder.assert_after(after, fact, text, guard.frames)
        self._asserts_after[known] = node


def _suggest_fix(env, violations):
    """The solver's fix for the violated guards over the input sizes (``symbolic.fixes``), or
    None when there is none."""
    backed = [s for s, info in env.symbols.items() if info.hint is not None]
    return suggest_fix([v.guard.as_fact() for v in violations],
                       {s: (env.spec_ranges[s].lower, finite_bound(env.spec_ranges[s].upper))
                        for s in backed},
                       {s: env.hint_of(s) for s in backed}, env.source_of)


def _stated_by_a_dim(fact) -> bool:
    """``fact`` is what a ``Dim`` states: a polynomial relation on one size (a bound, a value:
    ``Dim(min=, max=)``, a static dim) or the equality of two sizes, one possibly a linear
    function of the other (the same ``Dim``, a derived one). Not ``%``, ``//``, ``max``..."""
    if not isinstance(fact, sympy.core.relational.Relational):
        return False
    difference, symbols = fact.lhs - fact.rhs, sorted(fact.free_symbols, key=str)
    if not difference.is_polynomial(*symbols):
        return False
    if len(symbols) <= 1:
        return True
    return len(symbols) == 2 and isinstance(fact, sympy.Eq) and \
        sympy.Poly(difference, *symbols).total_degree() <= 1


def _mentions_unbacked(expr, env) -> bool:
    return any(env.symbols[s].hint is None for s in expr.free_symbols if s in env.symbols)
