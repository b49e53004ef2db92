"""Plain Python objects the model holds (``frontend.variables.objects.ObjectVariable``,
``TraceContext.model_holds``): a cache object stored on a module (transformers'
``EncoderDecoderCache`` with its ``is_updated`` dict and lazily filled layers) is the model's
state, written as the modules' own attributes are: forward() reads back what it wrote, the
program computes what eager's first call computes, and the object is left unchanged. Objects
the model does not hold (an input, a global) must still end as they were (UB107): a program
cannot replay a change to them, so export refuses where torch.export silently drops it."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.frontend.overlay import StateWriteWarning


class Layer:
    """A lazily initialised cache layer (transformers' ``DynamicLayer`` in miniature)."""

    def __init__(self):
        self.keys = None
        self.is_initialized = False

    def update(self, keys):
        if not self.is_initialized:
            self.keys, self.is_initialized = keys, True
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
        return self.keys


class Cache:
    """A cache object with a dict of flags and a list of layers."""

    def __init__(self, n):
        self.is_updated = {}
        self.layers = [Layer() for _ in range(n)]
        self.order = []


class HoldsCache(torch.nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.cache = Cache(n)

    def forward(self, x):
        out = x
        for i, layer in enumerate(self.cache.layers):
            if self.cache.is_updated.get(i):
                keys = layer.keys  # eager's later calls: the cached keys
            else:
                keys = layer.update(self.proj(out))
                self.cache.is_updated[i] = True
            self.cache.order.append(i)
            out = out + keys.sum(-2, keepdim=True) * len(self.cache.order)
        return out, self.cache.is_updated[1], len(self.cache.layers[0].keys)


def _snapshot(model):
    cache = model.cache
    return (dict(cache.is_updated), list(cache.order),
            [(layer.keys, layer.is_initialized) for layer in cache.layers])


def test_a_cache_object_the_model_holds_is_its_state():
    torch.manual_seed(0)
    model = HoldsCache().eval()
    pristine = copy.deepcopy(model)
    x, other = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    before = _snapshot(model)
    with pytest.warns(StateWriteWarning, match="is_initialized"):
        program = unbroken.export(model, (x,))
    assert _snapshot(model) == before  # the model's object left as it was
    peer = torch.export.export(copy.deepcopy(pristine), (x,))
    for exported in (program, peer):  # eager's first call, on any input
        assert_bit_exact(exported.module()(x), copy.deepcopy(pristine)(x))
    assert_bit_exact(program.module()(other), copy.deepcopy(pristine)(other))


class SharedRegistry:
    entries = {}  # a class attribute: every instance's, not the model's


class WritesClassDict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.registry = SharedRegistry()

    def forward(self, x):
        self.registry.entries["seen"] = True
        return x + 1


_GLOBAL = Cache(1)


class WritesGlobal(torch.nn.Module):
    def forward(self, x):
        _GLOBAL.layers[0].is_initialized = True
        return x + 1


class WritesInBranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = Cache(1)

    def forward(self, x):
        def branch(v):
            self.cache.layers[0].is_initialized = True
            return v + 1
        return torch.cond(x.sum() > 0, branch, lambda v: v - 1, (x,))


class WritesThroughDict(torch.nn.Module):
    """``obj.__dict__[k] = v`` sets an attribute: the trace's copy of the dict would not."""

    def __init__(self):
        super().__init__()
        self.cache = Cache(1)

    def forward(self, x):
        self.cache.__dict__["extra"] = 2
        return x * self.cache.extra


@pytest.mark.parametrize("model, needle", [
    (WritesClassDict(), "self.registry.entries"), (WritesGlobal(), "Layer.is_initialized"),
    (WritesInBranch(), "torch.cond branch"), (WritesThroughDict(), "self.cache.__dict__")])
def test_state_that_is_not_the_models_alone_is_still_refused(model, needle):
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(model, (torch.randn(3),))
    assert info.value.code == "UB107" and needle in info.value.render(), info.value.render()
    assert SharedRegistry.entries == {} and not _GLOBAL.layers[0].is_initialized


@dataclasses.dataclass
class InputCache:
    keys: torch.Tensor


torch.export.register_dataclass(InputCache)


class WritesItsInput(torch.nn.Module):
    def forward(self, x, cache):
        cache.keys = cache.keys + x
        return x * cache.keys


def test_a_change_to_an_input_object_is_refused_where_torch_drops_it():
    x, cache = torch.randn(3), InputCache(torch.randn(3))
    keys = cache.keys
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(WritesItsInput(), (x, cache))
    assert info.value.code == "UB107" and "InputCache.keys" in info.value.render()
    assert cache.keys is keys
    # torch.export exports it; its program cannot replay the write to the caller's object
    program = torch.export.export(WritesItsInput(), (x, InputCache(keys)))
    given = InputCache(keys)
    program.module()(x, given)
    assert given.keys is keys


@dataclasses.dataclass
class Options:
    scale: float = 2.0


def _read_natively(x, options):
    return x * options.scale


class WritesThenCallsNative(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.options = Options()

    def forward(self, x):
        self.options.scale = 3.0
        return scale_natively(x, self.options)


@torch.compiler.allow_in_graph
def scale_natively(x, options):
    return _read_natively(x, options)


def test_native_code_never_sees_a_stale_object():
    """A leaf call reads the object itself, which the trace does not change: refused."""
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(WritesThenCallsNative(), (torch.randn(3),))
    assert info.value.code == "UB107" and "scale_natively" in info.value.render()


@pytest.mark.slow
def test_transformers_seq2seq_decoder_with_a_static_cache():
    """transformers' export wrapper for a T5 decoder: the ``EncoderDecoderCache`` it holds
    marks ``is_updated`` per layer and fills its cross-attention ``DynamicCache`` lazily."""
    transformers = pytest.importorskip("transformers")
    from transformers.integrations.executorch import (
        Seq2SeqLMDecoderExportableModuleWithStaticCache,
    )

    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                   num_heads=4, use_cache=True, decoder_start_token_id=0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    kwargs = {"decoder_input_ids": torch.tensor([[5]]),
              "encoder_hidden_states": torch.randn(1, 6, 32),
              "cache_position": torch.tensor([3])}
    torch.manual_seed(0)
    wrapper = Seq2SeqLMDecoderExportableModuleWithStaticCache(model, 8, 1)
    reference = copy.deepcopy(wrapper)
    with pytest.warns(StateWriteWarning):
        program = unbroken.export(wrapper, (), copy.deepcopy(kwargs))
    assert wrapper.cache.is_updated == reference.cache.is_updated
    with torch.no_grad():
        assert_bit_exact(program.module()(**copy.deepcopy(kwargs)), reference(**kwargs))


class AliasingConfig:
    """A config whose ``__setattr__``/``__getattribute__`` map an alias to the attribute it
    stands for (transformers' ``PretrainedConfig.attribute_map``)."""

    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 2

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class WritesItsConfig(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = AliasingConfig()

    def forward(self, x):
        self.config.hidden = 5  # through the class's __setattr__: sets `width`
        first = x * self.config.width + self.config.hidden
        object.__setattr__(self.config, "hidden", 7)  # past it: an attribute of its own
        return first, x * vars(AliasingConfig)["__getattribute__"](self.config, "hidden")


def test_a_held_objects_own_setattr_runs():
    x = torch.randn(3)
    model = WritesItsConfig()
    program = unbroken.export(model, (x,))
    assert vars(model.config) == {"width": 2}
    assert_bit_exact(program.module()(x), WritesItsConfig()(x))
