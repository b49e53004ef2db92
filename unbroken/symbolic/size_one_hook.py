"""The hook through which the shape environment, the recorder and the trace context reach the
size-1 audit (``unbroken.size_one``), defined here, in the lowest layer, so that none of them
imports it.

An export makes one :class:`unbroken.size_one.audit.SizeOneAudit` and passes it to its
``ShapeEnvironment(size_one=...)``; the recorder reads it from the environment. Everything
else (loading a file, building torch's fake values, tests of the environment alone) gets
:data:`NO_SIZE_ONE`, this class itself: no dim admits 1, every question is asked once, nothing
is audited, and each method below does nothing (or what the plain computation does).
"""
from __future__ import annotations

import contextlib

__all__ = ["DryRunUndecided", "NO_SIZE_ONE", "SizeOneHook"]


class DryRunUndecided(Exception):
    """A question of a dry run (``SizeOneAudit.dry_run``) the ranges do not settle."""


class SizeOneHook:
    """The size-1 audit as the lower layers see it (this class: the null audit).

    ``active``: some dim admits 1 (the audit runs); ``dry``: the depth of the dry runs (a
    computation re-run with dims at 1) in progress, during which the environment answers only
    what the ranges settle and records nothing.
    """

    __slots__ = ()

    active = False
    dry = 0

    # ----- the shape environment's side
    def admit(self, symbol, *, requested: bool) -> None:
        """``symbol``'s spec admits 1 although it is traced from 2 (``requested``: declared
        ``min=1``)."""

    def audit(self, env, expr, value: bool, kind: str) -> None:
        """``env`` answered ``expr`` with ``value`` (a ``kind`` decision)."""

    def answered_again(self, env, expr) -> None:
        """``env`` gave an earlier answer to ``expr`` again."""

    def dry_truth(self, env, expr) -> bool | None:
        """A dry run's answer to ``expr`` beyond what the ranges settle, or None."""
        return None

    def held(self):
        """Around one decision of an ``and``/``or``: yields the list its sensitive answers
        are held in, for ``release`` (the null audit holds nothing)."""
        return contextlib.nullcontext([])

    def release(self, notes: list) -> None:
        """Count the answers ``held`` back after all."""

    def drop(self, notes: list) -> None:
        """The answers ``held`` back decide nothing."""

    # ----- the recorder's and the trace context's side
    def aligned_broadcast(self, func, args):
        """Around the dispatch of ``func`` on ``args``."""
        return contextlib.nullcontext()

    def node_meta(self, env, kernel, args, kwargs, func=None, computation=None, shared=None):
        """``kernel(args, kwargs)``: the meta output of one recorded node (of ``func``;
        ``computation``: what ``kernel`` computes, when no ``func`` says it; ``shared``: what
        else the kernel's output depends on, when the kernel is torch's own, else None)."""
        return kernel(args, kwargs)

    def unit_scope(self):
        """Around one leaf call: yields the answers to check given inside it."""
        return contextlib.nullcontext({})

    def settle_leaf_call(self, recorder, pending, log, fn, args, kwargs, result,
                         grad_enabled: bool) -> None:
        """After one leaf call whose answers ``pending`` are to be checked."""

    def same_answer_at_one(self, env, ask):
        """``ask(resize)``: a question of the recorder's own about the program (does this
        op save a tensor it writes?), answered on metadata whose sizes ``resize`` maps (None:
        as they are). Its size answers count only when the answer differs at 1."""
        return ask(None)

    def mark_sensitive(self, decisions: dict, why: str = "") -> None:
        """``decisions``: ``{symbol: Guard}`` whose answers depend on the symbol being >= 2."""

    watches_writes = False

    def written(self, root, frames) -> None:
        """An in-place write into the memory whose alias root is ``root``."""

    def leaf_called(self, fn, tensors, log, result, root_of, frames) -> None:
        """A leaf call ``fn`` has read ``tensors``, dispatched the ops of ``log`` and
        returned ``result``."""

    def read(self, func, tensors, outputs, root_of, frames, chain_of=None) -> None:
        """``func`` (an op, recorded) has read ``tensors`` and made ``outputs``; ``root_of``
        gives a tensor's alias root, ``chain_of`` the views from it to the tensor,
        ``frames()`` the user's frames."""


NO_SIZE_ONE = SizeOneHook()
