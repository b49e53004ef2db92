"""Cold start: ``import unbroken`` loads nothing heavy that it does not need.

A structural check (which modules a fresh interpreter holds), not a timing: ``torch._dynamo``
(~1.4 s of CPU, through ``torch.export._unlift``), z3, sympy and rich are imported on first
use (an export, ``ep.module()``, the CLI), never by ``import unbroken`` or by touching its error
types.
"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch._dynamo", "z3", "sympy", "rich", "unbroken.frontend", "unbroken.exporter")


def _loaded_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print('loaded:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("loaded:"))
    return [m for m in line.removeprefix("loaded:").split(",") if m]


def test_import_unbroken_loads_nothing_heavy():
    assert _loaded_after("import unbroken") == []


def test_error_types_load_nothing_heavy():
    code = ("import unbroken\n"
            "from unbroken.symbolic.diagnostics import RefusalError\n"
            "from unbroken import InternalError, GraphBreakError, Dim\n"
            "assert issubclass(GraphBreakError, unbroken.UnbrokenError)\n")
    assert _loaded_after(code) == []


def test_export_does_not_import_rich():
    """An export needs neither the CLI's console nor torch's unlifting."""
    code = ("import torch, unbroken\n"
            "unbroken.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))\n")
    assert "rich" not in _loaded_after(code)


def test_cli_version_loads_nothing_heavy():
    """``unbroken --version`` (and ``--help``, usage errors) import no command."""
    code = ("from unbroken.cli import main\n"
            "assert main(['--version']) == 0\n")
    assert _loaded_after(code) == []
