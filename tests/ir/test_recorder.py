"""ir.recorder: the dispatch mode that records ATen ops on meta tensors, driven directly (no
frontend), so that a failure points at the recorder."""
import pytest
import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.utils._python_dispatch import _disable_current_modes

import unbroken
from unbroken.ir.recorder import Recorder
from unbroken.symbolic.diagnostics import DataDependentError, UnsupportedError, UserFrame
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.ranges import ValueRange

aten = torch.ops.aten
FRAME = UserFrame("/m.py", 7, "forward", "y = x.nonzero()")


def _inputs(recorder, *shapes):
    """Meta tensors bound to user-input placeholders ``x0, x1...``."""
    metas = []
    for i, shape in enumerate(shapes):
        meta = torch.empty(shape, device="meta")
        recorder.builder.add_placeholder(f"x{i}", meta, user_input=True)
        metas.append(meta)
    return metas


def _targets(recorder):
    return [node.target for node in recorder.builder.graph.nodes if node.op == "call_function"]


def test_ops_are_recorded_with_their_inputs_nodes_and_the_users_location():
    recorder = Recorder(frames_provider=lambda: (FRAME,),
                        module_stack_provider=lambda: {"L__self__": ("", "M")})
    x, y = _inputs(recorder, (2, 3), (3,))
    with recorder.recording():
        out = x * 2 + y
    node = recorder.node_of(out)
    assert node.target is aten.add.Tensor
    assert node.args[0].target is aten.mul.Tensor and node.args[0].args[0].name == "x0"
    assert node.args[1] is recorder.node_of(y)
    assert node.meta["val"].shape == (2, 3) and node.meta["val"].device.type == "meta"
    assert node.meta["user_frames"] == (FRAME,)
    assert node.meta["nn_module_stack"] == {"L__self__": ("", "M")}
    assert recorder.device_of(out) == torch.device("cpu")


def test_nothing_is_recorded_outside_recording():
    recorder = Recorder()
    (x,) = _inputs(recorder, (2,))
    with recorder.recording():
        pass
    x.sin()  # the mode is off: computed on meta, not recorded
    assert _targets(recorder) == []
    assert not recorder.is_recording()


def test_an_in_place_op_rebinds_its_target_so_later_uses_see_the_new_value():
    recorder = Recorder()
    (x,) = _inputs(recorder, (4,))
    with recorder.recording():
        x.add_(1)
        out = x.neg()
    written = recorder.node_of(x)
    assert written.target is aten.add_.Tensor
    assert recorder.node_of(out).args[0] is written


def test_a_real_tensor_is_lifted_to_a_constant_placeholder():
    recorder = Recorder()
    (x,) = _inputs(recorder, (3,))
    real = torch.arange(3.0)
    with recorder.recording():
        out = x + real
    placeholder = recorder.node_of(out).args[1]
    assert placeholder.op == "placeholder" and placeholder.name.startswith("c_")
    assert recorder.constants[placeholder.name] is real
    placeholders = [n.name for n in recorder.builder.graph.nodes if n.op == "placeholder"]
    assert placeholders == [placeholder.name, "x0"]  # state and constants before user inputs


def test_a_state_tensor_met_as_itself_stands_for_its_placeholder_not_a_constant():
    """A buffer the trace meets as the real object (held by a cache object, not read off the
    module) is its placeholder's stand-in: written in place, later reads see the write."""
    recorder = Recorder()
    (x,) = _inputs(recorder, (3,))
    real = torch.zeros(3)
    stand_in = torch.empty(3, device="meta")
    placeholder = recorder.builder.add_placeholder("b_cache", stand_in, user_input=False)
    recorder.alias_state(real, stand_in)
    assert recorder.lift_constant(real) is stand_in
    with recorder.recording():
        recorder.lift_constant(real).add_(x)  # how the frontend wraps the object it met
        out = real * 2  # a native call handed the real object
    assert not recorder.constants
    write = recorder.node_of(stand_in)
    assert write.target is aten.add_.Tensor and write.args[0] is placeholder
    assert recorder.node_of(out).args[0] is write


def test_a_factory_records_the_default_dtype_and_the_users_device():
    recorder = Recorder()
    _inputs(recorder, (1,))
    with recorder.recording():
        made = torch.zeros(2, 2, device="cpu")
    node = recorder.node_of(made)
    assert node.target is aten.zeros.default
    assert node.kwargs["dtype"] == torch.get_default_dtype()
    assert node.kwargs["device"] == torch.device("cpu")
    assert made.device.type == "meta"


def test_a_meta_tensor_made_while_tracing_is_refused_unless_the_model_is_on_meta():
    with _disable_current_modes():
        unknown = torch.ones(2, device="meta")
    recorder = Recorder(frames_provider=lambda: (FRAME,))
    (x,) = _inputs(recorder, (2,))
    with pytest.raises(UnsupportedError) as info, recorder.recording():
        x + unknown
    assert info.value.code == "UB117" and info.value.frames == (FRAME,)
    allowed = Recorder(allow_meta_constants=True)
    (x,) = _inputs(allowed, (2,))
    with allowed.recording():
        x + unknown
    assert list(allowed.constants.values()) == [unknown]


def test_without_a_shape_environment_values_only_data_decides_are_refused():
    recorder = Recorder(frames_provider=lambda: (FRAME,))
    (x,) = _inputs(recorder, (3,))
    with pytest.raises(DataDependentError) as item, recorder.recording():
        x.sum().item()
    assert item.value.code == "UB105" and item.value.frames == (FRAME,)
    with pytest.raises(UnsupportedError) as nonzero, recorder.recording():
        x.nonzero()
    assert nonzero.value.code == "UB114"


def test_with_a_shape_environment_they_get_unbacked_symbols():
    """The constructor's ``env`` is the one source of SymInts: the builder reads its symbols
    from the same environment (issue 11 item 1: decompose set only one of two attributes)."""
    env = ShapeEnvironment()
    recorder = Recorder(env=env)
    assert recorder.builder.sym_value == env.sym_value
    (x,) = _inputs(recorder, (3, 2))
    with enable_python_dispatcher(), recorder.recording():  # symbolic meta kernels, as export
        n = x.sum().to(torch.int64).item()
        torch._check(n >= 0)
        torch._check(n <= 3)
        rows = x.nonzero()
        sliced = x[:n]
    assert isinstance(n, torch.SymInt) and env.is_unbacked(n.node.expr)
    assert env.bound(n.node.expr) == ValueRange(0, 3)  # the torch._check facts
    (count,) = rows.shape[:1]
    assert isinstance(count, torch.SymInt) and env.is_unbacked(count.node.expr)
    assert env.bound(count.node.expr).upper == 6  # at most every element is nonzero
    targets = _targets(recorder)
    assert aten.item.default in targets and aten.nonzero.default in targets
    slice_node = recorder.node_of(sliced)
    assert slice_node.args[3] is recorder.builder.definition_of(n.node.expr)


def test_a_decomposition_table_records_what_the_decomposition_calls():
    def addmm(bias, a, b, *, beta=1, alpha=1):
        return bias + torch.mm(a, b)

    recorder = Recorder(decompositions={aten.addmm.default: addmm})
    bias, a, b = _inputs(recorder, (2,), (3, 4), (4, 2))
    with recorder.recording():
        torch.addmm(bias, a, b)
    assert aten.addmm.default not in _targets(recorder)
    assert {aten.mm.default, aten.add.Tensor} <= set(_targets(recorder))


def test_the_recorder_is_inactive_after_a_failure_inside_recording():
    recorder = Recorder()
    (x,) = _inputs(recorder, (2,))
    with pytest.raises(DataDependentError), recorder.recording():
        x.sum().item()
    before = len(recorder.builder.graph.nodes)
    x.cos()
    assert len(recorder.builder.graph.nodes) == before
    assert not recorder.is_recording()


def test_guards_recorded_by_an_ops_meta_kernel_name_the_op():
    env = ShapeEnvironment()
    size = env.symint(env.create_symbol("b", 8, source="x.shape[0]"))
    recorder = Recorder(env=env)
    x = torch.empty(size, 3, device="meta")
    recorder.builder.add_placeholder("x", x, user_input=True)
    with enable_python_dispatcher(), recorder.recording():
        x.view(4, -1)
    assert env.guards and {g.op for g in env.guards} == {"aten.view.default"}
    assert size == 8  # user code comparing sizes directly: outside any op
    assert env.guards[-1].op is None


class _ChainOnGradInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return (x * 2).relu() + self.lin(x).sigmoid()


def test_saving_an_output_for_backward_is_not_a_factory_detach():
    """With an input that requires grad and a dynamic dim, autograd detaches ``relu``'s output
    to save it for the backward; that detach is not a factory binding's, whose original the
    program can never hold. It was elided, the output forgotten, and export refused (UB117)."""
    model = _ChainOnGradInput()
    x = torch.randn(3, 4, requires_grad=True)
    ep = unbroken.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("b")},))
    fresh = torch.randn(5, 4, requires_grad=True)
    got, want = ep.module()(fresh), model(fresh)
    assert torch.equal(got, want) and got.requires_grad
    grad_got, = torch.autograd.grad(got.sum(), fresh)
    grad_want, = torch.autograd.grad(want.sum(), fresh)
    assert torch.equal(grad_got, grad_want)


class WhereOfMask(torch.nn.Module):
    def forward(self, x):
        rows, cols = torch.where(x > 0)
        return rows * 10 + cols


def test_where_of_a_mask_records_nonzero():
    """torch.where(mask) reached the recorder whole, whose Python reference ran nonzero's meta
    kernel: UB120 NotImplementedError, where torch.export exports it."""
    ep = unbroken.export(WhereOfMask(), (torch.randn(4, 3),))
    assert torch.ops.aten.nonzero.default in [n.target for n in ep.graph.nodes]
    for x in (torch.randn(4, 3), torch.zeros(4, 3), torch.ones(4, 3)):
        assert torch.equal(ep.module()(x), WhereOfMask()(x))


class _SeededNoise(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.g = torch.Generator().manual_seed(3)

    def forward(self, x):
        return x + torch.rand(x.shape, generator=self.g)


def test_an_argument_no_graph_can_hold_is_refused_at_the_users_line():
    """A torch.Generator passed to an op was pasted into the graph's code (UB999 SyntaxError);
    it is refused (UB117) at the line that passes it, with a fix that names the generator."""
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(_SeededNoise(), (torch.randn(3),))
    error = info.value
    assert error.code == "UB117" and "torch.Generator" in str(error)
    assert "generator=self.g" in str(error) and "torch.manual_seed" in error.hint


def test_recording_is_left_whole_when_the_call_inside_raises():
    """An error inside ``recording()`` (nested, as a leaf call inside a leaf call) pops the
    dispatch and function modes, restores torch's device hint and leaves the depth at 0,
    and the error that leaves is the one raised."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from unbroken.ir import devices
    from unbroken.symbolic.torch_compat import meta_device_hint

    recorder = Recorder()
    (x,) = _inputs(recorder, (2,))
    hint = meta_device_hint()
    with pytest.raises(KeyError, match="inside"):
        with recorder.recording():
            with recorder.recording(python_data=False):
                x * 2
                raise KeyError("inside")
    assert recorder._recording == 0 and not recorder.is_recording()
    assert _get_current_dispatch_mode() is None
    modes = torch.overrides._get_current_function_mode_stack()
    assert not any(devices.is_trace_mode(mode) for mode in modes)
    assert devices._users == 0 and meta_device_hint() is hint
    with recorder.recording():  # usable again
        out = x + 1
    assert recorder.node_of(out).target is aten.add.Tensor
