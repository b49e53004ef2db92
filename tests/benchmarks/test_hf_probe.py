"""The Hugging Face probe (benchmarks/hf_probe.py): a model type shrunk, exported by torch and
unbroken, each program compared with eager; what cannot be built is a row saying so."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import torch  # noqa: E402
from hf_probe import _gradients_differ, main, probe  # noqa: E402


def test_a_probed_model_type_is_exported_by_both_and_compared_with_eager():
    row = probe("mra", dynamic=False)
    assert row["status"] == "probed" and row["class"] == "MraModel"
    assert row["torch"] == row["unbroken"] == "exported, same as eager"
    assert row["unbroken_s"] > 0


def test_a_config_that_cannot_be_shrunk_is_a_row_saying_so():
    row = probe("squeezebert", dynamic=False)
    assert row["status"] == "not built" and "AssertionError" in row["error"]
    assert "unbroken" not in row


def test_the_runner_prints_a_row_per_type_and_the_counts(capsys, tmp_path):
    out = tmp_path / "rows.json"
    assert main(["mra", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mra: torch: exported, same as eager" in printed
    assert "1 probed of 1; same as eager: torch 1, unbroken 1; torch only: []" in printed
    assert out.read_text().count('"model_type": "mra"') == 1


def test_gradients_are_compared_parameter_by_parameter():
    row = probe("mra", dynamic=False, grad=True)
    assert row["torch"] == row["unbroken"] == "exported, same as eager"
    grad = torch.ones(3)
    assert _gradients_differ({"w": grad, "b": None}, {"w": grad.clone(), "b": None}) == []
    assert _gradients_differ({"w": grad, "b": None}, {"w": grad * 1.01, "b": grad}) == ["w", "b"]
