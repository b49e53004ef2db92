"""unbroken.ExportedProgram in torch's toolchain, side by side with torch.export's program.

Each tool is applied to unbroken's program and to ``torch.export.export``'s program of the same
model; both must run and match eager. Cases: a small model with a submodule hierarchy and a
buffer, and a small randomly initialised Hugging Face BERT, each static and dynamic in
(batch, sequence). The expensive tools run on a few cases by default: AOTInductor (about a
minute a compile) on ``small_dynamic`` and ONNX on ``small`` and ``bert_dynamic``, their other
cases marked ``heavy`` (``make test-heavy``, see ``_on``); torch.compile runs on ``small`` only.
"""
import io
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
from torch.export import Dim
from torch.export.graph_signature import InputKind, OutputKind

import unbroken


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.register_buffer("scale", torch.full((8,), 0.5))

    def forward(self, x):
        return self.norm(torch.relu(self.lin(x))) * self.scale


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.blocks(x))


def _bert():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100)
    return transformers.BertModel(config)


@dataclass(frozen=True)
class Case:
    """A model, its example and fresh inputs (other sizes when dynamic), and its dims."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int, int], tuple]
    dynamic: bool

    def dynamic_shapes(self):
        if not self.dynamic:
            return None
        return ({0: Dim("batch", min=2, max=16), 1: Dim("seq", min=2, max=32)},)

    def fresh(self) -> tuple:
        return self.inputs(3, 7) if self.dynamic else self.inputs(2, 5)


def _tokens(batch, seq):
    return (torch.randint(0, 100, (batch, seq)),)


CASES = [Case("small", Small, lambda b, s: (torch.randn(b, s, 8),), False),
         Case("small_dynamic", Small, lambda b, s: (torch.randn(b, s, 8),), True),
         Case("bert", _bert, _tokens, False),
         Case("bert_dynamic", _bert, _tokens, True)]


def _on(*names: str):
    """Run the decorated test on the cases ``names`` by default and on the others only when
    heavy tests are selected (``-m heavy``): they carry ``@pytest.mark.heavy`` (and ``slow``).
    The parametrization overrides the ``exported`` fixture's, case for case in the same order,
    so each case is still exported once per module."""
    return pytest.mark.parametrize("exported", [
        pytest.param(c, id=c.name, marks=() if c.name in names
                     else (pytest.mark.heavy, pytest.mark.slow))
        for c in CASES], indirect=True)


@dataclass
class Exported:
    """One case exported both ways, with eager's output on fresh inputs."""

    case: Case
    model: nn.Module
    ours: torch.export.ExportedProgram
    torchs: torch.export.ExportedProgram
    fresh: tuple
    expected: torch.Tensor


def _first(out):
    """The first tensor of a model's output (a tensor, a tuple or a Hugging Face output)."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        return next(iter(out.values()))
    return out[0]


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def exported(request) -> Exported:
    case = request.param
    torch.manual_seed(0)
    model = case.build().eval()
    args = case.inputs(2, 5)
    ours = unbroken.export(model, args, dynamic_shapes=case.dynamic_shapes())
    torchs = torch.export.export(model, args, dynamic_shapes=case.dynamic_shapes())
    fresh = case.fresh()
    with torch.no_grad():
        expected = _first(model(*fresh))
    return Exported(case, model, ours, torchs, fresh, expected)


def _both(e: Exported):
    return (("unbroken", e.ours), ("torch", e.torchs))


def _matches(e: Exported, run: Callable[[torch.export.ExportedProgram], object],
             torchs_too: bool = True) -> None:
    for who, program in _both(e) if torchs_too else _both(e)[:1]:
        with torch.no_grad():
            out = _first(run(program))
        torch.testing.assert_close(out, e.expected, atol=1e-4, rtol=1e-4, msg=who)


# -- the program is torch's --------------------------------------------------------------------
@pytest.mark.matrix
def test_is_a_torch_program_with_torchs_signature(exported):
    ours, torchs = exported.ours, exported.torchs
    assert isinstance(ours, torch.export.ExportedProgram)
    assert ours.dialect == torchs.dialect == "TRAINING"
    for verifier in ours.verifiers:  # torch's own verifier for the dialect
        verifier().check(ours)

    def specs(program):
        return ([(s.kind, s.target) for s in program.graph_signature.input_specs],
                [(s.kind, s.target) for s in program.graph_signature.output_specs])
    assert specs(ours) == specs(torchs)  # torch's enums: equal kinds, same order, same FQNs
    assert ours.graph_signature.input_specs[0].kind == InputKind.PARAMETER
    assert ours.graph_signature.output_specs[-1].kind == OutputKind.USER_OUTPUT
    assert set(ours.range_constraints.values()) == set(torchs.range_constraints.values())


@pytest.mark.matrix
def test_nodes_carry_the_metadata_torchs_passes_read(exported):
    calls = [n for n in exported.ours.graph.nodes if n.op == "call_function"]
    for key in ("val", "nn_module_stack", "from_node", "torch_fn", "source_fn_stack",
                "stack_trace"):
        assert all(key in n.meta for n in calls), key
    tensors = [n for n in calls if isinstance(n.meta["val"], torch.Tensor)]
    assert all("tensor_meta" in n.meta for n in tensors)  # torch sets it on tensor values
    linear = next(n for n in calls if n.target == torch.ops.aten.linear.default)
    assert linear.meta["source_fn_stack"][-1][1] is nn.Linear


# -- torch's tools take it ----------------------------------------------------------------------
@pytest.mark.matrix
def test_torch_save_then_load_runs(exported):
    def round_trip(program):
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        buffer.seek(0)
        return torch.export.load(buffer).module()(*exported.fresh)
    _matches(exported, round_trip)


@pytest.mark.matrix
def test_unflatten_restores_the_module_hierarchy(exported):
    def hierarchy(program):
        return {name for name, _ in torch.export.unflatten(program).named_modules()}
    assert hierarchy(exported.ours) == hierarchy(exported.torchs)
    _matches(exported, lambda p: torch.export.unflatten(p)(*exported.fresh))


@pytest.mark.matrix
def test_move_to_device_pass(exported):
    from torch.export.passes import move_to_device_pass
    _matches(exported, lambda p: move_to_device_pass(p, "cpu").module()(*exported.fresh))


@pytest.mark.matrix
def test_run_decompositions_gives_torchs_op_set(exported):
    def ops(program):
        return {n.target for n in program.graph.nodes if n.op == "call_function"}
    ours, torchs = exported.ours.run_decompositions(), exported.torchs.run_decompositions()
    assert isinstance(ours, unbroken.ExportedProgram) and ours.dialect == "ATEN"
    assert ops(ours) == ops(torchs)
    _matches(exported, lambda p: p.run_decompositions().module()(*exported.fresh))


@pytest.mark.parametrize("exported", CASES[:1], indirect=True, ids=[CASES[0].name])
def test_torch_compile_of_the_module(exported):
    """One case: compiling is slow, and the other cases' compiles go through AOTInductor."""
    torch._dynamo.reset()
    _matches(exported, lambda p: torch.compile(p.module())(*exported.fresh))


@_on("small", "bert_dynamic")
def test_onnx_export_runs_in_onnxruntime(exported, tmp_path):
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")

    def run(program):
        path = tmp_path / f"{id(program)}.onnx"
        torch.onnx.export(program, dynamo=True).save(str(path))
        session = onnxruntime.InferenceSession(str(path))
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), exported.fresh)}
        return torch.from_numpy(session.run(None, feeds)[0])
    _matches(exported, run)


def _aoti(exported, tmp_path, torchs_too: bool):
    def run(program):
        path = torch._inductor.aoti_compile_and_package(
            program, package_path=str(tmp_path / f"{id(program)}.pt2"))
        return torch._inductor.aoti_load_package(path)(*exported.fresh)
    _matches(exported, run, torchs_too)


@_on("small_dynamic")
def test_aoti_compile_and_package(exported, tmp_path):
    """unbroken's program and torch's, on the default case; on the heavy ones unbroken's only
    (a compile takes about a minute)."""
    _aoti(exported, tmp_path, torchs_too=exported.case.name == "small_dynamic")


# -- unbroken's own way back in -------------------------------------------------------------------
@pytest.mark.matrix
def test_reexporting_the_module_gives_the_same_graph(exported):
    args = exported.case.inputs(2, 5)
    again = unbroken.export(exported.ours.module(), args,
                            dynamic_shapes=exported.case.dynamic_shapes())

    def calls(program):
        return [n.target for n in program.graph.nodes if n.op == "call_function"]
    assert calls(again) == calls(exported.ours)
    assert again.graph_signature.input_specs == exported.ours.graph_signature.input_specs


@pytest.mark.matrix
def test_torch_export_of_the_module(exported):
    args = exported.case.inputs(2, 5)
    _matches(exported, lambda p: torch.export.export(
        p.module(), args, dynamic_shapes=exported.case.dynamic_shapes()).module()(*exported.fresh))
