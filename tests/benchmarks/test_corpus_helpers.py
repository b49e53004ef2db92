"""The corpus benchmark's pure helpers (benchmarks/corpus_compare.py, corpus_report.py): output
flattening and comparison with eager, error summaries, pinned-dim detection, report counts."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from corpus_compare import (  # noqa: E402
    compare,
    describe_error,
    flatten_outputs,
    input_shapes,
    pinned_dims,
    short_path,
)
from corpus_report import cell, refused_where_strict_exports, resized_note, summary_rows  # noqa: E402

import unbroken  # noqa: E402


class Cache:
    """An unregistered object holding tensors, like a transformers cache."""

    def __init__(self, k, v):
        self.keys, self.values, self.seen = [k], [v], 3


@dataclass
class Out:
    logits: torch.Tensor
    cache: Cache


def test_flatten_walks_containers_and_plain_objects():
    k, v, logits = torch.ones(2), torch.zeros(2), torch.randn(3)
    leaves = flatten_outputs({"a": (logits, None, "text"), "b": Cache(k, v)})
    assert [p for p, _ in leaves] == ["out['a'][0]", "out['b'].keys[0]", "out['b'].seen",
                                      "out['b'].values[0]"]
    assert leaves[0][1] is logits and leaves[1][1] is k and leaves[2][1] == 3


class _KeylessOutput(dict):
    """A pytree node registered without key paths, as diffusers registers ``BaseOutput``."""


torch.utils._pytree.register_pytree_node(
    _KeylessOutput, lambda d: (list(d.values()), list(d)),
    lambda values, keys: _KeylessOutput(zip(keys, values)))


def test_flatten_walks_a_node_registered_without_key_paths_by_position():
    sample, extra = torch.ones(2), torch.zeros(1)
    leaves = flatten_outputs(_KeylessOutput(sample=sample, extra=(extra, 4)))
    assert [p for p, _ in leaves] == ["out[0]", "out[1]", "out[2]"]
    assert leaves[0][1] is sample and leaves[1][1] is extra and leaves[2][1] == 4


def test_compare_exact_close_differs_and_structure():
    x = torch.randn(4, 4)
    assert compare((x,), (x.clone(),)).status == "exact"
    close = compare([x], [x + 1e-7])
    assert close.status == "close" and close.ok and 0 < close.max_abs_diff < 1e-6
    differs = compare({"y": x}, {"y": x + 1})
    assert differs.status == "differs" and not differs.ok
    assert abs(differs.max_abs_diff - 1.0) < 1e-6 and "['y']" in differs.detail
    assert compare((x,), (x, x)).status == "structure"
    assert compare((x,), (x.double(),)).status == "structure"
    assert compare((x,), (x[:2],)).status == "structure"


def test_compare_integers_nans_and_objects():
    i = torch.tensor([1, 2, 3])
    assert compare(i, i + 1).status == "differs"
    nan = torch.tensor([float("nan"), 1.0])
    assert compare(nan, nan.clone()).status == "exact"
    out = Out(torch.ones(2), Cache(torch.ones(1), torch.ones(1)))
    same = Out(torch.ones(2), Cache(torch.ones(1), torch.ones(1)))
    assert compare(out, same).status == "exact"
    same.cache.values[0] += 1
    assert compare(out, same).status == "differs"


def test_describe_error_reads_unbroken_code_and_location():
    class Branch(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x

    try:
        unbroken.export(Branch(), (torch.randn(3),))
    except unbroken.UnbrokenError as error:
        info = describe_error(error)
    assert info["code"].startswith("UB") and info["where"].endswith(
        f"test_corpus_helpers.py:{Branch.forward.__code__.co_firstlineno + 1}")
    assert not info["line"].startswith("[UB")
    plain = describe_error(ValueError("\nfirst line\nsecond"))
    assert plain == {"type": "builtins.ValueError", "code": None, "line": "first line",
                     "where": None, "source": None}


def test_short_path_and_pinned_dims():
    assert short_path("/x/lib/python3.11/site-packages/transformers/a.py") == "transformers/a.py"
    leaves = [("input_ids", None), ("mask", None)]
    shapes = input_shapes(leaves, [["s0", 12], ["s0", "s1"]])
    assert shapes == {"input_ids": ["s0", 12], "mask": ["s0", "s1"]}
    assert input_shapes(leaves, [["s0"]]) == {}  # counts differ: no pairing
    auto = {"input_ids": (0, 1), "mask": (0, 1)}
    assert pinned_dims(shapes, auto) == ["input_ids.shape[1] = 12"]


def _record(case, group, exporter, status, **extra):
    return {"case": case, "group": group, "exporter": exporter, "status": status,
            "export_s": 0.5, "export2_s": 0.25, **extra}


def test_report_counts_and_refusals():
    exact = {"status": "exact", "max_abs_diff": 0.0}
    records = [
        _record("a", "common", "unbroken", "ok", match=exact),
        _record("a", "common", "strict", "ok", match=exact),
        _record("b", "common", "unbroken", "refused",
                error={"code": "UB107", "line": "attribute write", "where": "m.py:3"}),
        _record("b", "common", "strict", "ok", match=exact),
    ]
    assert summary_rows(records, {"common": "common architectures"},
                        ("unbroken", "strict")) == [["2 common architectures", "2/2", "1/2"]]
    refused = refused_where_strict_exports(records)
    assert list(refused) == ["UB107 (refused)"] and refused["UB107 (refused)"][0][0] == "b"
    assert cell(records[0]) == "✓ 0.50/0.25 s =" and cell(records[2]) == "✗ UB107"


def test_resized_notes():
    pinned = _record("a", "common", "unbroken", "ok", match={"status": "exact"}, dynamic=True,
                     pinned=["input_ids.shape[1] = 12"],
                     resized={"status": "run_error", "error": {"code": "UB002"}})
    assert resized_note(pinned) == "pinned input_ids.shape[1]"
    fine = {**pinned, "pinned": [], "resized": {"status": "close"}}
    assert resized_note(fine) == "resized ✓"
    assert summary_rows([fine], {"common": "x"}, ("unbroken",)) == [["1 x", "1/1 · resized 1"]]
    one = {**fine, "batch_one": {"status": "exact"}}
    refused = {**fine, "case": "other", "batch_one": {"status": "run_error",
                                                      "error": {"code": "UB002"}}}
    assert summary_rows([one, refused], {"common": "x"}, ("unbroken",)) == [
        ["2 x", "2/2 · resized 2 · batch 1 1"]]
    assert cell({**refused, "export_s": 1.0, "match": {"status": "exact"}}).endswith(
        "batch 1 ✗ UB002")
