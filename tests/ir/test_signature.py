"""Tests for unbroken.ir.signature: views, printing, parity with torch's enums."""
import dataclasses

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
)


def _signature() -> ExportGraphSignature:
    inputs = [
        InputSpec(InputKind.PARAMETER, TensorArgument("p_lin_weight"), "lin.weight"),
        InputSpec(InputKind.BUFFER, TensorArgument("b_bn_running_mean"), "bn.running_mean", True),
        InputSpec(InputKind.BUFFER, TensorArgument("b_scratch"), "scratch", False),
        InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument("c_lifted_tensor_0"),
                  "lifted_tensor_0"),
        InputSpec(InputKind.USER_INPUT, TensorArgument("x")),
        InputSpec(InputKind.USER_INPUT, SymIntArgument("n")),
        InputSpec(InputKind.USER_INPUT, ConstantArgument("flag", True)),
    ]
    outputs = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument("add"), "bn.running_mean"),
        OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument("mul"), "x"),
        OutputSpec(OutputKind.USER_OUTPUT, TensorArgument("relu")),
        OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", 3)),
    ]
    return ExportGraphSignature(inputs, outputs)


def test_enum_names_and_values_match_torch():
    for ours, theirs in ((InputKind, torch_sig.InputKind), (OutputKind, torch_sig.OutputKind)):
        assert {k.name: k.value for k in ours} == {k.name: k.value for k in theirs}


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


def test_str_equals_torch_for_same_specs():
    ours = _signature()
    kinds_in = {k.name: getattr(torch_sig.InputKind, k.name) for k in InputKind}
    kinds_out = {k.name: getattr(torch_sig.OutputKind, k.name) for k in OutputKind}

    def arg(a):
        if isinstance(a, ConstantArgument):
            return torch_sig.ConstantArgument(a.name, a.value)
        return getattr(torch_sig, type(a).__name__)(a.name)

    theirs = torch_sig.ExportGraphSignature(
        [torch_sig.InputSpec(kinds_in[s.kind.name], arg(s.arg), s.target, s.persistent)
         for s in ours.input_specs],
        [torch_sig.OutputSpec(kinds_out[s.kind.name], arg(s.arg), s.target)
         for s in ours.output_specs])
    assert str(ours) == str(theirs)


def test_specs_are_frozen_and_validated():
    spec = InputSpec(InputKind.USER_INPUT, TensorArgument("x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.target = "y"
    with pytest.raises(TypeError):
        InputSpec(InputKind.USER_INPUT, "x")
    with pytest.raises(TypeError):
        InputSpec(InputKind.BUFFER, TensorArgument("b"), "b")  # persistent missing


def test_replace_returns_new_signature():
    sig = _signature()
    new = sig.replace(output_specs=sig.output_specs[2:])
    assert new.buffers_to_mutate == {} and sig.buffers_to_mutate
    assert new.input_specs == sig.input_specs
