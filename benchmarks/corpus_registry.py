"""Every case of the corpus benchmark, by name and set (see ``corpus_cases``)."""
from __future__ import annotations

from corpus_cases import Case
from corpus_models import COMMON, HARDER
from corpus_outside import OUTSIDE2
from corpus_programs import exportdb_cases, seed_cases

# The summary sets, in table order, with their titles.
GROUPS = {
    "common": "common architectures",
    "harder": "harder programs",
    "exportdb": "ExportDB",
    "seed": "seed tutorial",
    "outside2": "outside 2 (code nobody here wrote)",
}


SOURCES = {
    "common": lambda: COMMON,
    "harder": lambda: HARDER,
    "exportdb": exportdb_cases,
    "seed": seed_cases,
    "outside2": lambda: OUTSIDE2,
}


def all_cases(groups=tuple(GROUPS)) -> dict[str, Case]:
    """name -> Case of the given sets, in table order (sets as in ``GROUPS``)."""
    cases = [c for g in groups for c in SOURCES[g]()]
    by_name = {c.name: c for c in cases}
    assert len(by_name) == len(cases), "duplicate case names"
    return {c.name: c for g in GROUPS for c in cases if c.group == g}
