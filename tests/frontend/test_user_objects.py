"""User-defined Python objects inside forward(): instances created while tracing, user context
managers, generators — exported programs must match eager."""
import contextlib
import dataclasses

import pytest
import torch

import unbroken


def _check(model, *args):
    ep = unbroken.export(model, args)
    torch.testing.assert_close(ep.module()(*args), model(*args))
    return ep


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    shift: float = 1.0


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: torch.Tensor
    extra: int = 3


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor


torch.export.register_dataclass(Pair)


class Affine:
    def __init__(self, cfg):
        self.cfg = cfg
        self.calls = 0

    @property
    def slope(self):
        return self.cfg.scale * 2

    def __call__(self, x):
        self.calls += 1
        return x * self.slope + self.cfg.shift


def test_instances_created_in_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            affine = Affine(Config(scale=0.5))
            y = affine(x)
            y = affine(y)
            frozen = Frozen(y)
            return frozen.value * affine.calls + frozen.extra

    _check(M(), torch.randn(3, 4))


def test_registered_dataclass_output():
    class M(torch.nn.Module):
        def forward(self, x):
            return Pair(first=x.sin(), second=x.cos())

    ep = unbroken.export(M(), (torch.randn(2, 2),))
    x = torch.randn(2, 2)
    out = ep.module()(x)
    assert isinstance(out, Pair)
    torch.testing.assert_close(out.first, x.sin())
    torch.testing.assert_close(out.second, x.cos())


def test_unregistered_output_class_is_a_clear_usage_error():
    class M(torch.nn.Module):
        def forward(self, x):
            return Config(scale=x)

    with pytest.raises(unbroken.ExportUsageError, match="register_dataclass"):
        unbroken.export(M(), (torch.randn(2),))


class Scaled:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return 3.0

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


def test_user_context_managers():
    class M(torch.nn.Module):
        def forward(self, x):
            log = []
            with Scaled(log) as factor:
                y = x * factor
            with contextlib.suppress(ValueError):
                y = y + len(log)
            return y

    _check(M(), torch.randn(4))


def test_generators_and_generator_expressions():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

        def blocks(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                yield i, x

        def forward(self, x):
            outs = [y * i for i, y in self.blocks(x)]
            return sum(o.mean() for o in outs), max(o.shape[-1] for o in outs)

    _check(M(), torch.randn(2, 4))


def test_mutating_an_object_that_exists_outside_forward_is_refused():
    shared = Affine(Config())

    class M(torch.nn.Module):
        def forward(self, x):
            return shared(x)  # shared.calls += 1 writes state that outlives the call

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(M(), (torch.randn(2),))
    assert info.value.code == "UB107"


class _Policy(torch.nn.Module):
    def __init__(self, validate):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)
        self.validate = validate

    def forward(self, x, action):
        mean, log_std = self.lin(x).chunk(2, dim=-1)
        d = torch.distributions.Normal(mean, log_std.exp(), validate_args=self.validate)
        return d.log_prob(action) + d.entropy()


def test_torch_distributions_in_forward():
    """A torch.distributions object built from traced tensors: its __init__ ran natively on
    the bare meta tensors first and its argument validation read their data (UB999 "Cannot
    cast tensor(True) to number"). Built by a recorded leaf call it exports and matches eager;
    with validation on, the data-dependent check is a clean refusal (UB105)."""
    x, action = torch.randn(5, 4), torch.randn(5, 1)
    model = _Policy(validate=False)
    ep = unbroken.export(model, (x, action))
    torch.testing.assert_close(ep.module()(x, action), model(x, action))
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(_Policy(validate=True), (x, action))
    assert info.value.code == "UB105"
