"""The frontend: a CPython 3.11 bytecode interpreter over variable trackers.

``trace_call`` interprets a module call for ``export``; ``interpret`` runs a pure-Python
function (the oracle tests compare it with CPython); ``GraphBreakError`` is what both raise
for constructs that cannot be captured (see ``graph_breaks.CATALOGUE``).
"""
from .graph_breaks import CATALOGUE, GraphBreakError
from .tracer import interpret, trace_call

__all__ = ["CATALOGUE", "GraphBreakError", "interpret", "trace_call"]
