"""Read symbolic expressions back from text, without ``sympify`` or ``eval``.

Saved programs (``unbroken.ir.serialize``) write sizes and symbolic values as ``str(expr)`` of
the sympy expressions unbroken builds (:mod:`unbroken.symbolic.expr`). This module is the
only way such text becomes an expression again. It is a recursive-descent parser of exactly
that language, and it trusts nothing: ``sympy.sympify`` would run Python (it calls ``eval``),
and sympy folds numbers eagerly, so ``9**9**9**9`` would never finish.

The language (lowest precedence first; sympy's printer parenthesizes ``&``/``|`` operands)::

    or        := and ('|' and)*
    and       := not ('&' not)*
    not       := '~' not | compare
    compare   := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
    sum       := product (('+' | '-') product)*
    product   := unary (('*' | '/' | '//' | '%') unary)*
    unary     := ('-' | '+') unary | power
    power     := atom ('**' unary)?
    atom      := INTEGER | FLOAT | SYMBOL | 'True' | 'False'
               | FUNCTION '(' or (',' or)* ')' | '(' or ')'

``SYMBOL`` must be one of the symbols the caller declares; ``FUNCTION`` one of
:data:`FUNCTIONS` (the sympy classes of ``symbolic/expr`` plus ``Eq``/``Ne``/... that sympy
prints for relations). Limits, each a :class:`ExpressionError`: the text length, the nesting
depth, the number of function arguments, the number of operations (sympy simplifies while it
builds, and some chains are slow: a hundred ``%`` take seconds), integer literals of at most
:data:`MAX_LITERAL_BITS` bits, folded integers of at most :data:`MAX_FOLDED_BITS` bits, and
powers only with a small exponent (a number of at most 64; a fraction ``p/q`` with
``|p|, q <= 64``), checked before sympy folds
anything. Division or modulo by zero is an error, never a crash.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import sympy

from . import expr as E

__all__ = ["ExpressionError", "ExpressionBudget", "parse_expression", "is_condition", "FUNCTIONS",
           "MAX_LENGTH", "MAX_DEPTH",
           "MAX_LITERAL_BITS", "MAX_FOLDED_BITS"]

MAX_LENGTH = 1024          # characters of one expression
MAX_DEPTH = 64             # nested parentheses, calls and unary operators
MAX_ARGUMENTS = 16         # arguments of one function call (Max/Min are variadic)
MAX_OPERATIONS = 24        # operators and calls in one expression (sympy's cost grows fast)
MAX_DIVISIONS = 6          # //, %, FloorDiv, Mod, PythonMod among them (the slowest to build)
MAX_LITERAL_BITS = 64      # an integer literal fits in 64 bits (sizes, bounds, strides)
MAX_FOLDED_BITS = 256      # numbers sympy folds while building stay below 2**256
MAX_EXPONENT = 64          # ``a ** (p/q)`` needs |p| <= 64 and 1 <= q <= 64


class ExpressionError(ValueError):
    """The text is not an expression of the language above, or exceeds a limit.

    The message says what and where (a character offset); callers add which file member.
    """


class ExpressionBudget:
    """Operations left for the expressions of one document (one saved program).

    A per-expression cap alone does not bound a file of many distinct expressions; callers
    parse each distinct text once (a cache) and charge it to one budget.

    operations: operators and calls left; divisions: ``//``/``%``/``FloorDiv``/... left.
    """

    __slots__ = ("operations", "divisions")

    def __init__(self, operations: int, divisions: int):
        self.operations = operations
        self.divisions = divisions

    def charge(self, operations: int, divisions: int) -> None:
        self.operations -= operations
        self.divisions -= divisions
        if self.operations < 0 or self.divisions < 0:
            raise ExpressionError("the expressions of this document exceed their budget of "
                                  "operations")


def _relation(cls):
    return lambda a, b: cls(a, b)


#: Function names the language admits -> (sympy constructor, allowed argument counts, kind).
#: kind: "int" (numeric arguments and result), "bool" (boolean arguments), "rel" (numeric
#: arguments, boolean result).
FUNCTIONS: dict[str, tuple] = {
    "FloorDiv": (E.FloorDiv, (2,), "int"),
    "CleanDiv": (E.FloorDiv, (2,), "int"),   # prints as // anyway; same value when exact
    "PythonMod": (E.PythonMod, (2,), "int"),
    "Mod": (E.Mod, (2,), "int"),
    "Max": (E.Max, range(1, MAX_ARGUMENTS + 1), "int"),
    "Min": (E.Min, range(1, MAX_ARGUMENTS + 1), "int"),
    "CeilToInt": (E.CeilToInt, (1,), "int"),
    "FloorToInt": (E.FloorToInt, (1,), "int"),
    "TruncToInt": (E.TruncToInt, (1,), "int"),
    "RoundToInt": (E.RoundToInt, (1,), "int"),
    "ToFloat": (E.ToFloat, (1,), "int"),
    "TruncToFloat": (E.TruncToFloat, (1,), "int"),
    "IntTrueDiv": (E.IntTrueDiv, (2,), "int"),
    "FloatTrueDiv": (E.FloatTrueDiv, (2,), "int"),
    "Identity": (E.Identity, (1,), "int"),
    "Abs": (sympy.Abs, (1,), "int"),
    "floor": (sympy.floor, (1,), "int"),
    "ceiling": (sympy.ceiling, (1,), "int"),
    "sqrt": (sympy.sqrt, (1,), "int"),
    "Eq": (_relation(sympy.Eq), (2,), "rel"),
    "Ne": (_relation(sympy.Ne), (2,), "rel"),
    "Lt": (_relation(sympy.Lt), (2,), "rel"),
    "Le": (_relation(sympy.Le), (2,), "rel"),
    "Gt": (_relation(sympy.Gt), (2,), "rel"),
    "Ge": (_relation(sympy.Ge), (2,), "rel"),
    "And": (sympy.And, range(1, MAX_ARGUMENTS + 1), "bool"),
    "Or": (sympy.Or, range(1, MAX_ARGUMENTS + 1), "bool"),
    "Not": (sympy.Not, (1,), "bool"),
}
_POWERS = {"PowByNatural", "FloatPow"}
# printed as ** by sympy; read as a checked power
_DIVISIONS = {"FloorDiv", "CleanDiv", "PythonMod", "Mod"}

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<float>\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+)
  | (?P<int>\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|//|<=|>=|==|!=|[-+*/%<>()&|~,])
""", re.VERBOSE)

_COMPARE = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "==": sympy.Eq,
            "!=": sympy.Ne}


@dataclass(frozen=True, slots=True)
class _Token:
    """One lexical token. kind: int, float, name or op; text: its characters; at: offset."""

    kind: str
    text: str
    at: int


def _tokenize(text: str) -> list[_Token]:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ExpressionError(f"unexpected character {text[at]!r} at offset {at}")
        if match.lastgroup != "space":
            tokens.append(_Token(match.lastgroup, match.group(), at))
        at = match.end()
    return tokens


def parse_expression(text: str, symbols: Mapping[str, sympy.Symbol],
                     budget: ExpressionBudget | None = None):
    """The sympy expression (or boolean) that ``text`` denotes.

    Args:
        text: what ``str(expr)`` printed for an expression unbroken built.
        symbols: the declared symbols by name; any other name is an error.
        budget: charged with this expression's operations (see :class:`ExpressionBudget`).

    Raises:
        ExpressionError: the text is not in the language, names an unknown symbol or function,
            or exceeds a limit (see the module docstring).

    Example::

        >>> s0 = sympy.Symbol("s0", integer=True, positive=True)
        >>> parse_expression("(s0//2) + 1", {"s0": s0})
        (s0//2) + 1
    """
    if not isinstance(text, str):
        raise ExpressionError(f"an expression must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression of {len(text)} characters exceeds the limit of "
                              f"{MAX_LENGTH}")
    parser = _Parser(_tokenize(text), symbols)
    result = parser.parse_or()
    if parser.position != len(parser.tokens):
        raise ExpressionError(f"unexpected {parser.peek().text!r} at offset {parser.peek().at}")
    if budget is not None:
        budget.charge(parser.operations, parser.divisions)
    return result


class _Parser:
    """Recursive descent over the token list; each ``parse_*`` is one grammar rule."""

    def __init__(self, tokens: list[_Token], symbols: Mapping[str, sympy.Symbol]):
        self.tokens = tokens
        self.symbols = symbols
        self.position = 0
        self.depth = 0
        self.operations = 0
        self.divisions = 0

    # -- tokens ---------------------------------------------------------------------------------
    def peek(self) -> _Token:
        if self.position < len(self.tokens):
            return self.tokens[self.position]
        return _Token("end", "end of expression", self.tokens[-1].at if self.tokens else 0)

    def accept(self, *texts: str) -> str | None:
        token = self.peek()
        if token.kind == "op" and token.text in texts:
            self.position += 1
            return token.text
        return None

    def expect(self, text: str) -> None:
        if self.accept(text) is None:
            token = self.peek()
            raise ExpressionError(f"expected {text!r} at offset {token.at}, found {token.text!r}")

    def count(self, operations: int = 1) -> None:
        """Charge operations against :data:`MAX_OPERATIONS`: sympy simplifies as it builds, and
        chains of ``%``/``//``/``&`` get slow long before the text limit (100 ``%`` take 10 s)."""
        self.operations += operations
        if self.operations > MAX_OPERATIONS:
            raise ExpressionError(f"expression has more than {MAX_OPERATIONS} operations")

    def count_division(self) -> None:
        self.divisions += 1
        if self.divisions > MAX_DIVISIONS:
            raise ExpressionError(f"expression has more than {MAX_DIVISIONS} floor divisions "
                                  f"and modulos")

    def nested(self, rule):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"expression nests deeper than {MAX_DEPTH} levels")
        try:
            return rule()
        finally:
            self.depth -= 1

    # -- rules ----------------------------------------------------------------------------------
    def parse_or(self):
        value = self.parse_and()
        while self.accept("|"):
            self.count()
            value = _build(sympy.Or, _boolean(value), _boolean(self.parse_and()))
        return value

    def parse_and(self):
        value = self.parse_not()
        while self.accept("&"):
            self.count()
            value = _build(sympy.And, _boolean(value), _boolean(self.parse_not()))
        return value

    def parse_not(self):
        if self.accept("~"):
            self.count()
            return _build(sympy.Not, _boolean(self.nested(self.parse_not)))
        return self.parse_compare()

    def parse_compare(self):
        left = self.parse_sum()
        operator = self.accept(*_COMPARE)
        if operator is None:
            return left
        self.count()
        return _build(_COMPARE[operator], _numeric(left), _numeric(self.parse_sum()))

    def parse_sum(self):
        value = self.parse_product()
        terms = []
        while (operator := self.accept("+", "-")) is not None:
            self.count()
            right = _numeric(self.parse_product())
            terms.append(right if operator == "+" else _fold(-right))
        if not terms:
            return value
        # one n-ary Add: adding term by term would cost O(n**2) in sympy
        return _fold(_build(sympy.Add, _numeric(value), *terms))

    def parse_product(self):
        # sympy prints Mul(2, a + b, c) as "2*(a + b)*c" and Mul(-1, a + b, c) as
        # "-(a + b)*c". Multiplying pairwise would distribute the number over a + b (sympy does
        # that for a two-factor Mul) and read back an equal but different expression, so a run
        # of * and / factors, with a leading sign as the factor -1, becomes one n-ary Mul.
        # Negation and factors commute with * and /, not with // and %: the run is closed
        # (sign included) before either, as Python would evaluate it.
        negative = False
        while (sign := self.accept("-", "+")) is not None:
            self.count()
            negative ^= sign == "-"
        factors = [self.parse_unary()]  # a lone factor may be a condition (True, s0 > 2)
        while (operator := self.accept("*", "/", "//", "%")) is not None:
            self.count()
            if operator in ("//", "%"):
                self.count_division()
                value = _numeric(_multiply(factors, negative))
                negative = False
                factors = [_product(operator, value, _numeric(self.parse_unary()))]
                continue
            right = _numeric(self.parse_unary())
            if operator == "/":
                if right.is_zero:
                    raise ExpressionError(f"division by zero in {_multiply(factors, False)} / "
                                          f"{right}")
                right = _build(sympy.Pow, right, -1)
            factors.append(right)
        return _multiply(factors, negative)

    def parse_unary(self):
        operator = self.accept("-", "+")
        if operator is None:
            return self.parse_power()
        self.count()
        operand = _numeric(self.nested(self.parse_unary))
        return _fold(-operand) if operator == "-" else operand

    def parse_power(self):
        base = self.parse_atom()
        if not self.accept("**"):
            return base
        self.count()
        return _power(_numeric(base), _numeric(self.nested(self.parse_unary)))

    def parse_atom(self):
        token = self.peek()
        self.position += 1
        if token.kind == "int":
            return _integer(token)
        if token.kind == "float":
            return _float(token)
        if token.kind == "name":
            return self.parse_name(token)
        if token.kind == "op" and token.text == "(":
            value = self.nested(self.parse_or)
            self.expect(")")
            return value
        raise ExpressionError(f"unexpected {token.text!r} at offset {token.at}")

    def parse_name(self, token: _Token):
        if token.text in ("True", "False"):
            return sympy.true if token.text == "True" else sympy.false
        if self.accept("("):
            return self.nested(lambda: self.parse_call(token))
        if token.text in self.symbols:
            return self.symbols[token.text]
        raise ExpressionError(f"unknown symbol {token.text!r} at offset {token.at}")

    def parse_call(self, token: _Token):
        arguments = [self.parse_or()]
        while self.accept(","):
            if len(arguments) >= MAX_ARGUMENTS:
                raise ExpressionError(f"{token.text}() at offset {token.at} has more than "
                                      f"{MAX_ARGUMENTS} arguments")
            arguments.append(self.parse_or())
        self.expect(")")
        self.count(len(arguments))
        if token.text in _DIVISIONS:
            self.count_division()
        if token.text in _POWERS and len(arguments) == 2:
            constructor = E.FloatPow if token.text == "FloatPow" else sympy.Pow
            return _power(_numeric(arguments[0]), _numeric(arguments[1]), constructor)
        entry = FUNCTIONS.get(token.text)
        if entry is None:
            raise ExpressionError(f"unknown function {token.text!r} at offset {token.at}")
        constructor, counts, kind = entry
        if len(arguments) not in counts:
            raise ExpressionError(f"{token.text}() at offset {token.at} takes "
                                  f"{_counts(counts)} argument(s), got {len(arguments)}")
        check = _boolean if kind == "bool" else _numeric
        return _fold(_build(constructor, *(check(a) for a in arguments)))


# -- building sympy values with the limits ----------------------------------------------------
def _counts(counts) -> str:
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"


def _integer(token: _Token) -> sympy.Integer:
    if len(token.text) > 20 or int(token.text).bit_length() > MAX_LITERAL_BITS:
        raise ExpressionError(f"integer literal at offset {token.at} exceeds "
                              f"{MAX_LITERAL_BITS} bits")
    return sympy.Integer(int(token.text))


def _float(token: _Token) -> sympy.Float:
    if len(token.text) > 40:
        raise ExpressionError(f"float literal at offset {token.at} is too long")
    value = float(token.text)
    if not math.isfinite(value):
        raise ExpressionError(f"float literal at offset {token.at} is not finite")
    return sympy.Float(value)


def _numeric(value):
    if isinstance(value, sympy.Expr):
        return value
    raise ExpressionError(f"{value} is a condition where a number is expected")


def is_condition(value) -> bool:
    """True for a sympy condition (``True``, a relation, ``&``/``|``/``~`` of conditions).
    A Symbol is not one, although sympy's Symbol also derives from Boolean."""
    return isinstance(value, (sympy.logic.boolalg.BooleanAtom,
                              sympy.logic.boolalg.BooleanFunction,
                              sympy.core.relational.Relational))


def _boolean(value):
    if is_condition(value):
        return value
    raise ExpressionError(f"{value} is a number where a condition is expected")


def _fold(value):
    """Refuse a folded number past the size limit (sympy folds numbers eagerly)."""
    if isinstance(value, sympy.Integer) and int(value).bit_length() > MAX_FOLDED_BITS:
        raise ExpressionError(f"a folded integer exceeds {MAX_FOLDED_BITS} bits")
    if isinstance(value, sympy.Rational) and not isinstance(value, sympy.Integer) and max(
            int(value.p).bit_length(), int(value.q).bit_length()) > MAX_FOLDED_BITS:
        raise ExpressionError(f"a folded fraction exceeds {MAX_FOLDED_BITS} bits")
    if isinstance(value, sympy.Float) and not math.isfinite(float(value)):
        raise ExpressionError("a folded float is not finite")
    return value


def _multiply(factors: list, negative: bool):
    """One n-ary Mul of ``factors`` (negated when ``negative``); a single factor as is."""
    if len(factors) == 1 and not negative:
        return factors[0]
    factors = [_numeric(f) for f in factors]
    if negative:
        factors = [sympy.Integer(-1), *factors]
    return factors[0] if len(factors) == 1 else _fold(_build(sympy.Mul, *factors))


def _build(constructor, *arguments):
    """Call a sympy constructor; its refusals (division by zero...) become ExpressionError."""
    try:
        return constructor(*arguments)
    except (ZeroDivisionError, TypeError, ValueError, ArithmeticError) as error:
        raise ExpressionError(f"{getattr(constructor, '__name__', 'operation')} of "
                              f"{', '.join(map(str, arguments))} is undefined: {error}") from None


def _product(operator: str, left, right):
    if operator in ("/", "//", "%") and right.is_zero:
        raise ExpressionError(f"division by zero in {left} {operator} {right}")
    if operator == "*":
        return _fold(left * right)
    if operator == "/":
        return _fold(left / right)
    if operator == "//":
        return _fold(_build(E.FloorDiv, left, right))
    return _fold(_build(E.PythonMod, left, right))


def _small_exponent(exponent) -> bool:
    if isinstance(exponent, sympy.Rational):
        return abs(int(exponent.p)) <= MAX_EXPONENT and int(exponent.q) <= MAX_EXPONENT
    return isinstance(exponent, sympy.Float) and abs(float(exponent)) <= MAX_EXPONENT


def _power(base, exponent, constructor=sympy.Pow):
    if not _small_exponent(exponent):
        raise ExpressionError(f"the exponent of {base} ** {exponent} must be a number of at "
                              f"most {MAX_EXPONENT} (a fraction: numerator and denominator)")
    if base.is_zero and exponent.is_negative:
        raise ExpressionError(f"{base} ** {exponent} divides by zero")
    if isinstance(base, sympy.Rational) and max(int(base.p).bit_length(), int(
            base.q).bit_length()) * abs(math.ceil(exponent)) > MAX_FOLDED_BITS:
        raise ExpressionError(f"{base} ** {exponent} exceeds {MAX_FOLDED_BITS} bits")
    return _fold(_build(constructor, base, exponent))
