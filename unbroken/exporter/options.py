"""What one export is asked: the call (:class:`ExportCall`) and how (:class:`ExportOptions`).

Both are immutable: a stage reads them, and a variant (the retrace of the ``Dim.AUTO`` rounds,
a trace at size 1, the re-export that verifies a suggested fix) is a new value made with
``dataclasses.replace``, never a flag set on an object after it was built.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

__all__ = ["ExportCall", "ExportOptions"]


@dataclass(frozen=True, slots=True)
class ExportCall:
    """The call being exported.

    mod:    the ``nn.Module`` (or plain function) whose ``forward`` is traced;
    args:   the example positional inputs (checked: a tuple);
    kwargs: the example keyword inputs (checked: a dict).
    """

    mod: object
    args: tuple
    kwargs: dict

    @property
    def root(self) -> torch.nn.Module | None:
        """The exported module, or None when a plain function is traced."""
        return self.mod if isinstance(self.mod, torch.nn.Module) else None


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """How to export.

    dynamic_shapes:   the user's spec (plain; torch's spec builders already expanded);
    preserve:         ``preserve_module_call_signature`` paths (checked);
    auto_refinements: what earlier traces found the code requires of ``Dim.AUTO`` /
                      ``Dim.DYNAMIC`` dims, by source (``symbolic.auto``), adopted here;
    specializations:  the ``Dim.AUTO`` dims earlier traces pinned (for the warnings);
    forced_static:    ``(id(example tensor), dim)`` pairs static whatever the spec says (the
                      traces at size 1 of ``unbroken.size_one``);
    find_all:         "find them all" mode (``find_graph_breaks``): breaks are collected and
                      tracing goes on along one path (``exporter.paths`` explores them all);
    forced_path:      in that mode, the sides prescribed for the first decisions on tensor
                      data, as ``(site, taken)`` pairs (``frontend.paths.PathDecisions``);
                      empty: the example inputs' path;
    suggest_fixes:    a refusal for shapes searches a fix and verifies it by exporting again;
    narrow_in_place:  an adoption that only narrows ranges is applied to this trace instead
                      of tracing again (off where a narrower range would be another spec);
    graph_only:       only the program's graph is needed (a trace at size 1, compared node by
                      node; a suggested fix, verified by exporting with it): built as
                      ``ProgramParts`` without fake values (``exporter.build.build_program``);
    adopt_early:      stop the trace after the first operation that records a guard whose
                      ``Dim.AUTO`` adoption needs another trace (two dims made one, a dim
                      pinned: ``symbolic.auto.needs_retrace``): what comes after it is traced
                      again anyway (``run_stages`` raises ``AdoptAuto`` for those guards).
    defer_unstated:   ``prefer_deferred_runtime_asserts_over_guards``: a violated condition
                      on named dims that no ``Dim`` states directly becomes a run-time
                      assertion instead of a refusal (``exporter.shapes``).
    """

    dynamic_shapes: object = None
    preserve: frozenset[str] = frozenset()
    auto_refinements: Mapping = field(default_factory=dict)
    specializations: tuple = ()
    forced_static: frozenset = frozenset()
    find_all: bool = False
    forced_path: tuple = ()
    suggest_fixes: bool = True
    narrow_in_place: bool = True
    graph_only: bool = False
    adopt_early: bool = False
    defer_unstated: bool = False

    def __post_init__(self):
        object.__setattr__(self, "auto_refinements",
                           MappingProxyType(dict(self.auto_refinements)))
