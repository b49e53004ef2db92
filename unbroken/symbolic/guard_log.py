"""The guard log: each guard of a successful export, the line that asked it, how it was decided,
and each ``Dim.AUTO`` dim that was pinned, with its reason (what ``TORCH_LOGS=+dynamic`` shows
for torch.export, one readable line per decision).

Enable it with ``UNBROKEN_LOG=guards`` in the environment (printed to stderr), or with the
standard ``logging`` API: the logger ``unbroken.guards`` at level INFO, e.g.
``logging.getLogger("unbroken.guards").setLevel(logging.INFO)`` plus a handler.

Only guards that the ranges could not settle are recorded while tracing; ``x.shape[0] != 1``
with ``x.shape[0] >= 2`` is answered on the spot and not logged.
"""
from __future__ import annotations

import logging
import os
import sys

from .guards import Guard

__all__ = ["LOGGER", "enabled", "log_guards"]

LOGGER = logging.getLogger("unbroken.guards")
_ENVIRONMENT_HANDLER: list[logging.Handler] = []


def enabled() -> bool:
    """Whether the log is on (``UNBROKEN_LOG`` names ``guards``, or the logger is at INFO)."""
    if "guards" in os.environ.get("UNBROKEN_LOG", "").replace(" ", "").split(","):
        if not _ENVIRONMENT_HANDLER:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("[unbroken.guards] %(message)s"))
            LOGGER.addHandler(handler)
            LOGGER.setLevel(logging.INFO)
            _ENVIRONMENT_HANDLER.append(handler)
    return LOGGER.isEnabledFor(logging.INFO)


def log_guards(decided: list[tuple[Guard, str]], specializations, describe,
               adopted=None) -> None:
    """One line per guard (``decided``: the guard and how it was decided), per ``Dim.AUTO``
    refinement earlier traces adopted (``adopted``: dim source -> refinement, see
    ``spec.resolve_dynamic_shapes``), then per specialization; ``describe``: symbol ->
    ``x.shape[0]``."""
    adopted = adopted or {}
    LOGGER.info("%d guard(s), %d adopted relation(s), %d specialization(s)", len(decided),
                len(adopted), len(specializations))
    for guard, how in decided:
        where = ""
        if guard.frames:
            frame = guard.frames[-1]
            where = f"  at {frame.short()}: {frame.source}"
        origin = f" [{guard.op}]" if guard.op else ""
        LOGGER.info("guard %s  -> %s%s%s", guard.describe(describe), how, origin, where)
    for source, refinement in adopted.items():
        LOGGER.info("adopted %s %s", source, _refinement_text(refinement))
    for specialization in specializations:
        LOGGER.info("specialized %s", specialization.describe())


def _refinement_text(refinement) -> str:
    if refinement == "static":
        return "is static (see the specialization below)"
    if isinstance(refinement, str):
        return f"== {refinement} (one symbol)"
    if refinement[0] == "range":
        return f"in [{refinement[1]}, {'inf' if refinement[2] is None else refinement[2]}]"
    return f"== {refinement[1]}"
