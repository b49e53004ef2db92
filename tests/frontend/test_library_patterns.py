"""Patterns from real libraries (found exporting Hugging Face models): registries keyed by
modules, dict subclasses with their own methods, imports inside functions, global state set
and reset around a call, introspection, objects with container protocols."""
import contextvars
import functools
import importlib.metadata
import importlib.util
import inspect
import math
import re

import pytest
import torch
import torch.nn as nn

import unbroken
from tests.exactness import assert_bit_exact

REGISTRY: dict = {}


class Registry(dict):
    """Keys stored by class name: ``get`` must run this code, not dict.get."""

    def __setitem__(self, module, value):
        super().__setitem__(type(module).__name__, value)

    def get(self, module):
        return super().get(type(module).__name__) or {}


SETTINGS = Registry()


class Switch:
    """A set/reset global, like transformers' CompileableContextVar."""

    def __init__(self):
        self.value = None
        self.var = contextvars.ContextVar("switch", default=None)

    def set(self, value):
        self.value = value
        return "token"

    def reset(self, token):
        self.value = None


SWITCH = Switch()


class Bag:
    def __init__(self, items):
        self._items = list(items)

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __contains__(self, item):
        return item in self._items

    def __getitem__(self, index):
        return self._items[index]


BAG = Bag(["a", "b", "c"])


class Library(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        REGISTRY[self.lin] = 2.0     # a dict keyed by a module
        SETTINGS[self] = {"scale": 3.0}

    def helper(self, x, y=1):
        return x * y

    def forward(self, x):
        import math as m  # already imported: only a lookup

        from torch.nn import functional as F
        token = SWITCH.set("on")
        try:
            scale = SETTINGS.get(self)["scale"] * REGISTRY[self.lin]
            arity = len(inspect.signature(self.helper).parameters)
            hidden = F.relu(self.lin(x)) * scale * arity
            if callable(self.helper) and "b" in BAG and len(BAG) == 3:
                hidden = hidden + m.pi + sum(1 for _ in BAG) + len(BAG[1])
        finally:
            SWITCH.reset(token)
        return hidden


def test_library_patterns_export_and_match():
    model = Library()
    ep = unbroken.export(model, (torch.randn(2, 4),))
    x = torch.randn(2, 4)
    torch.testing.assert_close(ep.module()(x), model(x))
    assert SWITCH.value is None       # the real object was never changed


class LeavesStateChanged(nn.Module):
    def forward(self, x):
        SWITCH.set("left on")
        return x + 1


def test_a_global_change_not_undone_is_refused():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(LeavesStateChanged(), (torch.randn(2),))
    assert info.value.code == "UB107" and "Switch.value" in info.value.message
    assert SWITCH.value is None


def test_importing_a_module_for_the_first_time_is_refused():
    def f(x):
        import unbroken_not_a_module_xyz  # noqa: F401
        return x

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.randn(2),))
    assert info.value.code == "UB111"


_ = math  # imported at module level so that `import math as m` above is a lookup


class Config:
    """Attribute aliases through __getattribute__, like transformers' PretrainedConfig."""

    aliases = {"num_layers": "n_layer"}

    def __init__(self):
        self.n_layer = 3

    def __getattribute__(self, key):
        if key != "aliases" and key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        return super().__getattribute__(key)


CONFIG = Config()


class Output(dict):
    """A dict subclass that is also a dataclass-like object (transformers' ModelOutput)."""

    def __init__(self, logits=None, hidden=None):
        super().__init__()
        self.logits = logits
        self.hidden = hidden
        for key in ("logits", "hidden"):
            if getattr(self, key) is not None:
                self[key] = getattr(self, key)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


torch.utils._pytree.register_pytree_node(
    Output, lambda o: (list(o.values()), list(o.keys())),
    lambda values, keys: Output(**dict(zip(keys, values))))


class UsesConfig(nn.Module):
    def forward(self, x):
        CONFIG.is_causal = True            # set for the call ...
        try:
            depth = CONFIG.num_layers      # ... read through the alias ...
            out = Output(logits=x * depth)
            first, = out.to_tuple()
        finally:
            del CONFIG.is_causal           # ... and removed again: nothing left changed
        return Output(logits=first, hidden=x if "logits" in out else None)


def test_config_aliases_temporary_attributes_and_dict_outputs():
    model = UsesConfig()
    ep = unbroken.export(model, (torch.randn(2),))
    x = torch.randn(2)
    out, ref = ep.module()(x), model(x)
    assert type(out) is Output and list(out.keys()) == list(ref.keys()) == ["logits", "hidden"]
    torch.testing.assert_close(out["logits"], ref["logits"])
    assert not hasattr(CONFIG, "is_causal")


def _hugging_face_cases():
    """Small randomly initialised Hugging Face models (transformers is not a dependency: these
    run when it is installed, e.g. `pip install transformers` in .venv)."""
    try:
        import transformers as T
    except ImportError:
        return []
    text = lambda: torch.randint(0, 100, (2, 10))  # noqa: E731
    return [
        ("bert", lambda: T.BertModel(T.BertConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
            vocab_size=100)), text, "last_hidden_state"),
        ("gpt2", lambda: T.GPT2LMHeadModel(T.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64, use_cache=False)),
         text, "logits"),
        ("llama", lambda: T.LlamaForCausalLM(T.LlamaConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, vocab_size=100, use_cache=False)), text, "logits"),
        ("distilbert", lambda: T.DistilBertModel(T.DistilBertConfig(
            n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=100)), text,
         "last_hidden_state"),
        ("roberta", lambda: T.RobertaModel(T.RobertaConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
            vocab_size=100)), text, "last_hidden_state"),
        ("vit", lambda: T.ViTModel(T.ViTConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
            image_size=32, patch_size=8)), lambda: torch.randn(2, 3, 32, 32),
         "last_hidden_state"),
        ("t5_encoder", lambda: T.T5EncoderModel(T.T5Config(
            num_layers=2, d_model=32, d_kv=8, num_heads=2, d_ff=64, vocab_size=100)), text,
         "last_hidden_state"),
        ("deberta_v2", lambda: T.DebertaV2Model(T.DebertaV2Config(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
            vocab_size=100, max_position_embeddings=64, relative_attention=True,
            pos_att_type=["p2c", "c2p"], position_buckets=16)), text, "last_hidden_state"),
    ]


@pytest.mark.skipif(not _hugging_face_cases(), reason="transformers is not installed")
@pytest.mark.parametrize("name, make, inputs, key", _hugging_face_cases(),
                         ids=[c[0] for c in _hugging_face_cases()])
def test_hugging_face_models_when_installed(name, make, inputs, key):
    torch.manual_seed(0)
    model = make().eval()
    ep = unbroken.export(model, (inputs(),))
    fresh = inputs()
    with torch.no_grad():
        assert_bit_exact(ep.module()(fresh)[key], model(fresh)[key])


CALLS = []


@functools.lru_cache
def backend_available(name):
    """An environment probe, like transformers' is_torch_available(): cached, constant."""
    CALLS.append(name)
    found = importlib.util.find_spec(name) is not None
    return found and re.fullmatch(r"\d+\.\d+.*", importlib.metadata.version(name)) is not None


class Probe:
    def __init__(self):
        self.scale = 2.0


class Probing(nn.Module):
    """Wav2Vec2's encoder asks is_fsdp_managed_module(self), which probes installed packages
    (importlib.metadata, a version regex) and reads vars(module)."""

    def __init__(self):
        super().__init__()
        self.probe = Probe()

    def forward(self, x):
        if backend_available("torch") and "scale" in vars(self.probe):
            x = x * vars(self.probe)["scale"]
        return x + len(vars(self))


def test_environment_probes_and_vars_match_eager():
    x = torch.randn(3)
    ep = unbroken.export(Probing(), (x,))
    torch.testing.assert_close(ep.module()(x), Probing()(x))
    assert CALLS == ["torch"]  # called natively once (then cached), as eager does


def test_writes_through_vars_of_an_outside_object_are_refused():
    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.probe = Probe()

        def forward(self, x):
            vars(self.probe)["scale"] = 3.0
            return x

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Writes(), (torch.randn(2),))
    assert info.value.code == "UB107"


class Activation(nn.Module):
    """Like transformers' SiLUActivation: a stateless module a model builds in forward."""

    def forward(self, x):
        return x * torch.sigmoid(x)


class BuildsModules(nn.Module):
    def forward(self, x):
        return nn.Softmax(dim=-1)(x) + Activation()(x)


def test_stateless_module_made_in_forward_matches_eager():
    x = torch.randn(3, 4)
    ep = unbroken.export(BuildsModules(), (x,))
    torch.testing.assert_close(ep.module()(x), BuildsModules()(x), rtol=0, atol=0)


def test_module_with_weights_made_in_forward_is_refused():
    class BuildsLinear(nn.Module):
        def forward(self, x):
            return nn.Linear(4, 4)(x)

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(BuildsLinear(), (torch.randn(2, 4),))
    assert info.value.code == "UB108" and "anew on every call" in info.value.message
    assert "Create it in __init__" in str(info.value)


def test_signature_parameters_mapping_is_read():
    """LLaVA's output capturing reads inspect.signature(...).parameters (a mappingproxy)."""

    def helper(x, scale=2.0, *, shift=1.0):
        return x * scale + shift

    class ReadsSignature(nn.Module):
        def forward(self, x):
            params = inspect.signature(helper).parameters
            defaults = [p.default for p in params.values() if p.default is not p.empty]
            return helper(x, *defaults[:1]) + len(params) + ("shift" in params)

    x = torch.randn(3)
    ep = unbroken.export(ReadsSignature(), (x,))
    torch.testing.assert_close(ep.module()(x), ReadsSignature()(x), rtol=0, atol=0)


class AssumesConstant(nn.Module):
    """ExportDB's assume_constant_result: the decorator makes the result a program constant."""

    @torch._dynamo.assume_constant_result
    def get_item(self, y):
        return y.int().item()

    def forward(self, x, y):
        return x[: self.get_item(y)]


def test_assume_constant_result_is_honoured():
    x, y = torch.randn(5, 2), torch.tensor(4)
    ep = unbroken.export(AssumesConstant(), (x, y))
    assert torch.equal(ep.module()(x, y), AssumesConstant()(x, y))
    slices = [n for n in ep.graph.nodes if "slice" in str(n.target)]
    assert slices and slices[0].args[-1] == 4  # the constant, not a data-dependent size


def test_assume_constant_result_on_a_computed_value_is_refused():
    class Computed(AssumesConstant):
        def forward(self, x, y):
            return x[: self.get_item(y + 1)]

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Computed(), (torch.randn(5, 2), torch.tensor(3)))
    assert info.value.code == "UB105" and "assume_constant_result" in info.value.message
