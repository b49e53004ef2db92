"""ir.autocast: the casts eager's autocast makes inside a ``torch.autocast`` region are
recorded, learned from the dispatcher (not a table), so the program computes what eager does
with no autocast at run time."""
import pytest
import torch
import torch.nn.functional as F

import unbroken


class Mixed(torch.nn.Module):
    """Ops of every autocast policy: lower precision (linear, matmul, conv, bmm inside einsum,
    sdpa), kept in fp32 (prod), promoted (cat of two dtypes), untouched (relu, add), plus a
    region nested inside with autocast off and a tensor leaving the region."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x, image):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.relu(self.lin(x))
            scores = torch.einsum("bi,bj->bij", h, x)
            attn = F.scaled_dot_product_attention(h[None], h[None], x[None])[0]
            both = torch.cat([h, x], dim=-1)
            product = torch.prod(x.abs() + 1, dim=-1)
            conv = self.conv(image)
            normed = self.norm(h)
            with torch.autocast("cpu", enabled=False):
                plain = x @ x.T
            inside = torch.is_autocast_enabled("cpu")
        return (h.float() + 1, scores, attn, both, product, conv, normed, plain,
                torch.tensor(inside))


def _inputs():
    torch.manual_seed(0)
    return torch.randn(5, 8), torch.randn(2, 3, 6, 6)


def test_a_region_computes_eagers_casts_bit_for_bit_with_gradients():
    """Refused before (UB110); torch.export keeps the region in a wrap_with_autocast
    operator. The casts are _to_copy nodes of the program; outputs, dtypes and parameter
    gradients equal eager's exactly."""
    model = Mixed()
    x, image = _inputs()
    ep = unbroken.export(model, (x, image))
    casts = [n for n in ep.graph.nodes if n.target is torch.ops.aten._to_copy.default]
    assert len(casts) >= 6
    want, got = model(x, image), ep.module()(x, image)
    assert [w.dtype for w in want] == [g.dtype for g in got]
    for index, (w, g) in enumerate(zip(want, got)):
        assert torch.equal(w, g), index
    grads = []
    for module in (model, ep.module()):
        module.zero_grad(set_to_none=True)
        sum(o.float().sum() for o in module(x, image)[:7]).backward()
        grads.append({n: p.grad for n, p in module.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        assert torch.equal(grads[0][name], grads[1][name]), name


def test_the_region_leaves_no_autocast_state_behind_on_success_or_failure():
    class Fails(torch.nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = x @ x
                if y.sum() > 0:  # a data-dependent branch: refused inside the region
                    return y
                return -y

    unbroken.export(Mixed(), _inputs())
    assert not torch.is_autocast_enabled("cpu")
    with pytest.raises(unbroken.UnbrokenError):
        unbroken.export(Fails(), (torch.randn(3, 3),))
    assert not torch.is_autocast_enabled("cpu")
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16  # the default, unchanged


def test_without_a_region_the_program_is_unchanged():
    model = torch.nn.Linear(4, 4)
    ep = unbroken.export(model, (torch.randn(2, 4),))
    assert not any(n.target is torch.ops.aten._to_copy.default for n in ep.graph.nodes)
