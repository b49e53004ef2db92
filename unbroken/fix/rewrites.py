"""Mechanical rewrites of graph breaks: from a break's place in the source to text edits.

:func:`rewrites_for` looks at the statement a break record names (its file and line), finds
the construct with ``ast``, and returns the candidate rewrites in order of preference, or a
:class:`NoRewrite` that says why there is none. A rewrite is only a proposal: the caller
(:mod:`unbroken.fix.verify`) exports the patched code and compares it with eager before it
shows it as verified.

The rewrites (``rule`` names):

- ``where`` / ``cond``: a data-dependent ``if``/``else`` or ternary. ``torch.where(c, a, b)``
  when both arms are one expression (same shape and dtype: the verification decides);
  else ``torch.cond(c, true_fn, false_fn, operands)``: each side becomes a nested function;
  the tensors it reads become operands, other values (``self``, ints) stay closures; both
  sides return the names assigned in either side (a name one side leaves alone is returned
  as ``name.clone()``: a branch may not return its input). ``if ...: return a`` followed by
  the rest of the block is the same ``if``/``else``.
- ``check``: an ``assert`` on tensor data becomes ``torch._check(...)``.
- ``item-check``: a value read with ``.item()`` into a name and used as an index or a size
  gets ``torch._check`` lines (``j >= 0``, ``j < t.shape[d]``): assumptions, marked as such.
- ``tolist``: ``len(x.tolist())`` becomes ``x.shape[0]``; ``for v in x.tolist()`` iterates
  over ``x`` itself.
- ``data``: ``x.data`` becomes ``x.detach()`` (same storage, no autograd history).
- ``unguard``: ``if c:`` around in-place updates only (``t[mask] = v``, ``t.masked_fill_``)
  is dropped, when the updates change nothing where ``c`` is False (an empty mask): a
  comment keeps the condition, and verification drives it both ways.
- ``counter``: ``self.n = self.n + k`` on a Python attribute (reported as a
  ``StateWriteWarning``: the export would not keep it) → a registered buffer updated in place.
- ``numpy``: ``x.numpy()`` becomes ``x.detach()``, ``np.f(...)`` on it ``torch.f(...)``, and
  ``torch.from_numpy(v)`` just ``v``.

A loop whose trip count is tensor data (``while`` on a tensor, ``range(n.item())``) has no
equivalent rewrite: :class:`NoRewrite` says so.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .source import Edit, SourceFile, apply_edits

#: The comment after a ``torch._check`` an ``item-check`` rewrite adds: a stated assumption
#: (verification does not compare inputs that fail it).
ASSUMPTION = "# assumption: holds on the example"

__all__ = ["NoRewrite", "Rewrite", "rewrites_for"]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One proposed rewrite of one break.

    rule:    which rewrite (module docstring): ``where``, ``cond``, ``check``, ...
    path:    the file edited.
    line:    the line of the break.
    edits:   the text edits of ``path``.
    summary: one line for the console (``if x.sum() > 0 → torch.cond``).
    buffers: ``("Class.attr", ...)``: Python attributes the rewrite turns into registered
             buffers (the patched copy of an existing model converts them the same way).
    """

    rule: str
    path: str
    line: int
    edits: tuple[Edit, ...]
    summary: str
    buffers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NoRewrite:
    """A break without a mechanical rewrite, and why."""

    path: str
    line: int
    reason: str


_NOT_FLAT = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Global,
             ast.Nonlocal)


def rewrites_for(src: SourceFile, code: str, line: int, message: str,
                 tensors: frozenset[str]) -> list[Rewrite] | NoRewrite:
    """The candidate rewrites of the break ``code`` at ``line`` of ``src`` (best first).

    ``message`` is the break's message; ``tensors`` the local names that hold tensors at that
    line on the example (observed by running it), which decides operands from closures.
    """
    chain = src.statement_at(line)
    if not chain:
        return NoRewrite(src.path, line, "no statement at this line")
    stmt = chain[-1]
    func = next((n for n in reversed(chain)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    context = _Context(src, stmt, chain, func, tensors, line)
    if code == "UB101":
        return _control_flow(context)
    if code == "UB102":
        return _data(context)
    if code == "UB105":
        return _data_dependent(context, message)
    if code == "UB107" and "StateWriteWarning" in message:
        return _counter(context)
    return NoRewrite(src.path, line, f"no mechanical rewrite for {code} ({message.strip()})")


@dataclass
class _Context:
    src: SourceFile
    stmt: ast.stmt
    chain: list
    func: ast.AST | None
    tensors: frozenset[str]
    line: int
    scalars: dict | None = None  # names bound to `t.item()`: {name: text of t}

    def no(self, reason: str) -> NoRewrite:
        return NoRewrite(self.src.path, self.line, reason)

    def rewrite(self, rule: str, edits, summary: str, buffers=()) -> Rewrite:
        return Rewrite(rule, self.src.path, self.line, tuple(edits), summary, tuple(buffers))

    @property
    def indent(self) -> str:
        return self.src.indentation(self.stmt.lineno)

    @property
    def unit(self) -> str:
        return self.src.indent_unit

    @property
    def nl(self) -> str:
        return self.src.newline


# -- UB101: if / ternary / assert / while -------------------------------------------------------

def _control_flow(c: _Context):
    stmt = c.stmt
    if isinstance(stmt, ast.While) and _spans(stmt.test, c.line):
        return c.no("a `while` loop whose trip count is tensor data has no equivalent "
                    "torch.cond/torch.where form; write it with torch.while_loop by hand, or "
                    "loop a bound known at export time and mask the extra iterations")
    if isinstance(stmt, ast.Assert):
        return _assert(c)
    ternary = [n for n in ast.walk(stmt) if isinstance(n, ast.IfExp) and _spans(n.test, c.line)]
    if isinstance(stmt, ast.If) and _spans(stmt.test, c.line) and not ternary:
        if not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Raise):
            return _raise_if(c)
        return _if(c)
    if ternary:
        return _ternary(c, max(ternary, key=lambda n: n.test.lineno * 10000 + n.col_offset))
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return c.no("the loop's iterable depends on tensor data: no equivalent rewrite")
    return c.no("the truth value of a tensor is taken here outside an if/else, ternary or "
                "assert (`and`/`or`, bool(), a comprehension filter): rewrite it by hand with "
                "torch.where or torch.cond")


def _spans(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= node.end_lineno


def _predicate(c: _Context, test: ast.expr) -> str:
    """The condition as a boolean tensor expression: comparisons as written, ``and``/``or``/
    ``not`` as ``&``/``|``/``~``, any other value's truth as ``.bool()``."""
    if isinstance(test, ast.Compare):
        return _text(c, test)
    if isinstance(test, ast.BoolOp):
        op = " & " if isinstance(test.op, ast.And) else " | "
        return op.join(f"({_predicate(c, v)})" for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return f"~({_predicate(c, test.operand)})"
    text = _text(c, test)
    if isinstance(test, ast.Name) and c.scalars and test.id in c.scalars:
        return f"{text}.bool()"
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            test.func.attr in _BOOLEAN_METHODS:
        return text
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        return f"{text}.bool()"
    return f"({text}).bool()"


_BOOLEAN_METHODS = frozenset({
    "all", "any", "isfinite", "isnan", "isinf", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_not", "logical_xor", "bool", "isclose", "allclose",
    "equal", "is_nonzero", "isneginf", "isposinf", "signbit"})


def _is_call(node) -> bool:
    return isinstance(node, (ast.Call, ast.Name, ast.Attribute, ast.Subscript))


def _text(c: _Context, node: ast.AST) -> str:
    """The source of ``node`` with each value read from a tensor kept as the tensor: a name
    bound to ``t.item()`` becomes ``(t)``, and ``t.item()`` itself ``t``."""
    start, _ = c.src.span(node)
    edits = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and c.scalars and n.id in c.scalars:
            edits.append(Edit(*c.src.span(n), f"({c.scalars[n.id]})"))
        elif _is_item_call(n):
            edits.append(Edit(c.src.span(n.func.value)[1], c.src.span(n)[1], ""))
    text = c.src.segment(node)
    return apply_edits(text, [Edit(e.start - start, e.end - start, e.new) for e in edits])


def _is_item_call(n) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
        n.func.attr == "item" and not n.args and not n.keywords


def _raise_if(c: _Context):
    """``if c: raise E(msg)`` → ``torch._check(not c, lambda: msg)`` (both refuse the input)."""
    stmt = c.stmt
    exc = stmt.body[0].exc
    message = ""
    if isinstance(exc, ast.Call) and exc.args:
        arg = exc.args[0]
        text = c.src.segment(arg)
        message = f", lambda: {text}" if isinstance(arg, (ast.Constant, ast.JoinedStr)) \
            else f", lambda: str({text})"
    # the comments of the `if` line and of the `raise` line: both lines become one
    comments = [c.src.trailing_comment(n) for n in range(stmt.lineno, stmt.end_lineno + 1)]
    tail = "".join(f"  {comment}" for comment in comments if comment)
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    text = f"{c.indent}torch._check((~({_predicate(c, stmt.test)})).item(){message}){tail}{c.nl}"
    return [c.rewrite("check", [Edit(start, end, text)],
                      f"if {c.src.segment(stmt.test)}: raise … → torch._check")]


def _block_of(c: _Context) -> list:
    """The statement list that holds ``c.stmt``."""
    parent = c.chain[-2] if len(c.chain) > 1 else c.src.tree
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and c.stmt in block:
            return block
    for handler in getattr(parent, "handlers", ()):
        if c.stmt in handler.body:
            return handler.body
    return [c.stmt]


def _walk_flat(nodes):
    """Every node under ``nodes``, not entering nested functions, lambdas or classes."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _stored(nodes) -> list[str]:
    names = []
    for n in sorted((n for n in _walk_flat(nodes) if isinstance(n, ast.Name)),
                    key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in names:
            names.append(n.id)
    return names


def _loaded(nodes) -> list[str]:
    names = []
    for n in sorted((n for n in _walk_flat(nodes) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Load)), key=lambda n: (n.lineno, n.col_offset)):
        if n.id not in names:
            names.append(n.id)
    return names


def _ends_in_return(stmts) -> bool:
    if not stmts or not isinstance(stmts[-1], ast.Return) or stmts[-1].value is None:
        return False
    return not any(isinstance(n, _NOT_FLAT) for n in _walk_flat(stmts[:-1])) and \
        not any(isinstance(n, _NOT_FLAT) for n in _walk_flat([stmts[-1].value]))


def _is_flat(stmts) -> bool:
    return not any(isinstance(n, _NOT_FLAT) for n in _walk_flat(stmts))


def _if(c: _Context):
    stmt: ast.If = c.stmt
    if c.func is None:
        return c.no("the if statement is not inside a function")
    block = _block_of(c)
    rest = block[block.index(stmt) + 1:]
    if _ends_in_return(stmt.body) and (_ends_in_return(stmt.orelse) or
                                       (not stmt.orelse and _ends_in_return(rest))):
        false_part = stmt.orelse or rest
        return _returning_if(c, false_part, extend_to=false_part[-1].end_lineno)
    if _is_flat(stmt.body) and _is_flat(stmt.orelse):
        return _assigning_if(c)
    if _is_skip_guard(c, stmt, rest):
        return _continue_if(c, rest)
    return c.no("a branch returns on some paths only (or breaks/continues a loop): "
                "torch.cond needs both sides to produce values; restructure so that each "
                "side assigns the same names, or each ends in a return")


def _is_skip_guard(c: _Context, stmt: ast.If, rest) -> bool:
    """``if c: continue`` directly in a loop's body, followed by flat statements."""
    parent = c.chain[-2] if len(c.chain) > 1 else None
    return isinstance(parent, (ast.For, ast.While, ast.AsyncFor)) and \
        stmt in parent.body and not stmt.orelse and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], ast.Continue) and bool(rest) and _is_flat(rest)


def _live_out(c: _Context, region, part) -> list[str]:
    """The names ``part`` (statements of ``region``) assigns whose value is read later: read
    in the function outside ``region``, or read in ``part`` no later than the statement that
    first assigns them (a value carried to the next iteration of a loop)."""
    inside = {id(n) for n in _walk_flat(region)}
    outside = set(_loaded([n for n in ast.walk(c.func) if id(n) not in inside
                           and isinstance(n, ast.Name)]))
    return [name for name in _stored(part) if name in outside or _read_first(name, part)]


def _read_first(name: str, part) -> bool:
    """Whether ``part`` reads ``name`` no later than the statement that first assigns it."""
    first = next(i for i, s in enumerate(part) if name in _stored([s]))
    return any(name in _loaded([s]) for s in part[:first + 1])


def _continue_if(c: _Context, rest) -> list | NoRewrite:
    """``if c: continue`` + the rest of the loop's body → the rest as the false branch of a
    torch.cond whose true branch (the skipped iteration) returns the names the rest would
    have changed as they are: ``best = torch.cond(c, skip, rest, operands)``."""
    stmt, ind, unit, nl = c.stmt, c.indent, c.unit, c.nl
    outputs = _live_out(c, [stmt, *rest], rest)
    if not outputs:
        return c.no("the rest of the loop body after `if ...: continue` produces no value "
                    "used afterwards: nothing for torch.cond to return")
    unknown = [n for n in outputs if n not in c.tensors]
    if unknown:
        return c.no(f"`{', '.join(unknown)}` is changed after `if ...: continue` and is not a "
                    "tensor before it: torch.cond needs a tensor for the skipped iteration")
    local = [n for n in _stored(rest) if not _read_first(n, rest) and
             n not in _loaded([stmt.test]) and n not in outputs]
    operands = _operands(c, [stmt, *rest], exclude=local)
    params = ", ".join(operands)
    copies = _plain_copies(rest)
    kept = [f"{n}.clone()" for n in outputs]
    made = [f"{n}.clone()" if n in copies else n for n in outputs]

    def packed(names):
        return names[0] if len(names) == 1 else f"({', '.join(names)})"

    comment = c.src.trailing_comment(stmt.lineno)
    tail = f"  {comment}" if comment else ""
    start, end = c.src.line_span(stmt.lineno, rest[-1].end_lineno)
    rest_text = _lines_of(c, rest, first_line=stmt.end_lineno + 1)
    text = (f"{ind}def _skip_branch({params}):{nl}{ind}{unit}return {packed(kept)}{nl}{nl}"
            f"{ind}def _rest_branch({params}):{nl}{rest_text}"
            f"{ind}{unit}return {packed(made)}{nl}{nl}"
            f"{ind}{', '.join(outputs)} = torch.cond({_predicate(c, stmt.test)}, _skip_branch, "
            f"_rest_branch, ({params}{',' if len(operands) == 1 else ''})){tail}{nl}")
    return [c.rewrite("cond", [Edit(start, end, text)],
                      f"if {c.src.segment(stmt.test)}: continue → torch.cond over the rest of "
                      "the loop body")]


def _operands(c: _Context, parts, exclude=()) -> list[str]:
    """The tensors that ``parts`` read from the enclosing function (the branch's operands)."""
    return [n for n in _loaded(parts) if n in c.tensors and n not in exclude]


def _lines_of(c: _Context, stmts, first_line: int | None = None,
              first_is_elif: bool = False) -> str:
    """The source lines of ``stmts`` (from ``first_line`` when given, so that comments
    above the first statement stay) indented one level deeper than ``c.stmt`` (as an ``if``
    body already is; statements at the ``if``'s own level get one more level)."""
    src = c.src
    target = c.indent + c.unit
    if stmts[0].lineno == c.stmt.lineno or stmts[0].lineno == getattr(
            c.stmt, "test", c.stmt).end_lineno or (first_line or 0) > stmts[0].lineno:
        # `if c: return a` / `else: return b` on one line
        return "".join(target + src.segment(s) + c.nl for s in stmts)
    first, last = first_line or stmts[0].lineno, stmts[-1].end_lineno
    text = "".join(src.lines[first - 1:last])
    if not text.endswith(("\n", "\r")):
        text += c.nl
    if src.indentation(stmts[0].lineno).startswith(target):
        return text
    lines = text.splitlines(keepends=True)
    shifted = [(c.unit + ln if ln.strip() else ln) for ln in lines]
    if first_is_elif:
        head = shifted[0]
        at = len(head) - len(head.lstrip(" \t"))
        shifted[0] = head[:at] + head[at:].removeprefix("el")
    return "".join(shifted)


def _body_text(c: _Context) -> str:
    return _lines_of(c, c.stmt.body, first_line=c.stmt.test.end_lineno + 1)


def _false_text(c: _Context, false_part) -> str:
    stmt = c.stmt
    if false_part is not stmt.orelse:  # the rest of the block after `if ...: return`
        return _lines_of(c, false_part, first_line=stmt.end_lineno + 1)
    if isinstance(stmt.orelse[0], ast.If) and \
            c.src.lines[stmt.orelse[0].lineno - 1].lstrip().startswith("elif"):
        return _lines_of(c, false_part, first_is_elif=True)
    else_line = next((n for n in range(stmt.orelse[0].lineno - 1, stmt.body[-1].end_lineno, -1)
                      if c.src.lines[n - 1].lstrip().startswith("else")), None)
    return _lines_of(c, false_part, first_line=else_line + 1 if else_line else None)


def _returning_if(c: _Context, false_part, extend_to: int):
    stmt, ind, nl = c.stmt, c.indent, c.nl
    pred = _predicate(c, stmt.test)
    comment = c.src.trailing_comment(stmt.lineno)
    tail = f"  {comment}" if comment else ""
    start, end = c.src.line_span(stmt.lineno, extend_to)
    candidates = []
    arms = [stmt.body, false_part]
    if all(len(a) == 1 and not isinstance(a[0].value, ast.Tuple) for a in arms):
        a, b = (c.src.segment(arm[0].value) for arm in arms)
        text = f"{ind}return torch.where({pred}, {a}, {b}){tail}{nl}"
        candidates.append(c.rewrite("where", [Edit(start, end, text)],
                                    f"if {c.src.segment(stmt.test)}: return … → torch.where"))
    operands = _operands(c, stmt.body + list(false_part))
    params = ", ".join(operands)
    true_text, false_text = _body_text(c), _false_text(c, false_part)
    text = (f"{ind}def _true_branch({params}):{nl}{true_text}{nl}"
            f"{ind}def _false_branch({params}):{nl}{false_text}{nl}"
            f"{ind}return torch.cond({pred}, _true_branch, _false_branch, "
            f"({params}{',' if len(operands) == 1 else ''})){tail}{nl}")
    candidates.append(c.rewrite("cond", [Edit(start, end, text)],
                                f"if {c.src.segment(stmt.test)}: return … → torch.cond"))
    return candidates


def _assigning_if(c: _Context):
    stmt, ind, unit, nl = c.stmt, c.indent, c.unit, c.nl
    body, orelse = stmt.body, stmt.orelse
    inside = {id(n) for n in ast.walk(stmt)}
    outside = [n for n in ast.walk(c.func) if id(n) not in inside]
    used_after = set(_loaded(outside))
    in_loop = any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for n in c.chain[:-1])
    stored = _stored(body + orelse)
    outputs = [n for n in stored if n in used_after or (in_loop and n in _loaded([stmt]))]
    sentinel = _none_sentinel(c)
    if sentinel is not None:
        return [sentinel]
    if not outputs:
        if not orelse and not stored:
            return [_unguard(c)] + _mutating_cond(c)
        return c.no("the branches produce no value used afterwards (they only change state): "
                    "torch.cond branches may not mutate; compute the new state in both "
                    "branches and assign it after torch.cond")
    pred = _predicate(c, stmt.test)
    comment = c.src.trailing_comment(stmt.lineno)
    tail = f"  {comment}" if comment else ""
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    candidates = []
    single = _single_assignment(body, outputs) if len(outputs) == 1 else None
    other = _single_assignment(orelse, outputs) if orelse else outputs[0]
    if single is not None and other is not None:
        a = c.src.segment(single) if isinstance(single, ast.AST) else single
        b = c.src.segment(other) if isinstance(other, ast.AST) else other
        text = f"{ind}{outputs[0]} = torch.where({pred}, {a}, {b}){tail}{nl}"
        candidates.append(c.rewrite("where", [Edit(start, end, text)],
                                    f"if {c.src.segment(stmt.test)}: {outputs[0]} = … → "
                                    "torch.where"))
    missing = [n for n in outputs if n not in _stored(body) or n not in _stored(orelse)]
    if any(n not in c.tensors for n in missing):
        unknown = ", ".join(n for n in missing if n not in c.tensors)
        return candidates or c.no(f"`{unknown}` is assigned on one side only and is not a "
                                  "tensor before the if: torch.cond needs a value on both sides")
    operands = _operands(c, [stmt], exclude=()) + [n for n in missing
                                                   if n not in _loaded([stmt])]
    params = ", ".join(operands)

    def result(part):
        mine, copies = _stored(part), _plain_copies(part)
        names = [n if n in mine and n not in copies else f"{n}.clone()" for n in outputs]
        return names[0] if len(names) == 1 else f"({', '.join(names)})"

    true_text = _body_text(c) + f"{ind}{unit}return {result(body)}{nl}"
    false_text = (_false_text(c, orelse) if orelse else "") + \
        f"{ind}{unit}return {result(orelse)}{nl}"
    targets = outputs[0] if len(outputs) == 1 else ", ".join(outputs)
    text = (f"{ind}def _true_branch({params}):{nl}{true_text}{nl}"
            f"{ind}def _false_branch({params}):{nl}{false_text}{nl}"
            f"{ind}{targets} = torch.cond({pred}, _true_branch, _false_branch, "
            f"({params}{',' if len(operands) == 1 else ''})){tail}{nl}")
    candidates.append(c.rewrite("cond", [Edit(start, end, text)],
                                f"if {c.src.segment(stmt.test)}: … → torch.cond"))
    return candidates


def _plain_copies(stmts) -> set[str]:
    """Names a branch binds to another name (``out = y``): returned as ``out.clone()``, since
    a torch.cond branch may not return one of its inputs."""
    return {s.targets[0].id for s in stmts if isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Name)}


#: The comment an ``unguard`` rewrite leaves where the ``if`` was; verification reads the
#: condition back from it (and drives it both ways).
UNGUARDED = "# unbroken fix: unguarded `if {}:` (its body changes nothing when it is False)"


def _unguard(c: _Context) -> Rewrite:
    """``if c: <in-place updates>`` → the updates alone, when they change nothing on the inputs
    where ``c`` is False (a masked write whose mask is then empty): only verification can say,
    so the rewrite is a candidate like any other."""
    stmt, unit = c.stmt, c.unit
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    body = _body_text(c)
    lines = [ln[len(unit):] if ln.startswith(c.indent + unit) else ln
             for ln in body.splitlines(keepends=True)]
    note = UNGUARDED.format(c.src.segment(stmt.test))
    text = f"{c.indent}{note}{c.nl}" + "".join(lines)
    return c.rewrite("unguard", [Edit(start, end, text)],
                     f"if {c.src.segment(stmt.test)}: <in-place update> → the update alone")


#: The comment a ``drop-none`` rewrite leaves where the ``if`` was (read back as a guard).
DROPPED = ("# unbroken fix: dropped `if {}:` (it set `{}` to None; the code after it does the "
           "same with the tensor)")


def _none_sentinel(c: _Context) -> Rewrite | None:
    """``if c: m = None`` (no else), where later code tests ``m is None`` / ``m is not
    None``: the usual "no mask when nothing is masked" (``if not mask.any(): mask = None``).
    The statement is dropped, so ``m`` stays a tensor: equivalent when what the code after
    does with the tensor where ``c`` holds is what it does without it (a fill or a select
    through an empty mask); only verification can say, driving ``c`` both ways."""
    stmt = c.stmt
    if stmt.orelse or len(stmt.body) != 1 or not isinstance(stmt.body[0], ast.Assign):
        return None
    assign = stmt.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name) or \
            not isinstance(assign.value, ast.Constant) or assign.value.value is not None:
        return None
    name = assign.targets[0].id
    block = _block_of(c)
    rest = block[block.index(stmt) + 1:]
    tested = any(isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and
                 n.left.id == name and len(n.ops) == 1 and
                 isinstance(n.ops[0], (ast.Is, ast.IsNot)) and
                 isinstance(n.comparators[0], ast.Constant) and n.comparators[0].value is None
                 for n in ast.walk(ast.Module(body=rest, type_ignores=[])))
    if not rest or not tested or name not in c.tensors:
        return None
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    note = DROPPED.format(c.src.segment(stmt.test), name)
    return c.rewrite("drop-none", [Edit(start, end, f"{c.indent}{note}{c.nl}")],
                     f"if {c.src.segment(stmt.test)}: {name} = None → {name} stays a tensor")


def _mutated(stmts) -> list[str]:
    """Local names a block updates in place: ``t[...] = v`` and ``t.op_(...)``."""
    names = []
    for n in _walk_flat(stmts):
        target = None
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                while isinstance(t, ast.Subscript):
                    t = t.value
                target = t if isinstance(t, ast.Name) and t is not n else target
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr.endswith("_") and not n.func.attr.startswith("_") and \
                isinstance(n.func.value, ast.Name):
            target = n.func.value
        if target is not None and target.id not in names:
            names.append(target.id)
    return names


def _mutating_cond(c: _Context) -> list:
    """``if c: t[m] = v`` → a torch.cond whose true branch computes the updated ``t`` and
    returns it, the false branch returns ``t`` as it is (a copy): ``t`` is rebound to the
    result. The updates of the branch are written functionally where they can be
    (:func:`_functional_update`: ``t = t.index_put((m,), v)``, ``t = t.masked_fill(m, v)``): a
    torch.cond branch may not write into a tensor; the others update a copy. Equivalent unless
    ``t`` is seen through another name (an input, a view): verification compares the inputs
    after the call too."""
    stmt, ind, unit, nl = c.stmt, c.indent, c.unit, c.nl
    names = _mutated(stmt.body)
    if not names or any(n not in c.tensors for n in names):
        return []
    operands = _operands(c, [stmt])
    operands += [n for n in names if n not in operands]
    params = ", ".join(operands)
    body, converted = _body_text(c), 0
    at = 0
    for s in stmt.body:
        new = _functional_update(c, s)
        old = c.src.segment(s)
        found = body.find(old, at)
        if new is None or found < 0 or "\n" in old or "\r" in old:
            continue
        body = body[:found] + new + body[found + len(old):]
        at, converted = found + len(new), converted + 1
    functional = converted == sum(1 for s in stmt.body if _updates_in_place(s))
    copies = "" if functional else "".join(f"{ind}{unit}{n} = {n}.clone(){nl}" for n in names)
    result = names[0] if len(names) == 1 else f"({', '.join(names)})"
    passed = names[0] + ".clone()" if len(names) == 1 else \
        "(" + ", ".join(f"{n}.clone()" for n in names) + ")"
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    comment = c.src.trailing_comment(stmt.lineno)
    tail = f"  {comment}" if comment else ""
    text = (f"{ind}def _true_branch({params}):{nl}{copies}{body}"
            f"{ind}{unit}return {result}{nl}{nl}"
            f"{ind}def _false_branch({params}):{nl}{ind}{unit}return {passed}{nl}{nl}"
            f"{ind}{', '.join(names)} = torch.cond({_predicate(c, stmt.test)}, _true_branch, "
            f"_false_branch, ({params}{',' if len(operands) == 1 else ''})){tail}{nl}")
    how = "functional update" if functional else "in-place update on a copy"
    return [c.rewrite("cond", [Edit(start, end, text)],
                      f"if {c.src.segment(stmt.test)}: <in-place update> → torch.cond, {how}")]


def _updates_in_place(s) -> bool:
    """Whether statement ``s`` writes into a tensor (``t[...] = v``, ``t[...] op= v``,
    ``t.op_(...)``) anywhere (nested statements included)."""
    return bool(_mutated([s]))


#: Python numbers written into a tensor are cast to its dtype; ``index_put`` wants a tensor.
_NUMBER = (ast.Constant, ast.UnaryOp)


def _functional_update(c: _Context, s) -> str | None:
    """The out-of-place form of one in-place update statement, or None:

    - ``t[i] = v`` / ``t[i, j] = v`` where every index is a tensor expression (a boolean mask
      or integer indices) → ``t = t.index_put((i, j), v)`` with ``v`` cast to ``t``'s dtype
      (as ``__setitem__`` casts); a slice, an int or ``...`` among the indices: None.
    - ``t.op_(args)`` as a statement, ``op`` a Tensor method → ``t = t.op(args)``.
    """
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
            isinstance(s.targets[0], ast.Subscript) and isinstance(s.targets[0].value, ast.Name):
        target = s.targets[0]
        name = target.value.id
        index = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if not index or not all(_is_tensor_expr(c, i) for i in index):
            return None
        indices = ", ".join(c.src.segment(i) for i in index) + ("," if len(index) == 1 else "")
        value = c.src.segment(s.value)
        if isinstance(s.value, _NUMBER) and _is_number(s.value):
            value = f"torch.tensor({value}, dtype={name}.dtype, device={name}.device)"
        elif not value.endswith(f".to({name}.dtype)"):
            value = f"({value}).to({name}.dtype)"
        return f"{name} = {name}.index_put(({indices}), {value})"
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
            isinstance(s.value.func, ast.Attribute) and isinstance(s.value.func.value, ast.Name):
        attr, name = s.value.func.attr, s.value.func.value.id
        import torch

        if attr.endswith("_") and not attr.startswith("_") and name in c.tensors and \
                callable(getattr(torch.Tensor, attr[:-1], None)):
            func = s.value.func
            call = c.src.segment(s.value)
            head = c.src.segment(func)
            return f"{name} = {name}.{attr[:-1]}{call[len(head):]}"
    return None


def _is_number(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)


_NOT_TENSOR_METHODS = frozenset({"item", "tolist", "size", "dim", "numel", "nelement",
                                 "stride", "data_ptr", "element_size", "is_contiguous"})


def _is_tensor_expr(c: _Context, node) -> bool:
    """Whether ``node`` certainly evaluates to a tensor: a name that holds one on the example,
    a method call on such an expression (not ``.item()``/``.size()``/...), a comparison or
    arithmetic with one, ``~`` of one. (A wrong guess only costs a rewrite verification
    refuses.)"""
    if isinstance(node, ast.Name):
        return node.id in c.tensors
    if isinstance(node, ast.Attribute):
        return node.attr in ("T", "mT", "real", "imag") and _is_tensor_expr(c, node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr not in _NOT_TENSOR_METHODS and \
            _is_tensor_expr(c, node.func.value)
    if isinstance(node, ast.Compare):
        return any(_is_tensor_expr(c, n) for n in [node.left, *node.comparators]) and \
            len(node.ops) == 1 and not isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In,
                                                                ast.NotIn))
    if isinstance(node, ast.BinOp):
        return _is_tensor_expr(c, node.left) or _is_tensor_expr(c, node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.USub)):
        return _is_tensor_expr(c, node.operand)
    return False


def _single_assignment(stmts, outputs):
    """The value assigned when ``stmts`` is exactly ``name = value`` (or ``name op= value``,
    returned as text) to the one output; else None."""
    if len(stmts) != 1:
        return None
    s = stmts[0]
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
            isinstance(s.targets[0], ast.Name) and s.targets[0].id == outputs[0]:
        return s.value
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and \
            s.target.id == outputs[0] and not isinstance(s.value, ast.Tuple):
        op = _BINOPS.get(type(s.op))
        return None if op is None else f"{outputs[0]} {op} ({ast.unparse(s.value)})"
    return None


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@"}


def _ternary(c: _Context, node: ast.IfExp):
    pred = _predicate(c, node.test)
    a, b = c.src.segment(node.body), c.src.segment(node.orelse)
    start, end = c.src.span(node)
    where = c.rewrite("where", [Edit(start, end, f"torch.where({pred}, {a}, {b})")],
                      f"{c.src.segment(node)} → torch.where")
    operands = _operands(c, [node.body, node.orelse])
    params = ", ".join(operands)
    packed = f"({params}{',' if len(operands) == 1 else ''})"
    cond_text = f"torch.cond({pred}, lambda {params}: {a}, lambda {params}: {b}, {packed})"
    cond = c.rewrite("cond", [Edit(start, end, cond_text)],
                     f"{c.src.segment(node)} → torch.cond")
    return [where, cond]


def _assert(c: _Context):
    stmt: ast.Assert = c.stmt
    pred = _predicate(c, stmt.test)
    message = f", lambda: {c.src.segment(stmt.msg)}" if stmt.msg is not None else ""
    comment = c.src.trailing_comment(stmt.lineno)
    tail = f"  {comment}" if comment else ""
    start, end = c.src.line_span(stmt.lineno, stmt.end_lineno)
    pred = pred if _is_call(stmt.test) else f"({pred})"
    text = f"{c.indent}torch._check({pred}.item(){message}){tail}{c.nl}"
    return [c.rewrite("check", [Edit(start, end, text)],
                      f"assert {c.src.segment(stmt.test)} → torch._check")]


# -- UB102: Tensor.data -------------------------------------------------------------------------

def _data(c: _Context):
    found = [n for n in ast.walk(c.stmt) if isinstance(n, ast.Attribute) and n.attr == "data"
             and _spans(n, c.line)]
    if not found:
        return c.no("no `.data` attribute on this line")
    edits = []
    for node in found:
        start, end = c.src.span(node)
        edits.append(Edit(start, end, f"{c.src.segment(node.value)}.detach()"))
    return [c.rewrite("data", edits, ".data → .detach() (same storage, no autograd history)")]


# -- UB105: values read from tensors ----------------------------------------------------------

def _data_dependent(c: _Context, message: str):
    stmt = c.stmt
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and not n.args and _spans(n, c.line)]
    tolist = [n for n in calls if n.func.attr == "tolist"]
    if "range()" in message or (isinstance(stmt, ast.For) and _is_range_of_item(stmt.iter)):
        return c.no("the loop's trip count is tensor data (range of a value read from a "
                    "tensor): unrolling cannot be equivalent; write it with torch.while_loop "
                    "by hand, or loop a bound known at export time and mask")
    if tolist:
        return _tolist(c, tolist)
    decision = _decision_on_item(c)
    if decision is not None:
        return decision
    if "`.numpy()`" in message or any(n.func.attr == "numpy" for n in calls):
        return _numpy(c)
    if "Could not decide" in message:
        return _item_check(c, message)
    return c.no(f"no mechanical rewrite for this use of a tensor's value ({message.strip()})")


def _decision_on_item(c: _Context):
    """An ``if``/ternary/``assert`` whose condition reads a value out of a tensor
    (``a = x.item(); if a < 6:`` or ``if x.sum().item() > 0:``): the control-flow rewrites,
    with the condition kept as a tensor."""
    stmt = c.stmt
    tests = [stmt.test] if isinstance(stmt, (ast.If, ast.Assert)) else []
    tests += [n.test for n in ast.walk(stmt) if isinstance(n, ast.IfExp)]
    tests = [t for t in tests if _spans(t, c.line)]
    if not tests or c.func is None:
        return None
    bound = {name: a.value.func.value for name, a in _item_bindings(c.func).items()}
    used = {n.id for t in tests for n in ast.walk(t) if isinstance(n, ast.Name)} & set(bound)
    if not used and not any(_is_item_call(n) for t in tests for n in ast.walk(t)):
        return None
    c.scalars = {name: c.src.segment(bound[name]) for name in used}
    return _control_flow(c)


def _is_range_of_item(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "range" and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("item", "tolist") for a in node.args for n in ast.walk(a))


def _tolist(c: _Context, calls):
    edits, parents = [], _parents(c.stmt)
    for call in calls:
        parent = parents.get(id(call))
        tensor = c.src.segment(call.func.value)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
                parent.func.id == "len" and len(parent.args) == 1:
            edits.append(Edit(*c.src.span(parent), f"{tensor}.shape[0]"))
        elif isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is call:
            edits.append(Edit(*c.src.span(call), tensor))
        else:
            return c.no("`.tolist()` feeds Python code that needs the values themselves: keep "
                        "the computation on tensors by hand")
    return [c.rewrite("tolist", edits, ".tolist() → shape / tensor iteration")]


def _parents(root) -> dict:
    parents = {}
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _numpy(c: _Context):
    """``.numpy()`` → ``.detach()``, ``np.f(`` → ``torch.f(`` and ``torch.from_numpy(v)`` →
    ``v`` across the function (the array's uses are rewritten with it)."""
    import torch  # the names numpy calls map to

    edits = []
    for node in _walk_flat(c.func.body if c.func is not None else [c.stmt]):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not node.args:
            edits.append(Edit(c.src.span(func.value)[1], c.src.span(node)[1], ".detach()"))
        elif isinstance(func, ast.Attribute) and func.attr in ("from_numpy", "as_tensor",
                                                              "tensor") \
                and isinstance(func.value, ast.Name) and func.value.id == "torch" \
                and len(node.args) == 1 and not node.keywords:
            # keep the call's own parentheses: `torch.from_numpy(v)` -> `(v)`
            edits.append(Edit(c.src.span(node)[0], c.src.span(node.args[0])[0], "("))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in ("np", "numpy") and hasattr(torch, func.attr):
            edits.append(Edit(*c.src.span(func), f"torch.{func.attr}"))
    if not edits:
        return c.no("`.numpy()` feeds code with no torch equivalent")
    return [c.rewrite("numpy", edits, ".numpy() arithmetic → torch")]


def _item_check(c: _Context, message: str):
    """A decision on a value read with ``.item()`` and bound to a name (``j = i.item()``),
    used as an index or a size: after the binding, ``torch._check(j >= 0)`` and, for each
    ``t[j]`` in the statement, ``torch._check(j < t.shape[d])``. Both are assumptions the
    example satisfies (``torch._check`` becomes a runtime assert), marked as such."""
    if c.func is None:
        return c.no("the decision is not inside a function")
    bound = _item_bindings(c.func)
    used = [n for n in _loaded([c.stmt]) if n in bound]
    if not used:
        return c.no("the undecided value is not a name bound to `.item()` in this function: "
                    "bind it (`n = t.item()`) and state its range with torch._check")
    edits, checks = [], []
    for name in used:
        assign = bound[name]
        lines = [f"torch._check({name} >= 0)"]
        for node in ast.walk(c.stmt):
            if isinstance(node, ast.Subscript):
                index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                for dim, part in enumerate(index):
                    if isinstance(part, ast.Name) and part.id == name:
                        lines.append(f"torch._check({name} < "
                                     f"{c.src.segment(node.value)}.shape[{dim}])")
        indent = c.src.indentation(assign.lineno)
        _, end = c.src.line_span(assign.lineno, assign.end_lineno)
        text = "".join(f"{indent}{line}  {ASSUMPTION}{c.nl}" for line in lines)
        edits.append(Edit(end, end, text))
        checks += lines
    return [c.rewrite("item-check", edits, "; ".join(checks) + " after the .item()")]


def _item_bindings(func) -> dict:
    """``{name: assignment}`` for ``name = <expr>.item()`` statements of ``func``."""
    found = {}
    for node in _walk_flat(func.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "item":
            found[node.targets[0].id] = node
    return found


# -- UB107 (a StateWriteWarning): a counter kept on self ----------------------------------------

def _counter(c: _Context):
    """``self.n = self.n + k`` (or ``self.n += k``) with ``self.n = v`` in ``__init__`` →
    ``self.register_buffer("n", torch.tensor(v))`` and ``self.n.add_(k)``: the exported program
    writes the buffer back, so every call sees the count eager would."""
    stmt = c.stmt
    name, step = _counter_update(stmt)
    if name is None:
        return c.no("the attribute changes in another way than `self.n = self.n + k`: keep "
                    "the state in a registered buffer and update it in place by hand")
    classes = [n for n in c.chain if isinstance(n, ast.ClassDef)]
    init = next((n for n in classes[-1].body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None) if classes else None
    first = next((n for n in ast.walk(init) if isinstance(n, ast.Assign) and len(n.targets) == 1
                  and _is_self_attribute(n.targets[0], name)), None) if init else None
    if first is None or first.lineno != first.end_lineno:
        return c.no(f"`self.{name}` is not set by one line of the class's __init__")
    start, end = c.src.span(first)
    init_text = f'self.register_buffer("{name}", torch.tensor({c.src.segment(first.value)}))'
    update_start, update_end = c.src.span(stmt)
    qualname = ".".join(n.name for n in classes)
    return [c.rewrite("counter", [Edit(start, end, init_text),
                                  Edit(update_start, update_end, f"self.{name}.add_({step})")],
                      f"self.{name}: a Python counter → a registered buffer updated in place",
                      buffers=(f"{qualname}.{name}",))]


def _is_self_attribute(node, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name and \
        isinstance(node.value, ast.Name) and node.value.id == "self"


def _counter_update(stmt):
    """``(name, step text)`` of ``self.n = self.n + k`` / ``self.n += k``, else (None, None)."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and \
            isinstance(stmt.target, ast.Attribute) and \
            _is_self_attribute(stmt.target, stmt.target.attr):
        return stmt.target.attr, ast.unparse(stmt.value)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.value, ast.BinOp) \
            and isinstance(stmt.value.op, ast.Add):
        name = stmt.targets[0].attr
        if _is_self_attribute(stmt.targets[0], name) and \
                _is_self_attribute(stmt.value.left, name):
            return name, ast.unparse(stmt.value.right)
    return None, None
