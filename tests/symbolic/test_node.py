"""SymNode backs torch.SymInt: arithmetic matches Python, meta kernels compute symbolic
shapes, and decisions record guards."""
import dataclasses
import operator

import pytest
import sympy
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dispatch.python import enable_python_dispatcher

from unbroken.symbolic import expr as E
from unbroken.symbolic import node as node_module
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.node import SymNode, sym_expr
from unbroken.symbolic.ranges import ValueRange

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def _env(*hints):
    env = ShapeEnvironment()
    symbols = [env.create_symbol(f"d{i}", h, source=f"x.shape[{i}]") for i, h in enumerate(hints)]
    return env, symbols


INT_OPS = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
           lambda a, b: torch.sym_max(a, b), lambda a, b: torch.sym_min(a, b),
           lambda a, b: a ** 2 + b]
CMP_OPS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(2, 40), st.integers(-7, 7).filter(bool),
       st.integers(2, 40), st.integers(2, 40))
def test_arithmetic_matches_concrete_evaluation(h0, h1, c, v0, v1):
    env, (s0, s1) = _env(h0, h1)
    a, b = env.symint(s0), env.symint(s1)
    for op in INT_OPS:
        for x, y, cx, cy in ((a, b, h0, h1), (a, c, h0, c), (c, b, c, h1)):
            result = op(x, y)
            expected = op(cx, cy)
            if isinstance(result, int):
                assert result == expected
                continue
            assert result.node.hint == expected
            # the symbolic result agrees with Python at other values too
            assert E.evaluate_at(sym_expr(result), {s0: v0, s1: v1}) == op(
                *(v0 if x is a else v1 if x is b else x, v0 if y is a else v1 if y is b else y))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 20), st.integers(2, 20), st.integers(-5, 30))
def test_comparisons_decide_at_hint_and_record(h0, h1, c):
    env, (s0, s1) = _env(h0, h1)
    a, b = env.symint(s0), env.symint(s1)
    for op in CMP_OPS:
        assert bool(op(a, b)) == op(h0, h1)
        assert bool(op(a, c)) == op(h0, c)
    for guard in env.guards:
        assert E.evaluate_at(guard.expr, {s0: h0, s1: h1}) == guard.value


def test_truediv_pow_float_and_bool_ops():
    env, (s0,) = _env(6)
    a = env.symint(s0)
    assert (a / 4).node.hint == 1.5 and (a / 4).node.pytype is float
    assert torch.sym_float(a).node.hint == 6.0
    assert (a ** 2).node.hint == 36
    assert torch.sym_int(torch.sym_float(a) / 4).node.hint == 1
    assert math_floor(a / 4) == 1
    t = (a > 3) & (a < 10)
    assert isinstance(t, torch.SymBool) and bool(t)
    assert bool(torch.sym_not(a > 10))
    # torch.sym_ite's Python wrapper insists on torch's own node class; call the protocol.
    assert (a > 3).node.sym_ite(a.node, (a * 2).node).hint == 6
    assert torch.sym_sum([a, a, 3]).node.expr == 2 * s0 + 3
    assert (a - a) == 0 and isinstance(a - a, int)


def math_floor(x):
    import math
    return math.floor(x)


def test_is_constant_is_sympys_is_number_for_every_kind_of_expression():
    """``is_constant`` (asked for each operand and result of every SymInt operation; a
    compound expression's answer is remembered) is sympy's ``is_number``, asked twice."""
    from unbroken.symbolic.node import SymNode

    s = sympy.Symbol("s0", integer=True, positive=True)
    unevaluated = sympy.Add(sympy.Integer(2), sympy.Integer(3), evaluate=False)
    cases = [(s, int), (sympy.Integer(4), int), (s * 2 + 1, int), (unevaluated, int),
             (sympy.Eq(s, 1), bool), (sympy.true, bool), (sympy.false, bool),
             (sympy.Max(s, 3), int), (sympy.Mul(sympy.Integer(2), sympy.Integer(5),
                                                evaluate=False), int),
             (sympy.Float(1.5), float), (s * 1.5, float)]
    for expr, pytype in cases:
        want = pytype is not float and (expr in (sympy.true, sympy.false) or
                                        bool(expr.is_number))
        node = SymNode(expr, None, pytype, None)
        assert node.is_constant() is want and node.is_constant() is want, expr
    assert SymNode(unevaluated, None, int, None).is_constant()


def test_protocol_surface():
    env, (s0,) = _env(5)
    node = env.symint(s0).node
    assert node.is_int() and not node.is_float() and not node.is_bool()
    assert node.has_hint() and node.maybe_as_int() is None and node.nested_int() is None
    assert node.wrap_int(3).maybe_as_int() == 3
    assert node.wrap_bool(True).maybe_as_bool() is True
    assert node.wrap_float(1.5).maybe_as_float() == 1.5
    assert node.clone() is node and node.str() == "s0"
    assert node.is_symbolic() and not node.is_constant() and node.wrap_int(2).is_constant()
    assert node.statically_known_true("", 0) if node.pytype is bool else True
    assert node.ge(node.wrap_int(2)).statically_known_true("", 0)
    assert not node.eq(node.wrap_int(5)).statically_known_true("", 0)
    assert node.eq(node.wrap_int(5)).guard_or_false("", 0) is True
    assert node.guard_int("", 0) == 5


def _meta(env, example, dims):
    return env.make_meta_tensor(example, dims)


@pytest.fixture
def batch_env():
    env, (s0,) = _env(8)
    return env, s0


def test_meta_ops_give_symbolic_shapes(batch_env):
    env, s0 = batch_env
    with enable_python_dispatcher():
        x = _meta(env, torch.randn(8, 16), [s0, 16])
        assert sym_expr(x.view(-1).shape[0]) == 16 * s0
        assert sym_expr(torch.cat([x, x]).shape[0]) == 2 * s0
        w = torch.randn(16, 4, device="meta")
        assert sym_expr((x @ w).shape[0]) == s0
        lin = torch.nn.Linear(16, 3).to("meta")
        assert sym_expr(lin(x).shape[0]) == s0
        assert sym_expr(F.linear(x, torch.empty(5, 16, device="meta")).shape[0]) == s0
        y = x[:, 2:]
        assert y.shape[1] == 14
        z = x[2:, :]
        assert sym_expr(z.shape[0]) == s0 - 2
        e = x[:, :1].expand(x.shape[0], 5)
        assert sym_expr(e.shape[0]) == s0 and e.shape[1] == 5
        r = x.reshape(x.shape[0] // 2, -1)
        assert sym_expr(r.shape[0]) == E.FloorDiv(s0, 2)
        assert x.is_contiguous() and x.t().is_contiguous() is False


def test_linear_on_dynamic_feature_dim_records_guard():
    env, (s0, s1) = _env(4, 100)
    with enable_python_dispatcher():
        x = _meta(env, torch.randn(4, 100), [s0, s1])
        torch.nn.Linear(100, 7).to("meta")(x)
    facts = [g.as_fact() for g in env.guards]
    assert sympy.Eq(s1, 100) in facts
    assert all(g.frames == () for g in env.guards)


def test_broadcast_records_ne_one_only_when_needed():
    env, (s0, s1) = _env(4, 4)
    with enable_python_dispatcher():
        a = _meta(env, torch.randn(4), [s0])
        b = _meta(env, torch.randn(4), [s1])
        c = a + b
    assert sym_expr(c.shape[0]) in (s0, s1)
    assert any(s0 in g.expr.free_symbols and s1 in g.expr.free_symbols for g in env.guards)


def test_lstm_and_sdpa_run_with_symbolic_batch(batch_env):
    env, s0 = batch_env
    with enable_python_dispatcher():
        seq = _meta(env, torch.randn(8, 5, 12), [s0, 5, 12])
        lstm = torch.nn.LSTM(12, 6, batch_first=True).to("meta")
        out, (h, c) = lstm(seq)
        assert sym_expr(out.shape[0]) == s0 and out.shape[2] == 6
        q = _meta(env, torch.randn(8, 2, 5, 4), [s0, 2, 5, 4])
        att = F.scaled_dot_product_attention(q, q, q)
        assert sym_expr(att.shape[0]) == s0
        mha = torch.nn.MultiheadAttention(12, 2, batch_first=True).to("meta")
        assert sym_expr(mha(seq, seq, seq)[0].shape[0]) == s0


def test_conv_and_channels_last():
    env, (s0, s1) = _env(2, 16)
    with enable_python_dispatcher():
        example = torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last)
        x = _meta(env, example, [s0, 3, s1, s1])
        assert x.is_contiguous(memory_format=torch.channels_last)
        conv = torch.nn.Conv2d(3, 4, 3).to("meta")
        y = conv(x)
        assert sym_expr(y.shape[2]) == s1 - 2


def test_contiguity_helpers_on_nodes():
    env, (s0, s1) = _env(3, 4)
    n = env.symint(s0).node
    sizes = [env.symint(s0).node, env.symint(s1).node]
    strides = [env.symint(s1).node, n.wrap_int(1)]
    assert n.is_contiguous(sizes, strides).expr is sympy.true
    assert n.is_non_overlapping_and_dense_indicator(sizes, strides).maybe_as_int() == 1
    transposed = [n.wrap_int(1), env.symint(s0).node]
    assert n.is_contiguous(sizes, transposed).guard_bool("", 0) is False
    assert n.is_non_overlapping_and_dense_indicator(sizes, transposed).maybe_as_int() == 1
    assert n.is_non_overlapping_and_dense(sizes, strides).maybe_as_bool() is True


def test_symnode_is_frozen():
    env, (s0,) = _env(3)
    node = SymNode(s0, env, int, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.hint = 4


def test_every_arithmetic_rule_is_a_method_named_in_the_class_body():
    """The protocol methods are written in ``class SymNode`` (found by name, not attached by
    a loop), each built from its own table entry."""
    for table in (node_module._BINARY, node_module._UNARY):
        for method in table:
            assert method in vars(SymNode), method
            assert getattr(SymNode, method).__name__ == method


def test_arithmetic_is_built_once_per_environment():
    env, (s,) = _env(4)
    x = env.symint(s)
    first, second = (x == 1).node, (x == 1).node
    assert first is not second and first.expr is second.expr  # the memo's one sympy object
    assert (x * 2).node.expr == 2 * s and (x + 1 == 5).node.hint is True
    assert ((x + 0.5) * 2).node.pytype is float  # result types come back with the memo


def test_mod_follows_the_current_ranges_not_the_memo():
    env, (s,) = _env(6)
    x = env.symint(s)
    assert isinstance(((x - 3) % 4).node.expr, E.PythonMod)  # x - 3 may be negative
    env.set_range(s, ValueRange(4, None), spec=True)
    assert isinstance(((x - 3) % 4).node.expr, E.Mod)


def test_sym_expr_reads_ours_torchs_and_plain_numbers():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnvironment()
    s = env.create_symbol("", 4)
    assert sym_expr(env.symint(s * 2)) == 2 * s
    assert sym_expr(3) == sympy.Integer(3) and sym_expr(True) is sympy.true
    theirs = ShapeEnv().create_unbacked_symint()  # torch's node (a program's fake values)
    assert sym_expr(theirs) == theirs.node.expr and isinstance(theirs.node.expr, sympy.Symbol)
    with pytest.raises(TypeError):
        sym_expr("five")


def test_wrap_int_gives_one_node_per_value_and_environment():
    """``s0 * 4`` wraps 4: the node is made once per environment (nodes are immutable), a
    bool stays a bool's node (``True`` equals 1 as a key), another environment's is its own."""
    env, (s0,) = _env(3)
    node = env.symint(s0).node
    four = node.wrap_int(4)
    assert node.wrap_int(4) is four and four.expr == 4 and four.hint == 4
    assert four.shape_env is env and four.pytype is int
    flag = node.wrap_int(True)
    assert flag is not node.wrap_int(1) and flag.hint is True
    other, (t0,) = _env(3)
    assert other.symint(t0).node.wrap_int(4).shape_env is other
    assert (env.symint(s0) * 4).node.expr == 4 * s0
