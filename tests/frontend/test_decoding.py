"""``frontend.decoding`` against its ground truth: the ``bytecode`` package's abstract
instructions (names, argument values and their types, line numbers and positions, jump
targets) and ``ConcreteBytecode``'s exception table, on every code object of a set of
library modules and on crafted code that reaches the encodings' corners (``EXTENDED_ARG``
before constants, names, locals and jumps; nested ``try`` regions; cells shared with
arguments; every comparison and operator; ``super()``; f-string conversions; generators,
coroutines, ``match``). Runs on every supported Python: the encodings differ between them."""
from __future__ import annotations

import importlib
import textwrap
import types

import bytecode
import pytest

from unbroken.frontend.decoding import _decode, decode

pytestmark = pytest.mark.matrix  # the encodings differ between Python versions

LIBRARY_MODULES = ("collections", "functools", "dataclasses", "inspect", "typing", "argparse",
                   "asyncio.tasks", "enum", "json.decoder", "contextlib", "torch.nn.functional",
                   "torch.nn.modules.activation", "torch._decomp.decompositions",
                   "unbroken.frontend.translator", "unbroken.frontend.protocol")


def _reference(code) -> list:
    """The decoding the translator used before ``frontend.decoding``: ``bytecode``'s
    abstract instructions, jump labels as instruction indices, and the covering entry of
    the concrete exception table."""
    items = [i for i in bytecode.Bytecode.from_code(code)
             if isinstance(i, (bytecode.Instr, bytecode.Label))]
    labels, index = {}, 0
    for item in items:
        if isinstance(item, bytecode.Label):
            labels[id(item)] = index
        else:
            index += 1
    instrs = [i for i in items if isinstance(i, bytecode.Instr)]
    concrete = bytecode.ConcreteBytecode.from_code(code)
    offsets, offset, prefix = [], 0, None
    for instr in concrete:
        if instr.name == "EXTENDED_ARG":
            prefix = offset if prefix is None else prefix
        elif instr.name != "CACHE":
            offsets.append(offset if prefix is None else prefix)
            prefix = None
        offset += instr.size // 2
    assert len(offsets) == len(instrs)
    index_of = {off: i for i, off in enumerate(offsets)}
    handlers = []
    for off in offsets:
        entry = next((e for e in concrete.exception_table
                      if e.start_offset <= off <= e.stop_offset), None)
        handlers.append(None if entry is None else
                        (index_of[entry.target], entry.stack_depth, entry.push_lasti))
    rows = []
    for instr, handler in zip(instrs, handlers):
        target = labels[id(instr.arg)] if isinstance(instr.arg, bytecode.Label) else None
        where = instr.location
        rows.append((instr.name, target if target is not None else instr.arg, instr.lineno,
                     target, handler, None if where is None else
                     (where.lineno, where.end_lineno, where.col_offset, where.end_col_offset)))
    return rows


def _ours(code) -> list:
    return [(i.name, i.arg, i.lineno, i.target,
             None if i.handler is None else
             (i.handler.target, i.handler.depth, i.handler.push_lasti), i.position)
            for i in _decode(code)]


def _typed(value):
    """``value`` with every leaf's type beside it: ``True`` and ``1`` compare equal, the
    handlers may not read them alike."""
    if isinstance(value, (tuple, list)):
        return tuple(_typed(v) for v in value)
    return type(value), value


def _nested(code, out: list) -> list:
    out.append(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _nested(const, out)
    return out


def _module_codes(module) -> list:
    codes, seen = [], set()
    for value in list(vars(module).values()):
        for obj in (list(vars(value).values()) if isinstance(value, type) else [value]):
            code = getattr(getattr(obj, "__func__", obj), "__code__", None)
            if isinstance(code, types.CodeType) and id(code) not in seen:
                seen.add(id(code))
                codes.extend(_nested(code, []))
    return codes


def _mismatches(codes) -> list:
    bad = []
    for code in codes:
        expected, got = _typed(_reference(code)), _typed(_ours(code))
        if expected != got:
            first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),
                         min(len(expected), len(got)))
            bad.append(f"{code.co_filename}:{code.co_firstlineno} {code.co_name} at "
                       f"instruction {first}: bytecode "
                       f"{expected[first] if first < len(expected) else None} != "
                       f"{got[first] if first < len(got) else None}")
    return bad


@pytest.mark.parametrize("name", LIBRARY_MODULES)
def test_library_code_decodes_as_the_bytecode_package_does(name):
    codes = _module_codes(importlib.import_module(name))
    assert len(codes) > 5
    assert _mismatches(codes) == []


def _compile(source: str) -> list:
    return _nested(compile(textwrap.dedent(source), "<crafted>", "exec"), [])


def test_extended_arguments_decode_as_the_bytecode_package_does():
    constants = ", ".join(f"{i}.5" for i in range(300))          # LOAD_CONST > 255
    attributes = " + ".join(f"o.a{i}" for i in range(300))        # co_names > 255
    lines = ["def many(o, x):", f"    c = [{constants}]"]
    lines += [f"    v{i} = g{i}" for i in range(300)]            # locals and globals > 255
    lines += [f"    t = {attributes}", "    while x:", "        if x > 3:"]
    lines += [f"            x = x + {i}" for i in range(200)]    # jumps over > 255 units
    lines += ["            continue", "        x -= 1", "    try:"]
    lines += [f"        x = x * {i}" for i in range(200)]        # a long try region
    lines += ["    except ValueError as e:", "        return e", "    return c, t, v299"]
    codes = _nested(compile("\n".join(lines), "<crafted>", "exec"), [])
    extended = __import__("opcode").opmap["EXTENDED_ARG"]
    assert any(code.co_code[i] == extended for code in codes
               for i in range(0, len(code.co_code), 2))
    decoded = [i for code in codes for i in decode(code)]
    assert any(i.target is not None and i.target > 255 for i in decoded)
    assert any(i.handler is not None for i in decoded)
    assert _mismatches(codes) == []


def test_crafted_constructs_decode_as_the_bytecode_package_does():
    source = '''
    import contextlib

    def cells(a, b=2, *args, k=1, **kw):
        def inner():
            nonlocal a
            a = a + b + k
            return a, args, kw
        del b
        return inner

    def shared(x):
        y = x
        lam = lambda: x + y
        x = 5
        return lam

    def comparisons(a, b):
        r = [a < b, a <= b, a == b, a != b, a > b, a >= b, a is b, a is not b, a in b,
             a not in b, 1 < a < 3]
        if a == b and (a < 2 or b >= 3):
            r.append(not a)
        return r

    def operators(a, b):
        a += b; a -= b; a *= b; a /= b; a //= b; a %= b; a **= b; a @= b; a <<= b
        a >>= b; a &= b; a |= b; a ^= b
        return (a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a @ b, a << b, a >> b,
                a & b, a | b, a ^ b, -a, +a, ~a, a[b], a[1:b], a[::2])

    def formatting(x, width):
        return f"{x!r} {x!s} {x!a} {x:>{width}} {x=}"

    class Base:
        def hello(self):
            return 1

    class Child(Base):
        def hello(self):
            return super().hello() + super(Child, self).hello()

    def handlers(x):
        try:
            try:
                x = 1 / x
            except ZeroDivisionError:
                x = 0
            finally:
                x += 1
        except* (ValueError, TypeError) as group:
            x = group
        with contextlib.suppress(KeyError), open(x) as f:
            return f
        return x

    def generator(xs):
        yield from xs
        for x in xs:
            yield x * 2

    async def coroutine(xs):
        async with xs as y:
            async for z in y:
                await z
        return [w async for w in xs]

    def comprehensions(xs):
        return [x for x in xs if x], {x: x for x in xs}, {x for x in xs}, (x for x in xs)

    def matching(v):
        match v:
            case {"k": [1, *rest]}:
                return rest
            case Base(hello=h) | Child(hello=h):
                return h
            case (a, b, *_) if a > b:
                return a
            case str() | None:
                return 0
            case _:
                return -1

    def unpacking(xs):
        a, *b, c = xs
        global G
        G = a
        return [*b, *xs], {**{}, "k": c}
    '''
    codes = _compile(source)
    opnames = {i.name for code in codes for i in decode(code)}
    assert {"COMPARE_OP", "BINARY_OP", "MAKE_CELL", "LOAD_DEREF"} <= opnames
    assert any(i.handler is not None for code in codes for i in decode(code))
    assert _mismatches(codes) == []


def test_decoding_is_cached_per_code_object():
    code = compile("x = 1", "<crafted>", "exec")
    assert decode(code) is decode(code)
