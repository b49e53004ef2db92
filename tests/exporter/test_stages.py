"""exporter.options, trace, shapes and build: the stages of export() run one by one, with
explicit inputs and outputs."""
import dataclasses

import pytest
import torch
from torch.export import Dim

from unbroken.exporter.build import build_program
from unbroken.exporter.options import ExportCall, ExportOptions
from unbroken.exporter.shapes import ShapeViolation, settle_shapes
from unbroken.exporter.trace import Trace


class _Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_options_are_immutable_and_variants_are_new_values():
    options = ExportOptions(auto_refinements={"x.shape[0]": "static"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.suggest_fixes = False
    with pytest.raises(TypeError):
        options.auto_refinements["y.shape[0]"] = "static"
    variant = dataclasses.replace(options, suggest_fixes=False)
    assert options.suggest_fixes and not variant.suggest_fixes
    assert ExportCall(_Add(), (), {}).root is not None and ExportCall(len, (), {}).root is None


def test_the_trace_site_is_built_first_and_read_by_the_environment_and_the_recorder():
    trace = Trace(ExportCall(_Add(), (torch.randn(2), torch.randn(2)), {}), ExportOptions())
    assert trace.env.location_provider == trace.site.user_frames
    assert trace.recorder.frames_provider == trace.site.user_frames
    assert trace.output.site is trace.site and trace.env.size_one is trace.size_one
    assert trace.recorder.size_one is trace.size_one


def test_the_three_stages_make_the_program():
    x = torch.randn(4, 3)
    call = ExportCall(_Add(), (x, torch.randn(4, 3)), {})
    options = ExportOptions(dynamic_shapes={"x": {0: Dim("n")}, "y": {0: Dim("n")}})
    trace = Trace(call, options)
    flat_outputs, out_spec = trace.run()
    assert settle_shapes(trace, options) == {}
    ep = build_program(trace, flat_outputs, out_spec)
    y = torch.randn(7, 3)
    torch.testing.assert_close(ep.module()(torch.ones(7, 3), y), torch.ones(7, 3) + y)


def test_a_violation_is_reported_with_its_fix_not_raised_as_the_user_error():
    call = ExportCall(_Add(), (torch.randn(4, 3), torch.randn(4, 3)), {})
    options = ExportOptions(dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    trace = Trace(call, options)
    trace.run()
    with pytest.raises(ShapeViolation) as info:
        settle_shapes(trace, options)
    assert info.value.violations and info.value.fix is not None


class _Regions(torch.nn.Module):
    """A grad-mode region (a higher-order op in torch's form), a size read and a view."""

    def forward(self, x, y):
        with torch.no_grad():
            z = (x * 2).sum(0)
        return z + y.view(-1, x.shape[1]).mean(0), x.shape[0] * 2


def test_a_graph_only_build_is_the_programs_graph_without_fake_values():
    """What the traces at size 1 and the fix checks build: the program's own graph in
    torch's form, node for node, with unbroken's meta values (no fake conversion)."""
    from unbroken.ir.parts import ProgramParts
    from unbroken.size_one.admission import same_program
    from unbroken.symbolic.torch_compat import FakeTensor

    def build(graph_only):
        x = torch.randn(4, 3, requires_grad=True)
        call = ExportCall(_Regions(), (x, torch.randn(2, 6)), {})
        options = ExportOptions(dynamic_shapes=({0: Dim("n")}, None), graph_only=graph_only)
        trace = Trace(call, options)
        flat_outputs, out_spec = trace.run()
        settle_shapes(trace, options)
        return build_program(trace, flat_outputs, out_spec, graph_only=graph_only)

    full, parts = build(False), build(True)
    assert isinstance(parts, ProgramParts)
    vals = [n.meta["val"] for n in parts.graph_module.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)]
    assert vals and not any(isinstance(v, FakeTensor) for v in vals)
    assert all(v.device.type == "meta" for v in vals)
    assert any(n.op == "get_attr" for n in parts.graph_module.graph.nodes)  # the region
    assert [(n.op, n.target) for n in parts.graph_module.graph.nodes] == \
        [(n.op, n.target) for n in full.graph_module.graph.nodes]
    assert same_program(full, parts, {})
