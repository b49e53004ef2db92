"""The behaviour table: tests/behaviours/, torch strict and unbroken side by side.

    python -m tests.behaviours.report            # the table and the percentage
    python -m tests.behaviours.report --only mutation,errors --json out.json

The percentage is "unbroken passes / torch strict passes": of the behaviours torch strict gives
the expected answer on, how many unbroken gives it on too. Where the measured answers differ
from what a behaviour pins (``torch_fails``, ``unbroken_fails``), the row says so: the pytest
suite would fail there.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import warnings

import tests.behaviours as package
from tests.behaviours.harness import TORCH, UNBROKEN, run


def behaviours(only=None):
    """(topic, behaviour) for every ``test_<topic>.py`` module's ``BEHAVIOURS``."""
    found = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("test_"):
            continue
        topic = info.name.removeprefix("test_")
        if only and topic not in only:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found.extend((topic, b) for b in getattr(module, "BEHAVIOURS", ()))
    return found


def _pin_note(behaviour, torch_outcome, unbroken_outcome) -> str:
    notes = []
    if torch_outcome.passed != (behaviour.torch_fails is None):
        notes.append("torch pin differs")
    if torch_outcome.passed and unbroken_outcome.passed == bool(behaviour.unbroken_fails):
        notes.append("unbroken pin differs")
    return "; ".join(notes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated topics (test_<topic>.py)")
    parser.add_argument("--json", help="write the rows to this file")
    ns = parser.parse_args(argv)
    only = set(ns.only.split(",")) if ns.only else None
    warnings.simplefilter("ignore")
    rows = []
    start = time.perf_counter()
    for topic, behaviour in behaviours(only):
        torch_outcome = run(behaviour, TORCH)
        unbroken_outcome = run(behaviour, UNBROKEN)
        rows.append({
            "topic": topic, "behaviour": behaviour.name,
            "torch": torch_outcome.kind, "unbroken": unbroken_outcome.kind,
            "torch_detail": torch_outcome.detail, "unbroken_detail": unbroken_outcome.detail,
            "reason": behaviour.unbroken_fails or behaviour.torch_fails or "",
            "pin": _pin_note(behaviour, torch_outcome, unbroken_outcome),
        })
        row = rows[-1]
        print(f"{topic:16} {behaviour.name:44} {row['torch']:8} {row['unbroken']:8} "
              f"{row['pin']:22} {row['reason'] or row['unbroken_detail']}"[:220], flush=True)
    torch_passes = [r for r in rows if r["torch"] == "pass"]
    both = [r for r in torch_passes if r["unbroken"] == "pass"]
    bonus = [r for r in rows if r["torch"] != "pass" and r["unbroken"] == "pass"]
    bad = [r for r in rows if r["torch"] != "pass" and r["unbroken"] not in ("pass", "refused")]
    share = 100.0 * len(both) / max(len(torch_passes), 1)
    print()
    print(f"behaviours: {len(rows)}; torch strict passes {len(torch_passes)}; unbroken passes "
          f"{len(both)} of those: {share:.1f}% (unbroken passes / torch strict passes)")
    print(f"unbroken also passes {len(bonus)} behaviours torch strict fails; "
          f"worse than a clean refusal where torch fails: {len(bad)}; "
          f"{time.perf_counter() - start:.0f} s")
    left = [r for r in torch_passes if r["unbroken"] != "pass"]
    if left:
        print("\nleft failing (torch strict passes, unbroken does not):")
        for r in left:
            print(f"- {r['topic']}/{r['behaviour']}: {r['unbroken']}: "
                  f"{r['reason'] or r['unbroken_detail']}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"rows": rows, "percentage": share}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
