"""Does ``Dim.AUTO`` generalize on real text models? For each tiny Hugging Face model of
``tests/models/hf_text.py``: export with every input dim ``Dim.AUTO`` at batch 2, seq 12, then
run ``ep.module()`` at batch 3, seq 9 and compare with eager.

    .venv/bin/python benchmarks/dynamic_text.py

Prints one line per model: ok / the error, the placeholders' shapes and the specializations.
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import unbroken  # noqa: E402
from tests.models.hf_text import TEXT_MODELS  # noqa: E402


def check(entry) -> str:
    model = entry.build()
    example = entry.inputs(2, 12)
    spec = {name: {0: Dim.AUTO, 1: Dim.AUTO} for name in example}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = unbroken.export(model, (), example, dynamic_shapes=spec)
        except unbroken.UnbrokenError as error:
            return f"export refused: {str(error).splitlines()[0][:120]}"
    seconds = time.perf_counter() - start
    shapes = [list(n.meta["val"].shape) for n in ep.graph.nodes
              if n.op == "placeholder" and n.name in example]
    resized = entry.inputs(3, 9, seed=1)
    try:
        got = ep.module()(**resized)
    except unbroken.UnbrokenError as error:
        first_line = str(error).splitlines()[0][:100]
        return f"exported {seconds:.1f}s {shapes}; (3, 9) refused: {first_line}"
    want = model(**resized)
    torch.testing.assert_close(got[0], want[0])
    pinned = [s.source for s in getattr(ep, "specializations", ())]
    return f"ok: exported {seconds:.1f}s {shapes}, (3, 9) matches eager; pinned {pinned}"


def main() -> None:
    for entry in TEXT_MODELS:
        print(f"{entry.name:12s} {check(entry)}", flush=True)


if __name__ == "__main__":
    main()
