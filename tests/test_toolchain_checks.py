"""The soundness checks of unbroken's ``module()`` hold for the torch-subclass program (issue 9
with issue 6): grad mode given back, input strides checked when the trace read a layout fact,
a written input sharing memory with another refused; and they survive ``unbroken.save`` /
``unbroken.load`` (the strict-layout flag and the specializations are in the file).
Grad-mode regions are torch's ``wrap_with_set_grad_enabled`` in the program, so torch's
tools take them.
"""
import io
import json
import zipfile

import pytest
import torch
import torch.nn as nn
from torch._higher_order_ops.wrap import wrap_with_set_grad_enabled

import unbroken


def _reloaded(ep):
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    return unbroken.load(buffer)


def _both(ep):
    return [ep, _reloaded(ep)]


# -- grad mode ---------------------------------------------------------------------------------
class Gather(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, idx):
        with torch.no_grad():
            target = self.lin(x).index_select(0, idx) * 2
        return self.lin(x) - target.sum()


def _gather_inputs():
    return torch.randn(4, 3), torch.tensor([0, 2])


def test_grad_region_is_torchs_higher_order_op():
    ep = unbroken.export(Gather(), _gather_inputs())
    assert any(n.target is wrap_with_set_grad_enabled for n in ep.graph.nodes)
    assert not any(n.target is torch.is_grad_enabled for n in ep.graph.nodes)


@pytest.mark.parametrize("ambient", [True, False])
def test_grad_mode_matches_eager_and_is_given_back(ambient):
    model, (x, idx) = Gather(), _gather_inputs()
    for program in _both(unbroken.export(model, (x, idx))):
        with torch.set_grad_enabled(ambient):
            got, want = program.module()(x, idx), model(x, idx)
            assert torch.is_grad_enabled() == ambient
        torch.testing.assert_close(got, want)
        assert got.requires_grad == want.requires_grad == ambient


def test_grad_mode_is_given_back_when_the_graph_fails_inside_a_region():
    x, bad = torch.randn(4, 3), torch.tensor([0, 9])  # index 9 is out of range
    for program in _both(unbroken.export(Gather(), _gather_inputs())):
        with pytest.raises((IndexError, RuntimeError)):
            program.module()(x, bad)
        assert torch.is_grad_enabled()


def test_grad_region_gradients_match_eager():
    model, (x, idx) = Gather(), _gather_inputs()
    module = unbroken.export(model, (x, idx)).module()
    got = torch.autograd.grad(module(x, idx).sum(), list(module.parameters()))
    want = torch.autograd.grad(model(x, idx).sum(), list(model.parameters()))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_reexporting_the_module_keeps_the_region():
    model, (x, idx) = Gather(), _gather_inputs()
    ep = unbroken.export(model, (x, idx))
    again = unbroken.export(ep.module(), (x, idx))
    assert [(n.op, str(n.target)) for n in again.graph.nodes if n.op != "get_attr"] == \
        [(n.op, str(n.target)) for n in ep.graph.nodes if n.op != "get_attr"]
    module = again.module()
    got = torch.autograd.grad(module(x, idx).sum(), list(module.parameters()))
    want = torch.autograd.grad(model(x, idx).sum(), list(model.parameters()))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


class Nested(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
            c = a + b
        return c, b


def test_nested_regions_round_trip_through_torch_and_unbroken_files(tmp_path):
    model, x = Nested(), torch.randn(3, requires_grad=True)
    ep = unbroken.export(model, (x,))
    path = tmp_path / "nested.pt2"
    torch.export.save(ep, path)
    for program in (ep, _reloaded(ep), torch.export.load(path)):
        for got, want in zip(program.module()(x), model(x)):
            torch.testing.assert_close(got, want)
            assert got.requires_grad == want.requires_grad


class RegionsInBranches(nn.Module):
    """Grad-mode regions inside torch.cond branches and a while_loop body (nested too)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        def positive(x):
            with torch.no_grad():
                frozen = self.lin(x)
            with torch.enable_grad():
                live = frozen * self.lin(x)
            return live

        def negative(x):
            with torch.no_grad():
                with torch.enable_grad():
                    return self.lin(x) - 1

        def body(i, acc):
            with torch.no_grad():
                step = acc * 0.5
            return i + 1, acc + step

        picked = torch.cond(x.sum() > 0, positive, negative, (x,))
        _, looped = torch.while_loop(lambda i, acc: i < 3, body, (torch.tensor(0), x))
        return picked, looped


@pytest.mark.parametrize("ambient", [True, False])
def test_grad_regions_inside_branches_and_loop_bodies(tmp_path, ambient):
    """torch's verifier takes the program (the regions inside subgraphs are torch's
    higher-order op too), and every spelling of it computes eager's values and
    ``requires_grad`` on both branches, in both ambient grad modes."""
    model = RegionsInBranches()
    x = torch.randn(3, 3, requires_grad=True)
    with torch.set_grad_enabled(ambient):
        ep = unbroken.export(model, (x,))
    branch = ep.graph_module.true_graph_0
    assert any(n.target is wrap_with_set_grad_enabled for n in branch.graph.nodes)
    assert not any(n.target is torch.is_grad_enabled for n in branch.graph.nodes)
    path = tmp_path / "branches.pt2"
    torch.export.save(ep, path)
    for program in (ep, _reloaded(ep), torch.export.load(path)):
        for sign in (1, -1):
            inputs = (sign * torch.ones(3, 3, requires_grad=True),)
            with torch.set_grad_enabled(ambient):
                got, want = program.module()(*inputs), model(*inputs)
                assert torch.is_grad_enabled() == ambient
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
                assert a.requires_grad == b.requires_grad


def test_grad_regions_survive_run_decompositions_and_unflatten():
    model, (x, idx) = Gather(), _gather_inputs()
    ep = unbroken.export(model, (x, idx))
    core = ep.run_decompositions()
    assert any(n.target is wrap_with_set_grad_enabled for n in core.graph.nodes)
    torch.testing.assert_close(core.module()(x, idx), model(x, idx))
    torch.testing.assert_close(torch.export.unflatten(ep)(x, idx), model(x, idx))


# -- layout ------------------------------------------------------------------------------------
class ReadsStride(nn.Module):
    def forward(self, x):
        return x.reshape(-1) * x.stride(0)


class ViewsInput(nn.Module):
    def forward(self, x):
        return x.reshape(-1) * 2


def test_layout_read_checks_strides_also_after_load():
    ep = unbroken.export(ReadsStride(), (torch.randn(3, 4),))
    assert ep.strict_layout
    for program in _both(ep):
        assert program.strict_layout
        with pytest.raises(unbroken.InputMismatchError, match="strides"):
            program.module()(torch.randn(4, 3).t())
        x = torch.randn(3, 4)
        torch.testing.assert_close(program.module()(x), ReadsStride()(x))


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x)


def test_layout_free_program_stays_free_after_load():
    conv, x = Conv(), torch.randn(2, 3, 8, 8)
    last = x.contiguous(memory_format=torch.channels_last)
    for program in _both(unbroken.export(conv, (x,))):
        assert not program.strict_layout
        torch.testing.assert_close(program.module()(last), conv(last))


def test_view_failing_on_another_layout_names_the_input():
    for program in _both(unbroken.export(ViewsInput(), (torch.randn(3, 4),))):
        with pytest.raises(unbroken.InputMismatchError, match="strides"):
            program.module()(torch.randn(4, 3).t())


def test_strict_layout_survives_run_decompositions():
    ep = unbroken.export(ReadsStride(), (torch.randn(3, 4),))
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        ep.run_decompositions().module()(torch.randn(4, 3).t())


# -- aliasing ----------------------------------------------------------------------------------
class WritesX(nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return y * 2


def test_written_input_sharing_memory_is_refused_also_after_load():
    for program in _both(unbroken.export(WritesX(), (torch.ones(2), torch.ones(2)))):
        base = torch.zeros(4)
        with pytest.raises(unbroken.InputMismatchError, match="share memory"):
            program.module()(base[:2], base[1:3])
        x, y = torch.zeros(2), torch.zeros(2)
        torch.testing.assert_close(program.module()(x, y), torch.zeros(2))
        torch.testing.assert_close(x, torch.ones(2))


# -- the file --------------------------------------------------------------------------------------
class Pinned(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        return self.lin(x)  # pins x.shape[1] to 5


def _document(ep) -> tuple[dict, dict]:
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    return members, json.loads(members["program.json"])


def _rezipped(members, document) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in {**members, "program.json": json.dumps(document).encode()}.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def test_specializations_round_trip():
    auto = torch.export.Dim.AUTO
    with pytest.warns(unbroken.SpecializationWarning):
        ep = unbroken.export(Pinned(), (torch.randn(2, 5),),
                             dynamic_shapes={"x": {0: auto, 1: auto}})
    assert ep.specializations
    assert _reloaded(ep).specializations == ep.specializations


def test_file_without_the_flag_checks_strides():
    members, document = _document(unbroken.export(ViewsInput(), (torch.randn(3, 4),)))
    assert document["strict_layout"] is False
    del document["strict_layout"]
    program = unbroken.load(_rezipped(members, document))
    assert program.strict_layout
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        program.module()(torch.randn(4, 3).t())


@pytest.mark.parametrize("field, value", [
    ("strict_layout", 0), ("strict_layout", "false"), ("strict_layout", None),
    ("specializations", {"x": 1}), ("specializations", [{"source": "x"}]),
    ("specializations", [{"source": "x", "value": True, "reason": "", "frames": []}]),
    ("specializations", [{"source": "x", "value": 1, "reason": "a\rb", "frames": []}]),
    ("specializations", [{"source": "x", "value": 1, "reason": "", "frames": [{}]}]),
])
def test_crafted_flag_or_specialization_is_refused(field, value):
    members, document = _document(unbroken.export(ReadsStride(), (torch.randn(3, 4),)))
    document[field] = value
    with pytest.raises(unbroken.SerializationError, match=field):
        unbroken.load(_rezipped(members, document))


@pytest.mark.slow
def test_grad_region_program_in_torchs_passes():
    from torch.export.passes import move_to_device_pass

    model, (x, idx) = Gather(), _gather_inputs()
    ep = unbroken.export(model, (x, idx))
    want = model(x, idx)
    for got in (move_to_device_pass(ep, "cpu").module()(x, idx),
                torch.compile(ep.module())(x, idx),
                torch.export.export(ep.module(), (x, idx)).module()(x, idx)):
        torch.testing.assert_close(got, want)
        assert got.requires_grad
