"""symbolic.guard_log: a successful export logs each guard with its line and how it was
decided, the relations Dim.AUTO adopted, and the dims it pinned (UNBROKEN_LOG=guards)."""
from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import torch
from torch.export import Dim

import unbroken
from tests.symbolic.test_auto import MaskOrBroadcast
from tests.test_suggested_fixes import DynamicModel


def test_log_names_guards_adoptions_and_specializations(caplog):
    args = (torch.randn(6, 5), torch.randn(4), torch.randn(8, 4), torch.randn(32))
    A = Dim.AUTO
    with caplog.at_level(logging.INFO, logger="unbroken.guards"):
        unbroken.export(DynamicModel(), args,
                        dynamic_shapes={"w": (A, A), "x": (A,), "y": (A, A), "z": (A,)})
    text = caplog.text
    assert "adopted z.shape[0] == x.shape[0]*y.shape[0]" in text
    assert "specialized Dim.AUTO w.shape[1] is specialized to 5" in text
    assert "x1 = self.l(w)" in text


def test_log_says_which_guards_are_checked_at_run_time(caplog):
    with caplog.at_level(logging.INFO, logger="unbroken.guards"):
        unbroken.export(MaskOrBroadcast(), (torch.randn(2, 6), torch.ones(2, 6)),
                        dynamic_shapes={"x": (Dim.AUTO, Dim.AUTO), "mask": (Dim.AUTO, Dim.AUTO)})
    line = next(r.getMessage() for r in caplog.records if "or (mask.shape[1] == 1)" in
                r.getMessage())
    assert "checked at run time" in line and "test_auto.py" in line


def test_environment_variable_prints_to_stderr():
    code = textwrap.dedent("""
        import torch, unbroken
        from torch.export import Dim
        class M(torch.nn.Module):
            def forward(self, x, y):
                return x + y
        unbroken.export(M(), (torch.randn(4), torch.randn(4)),
                        dynamic_shapes={"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}})
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"UNBROKEN_LOG": "guards", "PATH": ""}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "[unbroken.guards] adopted y.shape[0] == x.shape[0]" in result.stderr
