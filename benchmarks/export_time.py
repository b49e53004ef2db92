"""Export time: unbroken.export vs torch.export.export, strict and non-strict, on the model zoo.

For every benchmark model and every shape mode, in one process: one warm-up export per side, then
``--runs`` timed exports per side; the table shows the median wall time of each side and the
ratios strict / unbroken and non-strict / unbroken (above 1: unbroken is faster). A side that
fails on a model is reported in that model's row and does not stop the run.

Shape modes: ``static`` (no ``dynamic_shapes``), ``auto`` (``Dim.AUTO`` on the batch dim, and the
sequence dim of sequence models, of the model's input) and ``dims`` (the same dims as explicit
named ``Dim("batch")`` / ``Dim("seq")`` with the model's admitted maximum; LSTM: batch only,
its code pins the sequence).

    python benchmarks/export_time.py [--runs 5] [--models mlp,cnn] [--modes static,auto]
                                     [--json results.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.models.realistic import REALISTIC  # noqa: E402
from tests.models.zoo import ZOO  # noqa: E402


def _deep_transformer(depth: int = 24):
    """24 of the zoo's hand-written transformer blocks in a ModuleList: export time at the
    size of a real network, with all of its Python interpreted."""
    import copy

    block, args = ZOO["transformer_block"].make()

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(copy.deepcopy(block) for _ in range(depth))

        def forward(self, x):
            for layer in self.blocks:
                x = layer(x)
            return x

    return Stack().eval(), args


def _hugging_face():
    """Small randomly initialised Hugging Face models, when transformers is installed (it is
    not a dependency of unbroken: `pip install transformers` to measure these)."""
    try:
        import transformers
    except ImportError:
        return {}

    def bert():
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32,
                                         num_attention_heads=2, intermediate_size=64,
                                         vocab_size=100)
        return transformers.BertModel(config).eval(), (torch.randint(0, 100, (2, 10)),)

    def gpt2():
        config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100,
                                         n_positions=64, use_cache=False)
        return transformers.GPT2LMHeadModel(config).eval(), (torch.randint(0, 100, (2, 10)),)

    return {"hf_bert": bert, "hf_gpt2": gpt2}


# name -> () -> (model, example args): the zoo, two realistic models, a deep stack, and Hugging
# Face models when transformers is installed.
MODELS: dict[str, Callable] = {
    **{name: entry.make for name, entry in ZOO.items()},
    "gpt2_block": REALISTIC["gpt2_block"].make,
    "tiny_resnet": REALISTIC["tiny_resnet"].make,
    "transformer_x24": _deep_transformer,
    **_hugging_face(),
}


# name -> the dynamic dims of its one input: {dim: (role, largest size the model admits)};
# role "batch" or "seq" names the Dim of the ``dims`` mode (None: Dim.AUTO only, the code pins
# it). The causal masks of 16 need seq != 16 (a slice of the whole mask is another view): all
# three exporters refuse max=16 and accept 15.
DYNAMIC_DIMS: dict[str, dict[int, tuple[str | None, int | None]]] = {
    "mlp": {0: ("batch", None)},
    "cnn": {0: ("batch", None)},
    "transformer_block": {0: ("batch", None), 1: ("seq", 15)},
    "embedding_posenc": {0: ("batch", None), 1: ("seq", 64)},  # position table of 64
    "encoder_layer": {0: ("batch", None), 1: ("seq", None)},
    "lstm": {0: ("batch", None), 1: (None, None)},  # the recurrence unrolls over seq
    "gpt2_block": {0: ("batch", None), 1: ("seq", 15)},
    "tiny_resnet": {0: ("batch", None)},
    "transformer_x24": {0: ("batch", None), 1: ("seq", 15)},
    "hf_bert": {0: ("batch", None), 1: ("seq", 512)},  # max_position_embeddings
    "hf_gpt2": {0: ("batch", None), 1: ("seq", 64)},  # n_positions
}

MODES = ("static", "auto", "dims")


def dynamic_shapes(name: str, mode: str):
    """The ``dynamic_shapes`` of ``name`` in ``mode`` (one entry per positional input)."""
    if mode == "static":
        return None
    dims = DYNAMIC_DIMS[name]
    if mode == "auto":
        return ({dim: torch.export.Dim.AUTO for dim in dims},)
    return ({dim: torch.export.Dim(role, max=upper) if upper else torch.export.Dim(role)
             for dim, (role, upper) in dims.items() if role is not None},)


def unbroken_export(model, args, spec):
    import unbroken

    return unbroken.export(model, args, dynamic_shapes=spec)


def strict_export(model, args, spec):
    return torch.export.export(model, args, dynamic_shapes=spec, strict=True)


def non_strict_export(model, args, spec):
    return torch.export.export(model, args, dynamic_shapes=spec, strict=False)


SIDES: dict[str, Callable] = {"unbroken": unbroken_export, "strict": strict_export,
                              "non_strict": non_strict_export}


def time_side(export: Callable, model, args, spec, runs: int) -> dict:
    """Warm up once, then time ``runs`` exports. Returns median/all times, or the error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export(model, args, spec)
            times = []
            for _ in range(runs):
                gc.collect()
                start = time.perf_counter()
                export(model, args, spec)
                times.append(time.perf_counter() - start)
    except Exception as err:  # one side failing must not stop the benchmark
        first_line = (str(err).strip().splitlines() or [""])[0]
        return {"median_s": None, "runs_s": [], "error": f"{type(err).__name__}: {first_line}"}
    return {"median_s": statistics.median(times), "runs_s": times, "error": None}


_NOT_RUN = {"median_s": None, "runs_s": [], "error": None}


def measure(name: str, mode: str, runs: int, sides=tuple(SIDES)) -> dict:
    """One row: each of ``sides`` timed on the same model and inputs (a side not among them
    is recorded as not run)."""
    model, args = MODELS[name]()
    spec = dynamic_shapes(name, mode)
    row = {"model": name, "mode": mode}
    for side, export in SIDES.items():
        row[side] = time_side(export, model, args, spec, runs) if side in sides else _NOT_RUN
    ours = row["unbroken"]["median_s"]
    for side in ("strict", "non_strict"):
        theirs = row[side]["median_s"]
        row[f"{side}_ratio"] = theirs / ours if ours and theirs else None
    return row


def table(rows: list[dict], runs: int) -> Table:
    out = Table(title=f"export time, median of {runs} runs after 1 warm-up "
                      f"(Python {platform.python_version()}, torch {torch.__version__})",
                title_justify="left")
    out.add_column("model", no_wrap=True)
    out.add_column("shapes", no_wrap=True)
    out.add_column("unbroken", justify="right")
    out.add_column("strict", justify="right")
    out.add_column("non-strict", justify="right")
    out.add_column("strict / unbroken", justify="right")
    out.add_column("non-strict / unbroken", justify="right")
    out.add_column("errors", overflow="fold")
    for row in rows:
        errors = [f"{side}: {row[side]['error']}" for side in SIDES if row[side]["error"]]
        out.add_row(row["model"], row["mode"], *(_ms(row[side]) for side in SIDES),
                    *(_ratio(row[f"{side}_ratio"]) for side in ("strict", "non_strict")),
                    "\n".join(errors))
    return out


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


def _ms(side: dict) -> str:
    """A side's median, ``failed`` when it raised, ``-`` when it was not run."""
    if side["median_s"] is None:
        return "failed" if side["error"] else "-"
    return f"{side['median_s'] * 1000:.1f} ms"


def _loads(values) -> str:
    return " ".join(f"{v:.1f}" for v in values)


def environment() -> dict:
    try:
        from importlib.metadata import version

        ours = version("unbroken")
    except Exception:
        ours = "unknown"
    return {"python": platform.python_version(), "torch": torch.__version__, "unbroken": ours,
            "machine": platform.machine(), "threads": torch.get_num_threads()}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per side (default 5)")
    parser.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)}")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated shape modes among {', '.join(MODES)} (default all)")
    parser.add_argument("--sides", default=",".join(SIDES),
                        help="comma-separated exporters among unbroken, strict, non_strict "
                             "(default all; `--sides unbroken` compares unbroken across cells: "
                             "benchmarks/compare_cells.py)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    options = parser.parse_args(argv)
    options.side_list = tuple(options.sides.split(","))
    if not set(options.side_list) <= set(SIDES):
        parser.error(f"--sides: choose among {', '.join(SIDES)}")
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    options.names = options.models.split(",") if options.models else list(MODELS)
    unknown = [n for n in options.names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    options.mode_list = options.modes.split(",")
    if not set(options.mode_list) <= set(MODES):
        parser.error(f"--modes: choose among {', '.join(MODES)}")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    console = Console(highlight=False)
    if not console.is_terminal:  # CI logs: rich would assume 80 columns
        console = Console(highlight=False, width=max(console.width, 140))
    rows, load_before = [], os.getloadavg()
    for name in options.names:
        for mode in options.mode_list:
            console.print(f"measuring {name} ({mode}) ...", markup=False)
            rows.append(measure(name, mode, options.runs, options.side_list))
    console.print(table(rows, options.runs))
    load = {"before": load_before, "after": os.getloadavg()}
    console.print(f"load average (1, 5, 15 min) before: {_loads(load['before'])}, "
                  f"after: {_loads(load['after'])}", markup=False)
    if options.json:
        report = {"environment": {**environment(), "load_average": load}, "runs": options.runs,
                  "results": rows}
        Path(options.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
