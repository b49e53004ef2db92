"""Graph-to-graph transforms on exported graphs. Each pass is one module with one entry
function whose docstring states its input and output invariants.

``passes`` imports ``unbroken.ir`` and ``unbroken.symbolic`` only.
"""
from unbroken.passes.dce import dead_code_elimination
from unbroken.passes.functionalize import functionalize

__all__ = ["dead_code_elimination", "functionalize"]
