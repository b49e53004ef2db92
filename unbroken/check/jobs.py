"""The functions a worker process runs (:mod:`unbroken.check.pool` pickles them by name).

Each takes plain strings and returns plain data (dicts and lists of JSON types), so that
nothing of the user's crosses back into the command's process.
"""
from __future__ import annotations

import os
from dataclasses import asdict

from ..cases import CaseCollectionError
from .execute import collect, run_target_case, use_root

__all__ = ["collect_job", "case_job"]


def collect_job(target: str, root: str) -> dict:
    """``{"cases": [CaseInfo as dict...]}`` or ``{"error": message}``."""
    _enter(root)
    try:
        return {"cases": [asdict(info) for info in collect(target, root)]}
    except CaseCollectionError as err:
        return {"error": err.summary}


def case_job(target: str, case_id: str, root: str, path_budget: dict | None = None) -> dict:
    """``{"outcome": CaseOutcome as dict}`` or ``{"error": message}`` when the target no longer
    declares the case. ``path_budget``: see ``run_case``."""
    _enter(root)
    try:
        return {"outcome": run_target_case(target, case_id, root, path_budget).to_dict()}
    except CaseCollectionError as err:
        return {"error": err.summary}


def _enter(root: str) -> None:
    os.chdir(root)
    use_root(root)
