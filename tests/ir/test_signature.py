"""Tests for unbroken.ir.signature: torch's own types, views, printing, unbroken's helpers."""
import pytest
import torch.export.graph_signature as torch_sig

from unbroken.ir.signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
    mutation_specs,
    replace_specs,
)


def _signature() -> ExportGraphSignature:
    inputs = [
        InputSpec(InputKind.PARAMETER, TensorArgument("p_lin_weight"), "lin.weight"),
        InputSpec(InputKind.BUFFER, TensorArgument("b_bn_running_mean"), "bn.running_mean", True),
        InputSpec(InputKind.BUFFER, TensorArgument("b_scratch"), "scratch", False),
        InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument("c_lifted_tensor_0"),
                  "lifted_tensor_0"),
        InputSpec(InputKind.USER_INPUT, TensorArgument("x"), None),
        InputSpec(InputKind.USER_INPUT, SymIntArgument("n"), None),
        InputSpec(InputKind.USER_INPUT, ConstantArgument("flag", True), None),
    ]
    outputs = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument("add"), "bn.running_mean"),
        OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument("mul"), "x"),
        OutputSpec(OutputKind.USER_OUTPUT, TensorArgument("relu"), None),
        OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", 3), None),
    ]
    return ExportGraphSignature(inputs, outputs)


def test_types_are_torchs_own():
    """Tools written for torch compare kinds and test argument types: they must be torch's."""
    assert InputKind is torch_sig.InputKind and OutputKind is torch_sig.OutputKind
    assert InputSpec is torch_sig.InputSpec and TensorArgument is torch_sig.TensorArgument
    sig = _signature()
    assert isinstance(sig, torch_sig.ExportGraphSignature)
    assert sig.input_specs[0].kind == torch_sig.InputKind.PARAMETER


def test_torch_only_views_exist():
    sig = _signature()
    assert dict(sig.parameters_to_mutate) == {} and dict(sig.inputs_to_lifted_custom_objs) == {}
    assert sig.lifted_custom_objs == () and sig.input_tokens == () and sig.output_tokens == ()


def test_input_views():
    sig = _signature()
    assert sig.parameters == ("lin.weight",)
    assert sig.buffers == ("bn.running_mean", "scratch")
    assert sig.non_persistent_buffers == ("scratch",)
    assert sig.lifted_tensor_constants == ("lifted_tensor_0",)
    assert sig.user_inputs == ("x", "n", True)
    assert dict(sig.inputs_to_parameters) == {"p_lin_weight": "lin.weight"}
    assert dict(sig.inputs_to_buffers) == {"b_bn_running_mean": "bn.running_mean",
                                           "b_scratch": "scratch"}
    assert dict(sig.inputs_to_lifted_tensor_constants) == {"c_lifted_tensor_0": "lifted_tensor_0"}


def test_output_views():
    sig = _signature()
    assert sig.user_outputs == ("relu", 3)
    assert dict(sig.buffers_to_mutate) == {"add": "bn.running_mean"}
    assert dict(sig.user_inputs_to_mutate) == {"mul": "x"}
    assert [s.arg.name for s in sig.mutation_specs] == ["add", "mul"]


def test_views_are_read_only():
    with pytest.raises(TypeError):
        _signature().inputs_to_parameters["q"] = "r"


def test_str_matches_torch_format():
    text = str(_signature())
    assert text.startswith("\n# inputs\np_lin_weight: PARAMETER target='lin.weight'\n")
    assert "b_bn_running_mean: BUFFER target='bn.running_mean' persistent=True" in text
    assert "b_scratch: BUFFER target='scratch' persistent=False" in text
    assert "x: USER_INPUT\n" in text
    assert "\n\n# outputs\nadd: BUFFER_MUTATION target='bn.running_mean'\n" in text
    assert "relu: USER_OUTPUT\n" in text


def test_specs_are_validated():
    with pytest.raises(AssertionError):
        InputSpec(InputKind.USER_INPUT, "x", None)
    with pytest.raises(AssertionError, match="persistent"):
        InputSpec(InputKind.BUFFER, TensorArgument("b"), "b")


def test_replace_returns_new_signature():
    sig = _signature()
    new = sig.replace(output_specs=sig.output_specs[2:])
    assert new.buffers_to_mutate == {} and sig.buffers_to_mutate
    assert new.input_specs == sig.input_specs
    assert isinstance(new, ExportGraphSignature)


def test_helpers_accept_torchs_own_signature():
    ours = _signature()
    theirs = torch_sig.ExportGraphSignature(ours.input_specs, ours.output_specs)
    assert mutation_specs(theirs) == ours.mutation_specs
    assert replace_specs(theirs, output_specs=[]).output_specs == []
