"""frontend.variables.torch_calls: torch functions the frontend handles itself."""
import pytest
import torch
from torch.export import Dim

import unbroken


class TensorOfSize(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (x * torch.tensor(n), torch.tensor(n / 2), torch.tensor(n > 3),
                torch.tensor(n, dtype=torch.float64).sqrt(), torch.as_tensor(n * 2))


def test_tensor_of_a_dynamic_size_stays_dynamic():
    """torch.tensor(x.shape[0]) specialized the size (UB003) where torch.export computes it in
    the graph; the dtypes are torch.tensor's for int, float and bool."""
    model = TensorOfSize()
    ep = unbroken.export(model, (torch.randn(5, 4),),
                         dynamic_shapes=({0: Dim("n", min=2, max=12)},))
    for n in (2, 7, 12):
        x = torch.randn(n, 4)
        got, want = ep.module()(x), model(x)
        assert [t.dtype for t in got] == [t.dtype for t in want]
        torch.testing.assert_close(got, want)


class _AllReduce(torch.nn.Module):
    def forward(self, x, y):
        import torch.distributed as dist

        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        z = y * 2
        dist.all_reduce(z)
        return x + z


class _AsyncAllReduce(torch.nn.Module):
    def forward(self, x):
        import torch.distributed as dist

        dist.all_reduce(x, async_op=True).wait()
        return x


def _one_process_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    return dist


def test_c10d_collectives_become_functional_collectives():
    """dist.all_reduce pasted its process group and reduce op (TorchScript objects) into the
    graph's code: UB999. As torch's tracer does, it becomes the functional all_reduce (group
    by name, op as a string) written back into its argument; async_op=True is refused."""
    dist = _one_process_group()
    try:
        ep = unbroken.export(_AllReduce(), (torch.randn(3), torch.randn(3)))
        targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
        assert targets.count("_c10d_functional.all_reduce.default") == 2, targets
        assert "max" in [a for n in ep.graph.nodes for a in n.args if isinstance(a, str)]
        assert list(ep.graph_signature.user_inputs_to_mutate.values()) == ["x"]
        x, y = torch.randn(3), torch.randn(3)
        x_eager = x.clone()
        torch.testing.assert_close(ep.module()(x, y), _AllReduce()(x_eager, y))
        torch.testing.assert_close(x, x_eager)
        with pytest.raises(unbroken.GraphBreakError, match="async_op=True"):
            unbroken.export(_AsyncAllReduce(), (torch.randn(3),))
    finally:
        dist.destroy_process_group()


@torch.jit.script
def _scripted(x: torch.Tensor):
    if torch.jit.is_scripting():
        return x.cos()
    return x.sin()


class _CallsScripted(torch.nn.Module):
    def forward(self, x):
        return _scripted(x)


def _wrapped_script_call(*args, **kwargs):
    return _ORIGINAL_SCRIPT_CALL(*args, **kwargs)


_ORIGINAL_SCRIPT_CALL = torch._C.ScriptFunction.__call__
# torch's own test utilities (torch.testing._internal.common_utils) install a wrapper like
# this one, from a module inside torch, as every ScriptFunction's `__call__`.
_wrapped_script_call.__module__ = "torch.testing._internal.common_utils"


@pytest.mark.parametrize("patched", [False, True], ids=["plain", "call-wrapped"])
def test_a_torchscript_function_is_refused_however_it_is_reached(patched):
    """With its `__call__` wrapped by a function inside torch, a ScriptFunction reached the
    wrapper as a torch leaf and ran on the traced tensors: the trace recorded its Python
    source (sin) where eager runs the script (cos). Both ways it is now a UB108 refusal."""
    if patched:
        torch._C.ScriptFunction.__call__ = _wrapped_script_call
    try:
        assert torch.equal(_CallsScripted()(torch.zeros(2)), torch.ones(2))  # cos: the script
        with pytest.raises(unbroken.GraphBreakError) as info:
            unbroken.export(_CallsScripted(), (torch.randn(3),))
    finally:
        torch._C.ScriptFunction.__call__ = _ORIGINAL_SCRIPT_CALL
    assert info.value.code == "UB108", info.value.render()
    assert "_scripted" in str(info.value) and "return _scripted(x)" in str(info.value)
