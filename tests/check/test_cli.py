"""`unbroken check`: collection, exit codes, the printed report and the JSON report.

Every test writes its case files to ``tmp_path`` and runs ``main([...])`` in-process.
"""
from __future__ import annotations

import json
import re
import textwrap

import pytest

import unbroken
from unbroken import cases as cases_module
from unbroken.cases import CaseCollectionError, collect_cases
from unbroken.cli import main

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

GOOD = """\
import torch
import unbroken


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x * 2))


unbroken.case(Scale(), (torch.randn(2, 4),))
"""

BROKEN = """\
import torch
import unbroken


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()


unbroken.case(DataDependent(), (torch.randn(3, 3),), name="branchy")
"""


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def line_containing(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(autouse=True)
def plain_output(monkeypatch):
    """No colour codes in captured output, whatever the environment says."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


# -- collection (no export needed) ---------------------------------------------------------------

def test_case_records_name_and_declaration_line(tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    [case] = collect_cases(path)
    assert case.name == "Scale"
    assert case.declared_at == f"{path.resolve()}:{line_containing(path, 'unbroken.case(')}"
    assert case.short_location() == f"good.py:{line_containing(path, 'unbroken.case(')}"
    assert case.kwargs is None and case.dynamic_shapes is None


def test_case_name_for_functions_and_explicit_names(tmp_path):
    path = write(tmp_path, "fns.py", """\
        import torch, unbroken
        def double(x):
            return x * 2
        unbroken.case(double, (torch.ones(2),))
        unbroken.case(double, (torch.ones(2),), name="twice")
        """)
    assert [c.name for c in collect_cases(path)] == ["double", "twice"]


def test_case_rejects_non_tuple_args():
    with pytest.raises(TypeError, match=r"\(x,\)"):
        unbroken.case(lambda x: x, [1])


def test_directory_walk_skips_private_files_and_does_not_run_main(tmp_path):
    write(tmp_path, "a.py", GOOD)
    write(tmp_path, "sub/b.py", BROKEN)
    write(tmp_path, "_helpers.py", "raise RuntimeError('private files are not collected')\n")
    write(tmp_path, "__init__.py", "raise RuntimeError('not collected')\n")
    write(tmp_path, "c.py", GOOD + "if __name__ == '__main__':\n    raise SystemExit(3)\n")
    names = [c.name for c in collect_cases(tmp_path)]
    assert names == ["Scale", "Scale", "branchy"]


def test_file_may_import_its_neighbours(tmp_path):
    write(tmp_path, "shared_model.py", GOOD.replace("unbroken.case(", "# unbroken.case("))
    path = write(tmp_path, "uses.py", """\
        import torch, unbroken
        from shared_model import Scale
        unbroken.case(Scale(), (torch.randn(2, 4),), name="imported")
        """)
    assert [c.name for c in collect_cases(path)] == ["imported"]


def test_import_failure_is_a_collection_error(tmp_path):
    path = write(tmp_path, "bad.py", "import torch\n\nx = 1\nundefined_name + 1\n")
    with pytest.raises(CaseCollectionError) as info:
        collect_cases(path)
    assert "NameError" in info.value.summary and "line 4" in info.value.summary
    assert "importlib" not in info.value.summary
    assert not any(m.startswith("_unbroken_cases_bad_") for m in __import__("sys").modules)


def test_registry_keeps_every_declaration(tmp_path):
    before = len(cases_module.declared_cases())
    collect_cases(write(tmp_path, "good.py", GOOD))
    assert len(cases_module.declared_cases()) == before + 1


# -- usage errors: exit 2 ------------------------------------------------------------------------

def test_missing_path_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().out


def test_no_cases_exits_2(tmp_path, capsys):
    write(tmp_path, "empty.py", "import torch\n")
    assert main(["check", str(tmp_path)]) == 2
    assert "no export cases found" in capsys.readouterr().out


def test_import_failure_exits_2_with_traceback(tmp_path, capsys):
    path = write(tmp_path, "boom.py", "import torch\nraise ValueError('boom at import')\n")
    report = tmp_path / "report.json"
    assert main(["check", str(path), "--json", str(report)]) == 2
    out = capsys.readouterr().out
    assert "ValueError: boom at import" in out and "boom.py" in out and "line 2" in out
    data = json.loads(report.read_text())
    assert data["exit_code"] == 2 and data["cases"] == []
    assert data["usage_errors"][0]["path"].endswith("boom.py")


def test_no_command_exits_2(capsys):
    assert main([]) == 2


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("unbroken ")


# -- exporting: exit 0 / 1 -----------------------------------------------------------------------

def test_all_exported_exits_0(tmp_path, capsys):
    path = write(tmp_path, "good.py", GOOD)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Scale" in out and "OK" in out and "1 exported, 0 refused" in out
    assert f"good.py:{line_containing(path, 'unbroken.case(')}" in out


def test_refused_case_exits_1_and_shows_id_and_line(tmp_path, capsys):
    write(tmp_path, "good.py", GOOD)
    broken = write(tmp_path, "broken.py", BROKEN)
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "1 exported, 1 refused" in out
    codes = re.findall(r"\[(UB\d{3})\]", out)
    assert codes, out
    assert f"{codes[0]} broken.py:{line_containing(broken, 'if x.sum() > 0')}" in out
    assert "if x.sum() > 0:" in out  # the full diagnostic shows the source line
    assert "Fix:" in out


def test_json_report(tmp_path):
    write(tmp_path, "good.py", GOOD)
    broken = write(tmp_path, "broken.py", BROKEN)
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    assert main(["check", str(tmp_path), "--json", str(report), "--quiet"]) == 1
    data = json.loads(report.read_text())
    assert data["exit_code"] == 1
    assert data["summary"] == {"ok": 1, "refused": 1, "internal_error": 0, "timeout": 0,
                               "crashed": 0, "known": 0, "total": 2}
    by_name = {c["name"]: c for c in data["cases"]}
    assert by_name["Scale"]["status"] == "ok" and by_name["Scale"]["error"] is None
    refused = by_name["branchy"]
    assert refused["status"] == "refused"
    assert refused["line"] == line_containing(broken, "unbroken.case(")
    assert refused["error"]["code"].startswith("UB")
    assert refused["error"]["kind"] == "GraphBreakError"
    assert refused["error"]["frames"][-1]["line"] == line_containing(broken, "if x.sum() > 0")
    assert all(c["seconds"] >= 0 for c in data["cases"])


def test_users_broken_pytree_flatten_is_the_users_refusal_not_a_bug(tmp_path, capsys):
    """A flatten function the user registered that raises is reported at its line, as a
    refusal (exit 1), never as an internal error of unbroken (exit 3)."""
    path = write(tmp_path, "boxes.py", """\
        import torch
        import torch.utils._pytree as pytree
        import unbroken


        class Box:
            def __init__(self, t):
                self.t = t


        def flatten_box(box):
            raise ValueError("no children for you")


        pytree.register_pytree_node(Box, flatten_box, lambda xs, ctx: Box(xs[0]))


        class Unbox(torch.nn.Module):
            def forward(self, box):
                return box.t * 2


        unbroken.case(Unbox(), (Box(torch.randn(3)),))
        """)
    report = tmp_path / "r.json"
    assert main(["check", str(path), "--json", str(report), "--in-process"]) == 1
    case = json.loads(report.read_text())["cases"][0]
    assert case["status"] == "refused" and case["error"]["kind"] == "ExportUsageError"
    assert case["error"]["frames"][-1]["line"] == line_containing(path, "raise ValueError")
    assert "flatten function registered for Box" in capsys.readouterr().out


def test_quiet_omits_table_but_keeps_failures(tmp_path, capsys):
    write(tmp_path, "broken.py", BROKEN)
    assert main(["check", "--quiet", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "unbroken check" not in out  # the table title
    assert "branchy" in out and "0 exported, 1 refused" in out


def test_unexpected_exception_is_reported_as_internal_error(tmp_path, capsys, monkeypatch):
    def crash(*args, **kwargs):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(unbroken, "export", crash, raising=False)
    report = tmp_path / "r.json"
    assert main(["check", str(write(tmp_path, "good.py", GOOD)), "--json", str(report),
                 "--in-process"]) == 3
    out = capsys.readouterr().out
    assert "INTERNAL ERROR" in out and "ZeroDivisionError: oops" in out
    assert "bug in unbroken" in out
    case = json.loads(report.read_text())["cases"][0]
    assert case["status"] == "internal_error" and case["error"]["kind"] == "ZeroDivisionError"


def test_refusal_with_stub_export_exit_code(tmp_path, capsys, monkeypatch):
    """Exit 1 on an UnbrokenError, independent of which stage raised it."""
    from unbroken.symbolic.diagnostics import UnsupportedError, frame_from_code

    path = write(tmp_path, "good.py", GOOD)
    line = line_containing(path, "return torch.relu")

    def refuse(*args, **kwargs):
        raise UnsupportedError("not yet", frames=[frame_from_code(str(path), line, "forward")],
                               hint="rewrite it")

    monkeypatch.setattr(unbroken, "export", refuse, raising=False)
    assert main(["check", str(path), "--in-process"]) == 1
    out = capsys.readouterr().out
    assert f"UB005 good.py:{line}" in out and "Fix: rewrite it" in out


def test_unwritable_json_report_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(unbroken, "export", lambda *a, **k: object(), raising=False)
    path = write(tmp_path, "good.py", GOOD)
    assert main(["check", str(path), "--in-process",
                 "--json", str(tmp_path / "no" / "dir" / "r.json")]) == 2
    assert "cannot write the JSON report" in capsys.readouterr().out


def test_a_bug_while_listing_the_breaks_is_reported_not_dropped(tmp_path, capsys, monkeypatch):
    """The export is refused with a graph break; listing every break then meets a bug in
    unbroken: the case is an internal error, not a refusal with one break."""
    def broken(*args, **kwargs):
        raise unbroken.InternalError("a bug planted by the test")

    monkeypatch.setattr(unbroken, "find_graph_breaks", broken, raising=False)
    report = tmp_path / "r.json"
    assert main(["check", str(write(tmp_path, "broken.py", BROKEN)), "--in-process", "--json",
                 str(report)]) == 3
    assert "INTERNAL ERROR" in capsys.readouterr().out
    case = json.loads(report.read_text())["cases"][0]
    assert case["status"] == "internal_error" and case["error"]["kind"] == "InternalError"


def test_unsupported_python_is_one_usage_error(tmp_path, capsys, monkeypatch):
    """A Python whose bytecode unbroken does not know: exit 2 with one message, no case run."""
    from unbroken.frontend.opcodes import versions

    monkeypatch.setattr(versions, "CURRENT", (3, 99))
    write(tmp_path, "good.py", GOOD)
    write(tmp_path, "broken.py", BROKEN)
    assert main(["check", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("[UB119]") == 1, captured.err
    assert "CPython 3.11, 3.12, 3.13" in captured.err
    assert "REFUSED" not in captured.out and "exported" not in captured.out
