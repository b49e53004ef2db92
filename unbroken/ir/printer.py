"""Text forms of exported programs, in torch's format.

``ExportedProgram.__str__`` is::

    ExportedProgram:
        class GraphModule(torch.nn.Module):
            def forward(self, p_lin_weight: "f32[10, 100]", x: "f32[8, 100]"):
                ...
    Graph signature:
        # inputs
        p_lin_weight: PARAMETER target='lin.weight'
        ...
    Range constraints: {s0: VR[2, 10]}

fx prints the dtype/shape annotations from every node's ``meta["val"]``.
"""
from __future__ import annotations

import math
import re

import torch

__all__ = ["format_program", "format_graph_module", "format_range", "format_range_constraints"]

_INDENT = "    "


def format_graph_module(graph_module: torch.fx.GraphModule) -> str:
    """The readable Python code of ``graph_module`` with shapes, without colours."""
    return graph_module.print_readable(print_output=False, colored=False)


def _format_bound(bound) -> str:
    """A range bound: integers as themselves, infinities as torch writes them (``int_oo``)."""
    try:
        value = float(bound)
    except (TypeError, ValueError):
        return str(bound)
    if math.isinf(value):
        return "int_oo" if value > 0 else "-int_oo"
    return str(bound)


def format_range(value_range) -> str:
    """``VR[lower, upper]`` for any object with ``lower`` and ``upper``."""
    lower = _format_bound(value_range.lower)
    upper = _format_bound(value_range.upper)
    return f"VR[{lower}, {upper}]"


def _natural_key(text: str) -> list:
    """Sort key putting ``s2`` before ``s10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def format_range_constraints(range_constraints) -> str:
    """``{s0: VR[2, 10], s1: VR[2, int_oo]}``, sorted by symbol name (naturally) for stable
    output."""
    items = sorted(range_constraints.items(), key=lambda kv: _natural_key(str(kv[0])))
    body = ", ".join(f"{symbol}: {format_range(vr)}" for symbol, vr in items)
    return "{" + body + "}"


def format_program(program) -> str:
    """The full text of an ``ExportedProgram`` (graph, signature, range constraints)."""
    graph = format_graph_module(program.graph_module).replace("\n", "\n" + _INDENT)
    signature = str(program.graph_signature).replace("\n", "\n" + _INDENT)
    ranges = format_range_constraints(program.range_constraints)
    return (
        "ExportedProgram:\n"
        f"{_INDENT}{graph}\n"
        f"Graph signature: {signature}\n"
        f"Range constraints: {ranges}\n"
    )
