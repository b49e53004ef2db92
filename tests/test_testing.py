"""unbroken.testing.assert_exports and the pytest plugin (`pytest --unbroken PATH`), run in a
child pytest as a user would run them."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import unbroken
from unbroken.testing import ExportFailed, assert_exports


class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()


def test_assert_exports_returns_the_program():
    ep = assert_exports(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    assert isinstance(ep, unbroken.ExportedProgram)


def test_assert_exports_failure_is_the_diagnostic():
    with pytest.raises(ExportFailed) as info:
        assert_exports(Branchy(), (torch.randn(3),))
    message = str(info.value)
    assert message.startswith(f"{__file__}:")
    assert "[UB101]" in message and "if x.sum() > 0:" in message and "Fix:" in message
    assert info.value.error.code == "UB101"
    assert unbroken.testing.assert_exports is assert_exports


def _pytest(tmp_path, *args) -> subprocess.CompletedProcess:
    """Run pytest in ``tmp_path`` on the unbroken under test (this checkout first on the path,
    not whichever copy the environment installed)."""
    env = {**os.environ, "PYTHONPATH": str(Path(unbroken.__file__).parents[1])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env)


def test_child_pytest_shows_the_user_line_not_unbroken_internals(tmp_path):
    (tmp_path / "test_model.py").write_text(textwrap.dedent("""\
        import torch
        from unbroken.testing import assert_exports

        class Branchy(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x.sin()
                return x.cos()

        def test_branchy():
            assert_exports(Branchy(), (torch.randn(3),))
        """))
    done = _pytest(tmp_path, "test_model.py", "--tb=short")
    assert done.returncode == 1
    assert "if x.sum() > 0:" in done.stdout and "Fix:" in done.stdout
    assert "unbroken/" not in done.stdout.split("short test summary")[0].replace(
        str(tmp_path), "")
    line = _pytest(tmp_path, "test_model.py", "--tb=line")
    assert "test_model.py:11:" in line.stdout or "test_model.py:6:" in line.stdout, line.stdout
    assert "unbroken/frontend" not in line.stdout


def test_plugin_collects_cases_only_when_asked(tmp_path):
    cases = tmp_path / "models"
    cases.mkdir()
    (cases / "zoo.py").write_text(textwrap.dedent("""\
        import torch, unbroken

        class Branchy(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x.sin()
                return x.cos()

        unbroken.case(torch.nn.Linear(3, 2), (torch.randn(4, 3),), name="linear")
        unbroken.case(Branchy(), (torch.randn(3),))
        """))
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    plain = _pytest(tmp_path, "-q")
    assert "1 passed" in plain.stdout and "zoo" not in plain.stdout
    done = _pytest(tmp_path, "-q", "--unbroken", "models", "-rA")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 2 passed" in done.stdout
    assert "models/zoo.py::Branchy" in done.stdout and "[UB101]" in done.stdout
    assert "if x.sum() > 0:" in done.stdout and "Traceback" not in done.stdout


def test_plugin_reads_the_paths_from_the_ini_file(tmp_path):
    cases = tmp_path / "models"
    cases.mkdir()
    (cases / "zoo.py").write_text(
        "import torch, unbroken\n"
        "unbroken.case(lambda x: x * 2, (torch.ones(2),), name='double')\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nunbroken_paths = models\n")
    done = _pytest(tmp_path, "-q", "-rA")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED models/zoo.py::double" in done.stdout and "1 passed" in done.stdout
