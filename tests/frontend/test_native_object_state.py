"""Objects created in forward() whose class derives from a PyTorch class written in Python
(``torch.distributions``' ``Distribution``, ``Transform``): the torch methods run as leaf calls
on the object itself, and what they write to it is the object's state afterwards
(``variables.objects.NewObjectVariable.native``, ``TraceContext.native_objects``); a torch
method or class given an object that holds a traced function is interpreted instead of called
natively. Every export here is compared bit for bit with eager."""
from __future__ import annotations

import functools
import importlib.util

import pytest
import torch
from torch.distributions import Distribution, Independent, Normal, Transform, constraints

import unbroken


def _exact(model, *args):
    ep = unbroken.export(model, args)
    expected, got = model(*args), ep.module()(*args)
    assert torch.equal(got, expected), (got, expected)
    return ep


class _DiagNormal(Independent):
    """zuko's DiagNormal: a custom __init__, so expand() passes an instance made with
    ``__new__`` to the torch base's expand, which fills it natively."""

    def __init__(self, loc, scale):
        super().__init__(Normal(loc, scale, validate_args=False), 1, validate_args=False)

    def expand(self, batch_shape, new=None):
        new = self._get_checked_instance(_DiagNormal, new)
        return super().expand(batch_shape, new)


class _Expanded(torch.nn.Module):
    def forward(self, x, c):
        d = _DiagNormal(c, torch.ones_like(c)).expand(c.shape[:-1])
        return d.log_prob(x) + d.base_dist.scale.sum(-1)


def test_torch_base_init_writes_are_the_objects_state():
    """Independent.__init__ (a leaf call) sets base_dist on the object made in forward();
    expand() on an instance from ``self.__new__(type(self))`` reads it (UB999 before:
    "'_DiagNormal' object has no attribute 'base_dist'")."""
    _exact(_Expanded(), torch.randn(6, 4), torch.randn(6, 4))


class _Shifted(Normal):
    def __init__(self, loc):
        super().__init__(loc, torch.ones_like(loc), validate_args=False)


class _WriteAfterNative(torch.nn.Module):
    def forward(self, x):
        d = _Shifted(x)
        d.loc = d.loc * 2  # the trace's write after the torch __init__ ran natively
        d.tag = "kept"
        return d.log_prob(x * 3) + (1.0 if d.tag == "kept" else 0.0)


def test_trace_write_is_seen_by_a_later_native_method():
    """A write by the program to an object torch code already holds goes through to it: the
    native log_prob reads the new loc."""
    _exact(_WriteAfterNative(), torch.randn(5))


class _Identity(torch.nn.Module):
    def forward(self, x):
        d = _Shifted(x)
        same = d._get_checked_instance(_Shifted, d)  # torch returns its argument
        same.extra = x + 1
        return d.extra * (2.0 if same is d else 3.0)


def test_a_leaf_returning_the_object_gives_back_its_tracker():
    _exact(_Identity(), torch.randn(3))


class _Affine(Transform):
    """A Transform whose _call uses a traced callable (zuko's AutoregressiveTransform holds
    ``partial(self.meta, context)``): torch's ``__call__``, ``inv`` and ``_InverseTransform``
    cannot be handed the object natively and are interpreted."""

    domain = constraints.real
    codomain = constraints.real
    bijective = True

    def __init__(self, shift):
        super().__init__()
        self.shift = shift

    def _call(self, x):
        return x * 2 + self.shift(x)

    def _inverse(self, y):
        return (y - self.shift(y)) / 2

    def log_abs_det_jacobian(self, x, y):
        return torch.full_like(x, 2.0).log()


class _Flow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def offset(self, context, x):
        return self.lin(context).tanh()

    def forward(self, x, context):
        t = _Affine(functools.partial(self.offset, context))
        y = t(x)
        return y + t.inv(y) + t.log_abs_det_jacobian(x, y)


def test_torch_methods_are_interpreted_when_the_object_holds_traced_code():
    _exact(_Flow(), torch.randn(3, 4), torch.randn(3, 4))


class _Slotted(Distribution):
    __slots__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale
        super().__init__(validate_args=False)


class _SlotsAndDeletes(torch.nn.Module):
    def forward(self, x):
        d = _Slotted(x * 2)
        del d._validate_args  # set natively by Distribution.__init__, deleted by the program
        gone = not hasattr(d, "_validate_args")
        return d.scale + (1.0 if gone else 0.0) + len(d.batch_shape)


def test_slots_and_deletes_of_natively_written_attributes():
    _exact(_SlotsAndDeletes(), torch.randn(3))


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("zuko") is None, reason="zuko not installed")
@pytest.mark.parametrize("kind", ["MAF", "NSF"])
def test_zuko_flow_log_prob_and_inverse(kind):
    """The real library: zuko's conditional flows, ``flow(c).log_prob(x)`` and the inverse
    pass ``flow(c).transform.inv(z)`` that sampling runs."""
    import zuko

    Distribution.set_default_validate_args(False)  # zuko sets it at import; keep it set
    torch.manual_seed(0)
    flow = getattr(zuko.flows, kind)(features=4, context=3, transforms=2,
                                     hidden_features=(32, 32))

    class LogProb(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flow = flow

        def forward(self, x, c):
            return self.flow(c).log_prob(x)

    class Inverse(LogProb):
        def forward(self, z, c):
            return self.flow(c).transform.inv(z)

    x, c = torch.randn(8, 4), torch.randn(8, 3)
    _exact(LogProb(), x, c)
    _exact(Inverse(), x, c)


class _Listed(Distribution):
    def __init__(self, parts):
        self.parts = parts
        super().__init__(validate_args=False)


def _append_natively(d, x):
    d.parts.append(x)  # a torch function would change the list the trace holds


class _NativeListWrite(torch.nn.Module):
    def forward(self, x):
        d = _Listed([x])  # torch's __init__ was handed the object (and its list)
        d.parts.append(x * 2)
        return torch.stack(d.parts)


def test_a_list_attribute_stays_the_traces_after_a_native_call():
    """The trace's own appends after the object went through torch's __init__ are kept."""
    _exact(_NativeListWrite(), torch.randn(3))


def test_a_list_changed_in_place_by_native_code_is_refused(monkeypatch):
    """Native code changing a list the trace models (not read back): refused, never lost."""
    # a function of torch's is called as a leaf
    monkeypatch.setattr(_append_natively, "__module__", "torch.distributions.fake")

    class Model(torch.nn.Module):
        def forward(self, x):
            d = _Listed([x])
            _append_natively(d, x * 2)
            return torch.stack(d.parts)

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Model(), (torch.randn(3),))
    assert info.value.code == "UB107" and "in place" in str(info.value)


def test_dynamic_batch_with_size_one_admitted():
    """A dim declared min=1: leaf calls on the object are re-run at size 1 (the size-1 audit);
    what those dry runs write to it is not the program's state."""
    from torch.export import Dim

    batch = Dim("batch", min=1)
    model = _Expanded()
    x, c = torch.randn(6, 4), torch.randn(6, 4)
    ep = unbroken.export(model, (x, c), dynamic_shapes={"x": {0: batch}, "c": {0: batch}})
    for n in (1, 3, 6):
        x, c = torch.randn(n, 4), torch.randn(n, 4)
        assert torch.equal(ep.module()(x, c), model(x, c))
