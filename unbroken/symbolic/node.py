"""``SymNode``: our implementation of PyTorch's symbolic-node protocol.

``torch.SymInt(node)`` / ``SymBool`` / ``SymFloat`` accept any object implementing the
protocol of ``torch/fx/experimental/sym_node.py``. PyTorch's C++ core and its Python magic
methods call back into the node for arithmetic (``add``, ``int_floordiv``, ``sym_sum``, ...)
and for every decision (``guard_bool``, ``guard_int``, ``expect_true``,
``guard_size_oblivious``, ``guard_or_false`` ...). Arithmetic builds sympy expressions and
propagates example values ("hints"); decisions are delegated to the owning
``ShapeEnvironment``, which folds them, settles them with value ranges, or records a guard.

Mapping back: ``symint.node.expr`` is the sympy expression of a ``torch.SymInt`` built here.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from . import expr as E

__all__ = ["SymNode", "sym_expr", "is_our_symnode"]

_PY_TYPES = (bool, int, float)


def _sympify_bool(value: bool):
    return sympy.true if value else sympy.false


def _cast(pytype, value):
    if value is None:
        return None
    return pytype(value)


# ----- the arithmetic of SymNode: method name -> sympy constructor and Python operator -----
# (defined before the class, whose body names each method: ``SymNode.add`` is ``add = ...``)
def _result_type(method: str, a: SymNode, b: SymNode) -> type:
    if method in _ALWAYS_FLOAT:
        return float
    if method in _ALWAYS_BOOL:
        return bool
    if method in _ALWAYS_INT:
        return int
    if a.pytype is float or b.pytype is float:
        return float
    if method in ("add", "sub", "mul") and a.pytype is bool:
        return int
    return a.pytype


_ALWAYS_FLOAT = {"float_truediv", "int_truediv", "float_pow"}
_ALWAYS_BOOL = {"eq", "ne", "lt", "le", "gt", "ge", "sym_and", "sym_or"}
_ALWAYS_INT = {"pow_by_natural"}


def _as_int_expr(node: SymNode):
    """Booleans take part in integer arithmetic as 0/1 (``True + True == 2``)."""
    if node.pytype is bool:
        return sympy.Piecewise((sympy.Integer(1), node.expr), (sympy.Integer(0), True))
    return node.expr


def _build_mod(env, a, b):
    if env.bound(a, use="sign").lower >= 0 and env.bound(b, use="sign").lower > 0:
        return E.Mod(a, b)
    return E.PythonMod(a, b)


def _bool_eq(a, b):
    """Equality; ``Equivalent`` when both sides are booleans (sympy's ``Eq`` rejects them)."""
    if isinstance(a, _BOOL_TYPES) and isinstance(b, _BOOL_TYPES):
        return sympy.Equivalent(a, b)
    return sympy.Eq(a, b)


_BOOL_TYPES = (sympy.logic.boolalg.BooleanAtom, sympy.core.relational.Relational, sympy.And,
               sympy.Or, sympy.Not, sympy.Xor, sympy.Equivalent)


def _python_pow(a, b):
    return a ** b


_BINARY: dict[str, tuple[Callable, Callable]] = {
    # method: (build(env, a_expr, b_expr), python operator on hints)
    "add": (lambda env, a, b: a + b, operator.add),
    "sub": (lambda env, a, b: a - b, operator.sub),
    "mul": (lambda env, a, b: a * b, operator.mul),
    "mod": (_build_mod, operator.mod),
    "int_floordiv": (lambda env, a, b: E.FloorDiv(a, b), operator.floordiv),
    "float_truediv": (lambda env, a, b: E.FloatTrueDiv(a, b), operator.truediv),
    "int_truediv": (lambda env, a, b: E.IntTrueDiv(a, b), operator.truediv),
    "pow_by_natural": (lambda env, a, b: E.PowByNatural(a, b), _python_pow),
    "float_pow": (lambda env, a, b: E.FloatPow(a, b), lambda x, y: float(x) ** float(y)),
    "lshift": (lambda env, a, b: a * E.PowByNatural(2, b), operator.lshift),
    "rshift": (lambda env, a, b: E.FloorDiv(a, E.PowByNatural(2, b)), operator.rshift),
    "eq": (lambda env, a, b: _bool_eq(a, b), operator.eq),
    "ne": (lambda env, a, b: sympy.Not(_bool_eq(a, b)), operator.ne),
    "lt": (lambda env, a, b: sympy.Lt(a, b), operator.lt),
    "le": (lambda env, a, b: sympy.Le(a, b), operator.le),
    "gt": (lambda env, a, b: sympy.Gt(a, b), operator.gt),
    "ge": (lambda env, a, b: sympy.Ge(a, b), operator.ge),
    "sym_min": (lambda env, a, b: E.Min(a, b), min),
    "sym_max": (lambda env, a, b: E.Max(a, b), max),
    "sym_and": (lambda env, a, b: sympy.And(a, b), lambda x, y: bool(x and y)),
    "sym_or": (lambda env, a, b: sympy.Or(a, b), lambda x, y: bool(x or y)),
}
_INT_ARITH = {"add", "sub", "mul", "mod", "int_floordiv", "int_truediv", "pow_by_natural",
              "float_truediv", "float_pow", "lshift", "rshift", "lt", "le", "gt", "ge",
              "sym_min", "sym_max"}


# Methods whose result depends on more than the operands' expressions and types: ``mod``
# picks ``Mod`` or ``PythonMod`` from the current value ranges. Not memoized.
_RANGE_DEPENDENT = {"mod"}


# SymNode arithmetic: (method, types, operand expressions) -> (result expression, type).
# Kernels ask the same questions over and over (``s0 == 1`` while broadcasting each op), and
# every export of a model asks the ones the last asked (its symbols have the same names):
# building a sympy relation costs ~0.1-0.3 ms, a dict lookup nothing. The result is a function
# of the key alone (sympy's evaluation is deterministic), so the memo is process-wide; it is
# emptied when it reaches ARITHMETIC_MEMO_SIZE entries.
ARITHMETIC_MEMO_SIZE = 1 << 16
_ARITHMETIC_MEMO: dict = {}
_CONSTANT_MEMO: dict = {}  # compound expression -> is_number (SymNode.is_constant)


def _make_binary(method: str):
    build, py_op = _BINARY[method]
    memoized = method not in _RANGE_DEPENDENT

    def binary(self: SymNode, other: SymNode) -> SymNode:
        a, b = self.expr, other.expr
        key = (method, self.pytype, other.pytype, a.__class__, b.__class__, a, b)
        built = _ARITHMETIC_MEMO.get(key) if memoized else None
        if built is None:
            pytype = _result_type(method, self, other)
            built = (_build(method, build, self, other, pytype), pytype)
            if memoized:
                if len(_ARITHMETIC_MEMO) >= ARITHMETIC_MEMO_SIZE:
                    _ARITHMETIC_MEMO.clear()
                _ARITHMETIC_MEMO[key] = built
        expr, pytype = built
        hint = None
        if self.hint is not None and other.hint is not None:
            hint = _cast(pytype, py_op(self.hint, other.hint))
        return SymNode(expr, self.shape_env, pytype, hint)

    binary.__name__ = method
    binary.__doc__ = f"``{method}`` of two nodes: a new node with the sympy result and hint."
    return binary


def _build(method: str, build: Callable, a: SymNode, b: SymNode, pytype: type):
    """The sympy expression of ``a <method> b`` whose result has Python type ``pytype``."""
    if method in _INT_ARITH or a.pytype != b.pytype:
        x, y = _as_int_expr(a), _as_int_expr(b)
    else:
        x, y = a.expr, b.expr
    if pytype is float and method in ("add", "sub", "mul", "sym_min", "sym_max",
                                      "int_floordiv", "mod"):
        x, y = _to_float_expr(a, x), _to_float_expr(b, y)
    return build(a.shape_env, x, y)


def _to_float_expr(node: SymNode, expr):
    return E.ToFloat(expr) if node.pytype is not float else expr


def _bitwise(method: str, py_op: Callable, bool_build: Callable):
    def op(self: SymNode, other: SymNode) -> SymNode:
        if self.pytype is bool and other.pytype is bool:
            hint = (None if self.hint is None or other.hint is None
                    else bool(py_op(self.hint, other.hint)))
            return SymNode(bool_build(self.expr, other.expr), self.shape_env, bool, hint)
        # Not modelled on integers: decide both values (guards) and compute concretely.
        a = self.shape_env.decide_value(self)
        b = self.shape_env.decide_value(other)
        return self._wrap(py_op(a, b))

    op.__name__ = method
    return op




# ----- unary operations -----
def _int_identity_or(build: Callable):
    return lambda node: node.expr if node.pytype is int else build(node.expr)


def _float_of(node: SymNode):
    return E.ToFloat(node.expr) if node.pytype is not float else node.expr


_UNARY: dict[str, tuple[Callable, Callable, type | None]] = {
    # method: (build(node) -> expr, python op on the hint, result type or None = same type)
    "neg": (lambda n: -_as_int_expr(n), operator.neg, None),
    "pos": (lambda n: n.expr, operator.pos, None),
    "abs": (lambda n: sympy.Abs(n.expr), abs, None),
    "sym_not": (lambda n: sympy.Not(n.expr), operator.not_, bool),
    "sym_float": (_float_of, float, float),
    "sym_int": (lambda n: E.TruncToInt(n.expr) if n.pytype is float else n.expr, int, int),
    "floor": (_int_identity_or(E.FloorToInt), math.floor, int),
    "ceil": (_int_identity_or(E.CeilToInt), math.ceil, int),
    "trunc": (_int_identity_or(E.TruncToInt), math.trunc, int),
    "sym_sqrt": (lambda n: sympy.sqrt(_float_of(n)), math.sqrt, float),
}


def _make_unary(method: str):
    build, py_op, pytype = _UNARY[method]

    def unary(self: SymNode) -> SymNode:
        result_type = pytype or (int if self.pytype is bool and method == "neg" else self.pytype)
        hint = None if self.hint is None else _cast(result_type, py_op(self.hint))
        return SymNode(build(self), self.shape_env, result_type, hint)

    unary.__name__ = method
    return unary




def _make_math(name: str):
    fn = getattr(math, name)

    def math_op(self: SymNode) -> SymNode:
        # Transcendental functions are not modelled symbolically: decide the input's value.
        return self.wrap_float(float(fn(self.shape_env.decide_value(self))))

    math_op.__name__ = f"sym_{name}"
    return math_op


@dataclass(frozen=True, slots=True, eq=False, init=False)
class SymNode:
    """A symbolic int, float or bool value.

    expr:      the sympy expression (``s0*2``, ``Eq(s0, 4)``, a number for constants).
    shape_env: the ``ShapeEnvironment`` that owns the symbols and records guards.
    pytype:    ``int``, ``bool`` or ``float``: the Python type this value stands for.
    hint:      the value at the example inputs (same type as ``pytype``), or None when the
               value depends on tensor data (an unbacked symbol).
    """

    expr: Any
    shape_env: Any
    pytype: type
    hint: Any = None

    def __init__(self, expr, shape_env, pytype: type, hint=None):
        # frozen: the generated __init__ sets each field through object.__setattr__ (~0.45 us
        # a node, made ~20,000 times per dynamic-shape export); the slots' own setters, 0.25
        _SET_EXPR(self, expr)
        _SET_ENV(self, shape_env)
        _SET_PYTYPE(self, pytype)
        _SET_HINT(self, hint)

    # ----- identity, hints, constants -----
    @property
    def _hint(self):  # read by torch.fx.experimental.symbolic_shapes helpers
        return self.hint

    def has_hint(self) -> bool:
        return self.hint is not None

    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def nested_int(self):
        return None

    def nested_int_coeff(self):
        return None

    def is_symbolic(self) -> bool:
        return True

    def is_constant(self) -> bool:
        """True for int/bool nodes whose expression is a number (PyTorch then unwraps them)."""
        if self.pytype is float:
            return False
        expr = self.expr  # hot: asked for every operand and result of every SymInt operation
        if expr.is_Atom:
            return expr is sympy.true or expr is sympy.false or bool(expr.is_number)
        constant = _CONSTANT_MEMO.get(expr)  # a compound's is_number walks all of it
        if constant is None:
            if len(_CONSTANT_MEMO) >= ARITHMETIC_MEMO_SIZE:
                _CONSTANT_MEMO.clear()
            constant = _CONSTANT_MEMO[expr] = bool(expr.is_number)
        return constant

    def maybe_as_int(self) -> int | None:
        return int(self.expr) if self.pytype is int and self.expr.is_Integer else None

    def maybe_as_float(self) -> float | None:
        return float(self.expr) if isinstance(self.expr, sympy.Float) else None

    def maybe_as_bool(self) -> bool | None:
        if self.expr is sympy.true:
            return True
        if self.expr is sympy.false:
            return False
        return None

    def wrap_int(self, num: int) -> SymNode:
        # every SymInt operation with a Python int wraps it (``s0 * 4``): one node per value
        # and environment (a bool is wrapped as an int too, and equals 1 or 0 as a key)
        known = getattr(self.shape_env, "int_nodes", None)
        if known is None or type(num) is not int:
            return SymNode(sympy.Integer(num), self.shape_env, int, num)
        node = known.get(num)
        if node is None:
            node = known[num] = SymNode(sympy.Integer(num), self.shape_env, int, num)
        return node

    def wrap_float(self, num: float) -> SymNode:
        return SymNode(sympy.Float(num), self.shape_env, float, num)

    def wrap_bool(self, num: bool) -> SymNode:
        return SymNode(_sympify_bool(num), self.shape_env, bool, num)

    def with_shape_env(self, shape_env) -> SymNode:
        return SymNode(self.expr, shape_env, self.pytype, self.hint)

    def clone(self) -> SymNode:
        return self

    def str(self) -> str:  # noqa: A003  (protocol name)
        return str(self.expr)

    def _graph_repr(self) -> str:
        return str(self.expr)

    def __str__(self) -> str:
        return str(self.expr)

    def __repr__(self) -> str:
        return f"SymNode({self.expr}, pytype={self.pytype.__name__}, hint={self.hint})"

    # ----- decisions (each may record a guard in the shape environment) -----
    def guard_bool(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.decide_bool(self, kind="guard")

    def guard_int(self, file: str = "", line: int = 0) -> int:
        return int(self.shape_env.decide_value(self))

    def guard_float(self, file: str = "", line: int = 0) -> float:
        return float(self.shape_env.decide_value(self))

    def expect_true(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.expect_true(self)

    def expect_size(self, file: str = "", line: int = 0) -> bool:
        return self.ge(self.wrap_int(0)).expect_true(file, line)

    def guard_size_oblivious(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.decide_bool(self, kind="size_oblivious", size_oblivious=True)

    def guard_or_false(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.decide_bool(self, kind="guard", fallback=False)

    def guard_or_true(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.decide_bool(self, kind="guard", fallback=True)

    def statically_known_true(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.known_true(self.expr)

    def bool_(self) -> bool:
        return self.guard_bool()

    def int_(self) -> int:
        return self.guard_int()

    def evaluate(self, size_oblivious: bool = False):
        if self.pytype is bool:
            kind = "size_oblivious" if size_oblivious else "guard"
            return self.shape_env.decide_bool(self, kind=kind, size_oblivious=size_oblivious)
        return self.shape_env.decide_value(self)

    # ----- arithmetic: built by the tables above; torch calls these by name -----
    add = _make_binary("add")
    sub = _make_binary("sub")
    mul = _make_binary("mul")
    mod = _make_binary("mod")
    int_floordiv = _make_binary("int_floordiv")
    float_truediv = _make_binary("float_truediv")
    int_truediv = _make_binary("int_truediv")
    pow_by_natural = _make_binary("pow_by_natural")
    float_pow = _make_binary("float_pow")
    lshift = _make_binary("lshift")
    rshift = _make_binary("rshift")
    eq = _make_binary("eq")
    ne = _make_binary("ne")
    lt = _make_binary("lt")
    le = _make_binary("le")
    gt = _make_binary("gt")
    ge = _make_binary("ge")
    sym_min = _make_binary("sym_min")
    sym_max = _make_binary("sym_max")
    sym_and = _make_binary("sym_and")
    sym_or = _make_binary("sym_or")
    bitwise_and = _bitwise("bitwise_and", operator.and_, sympy.And)
    bitwise_or = _bitwise("bitwise_or", operator.or_, sympy.Or)
    bitwise_xor = _bitwise("bitwise_xor", operator.xor, sympy.Xor)
    neg = _make_unary("neg")
    pos = _make_unary("pos")
    abs = _make_unary("abs")  # noqa: A003  (protocol name)
    sym_not = _make_unary("sym_not")
    sym_float = _make_unary("sym_float")
    sym_int = _make_unary("sym_int")
    floor = _make_unary("floor")
    ceil = _make_unary("ceil")
    trunc = _make_unary("trunc")
    sym_sqrt = _make_unary("sym_sqrt")
    sym_cos = _make_math("cos")
    sym_cosh = _make_math("cosh")
    sym_sin = _make_math("sin")
    sym_sinh = _make_math("sinh")
    sym_tan = _make_math("tan")
    sym_tanh = _make_math("tanh")
    sym_asin = _make_math("asin")
    sym_acos = _make_math("acos")
    sym_atan = _make_math("atan")
    sym_log2 = _make_math("log2")
    sym_exp = _make_math("exp")
    sym_log = _make_math("log")

    def is_integer(self) -> SymNode:
        if self.pytype is int:
            return self.wrap_bool(True)
        if isinstance(self.expr, E.IntTrueDiv):
            # ``(n / k).is_integer()`` (padding to a multiple): ``n % k == 0``, a condition on
            # the sizes, instead of the value of the quotient (which pins n to its example)
            a, b = self.expr.args
            hint = None if self.hint is None else float(self.hint).is_integer()
            return SymNode(sympy.Eq(_build_mod(self.shape_env, a, b), 0), self.shape_env,
                           bool, hint)
        return self._from_hints(lambda v: float(v).is_integer(), bool)

    # ----- variadic -----
    def sym_sum(self, args) -> SymNode:
        hints = [a.hint for a in args]
        hint = None if any(h is None for h in hints) else sum(hints)
        return SymNode(sympy.Add(*[a.expr for a in args]), self.shape_env, int, hint)

    def sym_ite(self, then_node: SymNode, else_node: SymNode) -> SymNode:
        if self.expr is sympy.true or self.expr is sympy.false:
            return then_node if self.expr is sympy.true else else_node
        expr = sympy.Piecewise((then_node.expr, self.expr), (else_node.expr, True))
        hint = None
        if self.hint is not None:
            hint = then_node.hint if self.hint else else_node.hint
        return SymNode(expr, self.shape_env, then_node.pytype, hint)

    # ----- aliases of the protocol -----
    def truediv(self, other):
        return self.float_truediv(other)

    def floordiv(self, other):
        return self.int_floordiv(other)

    def pow(self, other):
        return self.float_pow(other)

    def and_(self, other):
        return self.sym_and(other)

    def or_(self, other):
        return self.sym_or(other)

    def round(self, ndigits: int | None = None) -> SymNode:
        if ndigits is not None:
            return self._from_hints(lambda v: round(v, ndigits), float)
        if self.pytype is int:
            return self
        return self._unary(E.RoundToInt, round, int)

    def is_non_overlapping_and_dense(self, sizes, strides) -> SymNode:
        return self.is_non_overlapping_and_dense_indicator(sizes, strides).eq(self.wrap_int(1))

    # ----- contiguity helpers (see _contiguity below) -----
    def is_contiguous(self, sizes, strides) -> SymNode:
        order = list(range(len(sizes) - 1, -1, -1))
        return self._bool_node(_contiguous_expr(sizes, strides, order))

    def is_channels_last_contiguous_2d(self, sizes, strides) -> SymNode:
        return self._bool_node(_contiguous_expr(sizes, strides, [1, 3, 2, 0]))

    def is_channels_last_contiguous_3d(self, sizes, strides) -> SymNode:
        return self._bool_node(_contiguous_expr(sizes, strides, [1, 4, 3, 2, 0]))

    def is_channels_last_strides_2d(self, sizes, strides) -> SymNode:
        return self.wrap_bool(_channels_last_strides(self.shape_env, sizes, strides, [1, 3, 2, 0]))

    def is_channels_last_strides_3d(self, sizes, strides) -> SymNode:
        order = [1, 4, 3, 2, 0]
        return self.wrap_bool(_channels_last_strides(self.shape_env, sizes, strides, order))

    def is_non_overlapping_and_dense_indicator(self, sizes, strides) -> SymNode:
        return self.wrap_int(int(_non_overlapping_and_dense(self.shape_env, sizes, strides)))

    # ----- helpers -----
    def _bool_node(self, expr) -> SymNode:
        return SymNode(expr, self.shape_env, bool, self.shape_env.hint_of(expr))

    def _unary(self, build: Callable, py_op: Callable, pytype: type | None = None) -> SymNode:
        pytype = pytype or self.pytype
        hint = None if self.hint is None else _cast(pytype, py_op(self.hint))
        return SymNode(build(self.expr), self.shape_env, pytype, hint)

    def _from_hints(self, py_op: Callable, pytype: type) -> SymNode:
        """Fallback for operations we do not model: guard on the value, compute concretely."""
        value = py_op(self.shape_env.decide_value(self))
        return self._wrap(pytype(value))

    def _wrap(self, value) -> SymNode:
        if isinstance(value, bool):
            return self.wrap_bool(value)
        if isinstance(value, int):
            return self.wrap_int(value)
        return self.wrap_float(float(value))




# ----- contiguity -----
def _contiguous_expr(sizes, strides, dim_order):
    """PyTorch's definition: strides match the packed layout (size-1 dims exempt), or empty."""
    if len(dim_order) != len(sizes):
        return sympy.false
    result = sympy.true
    expected = sympy.Integer(1)
    for d in dim_order:
        size, stride = sizes[d].expr, strides[d].expr
        result = sympy.And(result, sympy.Or(sympy.Eq(size, 1), sympy.Eq(stride, expected)))
        expected = expected * size
    for size_node in sizes:
        result = sympy.Or(result, sympy.Eq(size_node.expr, 0))
    return result


def _decide(env, expr, fallback: bool) -> bool:
    """A decision inside a layout query: guarded like ``guard_or_<fallback>``."""
    if expr is sympy.true or expr is sympy.false:
        return expr is sympy.true
    return env.decide_expr(expr, kind="guard", fallback=fallback)


def _non_overlapping_and_dense(env, sizes, strides) -> bool:
    """``c10::compute_non_overlapping_and_dense`` with each comparison a (guarded) decision.

    Unknown comparisons are answered "not dense", which is always safe for meta computation.
    """
    n = len(sizes)
    if n == 1:
        return _decide(env, sympy.Lt(sizes[0].expr, 2), False) or _decide(
            env, sympy.Eq(strides[0].expr, 1), False)
    perm = sorted(range(n), key=lambda i: _SortKey(env, sizes, strides, i))
    expected = sympy.Integer(1)
    for i in perm:
        size = sizes[i].expr
        if _decide(env, sympy.Eq(size, 1), False):
            continue
        if _decide(env, sympy.Ne(strides[i].expr, expected), True):
            return False
        expected = expected * size
    return True


class _SortKey:
    """Orders dims by stride (size-1 dims last), as c10 does, deciding comparisons lazily."""

    __slots__ = ("env", "sizes", "strides", "i")

    def __init__(self, env, sizes, strides, i):
        self.env, self.sizes, self.strides, self.i = env, sizes, strides, i

    def __lt__(self, other: _SortKey) -> bool:
        a, b = self.i, other.i
        env = self.env
        if _decide(env, sympy.Lt(self.sizes[a].expr, 2), False):
            return False
        if _decide(env, sympy.Lt(self.sizes[b].expr, 2), False):
            return True
        return _decide(env, sympy.Lt(self.strides[a].expr, self.strides[b].expr), False)


def _channels_last_strides(env, sizes, strides, dim_order) -> bool:
    """``c10::is_channels_last_strides_{2,3}d_s4`` with guarded comparisons."""
    if len(sizes) != len(dim_order):
        return False
    minimum = sympy.Integer(0)
    if _decide(env, sympy.Eq(strides[1].expr, 0), False):
        return False
    for d in dim_order:
        size, stride = sizes[d].expr, strides[d].expr
        if _decide(env, sympy.Eq(size, 0), False):
            return False
        if _decide(env, sympy.Lt(stride, minimum), False):
            return False
        if d == 0 and _decide(env, sympy.Eq(minimum, strides[1].expr), False):
            return False
        minimum = stride * E.Max(size, 1)
    return True


_SET_EXPR, _SET_ENV, _SET_PYTYPE, _SET_HINT = (
    SymNode.__dict__[name].__set__ for name in ("expr", "shape_env", "pytype", "hint"))


# ----- helpers for other modules -----
def is_our_symnode(value) -> bool:
    """True for ``torch.SymInt``/``SymBool``/``SymFloat`` backed by this module's node."""
    return isinstance(getattr(value, "node", None), SymNode)


def sym_expr(value):
    """The sympy expression of a SymInt/SymBool/SymFloat or plain number: the one conversion
    of a symbolic size to an expression. The symbolic value may be ours (a trace's meta
    tensors) or torch's (an ``ExportedProgram``'s fake values): both nodes hold one."""
    if isinstance(value, bool):
        return _sympify_bool(value)
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        return sympy.Float(value)
    expr = getattr(getattr(value, "node", None), "expr", None)
    if isinstance(expr, sympy.Basic):
        return expr
    raise TypeError(f"not a symbolic value: {type(value).__name__}")
