"""Export time: unbroken.export vs torch.export.export, strict and non-strict, on the model zoo,
realistic models and Hugging Face models with attention masks.

For every model and shape mode, in one process: one warm-up export per side, then ``--runs``
rounds in which every side exports once, in an order that rotates from round to round (so a
burst of load on the shared machine hits all sides alike). The table shows each side's median
and spread (min-max), the ratios strict / unbroken and non-strict / unbroken of the medians
(above 1: unbroken is faster), and the floor: a forward of the same model under
``FakeTensorMode`` (fake parameters and inputs, a fresh mode each run, as export needs; in the
dynamic modes with a ``ShapeEnv`` and the row's dynamic dims symbolic), and unbroken's export
time over it. A side that fails on a model is reported in its row.

Shape modes: ``static`` (no ``dynamic_shapes``), ``auto`` (``Dim.AUTO`` on the batch dim, and the
sequence dim of sequence models), ``dims`` (the same dims as named ``Dim("batch")`` /
``Dim("seq")`` with the model's admitted maximum; LSTM: batch only, its code pins the sequence),
``decomp`` (static export, then ``run_decompositions()``).

``--process-runs N`` (default 1; 0: off) adds, for the static mode, the cost in a fresh process:
each side in ``N`` subprocesses of its own (``python -c``: import torch and the exporter, build
the model, export once); the columns are the first export and the whole process (import +
build + export, interpreter start included), medians of CPU seconds (user + system: on a shared
machine the wall time of a fresh process mostly measures the other jobs). The package is
byte-compiled first, as an installed one is.

The load average is printed before and after; ``--json`` writes everything, ``--markdown`` the
table as Markdown (the README's).

    python benchmarks/export_time.py [--runs 5] [--models mlp,hf_gpt2] [--modes static,auto]
                                     [--process-runs 1] [--json FILE] [--markdown FILE]
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

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


def _text_inputs(vocab: int = 100, batch: int = 2, seq: int = 10) -> dict:
    """``input_ids`` and an ``attention_mask`` whose second row is padded (a mask that
    matters: the models build their additive masks from it)."""
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, seq - 3:] = 0
    return {"input_ids": torch.randint(0, vocab, (batch, seq), generator=generator),
            "attention_mask": mask}


def _hugging_face() -> dict:
    """Small randomly initialised Hugging Face models (2 layers), text models called with an
    attention mask, when transformers is installed (not a dependency of unbroken)."""
    try:
        import transformers
    except ImportError:
        return {}
    transformers.logging.set_verbosity_error()
    small = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64)

    def build(make):
        def entry():
            torch.manual_seed(0)
            return make()
        return entry

    def bert():
        config = transformers.BertConfig(num_hidden_layers=2, vocab_size=100, **small)
        return transformers.BertModel(config).eval(), (), _text_inputs()

    def gpt2():
        config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100,
                                         n_positions=64, use_cache=False)
        return transformers.GPT2LMHeadModel(config).eval(), (), _text_inputs()

    def llama():
        config = transformers.LlamaConfig(num_hidden_layers=2, vocab_size=100,
                                          num_key_value_heads=2, max_position_embeddings=64,
                                          use_cache=False, **small)
        return transformers.LlamaModel(config).eval(), (), _text_inputs()

    def t5():
        config = transformers.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16,
                                       num_heads=2, d_ff=64, vocab_size=100, use_cache=False)
        inputs = _text_inputs()
        inputs["decoder_input_ids"] = inputs["input_ids"][:, :6].clone()
        return transformers.T5Model(config).eval(), (), inputs

    def vit():
        config = transformers.ViTConfig(num_hidden_layers=2, image_size=32, patch_size=8,
                                        num_channels=3, **small)
        pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        return transformers.ViTModel(config).eval(), (), {"pixel_values": pixels}

    def whisper_encoder():
        config = transformers.WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=32,
                                            encoder_attention_heads=2,
                                            decoder_attention_heads=2, encoder_ffn_dim=64,
                                            decoder_ffn_dim=64, num_mel_bins=16,
                                            max_source_positions=32, vocab_size=100,
                                            pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                            decoder_start_token_id=1)
        encoder = transformers.WhisperModel(config).get_encoder().eval()
        features = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))
        return encoder, (), {"input_features": features}

    return {"hf_bert": build(bert), "hf_gpt2": build(gpt2), "hf_llama": build(llama),
            "hf_t5": build(t5), "hf_vit": build(vit), "hf_whisper_encoder":
            build(whisper_encoder)}


def _positional(make: Callable) -> Callable:
    def entry():
        model, args = make()
        return model, args, {}
    return entry


# name -> () -> (model, example args, example kwargs): the zoo, two realistic models, a deep
# stack, and Hugging Face models when transformers is installed.
MODELS: dict[str, Callable] = {
    **{name: _positional(entry.make) for name, entry in ZOO.items()},
    "gpt2_block": _positional(REALISTIC["gpt2_block"].make),
    "tiny_resnet": _positional(REALISTIC["tiny_resnet"].make),
    "transformer_x24": _positional(_deep_transformer),
    **_hugging_face(),
}

_TEXT = {0: ("batch", None), 1: ("seq", None)}

# name -> input (position or keyword) -> its dynamic dims: {dim: (role, largest size the model
# admits)}; role "batch" or "seq" names the Dim of the ``dims`` mode (None: Dim.AUTO only, the
# code pins it). The causal masks of 16 need seq != 16 (a slice of the whole mask is another
# view): all three exporters refuse max=16 and accept 15.
DYNAMIC_DIMS: dict[str, dict] = {
    "mlp": {0: {0: ("batch", None)}},
    "cnn": {0: {0: ("batch", None)}},
    "transformer_block": {0: {0: ("batch", None), 1: ("seq", 15)}},
    "embedding_posenc": {0: {0: ("batch", None), 1: ("seq", 64)}},  # position table of 64
    "encoder_layer": {0: {0: ("batch", None), 1: ("seq", None)}},
    "lstm": {0: {0: ("batch", None), 1: (None, None)}},  # the recurrence unrolls over seq
    "gpt2_block": {0: {0: ("batch", None), 1: ("seq", 15)}},
    "tiny_resnet": {0: {0: ("batch", None)}},
    "transformer_x24": {0: {0: ("batch", None), 1: ("seq", 15)}},
    "hf_bert": {"input_ids": {0: ("batch", None), 1: ("seq", 512)},  # max_position_embeddings
                "attention_mask": {0: ("batch", None), 1: ("seq", 512)}},
    "hf_gpt2": {"input_ids": {0: ("batch", None), 1: ("seq", 64)},  # n_positions
                "attention_mask": {0: ("batch", None), 1: ("seq", 64)}},
    "hf_llama": {"input_ids": _TEXT, "attention_mask": _TEXT},
    "hf_t5": {"input_ids": _TEXT, "attention_mask": _TEXT,
              "decoder_input_ids": {0: ("batch", None), 1: ("decoder_seq", None)}},
    "hf_vit": {"pixel_values": {0: ("batch", None)}},
    "hf_whisper_encoder": {"input_features": {0: ("batch", None)}},
}

MODES = ("static", "auto", "dims", "decomp")
SIDE_NAMES = ("unbroken", "strict", "non_strict")


def dynamic_shapes(name: str, mode: str, args: tuple, kwargs: dict):
    """The ``dynamic_shapes`` of ``name`` in ``mode``: a tuple for positional inputs, a dict
    by name for keyword inputs (one ``Dim`` object per role, shared by the inputs)."""
    if mode in ("static", "decomp"):
        return None
    named: dict = {}

    def dims(entry):
        if mode == "auto":
            return {dim: torch.export.Dim.AUTO for dim in entry}
        out = {}
        for dim, (role, upper) in entry.items():
            if role is None:
                continue
            if role not in named:
                named[role] = torch.export.Dim(role, max=upper) if upper else \
                    torch.export.Dim(role)
            out[dim] = named[role]
        return out

    spec = DYNAMIC_DIMS[name]
    if kwargs:
        return {key: dims(spec[key]) if key in spec else None for key in kwargs}
    return tuple(dims(spec[i]) if i in spec else None for i in range(len(args)))


def _unbroken(model, args, kwargs, spec):
    import unbroken

    return unbroken.export(model, args, kwargs, dynamic_shapes=spec)


def _torch(strict: bool):
    def export(model, args, kwargs, spec):
        return torch.export.export(model, args, kwargs, dynamic_shapes=spec, strict=strict)
    return export


EXPORTERS: dict[str, Callable] = {"unbroken": _unbroken, "strict": _torch(True),
                                  "non_strict": _torch(False)}


def fake_forward(model, args, kwargs, spec=None):
    """The floor: ``model``'s forward under a fresh ``FakeTensorMode``, its parameters,
    buffers and inputs made fake (what any exporter must at least do). Under ``spec`` (a
    dynamic row) the mode has a ``ShapeEnv`` and the input dims ``spec`` names are symbolic,
    as they are in an export of the row, with torch's Python dispatcher on (as every trace of
    torch's on symbolic sizes has it: composite ops such as ``lstm`` decompose instead of
    reading concrete sizes): every meta kernel then computes on symbolic sizes, which a
    dynamic export cannot avoid either."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    mode = FakeTensorMode(shape_env=ShapeEnv() if spec is not None else None)

    def fake(value, dims=None):
        if not isinstance(value, torch.Tensor):  # a structure of inputs: fake on the example
            return pytree.tree_map_only(torch.Tensor, fake, value)
        if not dims:
            return mode.from_tensor(value, static_shapes=True)
        dynamic = [DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC
                   for d in range(value.dim())]
        return mode.from_tensor(value, symbolic_context=StatelessSymbolicContext(
            dynamic_sizes=dynamic))

    state = {name: fake(t) for name, t in [*model.named_parameters(), *model.named_buffers()]}
    if isinstance(spec, dict):
        fake_args = tuple(fake(a) for a in args)
        fake_kwargs = {k: fake(v, spec.get(k)) for k, v in kwargs.items()}
    else:
        dims = spec if spec is not None else (None,) * len(args)
        fake_args = tuple(fake(a, d) for a, d in zip(args, dims))
        fake_kwargs = {k: fake(v) for k, v in kwargs.items()}
    dispatcher = enable_python_dispatcher() if spec is not None else contextlib.nullcontext()
    with mode, dispatcher:
        return torch.func.functional_call(model, state, fake_args, fake_kwargs)


def _static_fake_forward(model, args, kwargs, spec=None):
    return fake_forward(model, args, kwargs, None)


FLOORS = ("fake_forward", "symbolic_fake_forward")  # the second in the dynamic modes only


def _step(export: Callable, mode: str) -> Callable:
    if mode != "decomp":
        return export
    return lambda *a: export(*a).run_decompositions()


def _timed(step: Callable, *a) -> float:
    gc.collect()
    start = time.perf_counter()
    step(*a)
    return time.perf_counter() - start


def _summary(times: list[float], error: str | None = None) -> dict:
    if error is not None or not times:
        return {"median_s": None, "min_s": None, "max_s": None, "runs_s": times,
                "error": error}
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "runs_s": times, "error": None}


def _error_text(err: Exception) -> str:
    first_line = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first_line}"


def measure(name: str, mode: str, runs: int, sides=SIDE_NAMES, floor: bool = True) -> dict:
    """One row: each of ``sides`` (and the fake forward) timed on the same model and inputs,
    interleaved: round r runs the sides in an order rotated by r."""
    try:
        model, args, kwargs = MODELS[name]()
    except Exception as err:  # a model that cannot be built is a row of errors
        row = {"model": name, "mode": mode, "strict_ratio": None, "non_strict_ratio": None,
               "fake_forward_ratio": None, "symbolic_fake_forward_ratio": None}
        for side in (*SIDE_NAMES, *FLOORS):
            row[side] = _summary([], f"building the model: {_error_text(err)}")
        return row
    spec = dynamic_shapes(name, mode, args, kwargs)
    steps = {side: _step(EXPORTERS[side], mode) for side in sides}
    if floor:
        steps["fake_forward"] = _static_fake_forward
        if spec is not None:
            steps["symbolic_fake_forward"] = fake_forward
    times: dict[str, list] = {side: [] for side in steps}
    errors: dict[str, str | None] = dict.fromkeys(steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for side, step in steps.items():  # warm-up; a side that fails drops out
            try:
                step(model, args, kwargs, spec)
            except Exception as err:  # one side failing must not stop the benchmark
                errors[side] = _error_text(err)
        live = [side for side in steps if errors[side] is None]
        for round_ in range(runs):
            shift = round_ % max(len(live), 1)
            for side in live[shift:] + live[:shift]:
                times[side].append(_timed(steps[side], model, args, kwargs, spec))
    row = {"model": name, "mode": mode}
    for side in (*SIDE_NAMES, *FLOORS):
        row[side] = _summary(times.get(side, []), errors.get(side)) if side in steps else \
            _summary([])
    ours = row["unbroken"]["median_s"]
    for side in ("strict", "non_strict", *FLOORS):
        theirs = row[side]["median_s"]
        row[f"{side}_ratio"] = theirs / ours if ours and theirs else None
    return row


_PROCESS_CODE = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
start = time.process_time()
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/benchmarks")
import torch
{import_exporter}
imported = time.process_time()
import export_time as bench
model, args, kwargs = bench.MODELS[{name!r}]()
built = time.process_time()
{export_line}
done = time.process_time()
print("PROCESS " + json.dumps({{"import_s": imported - start, "build_s": built - imported,
                                "first_s": done - built}}))
"""


def _byte_compile_package() -> None:
    """Byte-compile ``unbroken`` (a no-op when its ``__pycache__`` is current), as pip does when
    it installs a package, and as torch's and transformers' installed modules are: a checkout
    run under ``PYTHONDONTWRITEBYTECODE`` (this machine's default) would otherwise compile all
    its modules from source in every fresh process, ~0.15 s that an installed unbroken never
    pays, counted in its first export."""
    compileall.compile_dir(str(ROOT / "unbroken"), quiet=1)


FLOOR_SIDE = "floor"  # a fresh process that imports torch and builds the model, no export


def measure_process(name: str, side: str, runs: int) -> dict:
    """``side``'s static export of ``name`` in ``runs`` fresh processes: the first export's
    median and the whole process's (CPU, from the parent). ``FLOOR_SIDE``: the same process
    without an exporter (import torch, build the model), which every side pays;
    ``"fake_forward"``: the fake forward in its place (its first call in a process is the
    floor of a first export: torch's lazily loaded modules, its cold caches)."""
    _byte_compile_package()
    import_exporter = {"unbroken": "import unbroken", FLOOR_SIDE: "", "fake_forward": ""}.get(
        side, "import torch.export")
    export_line = {FLOOR_SIDE: "", "fake_forward": "bench.fake_forward(model, args, kwargs)"}.get(
        side, f"bench.EXPORTERS[{side!r}](model, args, kwargs, None)")
    code = _PROCESS_CODE.format(root=str(ROOT), name=name, import_exporter=import_exporter,
                                export_line=export_line)
    first, whole = [], []
    for _ in range(runs):
        start = _children_cpu()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, timeout=900)
        elapsed = _children_cpu() - start
        line = next((x for x in done.stdout.splitlines() if x.startswith("PROCESS ")), None)
        if done.returncode != 0 or line is None:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"first": _summary([], tail), "process": _summary([], tail)}
        first.append(json.loads(line.removeprefix("PROCESS "))["first_s"])
        whole.append(elapsed)
    return {"first": _summary(first), "process": _summary(whole)}


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: the whole-process
    column counts CPU, not wall time, which the other jobs of a shared machine stretch."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def add_process_columns(row: dict, runs: int, sides=SIDE_NAMES) -> None:
    """The fresh-process measurements of ``row``'s model, sides interleaved run by run, and
    the floors (``FLOOR_SIDE``: ``non_strict_process_ceiling`` is the whole-process ratio
    non-strict / unbroken that an exporter costing nothing would reach; the fake forward's
    first call, the floor of a first export)."""
    measured = (*sides, "fake_forward", FLOOR_SIDE)
    per_side = {side: {"first": [], "process": []} for side in measured}
    errors: dict = {}
    for _ in range(runs):
        for side in measured:
            if side in errors:
                continue
            result = measure_process(row["model"], side, 1)
            if result["first"]["error"]:
                errors[side] = result["first"]["error"]
                continue
            for key in ("first", "process"):
                per_side[side][key] += result[key]["runs_s"]
    for side in (*sides, "fake_forward"):
        for key in ("first", "process"):
            row.setdefault(side, _summary([]))[f"{key}_process"] = _summary(
                per_side[side][key], errors.get(side))
    ours = row["unbroken"].get("process_process", {}).get("median_s")
    floor = _summary(per_side[FLOOR_SIDE]["process"], errors.get(FLOOR_SIDE))
    row["process_floor"] = floor
    for side in ("strict", "non_strict"):
        theirs = row.get(side, {}).get("process_process", {}).get("median_s")
        row[f"{side}_process_ratio"] = theirs / ours if ours and theirs else None
        row[f"{side}_process_ceiling"] = theirs / floor["median_s"] \
            if theirs and floor["median_s"] else None


# ------------------------------------------------------------------------------ output
def _ms(summary: dict | None, spread: bool = True) -> str:
    if not summary or summary["median_s"] is None:
        return "failed" if summary and summary["error"] else "-"
    text = _format_ms(summary["median_s"])
    if spread and len(summary["runs_s"]) > 1:
        text += f" ({_format_ms(summary['min_s'])}-{_format_ms(summary['max_s'])})"
    return text


def _format_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


COLUMNS = ("model", "shapes", "unbroken ms", "strict ms", "non-strict ms", "strict / unbroken",
           "non-strict / unbroken", "fake fwd ms", "unbroken / fake fwd", "symbolic fake fwd ms",
           "unbroken / symbolic fake fwd",
           "first export s CPU (unbroken / strict / non-strict)",
           "first fake fwd s CPU (a fresh process)",
           "whole process s CPU (unbroken / strict / non-strict)",
           "non-strict / unbroken (process)",
           "process floor s CPU (import torch, build, no export)",
           "non-strict / floor (process: the best ratio reachable)",
           "non-strict / fake fwd (process: an exporter costing one fake forward)")


def table_rows(rows: list[dict]) -> list[list[str]]:
    out = []
    for row in rows:
        fake_ratio = 1 / row["fake_forward_ratio"] if row.get("fake_forward_ratio") else None
        symbolic_ratio = 1 / row["symbolic_fake_forward_ratio"] \
            if row.get("symbolic_fake_forward_ratio") else None
        first = " / ".join(_seconds(row[s].get("first_process")) for s in SIDE_NAMES)
        whole = " / ".join(_seconds(row[s].get("process_process")) for s in SIDE_NAMES)
        out.append([row["model"], row["mode"], *(_ms(row[side]) for side in SIDE_NAMES),
                    _ratio(row["strict_ratio"]), _ratio(row["non_strict_ratio"]),
                    _ms(row["fake_forward"], spread=False), _ratio(fake_ratio),
                    _ms(row.get("symbolic_fake_forward"), spread=False), _ratio(symbolic_ratio),
                    first if "first_process" in row["unbroken"] else "-",
                    _seconds(row.get("fake_forward", {}).get("first_process")),
                    whole if "process_process" in row["unbroken"] else "-",
                    _ratio(row.get("non_strict_process_ratio")),
                    _seconds(row.get("process_floor")),
                    _ratio(row.get("non_strict_process_ceiling")),
                    _ratio(_process_ratio(row, "non_strict", "fake_forward"))])
    return out


def _process_ratio(row: dict, side: str, other: str) -> float | None:
    """``side``'s whole process over ``other``'s (medians of CPU seconds), or None."""
    values = [row.get(name, {}).get("process_process", {}).get("median_s")
              for name in (side, other)]
    return values[0] / values[1] if all(values) else None


def _seconds(summary: dict | None) -> str:
    if not summary or summary["median_s"] is None:
        return "failed" if summary and summary["error"] else "-"
    return f"{summary['median_s']:.2f}"


def errors_of(rows: list[dict]) -> list[str]:
    found = []
    for row in rows:
        for side in (*SIDE_NAMES, *FLOORS):
            found_side = row.get(side, {})
            for summary in (found_side, found_side.get("first_process"),
                            found_side.get("process_process")):
                if summary and summary["error"]:
                    found.append(f"{row['model']} {row['mode']} {side}: {summary['error']}")
    return sorted(set(found))


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(rows)]
    return "\n".join(lines) + "\n"


def print_table(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:  # CI logs: rich would assume 80 columns
        console = Console(highlight=False, width=max(console.width, 200))
    table = Table(title=title, title_justify="left")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("model", "shapes") else "right",
                         overflow="fold")
    for cells in table_rows(rows):
        table.add_row(*cells)
    console.print(table)
    for line in errors_of(rows):
        console.print(f"  error: {line}", markup=False)


def geometric_means(rows: list[dict]) -> dict:
    """Per mode: the geometric mean of each ratio over the rows that have it."""
    means: dict = {}
    for mode in MODES:
        for key in ("strict_ratio", "non_strict_ratio", "fake_forward_ratio",
                    "symbolic_fake_forward_ratio"):
            values = [r[key] for r in rows if r["mode"] == mode and r.get(key)]
            if values:
                means.setdefault(mode, {})[key] = statistics.geometric_mean(values)
    return means


def _loads(values) -> str:
    return " ".join(f"{v:.1f}" for v in values)


def environment() -> dict:
    try:
        from importlib.metadata import version

        ours = version("unbroken")
    except Exception:
        ours = "unknown"
    return {"python": platform.python_version(), "torch": torch.__version__, "unbroken": ours,
            "machine": platform.machine(), "threads": torch.get_num_threads(),
            "cpus": os.cpu_count()}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)}")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated shape modes among {', '.join(MODES)} (default all)")
    parser.add_argument("--sides", default=",".join(SIDE_NAMES),
                        help="comma-separated exporters among unbroken, strict, non_strict "
                             "(default all; `--sides unbroken` compares unbroken across cells: "
                             "benchmarks/compare_cells.py)")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the FakeTensorMode forward column")
    parser.add_argument("--process-runs", type=int, default=1, metavar="N",
                        help="fresh processes per side for the first-export and whole-process "
                             "columns (static mode; default 1, 0: off)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    options = parser.parse_args(argv)
    options.side_list = tuple(options.sides.split(","))
    if not set(options.side_list) <= set(SIDE_NAMES) or "unbroken" not in options.side_list:
        parser.error(f"--sides: choose among {', '.join(SIDE_NAMES)} (unbroken included)")
    if options.runs < 1 or options.process_runs < 0:
        parser.error("--runs must be at least 1, --process-runs at least 0")
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
    rows, load_before, started = [], os.getloadavg(), time.time()
    print(f"load average (1, 5, 15 min) before: {_loads(load_before)}", flush=True)
    for name in options.names:
        for mode in options.mode_list:
            print(f"measuring {name} ({mode}) ...", flush=True)
            row = measure(name, mode, options.runs, options.side_list, not options.no_floor)
            if mode == "static" and options.process_runs:
                add_process_columns(row, options.process_runs, options.side_list)
            rows.append(row)
    load = {"before": load_before, "after": os.getloadavg()}
    title = (f"export time, median (min-max) of {options.runs} interleaved rounds after 1 "
             f"warm-up (Python {platform.python_version()}, torch {torch.__version__})")
    print_table(rows, title)
    means = geometric_means(rows)
    for mode, values in means.items():
        print(f"geometric mean ({mode}): " + ", ".join(f"{k.removesuffix('_ratio')} / unbroken "
                                                       f"{v:.2f}x" for k, v in values.items()))
    print(f"load average (1, 5, 15 min) before: {_loads(load['before'])}, "
          f"after: {_loads(load['after'])}; {time.time() - started:.0f} s")
    if options.json:
        report = {"environment": {**environment(), "load_average": load}, "runs": options.runs,
                  "process_runs": options.process_runs, "results": rows,
                  "geometric_means": means}
        Path(options.json).write_text(json.dumps(report, indent=2) + "\n")
    if options.markdown:
        Path(options.markdown).write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
