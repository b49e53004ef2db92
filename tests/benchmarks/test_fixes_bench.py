"""The fix benchmark's helpers (benchmarks/fixes_bench.py): the lines torch's errors and
draft_export's failures name, and the done-when check per case (unbroken reports a break at
every line they name; breaks only on paths the example does not take)."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from fixes_bench import (  # noqa: E402
    _all_paths_cell,
    _draft_lines,
    _finds_cell,
    _lines_named,
    _matched,
    summary,
)


def test_lines_named_by_a_torch_traceback_are_the_case_files_only(tmp_path):
    case = tmp_path / "case.py"
    case.write_text("x = 1\n")
    text = (f'  File "{case}", line 17, in forward\n    if x.sum() > 0:\n'
            '  File "/elsewhere/torch/_dynamo/x.py", line 3, in f\n'
            f"# File: {case}:14 in forward, code: best = torch.zeros(())\n")
    assert _lines_named(text, str(case)) == {17}


def test_draft_lines_match_a_frame_whose_code_is_the_case_line():
    lines = ["import torch", "def f(x):", "    if x.sum() > 0:", "        return x"]
    failure = SimpleNamespace(data={"user_stack": [
        {"line": 1778, "filename": 10, "loc": "return self._call_impl(*args, **kwargs)"},
        {"line": 3, "filename": 11, "loc": "if x.sum() > 0:"},
        {"line": 4, "filename": 12, "loc": "something else"}]})
    assert _draft_lines(failure, lines) == {3}
    assert _draft_lines(SimpleNamespace(data="not a dict"), lines) == set()


def test_the_done_when_check_per_case_and_in_the_summary():
    found = {"case": "a", "torch_export": "refused", "unbroken_breaks": 1,
             "torch_lines": [17], "draft_lines": [], "finds_torch": True,
             "unbroken_all_paths": 2, "untaken_torch_misses": 1,
             "all_paths": [{"code": "UB101", "line": 17, "path": "", "example_path": True},
                           {"code": "UB105", "line": 21, "path": "`x.sum() > 0` is False",
                            "example_path": False}]}
    missed = {"case": "b", "torch_export": "refused", "unbroken_breaks": 0,
              "torch_lines": [9], "draft_lines": [9], "finds_torch": False,
              "unbroken_all_paths": 0, "all_paths": []}
    assert _all_paths_cell(found) == \
        "2: UB101@17; UB105@21 (untaken path: `x.sum() > 0` is False)"
    assert _finds_cell(found) == "yes (line 17)" and _finds_cell(missed) == "NO (line 9)"
    assert _finds_cell({"torch_export": "ok"}) == "— (torch names no line)"
    exports = dict(missed, case="c", unbroken_exports=True)
    assert _finds_cell(exports) == "exports: no break (torch: line 9)"
    s = summary([found, missed, exports])
    assert s["torch_names_a_break"] == 3 and s["finds_every_break_torch_names"] == 1
    assert s["misses_a_break_torch_names"] == ["b"]
    assert s["exports_where_torch_names_a_break"] == ["c"]
    assert s["untaken_path_breaks_torch_misses"] == 1
    assert s["cases_with_untaken_path_breaks"] == ["a"]


def test_a_break_torch_names_in_a_loop_body_is_matched_by_one_at_the_loop_header(tmp_path):
    case = tmp_path / "case.py"
    case.write_text("def f(t):\n    for k in g(t.tolist()):\n        n = len(list(k))\n"
                    "    return n\n")
    assert _matched(3, {2}, str(case)) and _matched(2, {2}, str(case))
    assert not _matched(4, {2}, str(case)) and not _matched(3, {4}, str(case))
