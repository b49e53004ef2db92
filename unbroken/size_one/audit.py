"""The size-1 audit: which dims whose spec admits 1 a trace's decisions depend on.

Tracing gives every dynamic dim the range ``[2, ...]``. For a dim whose spec admits 1
(``admit``), every question the trace answers is re-asked with each set of its candidate
symbols at 1 (``audit``): a symbol no answer depends on is admitted without more work. An
answer given inside one node's meta computation only shapes that node's output metadata: it
is checked by re-running the kernel at 1 once the trace's input facts are known
(``node_meta``, ``settle``: :mod:`unbroken.size_one.unit_meta`,
:mod:`unbroken.size_one.settle`). An answer torch's own code gives during a leaf call counts
only when the call, re-run at 1, dispatches other ops (``settle_leaf_call``), or, for a
layout-dependent call that copies on one side and views on the other, when the program writes
that memory, returns the result or reads a layout fact (``note_layout_at_one``, ``written``,
``layout_observed``). The admission of the dims still sensitive is
:mod:`unbroken.size_one.admission`.

The shape environment and the recorder reach this object through the interface
:class:`unbroken.symbolic.size_one_hook.SizeOneHook`: ``ShapeEnvironment(size_one=audit)``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import sympy
import torch
import torch.utils._pytree as pytree

from ..ir.meta_cache import metadata_key, process_state
from ..ir.ops import is_mutating, is_view_op
from ..symbolic import expr as E
from ..symbolic.guards import Guard
from ..symbolic.node import sym_expr
from ..symbolic.size_one_hook import SizeOneHook
from ..symbolic.torch_compat import (
    OpOverload,
    disable_current_modes,
    python_dispatcher_disabled,
)
from .at_one import AnswersAtOne, at_values, flipped_at_one, holds_at_one, put_ones
from .settle import forced_equalities, settle_check
from .unit_meta import (
    LAYOUT_DEPENDENT_CALLS,
    LAYOUT_FOLLOWING,
    REJECTED_AT_ONE,
    STRIDE_READING_PRODUCTS,
    contiguous_at,
    same_node_at,
    settle_leaf_call,
    substituted,
    substituted_tree,
)

__all__ = ["SizeOneAudit", "clear_shared_outcomes"]


class SizeOneAudit(SizeOneHook):
    """The size-1 state of one trace.

    admits_one:   symbols whose spec admits 1 although tracing gives them ``[2, ...]``
                  (``min=1``, ``Dim.AUTO``, ``Dim.DYNAMIC``, a named Dim's default min);
    requested:    those of them declared ``min=1`` (traced at 1 when sensitive, warned about);
    sensitive:    those of them on which some decision of the trace would have gone otherwise
                  at 1 -> that decision (a ``Guard``);
    why:          of ``sensitive``: why its answer matters, when the guard alone does not say;
    refused_sets: sets of sizes at 1 under which a node computes something else, refused at
                  run time by an assertion (``settle.RefusedAtOne``) the exporter adds;
    dry:          depth of the dry runs in progress (``dry_run``).
    """

    def __init__(self):
        self.admits_one: set = set()
        # () -> how many outputs ATen's backend selection has laid out so far (the recorder's
        # ``device_layouts``): a check that moved it read the process's backend settings, so
        # its outcome is not shared with other traces; None: no outcome is shared
        self.layout_events: Callable[[], int] | None = None
        self.requested: set = set()
        self.sensitive: dict = {}
        self.why: dict = {}
        # sensitive symbols a trace at 1 cannot clear (the program at 1 is known to differ)
        self.final: set = set()
        self.refused_sets: list = []
        self.dry = 0
        self._dry_ones: list[dict] = []  # the symbols each open dry run puts at 1
        self._aligned_broadcast = 0  # > 0 inside a pointwise op whose operands align
        # one AnswersAtOne per open meta computation of a recorded node or leaf call
        # (innermost last): its sensitive answers, checked by comparing metadata at 1
        self._unit_scopes: list[AnswersAtOne] = []
        # (pending answers of one node, check(ones) -> bool): run once the trace ends and
        # the input facts are known, for the symbols nothing else has made sensitive by then
        # (and a key saying which computation on which metadata, or None)
        self._deferred_checks: list[tuple[dict, Callable, object]] = []
        # sensitive answers -> (value, kind, symbols, flips): a cached answer reused by a
        # later node (or outside any) counts there too
        self._sensitive_answers: dict = {}
        # layout-dependent calls that copy in this trace and view at 1 (or the reverse):
        # harmless unless that memory is written, the result returned, or (laid out
        # otherwise at 1 and not recorded whole) read by an op whose values depend on the
        # layout
        self._layout_at_one: list[_LayoutAtOne] = []
        # the sensitive answers held back while an ``and``/``or`` decides (``held``), and
        # those found to decide nothing (symbol -> guard: ``drop``)
        self._held: list | None = None
        self._dropped: dict = {}

    @property
    def active(self) -> bool:
        return bool(self.admits_one)

    # ----------------------------------------------------------------- the environment's side
    def admit(self, symbol, *, requested: bool) -> None:
        self.admits_one.add(symbol)
        if requested:
            self.requested.add(symbol)

    def audit(self, env, expr, value: bool, kind: str) -> None:
        """Mark the ``admits_one`` symbols of ``expr`` on which the answer ``value`` might
        change when some of them are 1 instead of >= 2: for each non-empty set of them set to
        1, the ranges must still give ``value``. Up to ``at_one._AT_ONE_MAX`` symbols per
        question; beyond, all count as sensitive (``flipped_at_one``)."""
        if not self.admits_one or self.dry:
            return
        candidates = [s for s in expr.free_symbols
                      if s in self.admits_one and s not in self.sensitive]
        if not candidates:
            return
        flips = flipped_at_one(candidates, lambda ones: _holds_at_one(env, expr, ones, value))
        if flips == []:
            return
        self._sensitive_answers[expr] = (value, kind, tuple(candidates), flips)
        self._note_sensitive(expr, lambda: env.decision(expr, value, kind), candidates, flips)

    def answered_again(self, env, expr) -> None:
        entry = self._sensitive_answers.get(expr)
        if entry is not None and not self.dry:
            value, kind, symbols, flips = entry
            self._note_sensitive(expr, lambda: env.decision(expr, value, kind), symbols,
                                 flips)

    def dry_truth(self, env, expr) -> bool | None:
        """A dry run's question the ranges leave open, settled once exact polynomial divisions
        are carried out (``Eq(4*s1**2, 4*s1*((s1**2)//s1))``, a view's ``-1`` at size 1), or
        by an equality the input facts force (``settle.forced_equalities``)."""
        simpler = E.exact_divisions(expr)
        value = None if simpler is expr else env.static_truth(simpler)
        if value is None and env.input_facts:
            ones = self._dry_ones[-1] if self._dry_ones else {}
            equalities = forced_equalities(self, env, ones)
            if equalities:
                try:
                    value = env.static_truth(at_values(simpler, equalities))
                except ArithmeticError:  # undefined there: left open
                    value = None
        return value

    @contextlib.contextmanager
    def dry_run(self, ones: dict | None = None) -> Iterator[None]:
        """A hypothetical computation (metadata with ``ones``, ``{symbol: 1}``, put in):
        the environment answers only from the ranges, earlier answers and the input facts,
        records and audits nothing, and a question they do not settle raises
        ``DryRunUndecided``."""
        self.dry += 1
        self._dry_ones.append(ones or {})
        try:
            yield
        finally:
            self.dry -= 1
            self._dry_ones.pop()

    def _note_sensitive(self, expr, decision: Callable[[], Guard], symbols, flips) -> None:
        """``symbols`` depend on being >= 2 through ``expr`` (``flips``: the sets of them at 1
        that change the answer, None when too many to enumerate); ``decision()`` makes the
        answer's Guard (with the user's stack now), called only when a symbol is noted for
        the first time (kernels ask the same questions over and over). An answer given inside the
        meta computation of one recorded node (a unit scope) only shaped that node's output
        metadata: it goes to the scope, for the recorder to compare that metadata at 1. Any
        other (the model's own decisions, torch's indexing code choosing which ops to run)
        marks them for the whole program. An "is this size 1?" inside an aligned broadcast
        marks nothing (see ``aligned_broadcast``).

        A guard recorded inside a kernel holds for ``[2, ...]`` (the solver checks it against
        the spec) and only chose that node's metadata; nothing at run time reads it, so the
        metadata comparison covers it too."""
        if self._aligned_broadcast and _is_unit_question(expr):
            return
        free = [s for s in symbols if s not in self.sensitive]
        if self._unit_scopes:
            scope = self._unit_scopes[-1]
            new = any(s not in scope for s in free)
            scope.note(free, decision() if new else None, flips)
            return
        if self._held is not None:  # noted even when empty: the pick still decided nothing
            self._held.append((free, decision() if free else None))
            return
        if free:
            guard = decision()
            for symbol in free:
                self.sensitive.setdefault(symbol, guard)

    @contextlib.contextmanager
    def held(self) -> Iterator[list]:
        """The program-wide sensitive answers given inside, held back in the list yielded
        (``(symbols, guard)`` pairs): the interpreter holds the one answer by which an
        ``and``/``or`` picks its value, and ``release``s it unless either pick gives the same
        value at the same place (``is_causal = q_len > 1 and mask is None``: ``False`` both
        ways when a mask is given), in which case it decides nothing at 1."""
        outer, self._held = self._held, []
        try:
            yield self._held
        finally:
            self._held = outer

    def release(self, notes: list) -> None:
        """Mark the answers ``held`` back (holds do not nest: a truth test runs no code)."""
        for symbols, guard in notes:
            for symbol in symbols:
                self.sensitive.setdefault(symbol, guard)

    def drop(self, notes: list) -> None:
        """The answers ``held`` back decide nothing at 1. Kept aside: should the deferred
        checks then refuse sets of sizes at 1 that involve them, ``settle`` counts them after
        all (traced at 1 by the admission, as before, rather than refused by patterns)."""
        for symbols, guard in notes:
            for symbol in symbols:
                self._dropped.setdefault(symbol, guard)

    def mark_sensitive(self, decisions: dict, why: str = "", *, final: bool = False) -> None:
        """``decisions``: ``{symbol: the Guard that depends on it being >= 2}``; ``why``: what
        makes that answer matter, when the guard alone does not say it; ``final``: a trace
        at 1 would only confirm it (the admission does not try one)."""
        for symbol, guard in decisions.items():
            if symbol not in self.sensitive:
                self.sensitive[symbol] = guard
                if why:
                    self.why[symbol] = why
                if final:
                    self.final.add(symbol)

    def settle(self, env) -> set:
        """Run the deferred checks (:mod:`unbroken.size_one.settle`): the ``admits_one``
        symbols no answer depends on being >= 2 (the ones the program admits at 1 without
        another trace). Call it once the program's input facts are known (after the guards
        are checked), under the Python dispatcher (the checks re-run meta kernels); the sets
        of sizes at 1 refused by a run-time assertion instead are in ``refused_sets`` (their
        facts join ``env.input_facts``)."""
        checks, self._deferred_checks = self._deferred_checks, []
        sensitive, why = dict(self.sensitive), dict(self.why)
        refused_before, facts_before = len(self.refused_sets), len(env.input_facts)
        counted: dict = {}
        while involved := self._settle_checks(env, checks, self._dropped.keys() - counted):
            # dims an and/or's answer was dropped for are refused in a pattern at 1: settle
            # again as if that answer counted for them (a trace at 1 then judges them
            # whole); the other dropped answers still decide nothing
            counted.update((s, self._dropped[s]) for s in involved)
            self.sensitive, self.why = dict(sensitive), dict(why)
            del self.refused_sets[refused_before:], env.input_facts[facts_before:]
            self.mark_sensitive({s: g for s, g in counted.items() if s not in self.sensitive})
        return {s for s in self.admits_one if s not in self.sensitive}

    def _settle_checks(self, env, checks, dropped) -> set:
        """Run ``checks``; stop at the first pattern refused at 1 that involves symbols of
        ``dropped`` not sensitive, and return those (empty: all checks ran).
        Nodes of one computation on the same metadata (a block's views, repeated in every
        block: unlike functional ops, views are not served from the trace's meta cache) are
        re-run at each set of sizes at 1 once while the environment and its input facts
        stay as they were (the outcome is a function of those alone)."""
        outcomes: dict = {}
        reachability: dict = {}  # the ranges do not change while settling
        for pending, check, key in checks:
            if key is not None:
                check = _remembered(check, key, outcomes, env, self._shared_state(env, key))
            refused = settle_check(self, env, pending, check, reachability)
            self.refused_sets.extend(refused)
            env.input_facts.extend(r.fact for r in refused)
            for pattern in refused:
                involved = (pattern.ones | pattern.others) & dropped - self.sensitive.keys()
                if involved:
                    return set(involved)
        return set()

    def _shared_state(self, env, key=None):
        """``(everything a check's outcome depends on but its key and the sizes at 1, the
        backend-layout counter)`` when the outcome of a check may be shared with other
        traces: its kernel is torch's own (a node's ``key[2]``, the recorder's ``shared``; a
        leaf call's, without ``key``, stated by ``unit_meta.leaf_call_key``), else None. The
        state: the environment's answering state, the process's (grad mode, default dtype,
        attention backends...) and this audit's candidates and sensitive symbols (the input
        facts' forced equalities read them)."""
        if (key is not None and key[2] is None) or self.layout_events is None:
            return None
        state = (env.answering_state(), process_state(), frozenset(self.admits_one),
                 frozenset(self.sensitive))
        return _canonical(state), self.layout_events

    # ----------------------------------------------------------------- the recorder's side
    @contextlib.contextmanager
    def aligned_broadcast(self, func, args) -> Iterator[None]:
        """Inside a pointwise op whose operands' sizes agree at every (right-aligned) position
        up to literal 1s (``x + y`` of equal shapes, ``x * w`` with ``w`` broadcast): its
        "is this size 1?" / "are there fewer than 2 elements?" questions only pick the
        broadcast source or the layout shortcut. The output size is the same expression either
        way and the op recorded the same, so those answers do not make the program depend on
        a size being >= 2: not audited."""
        if not self.admits_one or not _aligned_pointwise(func, args):
            yield
            return
        self._aligned_broadcast += 1
        try:
            yield
        finally:
            self._aligned_broadcast -= 1

    @contextlib.contextmanager
    def unit_scope(self) -> Iterator[AnswersAtOne]:
        """Around the meta computation of one recorded node (or one leaf call): the sensitive
        answers the ranges give inside go to the yielded ``AnswersAtOne`` instead of
        ``sensitive``, to be checked by comparing the computation at 1."""
        pending = AnswersAtOne()
        self._unit_scopes.append(pending)
        try:
            yield pending
        finally:
            self._unit_scopes.pop()

    def node_meta(self, env, kernel, args, kwargs, func=None, computation=None, shared=None):
        """``kernel(args, kwargs)``: the meta output of one recorded node (of ``func``); its
        "is this size 1?" answers are checked against the output at 1
        (``unit_meta.same_node_at``), once the input facts are known (``settle``). So is the
        output of a pointwise op over operands laid out differently, which asks nothing:
        eager orders the output's dims by its operands' strides, leaving size-1 dims out, so
        at 1 another operand's order may win (``(5, n, 1)`` times a ``(5, n, 7)`` view of
        strides ``(1, 35, 5)``: contiguous at n >= 2, ``(1, 35, 5)`` at 1)."""
        if not self.admits_one:
            return kernel(args, kwargs)
        with self.unit_scope() as pending:
            out = kernel(args, kwargs)
        if not pending and func is not None and torch.Tag.pointwise in func.tags:
            self._layout_from_operands(env, pending, args, out)
        if pending:
            identity = func if func is not None else computation
            key = None if identity is None else metadata_key(args, kwargs, out)
            self._deferred_checks.append((pending, lambda ones: same_node_at(
                self, env, kernel, args, kwargs, out, ones),
                None if key is None else (identity, key, shared)))
        return out

    def _layout_from_operands(self, env, pending: AnswersAtOne, args, out) -> None:
        """Note, for the comparison at 1, the symbols admitting 1 in the sizes of a pointwise
        op's tensor operands when at least two operands and not all of them are laid out
        contiguously (all contiguous: the output is too, at every size)."""
        tensors = [a for a in pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
        if len(tensors) < 2 or not isinstance(out, torch.Tensor) or \
                all(contiguous_at(t) for t in tensors):
            return
        symbols = sorted({s for t in tensors for size in t.shape
                          if isinstance(size, torch.SymInt)
                          for s in size.node.expr.free_symbols
                          if s in self.admits_one and s not in self.sensitive}, key=str)
        for symbol in symbols:
            pending.note([symbol], env.decision(sympy.Eq(symbol, 1), False, "guard"), None)

    def same_answer_at_one(self, env, ask):
        """``ask(resize)`` (the recorder asking whether an op saves a tensor it writes, on
        stand-ins of its metadata): its "is this size 1?" answers (a broadcast in the op's
        reference) only matter when the answer itself differs with the dims at 1, so it is
        asked again in a dry run at each set of them that flips one, with the sizes put in
        (``resize``); a different or undecided answer there marks them."""
        if not self.admits_one or self.dry:
            return ask(None)
        with self.unit_scope() as pending:
            answer = ask(None)
        symbols = [s for s in pending if s not in self.sensitive]
        if symbols and not holds_at_one(
                symbols, lambda ones: self._same_answer(env, ask, ones, answer),
                within=pending.flips):
            self.mark_sensitive(pending)
        return answer

    def _same_answer(self, env, ask, ones: dict, answer) -> bool:
        with self.dry_run(ones):
            try:
                return ask(lambda value: substituted(env, value, ones)) == answer
            except REJECTED_AT_ONE:
                return False

    def settle_leaf_call(self, recorder, pending, log, fn, args, kwargs, result,
                         grad_enabled: bool) -> None:
        """See :func:`unbroken.size_one.unit_meta.settle_leaf_call`; the comparison's
        outcomes are shared with the process's later traces as the nodes' are
        (``_SHARED_OUTCOMES``): each export of a model with ``nn.MultiheadAttention`` re-ran
        ``F.multi_head_attention_forward`` at every set of sizes at 1 (~30 ms each)."""
        env = recorder.env

        def remembered(key, check):
            shared = self._shared_state(env)
            return lambda ones: _shared_outcome(check, key, ones, shared)

        settle_leaf_call(self, env, recorder, pending, log, fn, args, kwargs, result,
                         grad_enabled, remembered)

    def note_layout_at_one(self, recorder, inputs, result, pending: dict, *,
                           same_layout: bool, whole=None, carriers=(),
                           grad_enabled: bool = True, at_one=None) -> None:
        """``result`` of a layout-dependent call (``reshape``) on ``inputs`` is a copy in this
        trace and a view at size 1 (or the reverse), by the answers ``pending``: same values,
        other aliasing. A later write into the memory of either side (``written``), or the
        result returned (``layout_observed``), would tell them apart: those answers then
        count. So does a read with grad on of a result made with grad off
        (``grad_enabled``: a ``no_grad`` region): eager's view at 1 takes its input's
        ``requires_grad`` (and passes gradients to it), the program's copy does not.

        Laid out otherwise at 1 (not ``same_layout``: a strided view of a transposed input),
        the result, and what views and pointwise ops make of it (its ``carriers``), reach
        later ops with another layout there:
        - with ``whole`` (``(node, input node)``: its node and the node of the tensor it
          reshapes), the result is recorded as one ``aten.reshape`` node once the trace has
          shown that nothing tells the sides apart, so that the program views or copies at
          run time as eager does, and the ops reading it read eager's layout. What the trace
          decided on its own layout then counts: a later call that chooses its ops by the
          layout (``contiguous()`` copying or not, another reshape; any call that is not
          one op) taking a carrier (``leaf_called``; ``carriers``: more of them, made by the
          same leaf call);
        - without, the program keeps its copy: an op whose values depend on the layout (a
          ``sum`` adds in another order) reading a carrier counts (``read``).

        Laid out alike but for the strides of size-1 dims (``same_layout``), only a BLAS
        product reading the result or a view of it can tell (``read``): it counts unless the
        view it reads has the same strides on both sides at 1, replayed from eager's result
        there (``at_one``: ``{values: eager's result}``, None when unknown)."""
        roots = [recorder.aliases.root(t) for t in pytree.tree_leaves((inputs, result))
                 if isinstance(t, torch.Tensor)]
        result_root = recorder.aliases.root(result)
        carriers = [result_root, *(recorder.aliases.root(t) for t in carriers)]
        self._layout_at_one.append(_LayoutAtOne(
            roots, result, result_root, carriers, pending, whole, grad_enabled, same_layout,
            recorder.env, at_one))

    @property
    def watches_writes(self) -> bool:
        return bool(self._layout_at_one)

    def written(self, root, frames) -> None:
        """An in-place write into the memory whose alias root is ``root`` (at the user's
        ``frames``)."""
        for note in self._layout_at_one:
            if any(root is noted for noted in note.roots):
                note.whole = None
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    "and the program later writes into that memory in place" + _at(frames)))

    def read(self, func, tensors, outputs, root_of, frames, chain_of=None) -> None:
        """``func`` has read ``tensors`` and made ``outputs`` (``root_of``: a tensor's alias
        root; ``frames()``: the user's frames). Where it reads a result noted by
        ``note_layout_at_one`` that is laid out otherwise at 1 and not recorded whole, its
        values are the same on both sides only if they do not depend on the layout: a view,
        or a pointwise op (or a copy), whose output then carries the layout on; a reduction
        or a matmul sums in the order the layout gives, so it may round otherwise at 1:
        those answers then count. A write is ``written``'s."""
        op = isinstance(func, OpOverload)
        if op and (is_view_op(func) or func is torch.ops.aten._unsafe_view.default
                   or is_mutating(func)):
            return
        roots = [root_of(t) for t in tensors]
        made = [t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
        grad_on = torch.is_grad_enabled()
        for note in self._layout_at_one:
            if grad_on and not note.grad_enabled and any(
                    root is note.result_root for root in roots):
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    f"made with grad off and read with grad on by `{_name(func)}`"
                    f"{_at(frames())}: eager's view takes its input's requires_grad there, a "
                    "copy does not"))
            if note.carriers is None or not made or not any(
                    root is carrier for root in roots for carrier in note.carriers):
                continue  # (nothing made: a size or a Python number, no layout-ordered sums)
            if op and (torch.Tag.pointwise in func.tags or func in LAYOUT_FOLLOWING):
                note.carriers.extend(root_of(t) for t in made)
            elif note.same_layout:  # a size-1 dim's stride may differ: products read it
                if (not op or func.overloadpacket.__name__ in STRIDE_READING_PRODUCTS) and \
                        not _read_alike_at_one(self, note, tensors, root_of, chain_of):
                    # the program's copy at 1 is a copy there too, and the trace at 1 would
                    # count it for this reader (admission._LAYOUT_READING): no trace at 1
                    self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                        f"and `{_name(func)}` reads it{_at(frames())}, a product whose "
                        "kernel chooses its path by the strides, a size-1 dim's included"),
                        final=True)
            elif note.whole is None or not op:  # recorded whole, it reads eager's layout
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    f"and `{_name(func)}` reads its values{_at(frames())}, whose result "
                    "may round otherwise on the other layout"))

    def leaf_called(self, fn, tensors, log, result, root_of, frames) -> None:
        """A leaf call ``fn`` has read ``tensors`` and dispatched the ops of ``log``. Where it
        reads a carrier of a result to be recorded whole (``note_layout_at_one``), its ops
        were chosen on the trace's layout of it: they are eager's at 1 only when the call is
        one op of its own name (``sum``, ``matmul``, ``mul``), a view or a pointwise op, none
        of which chooses by the layout; ``contiguous()`` (no op here, a copy at 1), a reshape
        or a function of several ops count. A call that runs no op and returns no tensor
        reads metadata: a layout fact is ``layout_observed``'s."""
        if not log and not any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(result)):
            return
        roots = None
        for note in self._layout_at_one:
            if note.whole is None or note.carriers is None:
                continue
            if roots is None:
                roots = [root_of(t) for t in tensors]
            if any(root is carrier for root in roots for carrier in note.carriers) \
                    and not _one_op_call(fn, log):
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    f"and `{getattr(fn, '__name__', fn)}`{_at(frames())} decides on the "
                    "program's layout of it, which is not eager's there"))

    def layout_observed(self, recorder, outputs, observed: bool) -> None:
        """The trace has ended: mark the answers of the layout-dependent calls noted by
        ``note_layout_at_one`` sensitive when the program reads a layout fact (``observed``)
        or returns one of their results (writes are marked as they happen); record each
        other one that can be as one ``aten.reshape`` node."""
        roots = [recorder.aliases.root(t) for t in outputs if isinstance(t, torch.Tensor)]
        for note in self._layout_at_one:
            if observed:
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    "and the program reads a stride or contiguity fact"))
            elif any(root is carrier for root in roots for carrier in
                     ([note.result_root] if note.same_layout else note.carriers)):
                self.mark_sensitive(note.pending, _LAYOUT_AT_ONE.format(
                    "and the program returns that result (or a view of it)"))
            elif note.whole is not None:
                recorder.reshape_whole(note.result, *note.whole)
        self._layout_at_one.clear()


class _LayoutAtOne:
    """One call noted by ``SizeOneAudit.note_layout_at_one``: the alias roots of its
    inputs and result (``roots``), its result and the result's root, the roots whose layout
    follows the result's (``carriers``: the result and what pointwise ops made of it), the
    answers that chose (``pending``), ``whole`` (``(node, input node)`` to record it as one
    ``reshape``, or None) and ``same_layout`` (laid out alike at 1 but for the strides of
    size-1 dims, which only a BLAS product reads)."""

    __slots__ = ("roots", "result", "result_root", "carriers", "pending", "whole",
                 "grad_enabled", "same_layout", "env", "at_one", "examples", "alike")

    def __init__(self, roots, result, result_root, carriers, pending, whole, grad_enabled,
                 same_layout, env, at_one):
        self.roots, self.result, self.result_root = roots, result, result_root
        self.carriers, self.pending, self.whole = carriers, pending, whole
        self.grad_enabled = grad_enabled  # the grad mode the call ran in
        self.same_layout = same_layout  # laid out alike at 1 but for size-1 dims' strides
        self.env, self.at_one = env, at_one  # eager's result at 1 per set of values
        self.examples = None  # the example's sizes, {symbol: value}, once asked
        self.alike: dict = {}  # id(tensor) -> read alike at 1 (``_read_alike_at_one``)


def _read_alike_at_one(audit, note: _LayoutAtOne, tensors, root_of, chain_of) -> bool:
    """Whether every tensor of ``tensors`` made from ``note``'s result has, at 1, the same
    strides (every dim's) on both sides: the program's, substituted, and eager's, the views
    that made it replayed on eager's result there (a dry run: nothing recorded, nothing
    guarded). The other sizes are put in at the example's values: the replay then runs
    torch's concrete stride rules, eager's (its symbolic ones give a size-1 dim of a view
    another stride than eager's kernels do). Made otherwise (a pointwise op between), or
    eager's result unknown: not known alike."""
    if note.at_one is None or chain_of is None:
        return False
    for tensor in tensors:
        root = root_of(tensor)
        if root is not note.result_root:
            if any(root is carrier for carrier in note.carriers):
                return False  # a pointwise op made it: its layout is TensorIterator's
            continue
        known = note.alike.get(id(tensor))
        if known is None:
            known = note.alike[id(tensor)] = _alike_at_one(audit, note, tensor, chain_of)
        if not known:
            return False
    return True


def _alike_at_one(audit, note: _LayoutAtOne, tensor, chain_of) -> bool:
    """``_read_alike_at_one`` for one tensor made from the result by views only."""
    if note.examples is None:
        note.examples = {symbol: info.hint for symbol, info in note.env.symbols.items()
                         if info.hint is not None}
    chain = chain_of(tensor)
    for values, eager in note.at_one.items():
        ones = dict(values)
        at = {**note.examples, **ones}
        try:  # the recorder's mode off (no op of the program), eager's C++ view rules
            with audit.dry_run(ones), disable_current_modes(), python_dispatcher_disabled():
                view = _replayed(note.env, substituted_tree(note.env, eager, at), chain, at)
                ours = substituted_tree(note.env, tensor, at)
        except Exception:  # noqa: BLE001 (a view that cannot be replayed: not known)
            return False
        if not (_same_exprs(view.shape, ours.shape)
                and _same_exprs(view.stride(), ours.stride())):
            return False
    return True


def _same_exprs(left, right) -> bool:
    return len(left) == len(right) and all(
        sympy.expand(sym_expr(a) - sym_expr(b)) == 0 for a, b in zip(left, right))


def _replayed(env, tensor: torch.Tensor, chain: list, ones: dict) -> torch.Tensor:
    """The views of ``chain`` (``ViewOf`` calls, root side first) made again from
    ``tensor`` with ``ones`` put in for their symbolic arguments."""
    for made in chain:
        args, kwargs = substituted_tree(env, (list(made.args[1:]), made.kwargs), ones)
        out = made.func(tensor, *args, **kwargs)
        tensor = out[made.index] if made.index is not None else out
    return tensor


def _holds_at_one(env, expr, ones: dict, value: bool) -> bool:
    """Whether the ranges give ``expr`` the answer ``value`` with ``ones`` put in (False
    when it is undefined there: ``x % (s0 // 8)``)."""
    try:
        at_one = put_ones(expr, tuple(sorted(ones, key=str)))
    except ArithmeticError:
        return False
    return env.static_truth(at_one) is value


def _is_unit_question(expr) -> bool:
    """``Eq(e, 1)``/``Ne(e, 1)`` (is this size 1?) or ``e < 2`` (fewer than 2 elements?)."""
    if isinstance(expr, (sympy.Eq, sympy.Ne)):
        return sympy.Integer(1) in expr.args
    return isinstance(expr, sympy.StrictLessThan) and expr.rhs == 2


def _aligned_pointwise(func, args) -> bool:
    """A pointwise op whose tensor operands have, at every right-aligned position, one size
    expression besides literal 1s (see ``SizeOneAudit.aligned_broadcast``)."""
    if torch.Tag.pointwise not in func.tags:
        return False
    shapes = [arg.shape for arg in args if isinstance(arg, torch.Tensor)]
    if len(shapes) < 2:
        return False
    for position in range(1, max(len(shape) for shape in shapes) + 1):
        sizes = {sym_expr(shape[-position]) for shape in shapes if len(shape) >= position}
        sizes.discard(1)
        if len(sizes) > 1:
            return False
    return True


_LAYOUT_AT_ONE = ("at size 1 that call returns a view of its input where the program copies "
                  "(or a copy where it views), {}")


def _one_op_call(fn, log) -> bool:
    """Whether a leaf call ``fn`` that dispatched ``log`` ran one op that it names
    (``Tensor.sum`` -> ``aten.sum``, ``__matmul__`` -> ``aten.matmul``), or a view or
    pointwise op, none of which picks its ops by the input's layout (as a reshape, or a
    ``contiguous()`` that copies or not, does)."""
    if fn in LAYOUT_DEPENDENT_CALLS or len(log) != 1:
        return False
    func = log[0][0]
    if not isinstance(func, OpOverload):
        return False
    if is_view_op(func) or torch.Tag.pointwise in func.tags:
        return True
    name = getattr(fn, "__name__", "").strip("_").removeprefix("r").removeprefix("i")
    op = func.overloadpacket.__name__.strip("_")
    return bool(name) and (op == name or op == getattr(fn, "__name__", "").strip("_"))


def _name(func) -> str:
    packet = getattr(func, "overloadpacket", None)
    return getattr(packet or func, "__name__", str(func))


def _at(frames) -> str:
    return f" ({frames[-1].short()})" if frames else ""


def _remembered(check: Callable, key, outcomes: dict, env, shared) -> Callable:
    """``check(ones)`` (a node's comparison at 1, ``key``: its computation and metadata)
    answered from ``outcomes`` when the same comparison ran under the same environment and
    input facts (``outcomes`` is filled as it goes); with ``shared`` (``(state,
    layout_events)``: ``SizeOneAudit._shared_state``), from the outcomes of the process's
    earlier traces when one ran it in an equal state (``_SHARED_OUTCOMES``)."""
    def remembered(ones: dict) -> bool:
        at = (key, frozenset(ones.items()), env.version, len(env.input_facts))
        outcome = outcomes.get(at)
        if outcome is None:
            outcome = outcomes[at] = _shared_outcome(check, key, ones, shared)
        return outcome
    return remembered


# Outcomes of the size-1 checks (``_remembered``), shared by every trace of the process:
# (computation, metadata, sizes at 1, state) -> outcome. A check re-runs a kernel of torch's
# (a composite's decomposition: ~8 ms for attention) with some sizes at 1 under a dry run,
# whose answers come from the environment's state alone; every export of a model asks the
# same ones under the same state. Emptied when it reaches SHARED_OUTCOMES_MAX entries.
SHARED_OUTCOMES_MAX = 4096
_SHARED_OUTCOMES: dict = {}
_STATES: dict = {}  # state -> itself: states compared once, then by identity


def clear_shared_outcomes() -> None:
    """Forget the outcomes shared between traces (a fresh process's state)."""
    _SHARED_OUTCOMES.clear()
    _STATES.clear()


def _canonical(state: tuple) -> tuple:
    known = _STATES.get(state)
    if known is None:
        if len(_STATES) >= SHARED_OUTCOMES_MAX:
            _STATES.clear()
        known = _STATES[state] = state
    return known


def _shared_outcome(check: Callable, key, ones: dict, shared) -> bool:
    if shared is None:
        return check(ones)
    state, layout_events = shared
    at = (key, frozenset(ones.items()), state)
    outcome = _SHARED_OUTCOMES.get(at)
    if outcome is None:
        before = layout_events()
        outcome = check(ones)
        if layout_events() == before:
            if len(_SHARED_OUTCOMES) >= SHARED_OUTCOMES_MAX:
                _SHARED_OUTCOMES.clear()
            _SHARED_OUTCOMES[at] = outcome
    return outcome
