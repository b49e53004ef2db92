"""The program's fake values: what torch's passes read from each node (``meta["val"]`` and
``meta["tensor_meta"]``) is what torch would compute from them."""
import pytest
import sympy
import torch
from torch import nn
from torch.export import Dim
from torch.fx.passes.shape_prop import _extract_tensor_metadata
from torch.utils._pytree import tree_leaves

import unbroken
from unbroken.ir.fake import hints_of

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


class Layouts(nn.Module):
    """Contiguous, transposed, channels-last and expanded values side by side."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, tokens):
        y = self.conv(x.contiguous(memory_format=torch.channels_last))
        t = tokens.transpose(0, 1)
        return y.relu(), t * 2, t.contiguous(), tokens[:, :1].expand_as(tokens) + 1


ARGS = (torch.randn(2, 3, 8, 8), torch.randn(5, 6))


@pytest.mark.parametrize("spec", [None, ({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},
                                         {0: Dim.AUTO, 1: Dim.AUTO})], ids=["static", "auto"])
def test_tensor_meta_is_torchs_for_every_node(spec):
    ep = unbroken.export(Layouts(), ARGS, dynamic_shapes=spec)
    checked = 0
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            assert node.meta["tensor_meta"] == _extract_tensor_metadata(val), node
            checked += 1
    formats = {n.meta["tensor_meta"].memory_format for n in ep.graph.nodes
               if "tensor_meta" in n.meta}
    assert checked > 8 and torch.channels_last in formats and None in formats


def test_fake_values_are_distinct_and_not_views():
    """Each node has its own fake tensor (torch's passes find aliasing by storage)."""
    model = Layouts()
    ep = unbroken.export(model, ARGS, dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}))
    vals = [n.meta["val"] for n in ep.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)]
    assert len({id(v) for v in vals}) == len(vals)
    placeholders = [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"]
    storages = {p.untyped_storage()._cdata for p in placeholders}
    assert len(storages) == len(placeholders)
    assert not any(p._is_view() for p in placeholders)
    want, got = model(*ARGS), ep.module()(*ARGS)
    for a, b in zip(tree_leaves(got), tree_leaves(want)):
        torch.testing.assert_close(a, b)


def test_symbolic_fake_values_have_storages_of_their_own_sized_as_torchs():
    """A value with symbolic sizes is built on a storage of its own (not by torch's
    ``empty_strided``): its size in bytes is the one torch derives for that layout, it is no
    view, and no two values share a storage."""
    ep = unbroken.export(Layouts(), ARGS, dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO},
                                                          {0: Dim.AUTO, 1: Dim.AUTO}))
    vals = [n.meta["val"] for n in ep.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)]
    symbolic = [v for v in vals if any(isinstance(s, torch.SymInt) for s in v.shape)]
    assert len(symbolic) > 6
    shape_env = symbolic[0].shape[0].node.shape_env
    with shape_env.suppress_guards():
        for val in symbolic:
            torchs = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                         device="meta").untyped_storage().nbytes()
            ours = val.untyped_storage().nbytes()
            assert sympy.simplify(sympy.sympify(ours) - sympy.sympify(torchs)) == 0, val
            assert not val._is_view() and val._base is None
    assert len({v.untyped_storage()._cdata for v in vals}) == len(vals)


def test_hints_of_a_graph_with_only_data_dependent_sizes_warns_nothing(recwarn):
    class Nonzero(nn.Module):
        def forward(self, x):
            return x.nonzero()

    ep = unbroken.export(Nonzero(), (torch.tensor([0, 1, 1]),))
    symbols = set(ep.range_constraints)
    assert hints_of(ep.graph, symbols) == dict.fromkeys(symbols)
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def test_a_program_rebuilt_with_a_wider_range_keeps_its_values_and_forgets_old_answers():
    """``from_parts`` of a program's own parts keeps its fake values (building them again is
    most of a build); with a wider range (what the size-1 admission does) the values' ShapeEnv
    takes it, and what that env proved under the narrower one (``s0 != 1`` for ``s0 >= 2``)
    is no longer answered: AOTInductor and torch's passes ask that env."""
    import dataclasses

    import sympy
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    from unbroken.program import ExportedProgram
    from unbroken.symbolic.ranges import ValueRange

    ep = unbroken.export(Layouts(), ARGS, dynamic_shapes=({0: Dim("b", min=2)}, None))
    (symbol, value_range), = ep.range_constraints.items()
    assert value_range.lower == 2
    vals = {n.name: n.meta["val"] for n in ep.graph.nodes if "val" in n.meta}
    shape_env = next(v for v in vals.values() if isinstance(v, torch.Tensor)).fake_mode.shape_env
    assert statically_known_true(shape_env.create_symboolnode(sympy.Ne(symbol, 1)))

    parts = ep.parts()
    widened = ExportedProgram.from_parts(dataclasses.replace(
        parts, range_constraints={symbol: ValueRange(1, None)}))
    assert widened.range_constraints[symbol].lower == 1
    assert all(n.meta["val"] is vals[n.name] for n in widened.graph.nodes if n.name in vals)
    assert shape_env.var_to_range[symbol].lower == 1
    assert not statically_known_true(shape_env.create_symboolnode(sympy.Ne(symbol, 1)))
    assert statically_known_true(shape_env.create_symboolnode(sympy.Ge(symbol, 1)))


# sizes and strides: contiguous, channels-last (2-d and 3-d), transposed, size-1 dims with
# any stride, empty, expanded (stride 0), a scalar
_STATIC_LAYOUTS = [
    ((2, 3, 4, 5), (60, 20, 5, 1)), ((2, 3, 4, 5), (60, 1, 15, 3)),
    ((2, 3, 2, 4, 5), (120, 1, 60, 15, 3)), ((4, 6), (1, 4)), ((1, 3, 1, 1), (7, 1, 9, 5)),
    ((1, 1, 4, 4), (16, 1, 4, 1)), ((0, 3, 4, 5), (60, 20, 5, 1)), ((2, 3, 4, 5), (0, 0, 5, 1)),
    ((), ()), ((3, 1, 1, 2), (2, 1, 2, 1)), ((2, 1, 4, 5), (20, 1, 5, 1)),
]


def test_static_memory_formats_are_torchs_in_every_program_of_a_process(monkeypatch):
    """The memory format of a static layout is computed once per process (a function of the
    sizes and strides): each program's ``tensor_meta`` is still torch's, field for field."""
    from unbroken.ir import fake as F

    monkeypatch.setattr(F, "_STATIC_FORMATS", {})
    first = F._Converter(F.torch_shape_env({}, {}), {})
    metas = [torch.empty_strided(size, stride, device="meta") for size, stride in _STATIC_LAYOUTS]
    for meta in metas:
        val = first.value(meta, torch.device("cpu"))
        assert first.tensor_meta(val) == _extract_tensor_metadata(val), meta.shape
    assert len(F._STATIC_FORMATS) == len(_STATIC_LAYOUTS)
    formats = set(F._STATIC_FORMATS.values())
    assert {torch.contiguous_format, torch.channels_last, torch.channels_last_3d, None} <= formats

    # a second program's converter asks torch nothing, and gets the same answers
    second = F._Converter(F.torch_shape_env({}, {}), {})
    vals = [second.value(meta, torch.device("cpu")) for meta in metas]
    want = [_extract_tensor_metadata(v) for v in vals]
    monkeypatch.setattr(F, "extract_tensor_metadata", None)  # calling it would fail
    assert [second.tensor_meta(v) for v in vals] == want


def test_symbolic_memory_formats_are_torchs_in_every_program_of_a_process(monkeypatch):
    """The memory format of a symbolic layout is computed once per process for the ranges
    and example values of its symbols (torch answers its contiguity questions from both: a
    transposed ``(s0, s1)`` is contiguous where ``s0`` is 1 and may be); every program's
    ``tensor_meta`` is still torch's, and a program whose ranges or example values differ
    gets its own answer."""
    from unbroken.ir import fake as F
    from unbroken.symbolic.env import ShapeEnvironment

    monkeypatch.setattr(F, "_SYMBOLIC_FORMATS", {})
    real = F.extract_tensor_metadata
    asked = []

    def counting(value):
        asked.append(value)
        return real(value)

    monkeypatch.setattr(F, "extract_tensor_metadata", counting)
    found = []
    for lower, hint in ((1, 1), (1, 3), (2, 3), (1, 1), (1, 3), (2, 3)):
        env = ShapeEnvironment()
        a, b = env.create_symbol("", hint, lower=lower), env.create_symbol("", 4)
        sa, sb = env.symint(a), env.symint(b)
        metas = [torch.empty_strided([sa, sb], [1, sa], device="meta"),
                 torch.empty_strided([sa, 3, sb, 5], [15 * sb, 1, 15, 3], device="meta"),
                 torch.empty([sa, sb], device="meta")]
        converter = F._Converter(F.torch_shape_env({s: env.var_ranges[s] for s in (a, b)},
                                                   {a: hint, b: 4}), {a: hint, b: 4})
        with converter.env.suppress_guards():
            values = [converter.value(meta, torch.device("cpu")) for meta in metas]
            metadata = [converter.tensor_meta(v) for v in values]
            assert metadata == [_extract_tensor_metadata(v) for v in values]
        found.append(tuple(m.memory_format for m in metadata))
    assert found[:3] == found[3:]
    assert found[0][0] is torch.contiguous_format and found[1][0] is None is found[2][0]
    assert {f[1] for f in found} == {torch.channels_last}
    assert len(asked) == 9  # the last three programs asked torch nothing


def test_the_static_format_table_is_bounded(monkeypatch):
    from unbroken.ir import fake as F

    monkeypatch.setattr(F, "_STATIC_FORMATS", {})
    monkeypatch.setattr(F, "STATIC_FORMATS_MAX", 3)
    converter = F._Converter(F.torch_shape_env({}, {}), {})
    for n in range(1, 8):
        val = converter.value(torch.empty(n, 2, device="meta"), torch.device("cpu"))
        assert converter.tensor_meta(val).memory_format is torch.contiguous_format
        assert len(F._STATIC_FORMATS) <= 3
