"""Values that only tensor data decide: .item() and data-dependent sizes are unbacked symbols;
torch._check facts about them become runtime asserts; what the facts cannot decide is refused
with a hint. Examples from the seed tutorial's data-dependent section."""
import io
import warnings

import pytest
import torch
import torch.nn as nn

import unbroken

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


class IndexByItem(nn.Module):
    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        torch._check(a < y.shape[0])
        return y[a]


def test_seed_item_with_checks_exports_with_runtime_asserts():
    ep = unbroken.export(IndexByItem(), (torch.tensor(32), torch.randn(60)))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten._assert_scalar.default) == 2
    assert [(r.lower, r.upper) for r in ep.range_constraints.values()] == [(0, 59)]
    y = torch.randn(60)
    for a in (0, 7, 59):
        torch.testing.assert_close(ep.module()(torch.tensor(a), y), y[a])
    with pytest.raises(RuntimeError, match="x.item\\(\\) >= 0"):
        ep.module()(torch.tensor(-3), y)  # the program checks like eager's torch._check


class Repeat(nn.Module):
    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        b = y.unsqueeze(0).repeat(a, 1)
        return b + a


def test_seed_repeat_by_item():
    ep = unbroken.export(Repeat(), (torch.tensor(32), torch.randn(60)))
    y = torch.randn(60)
    for a in (0, 3, 40):
        torch.testing.assert_close(ep.module()(torch.tensor(a), y), Repeat()(torch.tensor(a), y))


def test_data_dependent_output_sizes():
    class M(nn.Module):
        def forward(self, x):
            positive = x[x > 0]
            where = x.nonzero()
            picked = torch.masked_select(x, x < -1)
            return positive.sum(), where.float().sum(0), picked.sum(), positive.shape[0] + 0.0

    ep = unbroken.export(M(), (torch.randn(4, 5),))
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(4, 5)
        torch.testing.assert_close(ep.module()(x), M()(x))


class BranchOnItem(nn.Module):
    def forward(self, x):
        s = x.sum().item()
        if s > 0:
            return x * 2
        return x


def test_a_branch_on_a_data_dependent_value_is_refused_with_a_hint():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(BranchOnItem(), (torch.randn(3),))
    error = info.value
    assert error.code == "UB105"
    assert error.frames[-1].source == "if s > 0:"
    assert "torch._check" in error.render() or "torch.cond" in error.render()


class SizeFromData(torch.nn.Module):
    def forward(self, x, counts):
        n = counts.sum().item()
        torch._check_is_size(n)
        torch._check(n <= x.shape[0])
        return x[:n] + 1


def test_check_is_size_means_nonnegative():
    """torch._check_is_size(n) asserts n >= 0 (it was mapped to torch._check(n), which failed
    with UB120 "cond must be a bool"); torch.export exports the same program."""
    model = SizeFromData()
    x, counts = torch.randn(4, 2), torch.tensor([1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates _check_is_size
        ep = unbroken.export(model, (x, counts))
        torch.export.export(model, (x, counts))  # the peer accepts it too
    torch.testing.assert_close(ep.module()(x, counts), model(x, counts))
    torch.testing.assert_close(ep.module()(x, torch.tensor([0, 0])), x[:0] + 1)
    with pytest.raises(RuntimeError, match=r"Runtime assertion failed .* >= 0"):
        ep.module()(x, torch.tensor([-2, 0]))  # n >= 0 is checked at run time


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch deprecates _check_is_size
def test_check_is_size_of_a_negative_constant_fails_like_eager():
    def negative(x):
        torch._check_is_size(x.shape[0] - 5)
        return x

    with pytest.raises(RuntimeError):
        negative(torch.randn(3))
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(negative, (torch.randn(3),))
    assert info.value.code == "UB104"


class LoopOverHits(nn.Module):
    """Switch-Transformers' expert loop: one iteration per row of a ``nonzero()`` result."""

    def forward(self, x):
        total = x.sum(0)
        for hit in (x > 0).nonzero():  # the loop
            total = total + hit
        return total


def test_iterating_rows_that_tensor_data_counts_is_refused_at_the_loop():
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(LoopOverHits(), (torch.randn(4, 2),))
    error = info.value
    assert error.code == "UB105" and "number of rows depends on tensor data" in str(error)
    assert error.frames[-1].source.strip().endswith("# the loop")
    assert "nonzero() count" in error.details and "range(n)" in error.hint


UNIQUE_CASES = {
    "values": lambda x: torch.unique(x) * 2,
    "inverse_and_counts": lambda x: torch.unique(x, return_inverse=True, return_counts=True),
    "count_as_size": lambda x: torch.arange(torch.unique(x).numel()) + x.shape[0],
    "dim": lambda x: torch.unique(x.view(-1, 2), dim=0, return_counts=True),
    "consecutive": lambda x: torch.unique_consecutive(x, return_inverse=True),
    "consecutive_dim": lambda x: torch.unique_consecutive(x.view(2, -1), dim=1),
    "one_hot_against_values": lambda x: x[:, None] == torch.unique(x)[None, :],
    "repeat_interleave": lambda x: torch.repeat_interleave(x * 10, x),
    "repeat_interleave_indices": lambda x: torch.repeat_interleave(x).float().mean(),
    "bincount": lambda x: torch.bincount(x),
    "bincount_minlength_weights": lambda x: torch.bincount(x, x.float() / 3, minlength=9),
    "bincount_half_weights_sum_in_double": lambda x: torch.bincount(x, x.half()),
    "mask_over_a_later_dim": lambda x: x.view(2, 3)[:, x.view(2, 3)[0] > 1] * 2,
    "mask_after_an_ellipsis": lambda x: x.view(3, 2)[..., x[:2] > 1],
}


@pytest.mark.parametrize("name", list(UNIQUE_CASES))
def test_unique_counts_are_unbacked_sizes(name):
    """torch.unique and its relatives (bincount, repeat_interleave, a boolean mask over any
    dims): the number of values kept is a size only tensor data decides (an unbacked symbol,
    as for nonzero); the program matches eager on inputs with other numbers of distinct
    values, after save/load and after run_decompositions()."""
    fn = UNIQUE_CASES[name]
    example = torch.tensor([3, 1, 3, 2, 1, 2])
    ep = unbroken.export(fn, (example,))  # a function: unbroken takes it as is
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    programs = (ep, unbroken.load(buffer), ep.run_decompositions())
    for x in (example, torch.tensor([5, 5, 4, 4, 7, 5]), torch.tensor([1, 1, 1, 1, 1, 1])):
        want = torch.utils._pytree.tree_leaves(fn(x))
        for program in programs:
            got = torch.utils._pytree.tree_leaves(program.module()(x))
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


def test_bincount_minlength_read_from_data_bounds_its_length():
    def counts(x, lengths):
        n, minlength = lengths.tolist()
        torch._check_is_size(n, max=x.shape[0])
        torch._check_is_size(minlength)
        return torch.bincount(x[:n], minlength=minlength)

    x, lengths = torch.tensor([0, 2, 2, 5, 1]), torch.tensor([3, 8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates _check_is_size
        ep = unbroken.export(counts, (x, lengths))
    for other in (lengths, torch.tensor([5, 2]), torch.tensor([0, 0])):
        assert torch.equal(ep.module()(x, other), counts(x, other))


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch deprecates _check_is_size
def test_check_is_size_max_bounds_the_value():
    """torch._check_is_size(n, max=m): 0 <= n <= m, so x.narrow(1, 0, n) needs no guard;
    a constant outside the bound fails like eager."""
    def narrow(x, n):
        n = n.item()
        torch._check_is_size(n, max=x.size(1))
        return x.narrow(1, 0, n)

    x = torch.randn(3, 7)
    ep = unbroken.export(narrow, (x, torch.tensor(5)))
    for n in (0, 2, 7):
        assert torch.equal(ep.module()(x, torch.tensor(n)), narrow(x, torch.tensor(n)))
    with pytest.raises(RuntimeError):
        ep.module()(x, torch.tensor(8))

    def constant(x):
        torch._check_is_size(9, max=x.size(1))
        return x

    with pytest.raises(RuntimeError):
        constant(x)
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(constant, (x,))
    assert info.value.code == "UB104"


def test_bincount_minlength_is_the_lower_bound_of_its_length():
    ep = unbroken.export(lambda x: torch.bincount(x, minlength=8), (torch.tensor([0, 2, 2]),))
    (length,) = ep.range_constraints.values()
    assert length.lower == 8


def test_unique_of_an_empty_input_keeps_no_symbol():
    empty = torch.zeros(0, 3, dtype=torch.long)
    ep = unbroken.export(lambda x: torch.unique(x, return_inverse=True), (empty,))
    assert not ep.range_constraints
    values, inverse = ep.module()(empty)
    assert values.shape == (0,) and inverse.shape == (0, 3)


# --- ir.data_dependent: views an .item() index positions ----------------------------------
class IndexByItemUnchecked(torch.nn.Module):
    """``y[x.item()]`` on either dim, the method form, and a write through such a view."""

    def forward(self, x, y):
        i = x.item()
        picked = (y[i], y[:, i], y.select(0, i) + 1)
        y[i].mul_(2)
        return (*picked, y * 1)


def _assert_same_as_eager(model, ep, index, y) -> None:
    """The program's outputs and its write into ``y`` are eager's, bit for bit."""
    y_eager, y_program = y.clone(), y.clone()
    want = model(index, y_eager)
    got = ep.module()(index, y_program)
    assert all(torch.equal(g, w) for g, w in zip(got, want)), index
    assert torch.equal(y_program, y_eager), index


def test_indexing_with_an_item_value_exports_and_matches_eager_at_every_index():
    """torch's fake select kernel keeps an unbacked index without a guard; ours asked for its
    sign and bounds (UB105). Every index in range, negative ones included, matches eager,
    the write into the input too; one out of range is eager's IndexError at run time."""
    model = IndexByItemUnchecked()
    ep = unbroken.export(model, (torch.tensor(2), torch.randn(5, 5)))
    assert sum(n.target is torch.ops.aten.select.int for n in ep.graph.nodes) >= 3
    for index in range(-5, 5):
        _assert_same_as_eager(model, ep, torch.tensor(index), torch.randn(5, 5))
    for index in (5, -6):
        with pytest.raises(IndexError, match="out of range"):
            ep.module()(torch.tensor(index), torch.randn(5, 5))


class CheckedOutOfRange(torch.nn.Module):
    def forward(self, x, y):
        i = x.item()
        torch._check(i >= 7)
        return y[i]


def test_an_index_the_ranges_prove_out_of_bounds_is_eagers_index_error():
    with pytest.raises(unbroken.UnbrokenError, match="out of range"):
        unbroken.export(CheckedOutOfRange(), (torch.tensor(7), torch.randn(5, 5)))


# --- ir.data_dependent: slices an .item() / .tolist() bound positions ------------------------
class SliceByList(torch.nn.Module):
    """The seed tutorial's ``.tolist()`` bounds slicing a tensor (both ends unknown): a write
    through a slice of the input, then a slice whose length is used as a size."""

    def forward(self, bounds, y):
        a, b = bounds.tolist()
        y[a:].add_(1)
        part = y[a:b]
        return part * 2, torch.zeros(part.shape[0]) + part.shape[0], y[:b, a:] + 0


class SliceChecked(torch.nn.Module):
    """A start known non-negative (``torch._check``): the storage offset is computed, only the
    length is read at run time; a narrow and a step of 2 too."""

    def forward(self, n, y):
        k = n.item()
        torch._check(k >= 0)
        return y[k:].sum(0), y[: k + 1 : 2] * 1, y.narrow(0, 0, 2)[k % 2 :]


BOUNDS = [(1, 4), (-3, 5), (4, 1), (2, -1), (0, 100), (-100, 2), (6, 6), (0, 0), (-1, 6)]


def test_slicing_with_bounds_from_tolist_matches_eager_at_every_bound():
    """torch's fake slice kernel gives an unknown bound a fresh length; our meta kernel asked
    for its sign (UB105). Every pair of bounds, negative, reversed and out of range ones
    included, matches eager, the write into the input too."""
    model = SliceByList()
    ep = unbroken.export(model, (torch.tensor([1, 4]), torch.randn(6, 6)))
    assert any(n.target is torch.ops.aten.slice.Tensor for n in ep.graph.nodes)
    for bounds in BOUNDS:
        _assert_same_as_eager(model, ep, torch.tensor(bounds), torch.randn(6, 6))


def test_a_slice_from_a_checked_start_matches_eager():
    model = SliceChecked()
    ep = unbroken.export(model, (torch.tensor(3), torch.randn(6, 3)))
    for k in (0, 1, 3, 5, 6, 100):
        args = (torch.tensor(k), torch.randn(6, 3))
        got, want = ep.module()(*args), model(*args)
        assert all(torch.equal(g, w) for g, w in zip(got, want)), k
    with pytest.raises(RuntimeError, match="n.item\\(\\) >= 0"):
        ep.module()(torch.tensor(-1), torch.randn(6, 3))
