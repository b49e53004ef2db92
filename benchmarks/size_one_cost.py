"""What the traces at size 1 (``unbroken.size_one.admission``) cost: export time of corpus
cases under plain ``Dim.AUTO``, and the part of it spent admitting size 1.

    PYTHONPATH=. python benchmarks/size_one_cost.py outside2 nn_mha_masks,megatron_bert [REPS]

Prints, per case, the best of REPS exports (default 2): total seconds, seconds in the size-1
admission, the number of traces at 1, and the ranges.
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus_worker  # noqa: E402

import unbroken  # noqa: E402
import unbroken.exporter.pipeline as pipeline  # noqa: E402


def main(group: str, names: list[str], reps: int) -> None:
    corpus_worker.preload()
    stats = {"admit": 0.0, "traces": 0}
    real_admit, real_stages = pipeline._admit_size_one, pipeline.run_stages

    def admit(call, options, trace, ep):
        start = time.perf_counter()
        try:
            return real_admit(call, options, trace, ep)
        finally:
            stats["admit"] += time.perf_counter() - start

    def stages(call, options):
        stats["traces"] += bool(options.forced_static)
        return real_stages(call, options)

    pipeline._admit_size_one, pipeline.run_stages = admit, stages
    cases = corpus_worker.all_cases((group,))
    for name in names:
        plan = corpus_worker.Plan(cases[name], True)
        torch.manual_seed(0)
        model = cases[name].build()
        plan.call(model)  # as the corpus does: eager first (einops fills its caches)
        best = None
        for _ in range(reps):
            stats.update(admit=0.0, traces=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                ep = unbroken.export(model, plan.args, plan.kwargs, dynamic_shapes=plan.spec)
                total = time.perf_counter() - start
            if best is None or total < best[0]:
                best = (total, stats["admit"], stats["traces"])
        total, admitted, traces = best
        print(f"{name}: export {total:.2f} s, of which size-1 admission {admitted:.2f} s "
              f"({traces} traces at 1, {100 * admitted / total:.0f}%); "
              f"ranges {dict(ep.range_constraints)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]) if len(sys.argv) > 3 else 2)
