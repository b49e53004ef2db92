"""itertools combinators over traced values (frontend.builtins ``_COMBINATORS``): CPython's
own functions arrange the items' trackers, so the program holds eager's arrangement."""
import itertools
import sys

import pytest
import torch

import unbroken


class Arranges(torch.nn.Module):
    def forward(self, xs, ys):
        out = []
        for a, b in itertools.zip_longest(xs, ys, fillvalue=None):
            out.append(a if b is None else a + b)
        for a, b in itertools.zip_longest(xs, ys):  # the default filler
            out.append(a if b is None else a * b)
        for a, b in itertools.product(xs[:2], [1, 2]):
            out.append(a * b)
        for a, b in itertools.combinations(xs, 2):
            out.append(a - b)
        for a, b in itertools.permutations(ys):
            out.append(a / (b.abs() + 1))
        out += [a * b for a, b in itertools.combinations_with_replacement(ys, 2)]
        out += [p[0] * p[1] for p in itertools.pairwise(xs)]
        out += list(itertools.islice(xs, 1, None, 2))
        out += list(itertools.compress(xs, [1, 0, 1]))
        if sys.version_info >= (3, 12):
            out += [sum(batch) for batch in itertools.batched(xs, 2)]
        return out


def test_combinators_arrange_traced_values_as_eager():
    """zip_longest was UB108 ('constructing an instance of zip_longest'): transformers'
    executorch cache unflattening calls it on the cache's tensors."""
    xs, ys = [torch.randn(2) for _ in range(3)], [torch.randn(2) for _ in range(2)]
    got, want = unbroken.export(Arranges(), (xs, ys)).module()(xs, ys), Arranges()(xs, ys)
    assert len(got) == len(want)
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_a_count_only_tensor_data_knows_is_refused_at_its_line():
    class ByData(torch.nn.Module):
        def forward(self, xs, n):
            return list(itertools.combinations(xs, n.item()))

    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(ByData(), ([torch.randn(2)] * 3, torch.tensor(2)))
    assert "combinations" in str(info.value) and "n.item()" in str(info.value)
