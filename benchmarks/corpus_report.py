"""The corpus benchmark's Markdown report, from the records the workers wrote (pure functions).

A record is the worker's JSON dict (``corpus_worker.measure``) or the driver's for a process that
timed out or crashed. Status values: ``ok`` (exported, and the program matches eager on the
example inputs), ``mismatch``, ``run_error`` (exported, but ``ep.module()`` raised),
``refused`` (export raised), ``build_error`` (the case failed eagerly), ``timeout``, ``crash``.
"""
from __future__ import annotations

from collections import defaultdict

EXPORTERS = ("unbroken", "strict", "nonstrict")
TITLES = {"unbroken": "unbroken", "strict": "torch strict", "nonstrict": "torch non-strict"}
MARK = {"ok": "✓", "mismatch": "≠", "run_error": "✗ run", "refused": "✗",
        "build_error": "case error", "timeout": "⏱ timeout", "crash": "✗ crash"}


def exported(record: dict) -> bool:
    """The export call returned a program (whatever the program then does)."""
    return record.get("status") in ("ok", "mismatch", "run_error")


def resized_ok(record: dict) -> bool:
    """Under --dynamic: the program ran on the resized inputs and matched eager there."""
    return record.get("status") == "ok" and (record.get("resized") or {}).get(
        "status") in ("exact", "close")


def batch_one_ok(record: dict) -> bool:
    """Under --dynamic: the program ran on a batch of 1 (sequence 9) and matched eager."""
    return record.get("status") == "ok" and (record.get("batch_one") or {}).get(
        "status") in ("exact", "close")


def error_label(error: dict | None) -> str:
    """``UB107`` for unbroken's errors, the exception's class name otherwise."""
    if not error:
        return ""
    return error.get("code") or error.get("type", "").rsplit(".", 1)[-1]


def cell(record: dict | None) -> str:
    """One table cell: status, export time (first / second call), and how it matches eager."""
    if record is None:
        return "—"
    status = record.get("status", "crash")
    if status in ("refused", "build_error"):
        return f"{MARK[status]} {error_label(record.get('error'))}"
    if status in ("timeout", "crash"):
        return MARK[status]
    times = f"{record['export_s']:.2f}"
    if record.get("export2_s") is not None:
        times += f"/{record['export2_s']:.2f}"
    match = record.get("match") or {}
    if status == "run_error":
        text = f"{MARK[status]} {error_label(match.get('error'))} ({times} s)"
    elif match.get("status") == "exact":
        text = f"✓ {times} s ="
    elif match.get("status") == "close":
        text = f"✓ {times} s ≈{match['max_abs_diff']:.0e}"
    else:
        diff = match.get("max_abs_diff")
        text = f"≠ {times} s" + (f" Δ{diff:.0e}" if diff is not None else " structure")
    if "resized" in record:
        text += " · " + resized_note(record)
    if "batch_one" in record:
        text += " · batch 1 " + ("✓" if batch_one_ok(record) else "✗ " + (
            error_label((record["batch_one"] or {}).get("error"))
            or (record["batch_one"] or {}).get("status", "")))
    return text


def resized_note(record: dict) -> str:
    """Under --dynamic: ``resized ✓``, or what went wrong on the resized inputs."""
    if resized_ok(record):
        return "resized ✓"
    pinned = record.get("pinned") or []
    if pinned:
        return "pinned " + ", ".join(p.split(" = ")[0] for p in pinned)
    resized = record.get("resized") or {}
    return "resized ✗ " + (error_label(resized.get("error")) or resized.get("status", ""))


def by_case(records) -> dict[str, dict[str, dict]]:
    """``{case: {exporter: record}}`` keeping the records' order."""
    table: dict[str, dict[str, dict]] = {}
    for r in records:
        table.setdefault(r["case"], {})[r["exporter"]] = r
    return table


def summary_rows(records, groups: dict[str, str], exporters=EXPORTERS) -> list[list[str]]:
    """One row per set: cases, then per exporter ``exported & matching / cases`` (and under
    --dynamic ``· resized n · batch 1 m``: programs that also ran and matched on the resized
    inputs, on a batch of 1)."""
    counts: dict = defaultdict(lambda: defaultdict(int))
    cases: dict = defaultdict(set)
    dynamic = any(r.get("dynamic") for r in records)
    for r in records:
        cases[r["group"]].add(r["case"])
        counts[r["group"]][r["exporter"], "ok"] += r.get("status") == "ok"
        counts[r["group"]][r["exporter"], "resized"] += resized_ok(r)
        counts[r["group"]][r["exporter"], "batch_one"] += batch_one_ok(r)
    rows = []
    for group, title in groups.items():
        n = len(cases.get(group, ()))
        if not n:
            continue
        row = [f"{n} {title}"]
        for e in (e for e in ("strict", "nonstrict", "unbroken") if e in exporters):
            text = f"{counts[group][e, 'ok']}/{n}"
            if dynamic and group in ("common", "harder", "seed", "outside2"):
                text += f" · resized {counts[group][e, 'resized']}"
                if any("batch_one" in r for r in records if r["group"] == group):
                    text += f" · batch 1 {counts[group][e, 'batch_one']}"
            row.append(text)
        rows.append(row)
    return rows


def refused_where_strict_exports(records) -> dict[str, list[tuple[str, dict]]]:
    """``{label: [(case, unbroken's error), ...]}``: cases torch strict exports correctly and
    unbroken does not, grouped by unbroken's first error id (or status)."""
    groups: dict[str, list] = defaultdict(list)
    for case, row in by_case(records).items():
        mine, strict = row.get("unbroken"), row.get("strict")
        if not mine or not strict or strict.get("status") != "ok" or mine.get("status") == "ok":
            continue
        error = mine.get("error") or (mine.get("match") or {}).get("error") or {}
        label = error_label(error) or mine.get("status", "")
        groups[f"{label} ({mine.get('status')})"].append((case, error or mine.get("match", {})))
    return dict(sorted(groups.items()))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _error_line(case: str, exporter: str, error: dict) -> str:
    where = f" at `{error['where']}`" if error.get("where") else ""
    line = error.get("line") or error.get("detail") or ""
    return f"- `{case}` ({TITLES.get(exporter, exporter)}): {error_label(error)}{where}: {line}"


def render(records, groups: dict[str, str], environment: dict, command: str,
           exporters=EXPORTERS) -> str:
    """The whole Markdown report: summary, one row per case, then every failure's first error,
    and under --dynamic the pinned dims."""
    dynamic = any(r.get("dynamic") for r in records)
    exporters = [e for e in EXPORTERS if e in exporters]
    parts = [f"# Corpus: unbroken vs torch.export ({'Dim.AUTO' if dynamic else 'static'})",
             "", f"`{command}` — {environment.get('date', '')}, "
             f"Python {environment.get('python')}, torch {environment.get('torch')},"
             f" transformers {environment.get('transformers')}, {environment.get('machine')}",
             "", "## Summary", "",
             "Exported and matching eager on the example inputs"
             + (" (`resized n`: the program also ran on batch 3 / seq 9 and matched eager; "
                "`batch 1 m`: on batch 1 / seq 9)"
                if dynamic else "") + ".", ""]
    header = ["set"] + [TITLES[e] for e in ("strict", "nonstrict", "unbroken") if e in exporters]
    parts += [markdown_table(header, summary_rows(records, groups, exporters)), ""]
    parts += ["## Cases", "",
              "Cell: ✓ exported and matches eager (`=` bit-exact, `≈` max abs diff within "
              "1e-4 rel / 1e-5 abs), export time first/second call in one process; ≠ differs; "
              "✗ refused (first error id or type); ✗ run: `ep.module()` raised.", ""]
    rows = [[case, next(iter(row.values()))["group"]] + [cell(row.get(e)) for e in exporters]
            for case, row in by_case(records).items()]
    parts += [markdown_table(["case", "set"] + [TITLES[e] for e in exporters], rows), ""]
    refused = refused_where_strict_exports(records)
    if refused:
        parts += ["## unbroken fails where torch strict exports", ""]
        for label, items in refused.items():
            parts.append(f"**{label}**: {len(items)}")
            parts += [_error_line(case, "unbroken", error) for case, error in items]
            parts.append("")
    if dynamic:
        parts += _pinned_section(records)
    parts += ["## First errors", ""]
    for r in records:
        error = r.get("error") or (r.get("match") or {}).get("error")
        if r.get("status") != "ok":
            parts.append(_error_line(r["case"], r["exporter"], error or {
                "line": r.get("status", "") + " " + str((r.get("match") or {}).get("detail", ""))}))
    return "\n".join(parts) + "\n"


def _pinned_section(records) -> list[str]:
    lines = ["## Dims pinned under Dim.AUTO", "",
             "Input dims marked `Dim.AUTO` that the program made static (placeholder size is "
             "a number), and programs that failed on the resized inputs.", ""]
    for r in records:
        if r.get("status") != "ok" or resized_ok(r):
            continue
        pinned = ", ".join(r.get("pinned") or []) or "none"
        resized = r.get("resized") or {}
        error = resized.get("error") or {}
        why = error.get("line") or resized.get("detail") or resized.get("status", "")
        lines.append(f"- `{r['case']}` ({TITLES[r['exporter']]}): pinned {pinned}; resized: "
                     f"{error_label(error) or resized.get('status', '')} {why}".rstrip())
    return lines + [""]
