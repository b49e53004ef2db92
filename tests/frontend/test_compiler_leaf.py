"""Functions registered with ``torch.compiler.allow_in_graph`` are leaf calls
(``symbolic.torch_compat.compiler_leaf``): torch's tracer does not look inside them and runs
them on fake tensors; unbroken runs them natively on its meta stand-ins while the recorder
records their ops. Code run so builds constants from Python data "on the device of" a traced
tensor (``torch.asarray(0.0, device=x.device)``): the recorder builds them on the device the
stand-in stands for (``ir.devices.python_data_on_user_device``). The real library is einx
(its operations register themselves so; x-transformers calls ``einx.where``). Side by side
with torch.export, bit-exact with eager."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact


def _opaque_scale(x, scales):
    """Python the interpreter does not model (a class statement), and constants made from
    Python data on the device of ``x``: fine natively."""
    class Table:
        factors = {name: 2.0 ** i for i, name in enumerate(scales)}

    weights = torch.tensor([Table.factors[s] for s in scales], device=x.device)
    bias = torch.asarray(0.5, device=x.device)
    shift = x.new_tensor([1.0, -1.0])
    return x * weights.sum() + bias + shift.sum() + torch.as_tensor(3.0, device=x.device)


@torch.compiler.allow_in_graph
def opaque_scale(x, scales):
    return _opaque_scale(x, scales)  # (the registration is the function object's)


class UsesLeaf(torch.nn.Module):
    def forward(self, x):
        return opaque_scale(torch.relu(x), ("a", "b", "c")) * 2


def test_an_allowed_in_graph_function_is_a_leaf_call():
    x = torch.randn(3, 4)
    program = unbroken.export(UsesLeaf(), (x,))
    assert not any("Table" in str(node.target) for node in program.graph.nodes)
    peer = torch.export.export(UsesLeaf(), (x,))
    for exported in (program, peer):
        assert_bit_exact(exported.module()(x), UsesLeaf()(x))
    other = torch.randn(3, 4)
    assert_bit_exact(program.module()(other), UsesLeaf()(other))


def test_without_the_registration_the_same_code_is_interpreted_and_refused():
    class Interprets(torch.nn.Module):
        def forward(self, x):
            return _opaque_scale(x, ("a",))

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Interprets(), (torch.randn(3, 4),))
    assert info.value.code == "UB112"  # the class statement


@torch.compiler.allow_in_graph
def size_tensor(x):
    return x * torch.tensor(x.shape[0], device=x.device)


class SizeData(torch.nn.Module):
    def forward(self, x):
        return size_tensor(x)


def test_python_data_holding_a_symbolic_size_is_not_made_a_constant():
    """With a dynamic dim the data is a symbolic size: a constant would bake the example's
    value in, so the recorder's refusal stands (statically the size is a plain int)."""
    x = torch.randn(4, 3)
    static = unbroken.export(SizeData(), (x,))
    assert_bit_exact(static.module()(x), SizeData()(x))
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(SizeData(), (x,), dynamic_shapes=({0: Dim("b")},))
    assert info.value.code == "UB117"


def test_is_instance_of_a_union_of_classes():
    class Unions(torch.nn.Module):
        def forward(self, x, n):
            kinds = int | float
            return x * (2 if isinstance(n, kinds) else 3), isinstance(x, kinds | None)

    x = torch.randn(3)
    program = unbroken.export(Unions(), (x, 2))
    assert_bit_exact(program.module()(x, 2), Unions()(x, 2))


_FIRST_CALL = textwrap.dedent("""
    import einops, torch, unbroken

    class Patches(torch.nn.Module):
        def forward(self, x):
            return einops.rearrange(x, "b (n p) -> b n p", p=2)

    x = torch.randn(2, 6)
    program = unbroken.export(Patches(), (x,))  # einops never called before in this process
    assert torch.equal(program.module()(x), Patches()(x))
""")


@pytest.mark.slow
def test_a_library_torch_registers_lazily_is_ready_on_its_first_call_in_a_trace():
    """einops fills its backend cache on its first call; torch's tracer makes the library's
    registration (which warms it up) when it first meets one of its functions, so a model
    exported before any eager call works: unbroken makes the same registrations."""
    pytest.importorskip("einops")
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]


class EinxOps(torch.nn.Module):
    """einx's operations as x-transformers calls them: a masked fill and a sum."""

    def forward(self, mask, x):
        import einx

        kept = einx.where("b n, b n d, -> b n d", mask, x, 0.0)
        return einx.sum("b n d -> b d", kept), einx.multiply("b n d, d -> b n d", x,
                                                             x.new_ones(x.shape[-1]))


def test_einx_operations_export_bit_exact():
    pytest.importorskip("einx")
    mask, x = torch.rand(2, 5) > 0.3, torch.randn(2, 5, 8)
    program = unbroken.export(EinxOps(), (mask, x))
    peer = torch.export.export(EinxOps(), (mask, x))
    for exported in (program, peer):
        assert_bit_exact(exported.module()(mask, x), EinxOps()(mask, x))


@pytest.mark.slow
def test_x_transformers_encoder_with_a_padding_mask():
    """x-transformers masks attention with ``einx.where`` and normalises through wrappers made
    by ``functools.wraps`` in forward(): both export, bit-exact with eager, as torch's."""
    x_transformers = pytest.importorskip("x_transformers")
    torch.manual_seed(0)
    model = x_transformers.TransformerWrapper(
        num_tokens=64, max_seq_len=32, attn_layers=x_transformers.Encoder(
            dim=32, depth=1, heads=2, ff_glu=True)).eval()
    tokens = torch.randint(0, 64, (2, 6))
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    program = unbroken.export(model, (tokens,), {"mask": mask})
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    peer = torch.export.export(model, (tokens,), {"mask": mask})
    for exported in (program, peer):
        assert_bit_exact(exported.module()(tokens, mask=mask), model(tokens, mask=mask))


def _late_leaf(x):
    """Registered with ``allow_in_graph`` only by the test below, between two exports."""
    class Table:  # a class statement: not interpreted, fine natively
        factor = 3.0

    return x * Table.factor


class UsesLateLeaf(torch.nn.Module):
    def forward(self, x):
        return _late_leaf(x) + 1


def test_a_registration_between_two_exports_is_seen_by_the_second():
    """What ``wrap`` decides for a function (a leaf call or interpreted) is decided per trace:
    registering it after one export makes the next one call it as a leaf."""
    x = torch.randn(2, 3)
    with pytest.raises(unbroken.GraphBreakError):
        unbroken.export(UsesLateLeaf(), (x,))
    torch.compiler.allow_in_graph(_late_leaf)
    program = unbroken.export(UsesLateLeaf(), (x,))
    assert_bit_exact(program.module()(x), UsesLateLeaf()(x))
