"""exporter.trace: parameters and buffers reached through objects that are not the module's
attributes (a cache object holding the tensors the module registered as buffers, a helper
holding a weight) are the module's state, by identity, as torch.export lifts them: a write to
one is a buffer mutation, a read sees the trace's writes, and nothing is lifted as a copy."""
import copy
import types

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.ir.signature import OutputKind
from unbroken.symbolic.diagnostics import RefusalError


class _Cache:
    """A plain object (not a module) owning preallocated tensors, as transformers'
    ``StaticLayer`` owns ``keys`` and ``cumulative_length``."""

    def __init__(self, slots: int, width: int):
        self.keys = torch.zeros(slots, width)
        self.length = torch.tensor(0)

    def update(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[0]) + self.length
        self.length.add_(x.shape[0])
        self.keys.index_copy_(0, positions, x)
        return self.keys


class _CachedModule(torch.nn.Module):
    """The export wrapper's pattern: the cache's tensors registered as (non-persistent)
    buffers, forward writing them through the cache object, never through ``self``."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.cache = _Cache(8, 4)
        self.register_buffer("cache_keys", self.cache.keys, persistent=False)
        self.register_buffer("cache_length", self.cache.length, persistent=False)

    def forward(self, x, position):
        self.cache.length.copy_(position[0])
        keys = self.cache.update(self.proj(x))
        return keys.cumsum(0) * self.cache.length


def _calls(module, steps):
    with torch.no_grad():
        return [module(x, torch.tensor([p])) for p, x in steps]


_STEPS = [(0, torch.randn(2, 4)), (2, torch.randn(1, 4)), (3, torch.randn(1, 4))]


def test_a_buffer_written_through_a_cache_object_is_a_buffer_mutation():
    torch.manual_seed(0)
    model = _CachedModule()
    eager = copy.deepcopy(model)
    before = {k: v.clone() for k, v in model.state_dict(keep_vars=True).items()}
    x = torch.randn(1, 4)
    ep = unbroken.export(model, (x, torch.tensor([0])))
    mutated = {s.target for s in ep.graph_signature.output_specs
               if s.kind == OutputKind.BUFFER_MUTATION}
    assert mutated == {"cache_keys", "cache_length"}
    assert not ep.graph_signature.lifted_tensor_constants  # no copy of the cache lifted
    # export left the model and its cache object as they were, the same tensor objects (the
    # program's state is those tensors, as torch's: running it below writes them)
    assert model.cache.keys is model.cache_keys and model.cache.length is model.cache_length
    for name, value in model.state_dict(keep_vars=True).items():
        assert_bit_exact(value, before[name])
    assert torch.equal(model.cache.keys, torch.zeros(8, 4)) and int(model.cache.length) == 0
    # the program carries the cache across calls as eager does (decode steps)
    steps = [(p, t) for p, t in _STEPS if t.shape == x.shape]
    program = ep.module()
    assert_bit_exact(_calls(program, steps), _calls(eager, steps))
    assert_bit_exact(program.cache_keys, eager.cache_keys)
    assert_bit_exact(program.cache_length, eager.cache_length)


def test_a_parameter_read_through_a_helper_object_is_the_parameter_not_a_constant():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.head = types.SimpleNamespace(weight=self.embed.weight)  # tied, not a module

        def forward(self, ids):
            return self.embed(ids) @ self.head.weight.t()

    torch.manual_seed(0)
    model = Tied()
    ids = torch.tensor([[1, 2, 3]])
    ep = unbroken.export(model, (ids,))
    assert not ep.constants and not ep.graph_signature.lifted_tensor_constants
    program = ep.module()
    out, want = program(ids), model(ids)
    assert_bit_exact(out, want)  # requires_grad included: the weight is the parameter
    # the program follows its state: a new weight reaches both reads
    with torch.no_grad():
        program.embed.weight.mul_(2.0)
        model.embed.weight.mul_(2.0)
    assert_bit_exact(program(ids), model(ids))


def test_a_view_of_a_written_buffer_held_outside_the_module_is_refused_not_read_stale():
    class ViewCache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(4))
            self.holder = types.SimpleNamespace(head=self.state[:2])  # a view, not the buffer

        def forward(self, x):
            self.state.add_(x)
            return self.holder.head * 2

    with pytest.raises(RefusalError) as info:
        unbroken.export(ViewCache(), (torch.ones(4),))
    assert info.value.code == "UB121"


# --- transformers' own export wrapper ------------------------------------------------------

def _static_cache_llama(**config):
    transformers = pytest.importorskip("transformers")
    executorch = pytest.importorskip("transformers.integrations.executorch")
    # as many key/value heads as query heads: transformers picks a grouped-query SDPA layout
    # in eager and repeats the keys under export (a library choice all exporters share)
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=64,
                                   max_position_embeddings=32, use_cache=True, **config)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    return executorch.TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=12)


@pytest.mark.slow
def test_transformers_static_cache_wrapper_decode_is_bit_exact_across_calls():
    wrapper = _static_cache_llama()
    eager = copy.deepcopy(wrapper)
    example = {"input_ids": torch.tensor([[5]]), "cache_position": torch.tensor([0])}
    with torch.no_grad():
        ep = unbroken.export(wrapper, (), example)
    # the wrapper's cache is untouched by the export
    assert all(not layer.keys.any() and int(layer.cumulative_length) == 0
               for layer in wrapper.static_cache.layers)
    mutated = {s.target for s in ep.graph_signature.output_specs
               if s.kind == OutputKind.BUFFER_MUTATION}
    assert mutated == {f"{kind}_{i}" for i in range(2)
                       for kind in ("key_cache", "value_cache", "cumulative_length")}
    program = ep.module()
    with torch.no_grad():
        for position in range(4):
            call = {"input_ids": torch.tensor([[7 + position]]),
                    "cache_position": torch.tensor([position])}
            assert_bit_exact(program(**call), eager(**call))
    for name, buffer in eager.named_buffers():
        assert_bit_exact(dict(program.named_buffers())[name], buffer)


@pytest.mark.slow
def test_transformers_static_cache_wrapper_prefill_then_state_matches_eager(monkeypatch):
    wrapper = _static_cache_llama()
    eager = copy.deepcopy(wrapper)
    prompt = {"input_ids": torch.tensor([[3, 9, 4, 11, 6]]), "cache_position": torch.arange(5)}
    with torch.no_grad():
        program = unbroken.export(wrapper, (), prompt).module()
        got = program(**prompt)
        # eager on the path transformers takes under export: a prompt's causal mask is never
        # skipped for `is_causal=True` there (masking_utils asks `is_torchdynamo_exporting()`),
        # which rounds differently in the last bit
        masking = pytest.importorskip("transformers.masking_utils")
        monkeypatch.setattr(masking, "is_torchdynamo_exporting", lambda: True)
        assert_bit_exact(got, eager(**prompt))
    for name, buffer in eager.named_buffers():
        assert_bit_exact(dict(program.named_buffers())[name], buffer)


def _two(*shape):
    return TwoTensor(torch.ones(*shape), 2 * torch.ones(*shape))


class _SubclassParameter(torch.nn.Module):  # torch's test_subclass_nested_attr_access
    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(_two(3))

    def forward(self, x):
        return x + (self.p * 2).a


class _SubclassBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", _two(3))

    def forward(self, x):
        return x + self.b


class _SubclassAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = _two(3)

    def forward(self, x):
        return x * self.c


class _SubclassLeafWeight(torch.nn.Module):  # nn.Linear's native forward reads the weight
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.lin.weight = torch.nn.Parameter(_two(3, 3))

    def forward(self, x):
        return self.lin(x)


class _SubclassMadeInForward(torch.nn.Module):
    def forward(self, x):
        return (TwoTensor(x, x * 2) + 1).b


@pytest.mark.parametrize("model, line, name", [
    (_SubclassParameter, "return x + (self.p * 2).a", "`self.p` is a TwoTensor"),
    (_SubclassBuffer, "return x + self.b", "`self.b` is a TwoTensor"),
    (_SubclassAttribute, "return x * self.c", "`self.c` is a TwoTensor"),
    (_SubclassLeafWeight, "return self.lin(x)", "`lin.weight` is a TwoTensor"),
    (_SubclassMadeInForward, "return (TwoTensor(x, x * 2) + 1).b", "is a TwoTensor"),
])
def test_tensor_subclasses_are_refused_where_forward_reads_them(model, line, name):
    # the trace stands a plain meta tensor in for a subclass (its __torch_dispatch__ and
    # inner tensors dropped): an internal error (`.a` missing) or a program computing on
    # plain tensors; torch exports some through __tensor_flatten__, unbroken refuses them
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(model(), (torch.randn(3),))
    assert info.value.code == "UB117", info.value.render()
    assert name in info.value.render()
    assert info.value.frames[-1].source == line


def test_a_tensor_subclass_parameter_forward_never_uses_is_lifted_as_the_others():
    class Unused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(_two(3))

        def forward(self, x):
            return x + 1

    x = torch.randn(3)
    assert_bit_exact(unbroken.export(Unused(), (x,)).module()(x), x + 1)
