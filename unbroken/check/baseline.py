"""Baselines: adopt the gate on a codebase that is not clean yet.

``--write-baseline FILE`` records every finding of the run; ``--baseline FILE`` then fails only
on findings the file does not list, and reports the listed ones that no longer occur (fixed).

A finding is identified by its case id, its diagnostic id and the text of its source line —
not the line number, so that code moving up or down does not turn a known break into a new one.
Each key has a count: two identical lines in one case are two findings. The file is JSON
sorted by key, so that it diffs well in review::

    {"format": 1, "tool": "unbroken check",
     "findings": [{"case": "models/a.py::Head", "code": "UB101",
                   "source": "if x.sum() > 0:", "count": 1}]}
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from .outcome import REFUSED, Report, with_findings
from .reports import ReportError

__all__ = ["apply_baseline", "baseline_text", "read_baseline"]

BASELINE_FORMAT = 1


def baseline_text(report: Report) -> str:
    """The baseline of a run's findings."""
    counts = Counter(f.baseline_key(o.id) for o in report.outcomes if o.status == REFUSED
                     for f in o.findings)
    entries = [{"case": case, "code": code, "source": source, "count": n}
               for (case, code, source), n in sorted(counts.items())]
    return json.dumps({"format": BASELINE_FORMAT, "tool": "unbroken check",
                       "findings": entries}, indent=2) + "\n"


def read_baseline(path: str) -> Counter:
    """The counted keys of a baseline file. Raises ReportError."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return Counter({(e["case"], e["code"], e["source"]): int(e.get("count", 1))
                        for e in data["findings"]})
    except OSError as err:
        raise ReportError(f"cannot read the baseline {path}: {err.strerror}") from err
    except (ValueError, KeyError, TypeError) as err:
        raise ReportError(f"{path} is not an unbroken baseline (written by "
                          f"--write-baseline): {err}") from err


def apply_baseline(report: Report, known: Counter) -> Report:
    """Mark the findings the baseline lists as known, and list as fixed the baseline entries
    of cases that ran but no longer have them."""
    left = Counter(known)
    outcomes = []
    for outcome in report.outcomes:
        marked = []
        for f in outcome.findings:
            key = f.baseline_key(outcome.id)
            marked.append(replace(f, known=left[key] > 0))
            left[key] -= 1
        outcomes.append(with_findings(outcome, marked))
    ran = {o.id for o in report.outcomes}
    fixed = [{"case": case, "code": code, "source": source, "count": n}
             for (case, code, source), n in sorted(left.items()) if n > 0 and case in ran]
    return replace(report, outcomes=outcomes, fixed=fixed)
