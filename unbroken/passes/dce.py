"""Dead code elimination.

Input: an exported graph module (any dialect state: functional or not).
Output: the same graph module, in place, without ``call_function`` nodes whose values are never
used and that have no effect besides their value. Kept always: placeholders (they are the
program's calling convention), the output node, ops with a mutable schema (they write a tensor),
side-effectful ops (``_assert_scalar``, ``_assert_async``, ``sym_constrain_range``, ``print`` ...,
as ``torch.fx.Node.is_impure`` reports them) and higher-order ops that torch marks impure.
Random ops are removed when unused: their only effect is on the random stream, which an exported
program does not promise to preserve (torch.export removes them too).
"""
from __future__ import annotations

import torch

from unbroken.ir.ops import is_mutating

__all__ = ["dead_code_elimination", "is_removable"]


def is_removable(node: torch.fx.Node) -> bool:
    """True if ``node`` can be deleted when nothing uses its value."""
    if node.op != "call_function" or node.users:
        return False
    if is_mutating(node.target):
        return False
    return not node.is_impure(impure_random=False)


def dead_code_elimination(graph_module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Remove unused pure nodes from ``graph_module`` (in place); returns it.

    Walks the graph backwards so that a chain of dead nodes goes in one sweep.
    """
    graph = graph_module.graph
    changed = False
    for node in reversed(list(graph.nodes)):
        if is_removable(node):
            graph.erase_node(node)
            changed = True
    if changed:
        graph_module.recompile()
    return graph_module
