"""Golden files for printed programs and error messages (STYLE.md habit 8).

They change only on purpose: run ``UNBROKEN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py``
and review the diff. Absolute paths are replaced by the file's base name so the files do not
depend on where the repository lives.
"""
import os
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import unbroken

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UNBROKEN_UPDATE_GOLDEN") == "1"


def _normalize(text: str) -> str:
    return text.replace(str(Path(__file__).resolve()), "test_golden.py").replace(
        str(Path(__file__).resolve().parent) + os.sep, "")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    text = _normalize(text)
    if UPDATE or not path.exists():
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"golden file {path.name} was missing and has been written; rerun")
    assert text == path.read_text(), f"{path.name} changed; see the module docstring"


class SeedBasic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x, y):
        return torch.nn.functional.relu(self.lin(x + y), inplace=True)


class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        self.steps.add_(1)
        return self.norm(x).softmax(-1)


def test_seed_program_printout():
    ep = unbroken.export(SeedBasic(), (torch.randn(8, 100), torch.randn(8, 100)))
    check_golden("seed_basic_program", str(ep))


def test_buffer_mutation_program_printout():
    ep = unbroken.export(WithBuffer(), (torch.randn(2, 4),))
    check_golden("buffer_mutation_program", str(ep))


def test_dynamic_program_printout():
    def slicer(x):
        return torch.relu(x[:, 2:])

    ep = unbroken.export(slicer, (torch.randn(10, 10, 2),),
                         dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("width", min=4, max=18)}})
    check_golden("dynamic_program", str(ep))


def bad_branch(x):
    if x.sum() > 0:
        return torch.sin(x)
    return torch.cos(x)


def bad_raise(x):
    x = x + 1
    raise RuntimeError("bad")


class Mismatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, w, x, y):
        return w @ x, self.lin(y)


@pytest.mark.parametrize("name, run", [
    ("error_data_dependent_branch", lambda: unbroken.export(bad_branch, (torch.randn(3, 3),))),
    ("error_raise", lambda: unbroken.export(bad_raise, (torch.randn(3, 3),))),
    ("error_constraint_violation", lambda: unbroken.export(
        Mismatch(), (torch.randn(4, 8), torch.randn(8, 2), torch.randn(3, 5)),
        dynamic_shapes={"w": (Dim("w0"), Dim("w1")), "x": (Dim("x0"), Dim("x1")),
                        "y": (Dim("y0"), Dim("y1"))})),
    ("error_specialized_input", lambda: unbroken.export(
        SeedBasic(), (torch.randn(8, 100), torch.randn(8, 100))).module()(
        torch.randn(10, 100), torch.randn(10, 100))),
    ("error_bad_dynamic_shapes_key", lambda: unbroken.export(
        SeedBasic(), (torch.randn(8, 100), torch.randn(8, 100)),
        dynamic_shapes={"x": {0: Dim("b")}, "z": None})),
])
def test_error_messages(name, run):
    with pytest.raises(unbroken.UnbrokenError) as info:
        run()
    check_golden(name, f"{type(info.value).__name__}: {info.value.render()}\n")
