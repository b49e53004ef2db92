"""The edits that put a suggested ``dynamic_shapes`` into the ``unbroken.case(...)`` call that
declared a case, touching as little of the user's text as possible.

The suggestion (``ConstraintViolationError.suggested_code``) is inlined into one display
(``{"x": {0: 4 * Dim("_n", min=2, max=25)}}``: Dims of one name are one dimension; ``Dim`` is
spelled as the file binds it). It is then merged into the declared display rather than
pasted over it: dicts are matched key by key, tuples and lists element by element (a
positional top-level tuple against the suggestion's by-name dict, in argument order), and
only what differs is replaced, removed or added. So the user's layout, comments, line
endings and the entries the fix does not change stay as they were; a comment inside a part
that is replaced or removed is kept on its own line before that part. The merged text is
parsed again and must equal the suggestion, else nothing is written.

A spec given by a name or a call is refused: the file would need more than one edit.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from .source_files import Edit, SourceFile

__all__ = ["SuggestError", "declaration_edits", "dim_name", "spec_argument", "spec_node"]


class SuggestError(Exception):
    """``--write`` cannot edit a declaration (the reason says why and what to do instead)."""


def declaration_edits(source: SourceFile, lineno: int, code: str) -> list[Edit]:
    """The edits of ``source`` that make the ``dynamic_shapes=`` of the ``case(...)`` call at
    ``lineno`` the spec of ``code``; empty when it already is."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError as err:
        raise SuggestError(f"{source.path}:{err.lineno} does not parse: {err.msg}") from err
    old = spec_argument(tree, source.path, lineno)
    new = spec_node(code, dim_name(tree))
    if isinstance(old, (ast.Tuple, ast.List)) and isinstance(new, ast.Dict):
        new = type(old)(elts=list(new.values), ctx=ast.Load())  # positional, argument order
    edits = _Merge(source).merge(old, new)
    _verify(source, edits, source.node_span(old), new)
    return edits


def spec_argument(tree, filename: str, lineno: int):
    """The ``dynamic_shapes=`` display of the innermost ``case(...)`` call spanning
    ``lineno``."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_case(n.func)
             and n.lineno <= lineno <= n.end_lineno]
    if not calls:
        raise SuggestError(f"no unbroken.case(...) call at {filename}:{lineno}")
    call = max(calls, key=lambda n: n.lineno)
    spec = next((k.value for k in call.keywords if k.arg == "dynamic_shapes"), None)
    if not isinstance(spec, (ast.Dict, ast.Tuple, ast.List)):
        raise SuggestError(
            f"the dynamic_shapes= of the declaration at {filename}:{call.lineno} is not written "
            "in the call as a dict, tuple or list (it is a name, a call or built elsewhere); "
            "paste the spec printed above where it is built instead")
    return spec


def _is_case(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "case") or \
        (isinstance(func, ast.Name) and func.id == "case")


def dim_name(tree) -> str:
    """How the file can spell ``torch.export.Dim`` at module level."""
    bound, has_torch = set(), False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            bound |= {a.asname or a.name for a in node.names if a.name == "Dim"}
        elif isinstance(node, ast.Import):
            has_torch |= any(a.name == "torch" and a.asname is None for a in node.names)
    if "Dim" in bound:
        return "Dim"
    if has_torch:
        return "torch.export.Dim"
    raise SuggestError("the file imports neither Dim nor torch at module level; add "
                       "`from torch.export import Dim` and run again")


def spec_node(code: str, dim_name: str) -> ast.expr:
    """The ``dynamic_shapes = {...}`` display of ``code`` with each Dim's definition written
    in place, spelling ``Dim`` as ``dim_name``."""
    module = ast.parse(code)
    definitions, spec = {}, None
    for node in module.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "dynamic_shapes":
                spec = node.value
            else:
                definitions[name] = node.value
    if spec is None:
        raise SuggestError("the suggested code has no dynamic_shapes")
    dim = ast.parse(dim_name, mode="eval").body

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in definitions:
                call = definitions[node.id]
                return ast.copy_location(ast.Call(dim, call.args, call.keywords), node)
            return node

    return Inline().visit(spec)


class _Merge:
    """The edits that turn one display of the file into a new display node."""

    def __init__(self, source: SourceFile):
        self.source = source

    def merge(self, old, new) -> list[Edit]:
        if _same(old, new):
            return []
        if isinstance(old, ast.Dict) and isinstance(new, ast.Dict):
            old_keys, new_keys = _keys(old), _keys(new)
            if old_keys is not None and new_keys is not None:
                return self._merge_dict(old, old_keys, new, new_keys)
        if isinstance(old, (ast.Tuple, ast.List)) and type(new) is type(old) \
                and len(old.elts) == len(new.elts):
            return [e for o, n in zip(old.elts, new.elts) for e in self.merge(o, n)]
        return self._replace(old, ast.unparse(new))

    def _merge_dict(self, old, old_keys, new, new_keys) -> list[Edit]:
        edits = []
        for i, key in enumerate(old_keys):
            if key in new_keys:
                edits += self.merge(old.values[i], new.values[new_keys.index(key)])
            else:
                edits += self._remove_entry(old, i)
        added = [f"{ast.unparse(k)}: {ast.unparse(v)}" for k, v, key in
                 zip(new.keys, new.values, new_keys) if key not in old_keys]
        if added:
            edits.append(self._append_entries(old, added))
        return edits

    def _replace(self, old, text: str) -> list[Edit]:
        start, end = self.source.node_span(old)
        return self._keep_comments(old, start, end) + [Edit(start, end, text)]

    def _remove_entry(self, old, i: int) -> list[Edit]:
        text = self.source.text
        start = self.source.node_span(old.keys[i])[0]
        end = self.source.node_span(old.values[i])[1]
        comma = _next_comma(text, end)
        if comma is not None:
            end = comma + 1
        elif i > 0:
            start = _next_comma(text, self.source.node_span(old.values[i - 1])[1])
        return self._keep_comments(old.keys[i], start, end) + [Edit(start, end, "")]

    def _append_entries(self, old, added: list[str]) -> Edit:
        text = self.source.text
        if not old.keys:
            close = self.source.node_span(old)[1] - 1
            return Edit(close, close, ", ".join(added))
        last = self.source.node_span(old.values[-1])[1]
        comma = _next_comma(text, last)
        if comma is None:
            return Edit(last, last, "".join(f", {a}" for a in added))
        close = self.source.node_span(old)[1] - 1
        if "\n" in text[comma:close] or "\r" in text[comma:close]:
            indent = _indent(self.source.line(old.keys[-1].lineno))
            return Edit(comma + 1, comma + 1, "".join(f"\n{indent}{a}," for a in added))
        return Edit(comma + 1, comma + 1, "".join(f" {a}," for a in added))

    def _keep_comments(self, node, start: int, end: int) -> list[Edit]:
        """Comments inside ``text[start:end]``, written on their own lines before ``node``'s
        line (at its indentation), so that replacing or removing the span keeps them."""
        comments = _comments(self.source.text[start:end])
        if not comments:
            return []
        line = self.source.line(node.lineno)
        at = self.source.offset(node.lineno, 0)
        indent = _indent(line)
        return [Edit(at, at, "".join(f"{indent}{c}\n" for c in comments))]


def _keys(node: ast.Dict) -> list | None:
    """The literal values of a dict display's keys, or None (``**spread``, a computed key)."""
    keys = []
    for key in node.keys:
        if key is None:
            return None
        try:
            keys.append(ast.literal_eval(key))
        except ValueError:
            return None
    return keys


def _same(a, b) -> bool:
    return ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


def _next_comma(text: str, index: int) -> int | None:
    """The index of the comma that follows ``index`` across blanks and comments, or None."""
    while index < len(text):
        char = text[index]
        if char == ",":
            return index
        if char == "#":
            while index < len(text) and text[index] not in "\r\n":
                index += 1
        elif not char.isspace() and char != "\\":
            return None
        else:
            index += 1
    return None


def _comments(text: str) -> list[str]:
    """The comments in a fragment of a display, in order."""
    normalized = re.sub(r"\r\n|\r", "\n", text)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(normalized).readline))
    except (tokenize.TokenError, SyntaxError):
        return re.findall(r"#[^\n]*", normalized)  # a fragment that ends inside a bracket
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _verify(source: SourceFile, edits: list[Edit], span: tuple[int, int], new) -> None:
    """Parse the edited text: it must parse, and the display at ``span`` (the old display's
    place; every edit lies before its end) must now be the suggestion, else nothing is
    written."""
    text = source.edited(edits)
    start = span[0] + sum(len(source.with_newlines(e.text)) - (e.end - e.start)
                          for e in edits if e.start < span[0])
    end = len(text) - (len(source.text) - span[1])
    try:
        ast.parse(text)
        written = ast.parse(text[start:end].strip(), mode="eval").body
    except SyntaxError as err:
        raise SuggestError(
            f"editing {source.path} in place would not parse ({err.msg}); not rewritten: "
            "paste the spec printed above by hand") from err
    if not _same(written, new):
        raise SuggestError(
            f"editing {source.path} in place would not give the suggested spec; not "
            "rewritten: paste the spec printed above by hand")
