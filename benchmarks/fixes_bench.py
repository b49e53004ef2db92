"""`make fixes`: the benchmark of real graph breaks (benchmarks/fixes/) and what each tool does
with them.

Every file of benchmarks/fixes/ is a small module reduced from code nobody here wrote
(transformers models, torch.export's tutorial and ExportDB, torch.export GitHub issues), with
its source in its docstring, and one ``unbroken.case(...)``. For each case, in a fresh process
(a timeout per case):

- torch.export: ``torch.export.export(model, args)`` exports, or its first error line;
- draft_export: ``torch.export.draft_export(model, args)``: how many failures its report lists
  (or the error that stopped it);
- unbroken: the breaks ``unbroken.find_graph_breaks`` reports on the example's path alone
  (``unbroken.budget(paths=1)``), on all paths (its path exploration: both sides of every
  decision on tensor data; each break with the condition of its path), and the further breaks
  ``unbroken fix`` met in the patched rounds;
- the done-when check per case: every line torch.export's error or draft_export's failures
  name in the case's file is a line where unbroken reports a break ("finds torch's"), and the
  breaks only paths the example does not take reach, which neither torch tool names;
- fixes proposed (rewrites applied), whether the patch is verified, and whether the patched
  model exports and matches eager on every draw (outputs, dtypes, gradients, buffers).

    python benchmarks/fixes_bench.py [--only NAME,...] [--timeout S] [--jobs N] \
        [--markdown FILE] [--json FILE]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "fixes"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {line}"[:160]


def run_one(path: str) -> dict:
    """Measure one case file (in this process); the row as a dict."""
    import warnings

    import torch

    warnings.simplefilter("ignore")
    sys.path.insert(0, str(HERE.parent))
    from unbroken.cases import collect_cases
    from unbroken.fix import fix_case

    (case,) = collect_cases(path)
    row = {"case": Path(path).stem, "source": _source_line(path)}
    started = time.perf_counter()
    lines = Path(path).read_text().splitlines()
    torch_lines, draft_lines = set(), set()
    try:
        torch.export.export(copy.deepcopy(case.model), case.args, case.kwargs)
        row["torch_export"] = "ok"
    except Exception as err:  # noqa: BLE001 - the peer's refusal is the measurement
        row["torch_export"] = _first_line(err)
        torch_lines = _lines_named(str(err), path)
    try:
        torch._dynamo.reset()
        program = torch.export.draft_export(copy.deepcopy(case.model), case.args, case.kwargs)
        report = getattr(program, "_report", None)
        failures = getattr(report, "failures", []) or []
        row["draft_export"] = len(failures)
        draft_lines = {line for f in failures for line in _draft_lines(f, lines)}
    except Exception as err:  # noqa: BLE001
        row["draft_export"] = _first_line(err)
        draft_lines = _lines_named(str(err), path)
    row["torch_lines"], row["draft_lines"] = sorted(torch_lines), sorted(draft_lines)
    try:
        import unbroken

        with unbroken.budget(paths=1):
            example = case.find_graph_breaks()
        every = case.find_graph_breaks()
        on_example = {_break_key(e) for e in example}
        row["unbroken_breaks"] = len(example)
        row["unbroken_all_paths"] = len(every)
        row["exploration"] = every.exploration.describe()
        row["all_paths"] = [{"code": e.code, "line": _break_key(e)[1],
                             "path": "; ".join(c.describe() for c in e.path_conditions),
                             "example_path": _break_key(e) in on_example} for e in every]
        found = {b["line"] for b in row["all_paths"]}
        named = torch_lines | draft_lines
        row["finds_torch"] = all(_matched(line, found, path) for line in named)
        if not every:
            row["unbroken_exports"] = _unbroken_exports(case)
        row["untaken_torch_misses"] = sum(1 for b in row["all_paths"] if not b["example_path"]
                                          and b["line"] not in named)
    except Exception as err:  # noqa: BLE001
        row["unbroken_breaks"] = _first_line(err)
    fix = fix_case(case, str(HERE.parent.parent))
    row["unbroken_more"] = sum(b.round > 1 for b in fix.breaks)
    row["codes"] = sorted({b.code for b in fix.breaks if b.code})
    row["proposed"] = len(fix.rewrites)
    row["rules"] = [r.rule for r in fix.rewrites]
    row["status"] = fix.status
    row["verified"] = fix.status == "verified"
    row["exports_and_matches"] = fix.verification.exported and fix.verification.matches
    row["reason"] = fix.verification.reason or "; ".join(h.reason for h in fix.hints)[:200]
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def _lines_named(text: str, path: str) -> set[int]:
    """The lines of ``path`` a torch error's traceback text names (``File "...", line N``)."""
    import re

    real = os.path.realpath(path)
    return {int(n) for f, n in re.findall(r'File "([^"]+)", line (\d+)', text)
            if os.path.realpath(f) == real}


def _draft_lines(failure, lines: list[str]) -> set[int]:
    """The lines of the case file a draft_export failure's user stack names (its frames name
    files by index: a frame is the case's when its line there reads as the frame's code)."""
    data = getattr(failure, "data", None)
    stack = data.get("user_stack", []) if isinstance(data, dict) else []
    found = set()
    for frame in stack if isinstance(stack, list) else []:
        if not isinstance(frame, dict):
            continue
        line, loc = frame.get("line"), str(frame.get("loc", "")).strip()
        if isinstance(line, int) and 0 < line <= len(lines) and loc and \
                lines[line - 1].strip() == loc:
            found.add(line)
    return found


def _matched(line: int, found: set[int], path: str) -> bool:
    """Whether unbroken reports the break torch names at ``line``: a break at that line, or at
    the header of a loop whose body holds it (torch names where the body consumes the
    iterator, e.g. ``list(group)`` of an ``itertools.groupby`` in the ``for``)."""
    import ast

    if line in found:
        return True
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, (ast.For, ast.While)) and node.lineno in found and \
                node.body[0].lineno <= line <= node.end_lineno:
            return True
    return False


def _unbroken_exports(case) -> bool | str:
    """True when ``unbroken.export`` exports the case, else its first error line."""
    import unbroken

    try:
        unbroken.export(case.model, case.args, case.kwargs, dynamic_shapes=case.dynamic_shapes)
        return True
    except Exception as err:  # noqa: BLE001
        return _first_line(err)


def _break_key(error) -> tuple:
    where = error.location
    return error.code, where.lineno if where is not None else 0


def _source_line(path: str) -> str:
    text = Path(path).read_text()
    for line in text.splitlines():
        for marker in ("https://", "transformers/", "torch/_export"):
            if marker in line:
                start = line.index(marker)
                return line[start:].split()[0].rstrip(",;:)")
    return ""


def run_all(names, timeout: float, jobs: int = 1) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    files = sorted(CASES.glob("*.py"))
    if names:
        files = [f for f in files if f.stem in names]
    with ThreadPoolExecutor(jobs) as pool:
        rows = list(pool.map(lambda f: _run_file(f, timeout), files))
    return rows


def _run_file(file: Path, timeout: float) -> dict:
    """One case in a fresh process (the row, or why there is none)."""
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, __file__, "--one", str(file)],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        row = json.loads(lines[-1]) if lines else {
            "case": file.stem, "status": "crashed",
            "reason": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    except subprocess.TimeoutExpired:
        row = {"case": file.stem, "status": "timeout", "reason": f"over {timeout:.0f} s"}
    row.setdefault("seconds", round(time.perf_counter() - started, 2))
    print(f"{row['case']:<34} {row.get('status')}", flush=True)
    return row


def summary(rows: list[dict]) -> dict:
    torch_fails = [r for r in rows if r.get("torch_export", "ok") != "ok"]
    breaks = [r for r in rows if isinstance(r.get("unbroken_breaks"), int)
              and r["unbroken_breaks"] > 0]
    return {
        "cases": len(rows),
        "torch_export_refuses": len(torch_fails),
        "unbroken_finds_breaks": len(breaks),
        "torch_refuses_unbroken_finds_no_break": [
            r["case"] for r in torch_fails if r.get("unbroken_breaks") == 0],
        "more_breaks_on_untaken_paths": sum(1 for r in rows if r.get("unbroken_more")),
        "torch_names_a_break": sum(1 for r in rows if r.get("torch_lines") or
                                   r.get("draft_lines")),
        "finds_every_break_torch_names": sum(1 for r in rows if (
            r.get("torch_lines") or r.get("draft_lines")) and r.get("finds_torch")),
        "exports_where_torch_names_a_break": [
            r["case"] for r in rows if r.get("finds_torch") is False
            and r.get("unbroken_exports") is True],
        "misses_a_break_torch_names": [r["case"] for r in rows if r.get("finds_torch") is False
                                       and r.get("unbroken_exports") is not True],
        "untaken_path_breaks_torch_misses": sum(r.get("untaken_torch_misses", 0) for r in rows),
        "cases_with_untaken_path_breaks": [r["case"] for r in rows
                                           if r.get("untaken_torch_misses")],
        "fix_proposed": sum(1 for r in rows if r.get("proposed")),
        "verified": sum(1 for r in rows if r.get("verified")),
        "exports_and_matches": sum(1 for r in rows if r.get("exports_and_matches")),
    }


def markdown(rows: list[dict], env: dict) -> str:
    s = summary(rows)
    with_breaks = max(s["unbroken_finds_breaks"], 1)
    no_break = ", ".join(_exported(c, rows) for c in s["torch_refuses_unbroken_finds_no_break"])
    lines = [
        f"# Fix benchmark: real graph breaks ({env['date']}, Python {env['python']}, "
        f"torch {env['torch']})", "",
        "`make fixes` (benchmarks/fixes_bench.py) on benchmarks/fixes/: "
        f"{s['cases']} cases from transformers, torch.export's tutorial and ExportDB, and "
        "torch.export GitHub issues (each file names its source).", "",
        f"- torch.export refuses {s['torch_export_refuses']}; unbroken reports a break in "
        f"{s['unbroken_finds_breaks']} "
        f"(torch refuses, unbroken finds no break: "
        f"{no_break or 'none'}).",
        f"- path exploration (`find_graph_breaks`, both sides of every decision on tensor "
        f"data): of the {s['torch_names_a_break']} cases where torch.export's error or "
        f"draft_export's failures name a line of the case, unbroken reports a break at every "
        f"line they name in {s['finds_every_break_torch_names']}, and exports the case "
        f"soundly, so that what torch names is no break, in "
        f"{len(s['exports_where_torch_names_a_break'])} "
        f"({', '.join(s['exports_where_torch_names_a_break']) or 'none'}; misses: "
        f"{', '.join(s['misses_a_break_torch_names']) or 'none'}); "
        f"{s['untaken_path_breaks_torch_misses']} break(s) only on paths the example does not "
        f"take, which neither torch tool names, in: "
        f"{', '.join(s['cases_with_untaken_path_breaks']) or 'none'}.",
        f"- breaks found beyond the example's path in the patched rounds of `unbroken fix`: "
        f"{s['more_breaks_on_untaken_paths']} case(s).",
        f"- a fix proposed: {s['fix_proposed']}; verified: {s['verified']} "
        f"({100 * s['verified'] / with_breaks:.0f}% of the cases with a break); "
        f"patched model exports and matches eager: {s['exports_and_matches']}.", "",
        "| case | torch.export | draft_export failures | unbroken breaks (example path) | "
        "unbroken breaks on all paths | finds torch's | more in patched rounds | "
        "fixes proposed | verified | patched exports & matches | why not |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        torch_cell = "ok" if r.get("torch_export") == "ok" else \
            "refused: " + str(r.get("torch_export", "?")).split(":")[0]
        rules = ", ".join(r.get("rules", [])) or "—"
        why = "" if r.get("verified") else str(r.get("reason", ""))
        why = why.replace("|", "\\|").replace("\n", " ")[:110]
        lines.append(
            f"| [{r['case']}](../fixes/{r['case']}.py) | {torch_cell} | "
            f"{r.get('draft_export', '?')} | {r.get('unbroken_breaks', '?')} "
            f"{' '.join(r.get('codes', []))} | {_all_paths_cell(r)} | {_finds_cell(r)} | "
            f"{r.get('unbroken_more', '?')} | "
            f"{r.get('proposed', 0)} ({rules}) | {'yes' if r.get('verified') else 'no'} | "
            f"{'yes' if r.get('exports_and_matches') else 'no'} | {why} |")
    return "\n".join(lines) + "\n"


def _exported(case: str, rows: list[dict]) -> str:
    """``case`` and, when unbroken exports it, so."""
    row = next((r for r in rows if r["case"] == case), {})
    return case + (" — unbroken exports it" if row.get("unbroken_exports") is True else "")


def _all_paths_cell(r: dict) -> str:
    """``2: UB101@17; UB105@21 when `x.sum() > 0` is False`` (breaks only on untaken paths
    carry their path's condition)."""
    if "unbroken_all_paths" not in r:
        return "?"
    parts = [f"{b['code']}@{b['line']}" + ("" if b["example_path"] else
                                           f" (untaken path: {b['path'] or 'another path'})")
             for b in r.get("all_paths", [])]
    text = f"{r['unbroken_all_paths']}" + (": " + "; ".join(parts) if parts else "")
    return text.replace("|", "\\|")


def _finds_cell(r: dict) -> str:
    named = sorted(set(r.get("torch_lines", [])) | set(r.get("draft_lines", [])))
    if not named:
        return "— (torch names no line)"
    lines = ", ".join(map(str, named))
    if r.get("finds_torch"):
        return f"yes (line {lines})"
    if r.get("unbroken_exports") is True:
        return f"exports: no break (torch: line {lines})"
    return f"NO (line {lines})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--jobs", type=int, default=1, help="cases at a time (processes)")
    parser.add_argument("--markdown")
    parser.add_argument("--json")
    options = parser.parse_args(argv)
    if options.one:
        print(json.dumps(run_one(options.one)))
        return 0
    import torch

    env = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
           "python": ".".join(map(str, sys.version_info[:3])),
           "torch": torch.__version__.split("+")[0]}
    rows = run_all(set(options.only.split(",")) if options.only else None, options.timeout,
                   options.jobs)
    text = markdown(rows, env)
    print(text)
    if options.markdown:
        Path(options.markdown).write_text(text)
    if options.json:
        Path(options.json).write_text(json.dumps({"environment": env, "summary": summary(rows),
                                                  "cases": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
