"""Choosing which cases run: ``-k EXPR`` and ``--shard I/N``.

``-k`` takes pytest's keyword grammar::

    expr := or_expr
    or_expr := and_expr ("or" and_expr)*
    and_expr := not_expr ("and" not_expr)*
    not_expr := "not" not_expr | "(" expr ")" | word

A word matches a case when it is a case-insensitive substring of the case's id
(``models/heads.py::Head[1]``), so ``-k Head``, ``-k "heads.py and not [1]"`` and
``-k "resnet or vit"`` all work as they do in pytest.

``--shard I/N`` keeps the cases whose position in the id-sorted list is ``I-1`` modulo ``N``:
the split depends only on the set of ids, so every machine of a CI matrix computes the same
one, and the N shards together hold every case exactly once.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KeywordError", "ShardError", "keyword_matcher", "parse_shard", "shard"]

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class KeywordError(ValueError):
    """A ``-k`` expression that does not parse (a usage error)."""


class ShardError(ValueError):
    """A ``--shard`` that is not ``I/N`` with ``1 <= I <= N`` (a usage error)."""


@dataclass(slots=True)
class _Parser:
    tokens: list[str]
    position: int = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise KeywordError("the expression ends too early")
        self.position += 1
        return token

    def expr(self) -> Callable[[str], bool]:
        left = self.and_expr()
        while self.peek() == "or":
            self.take()
            left = _either(left, self.and_expr())
        return left

    def and_expr(self) -> Callable[[str], bool]:
        left = self.not_expr()
        while self.peek() == "and":
            self.take()
            left = _both(left, self.not_expr())
        return left

    def not_expr(self) -> Callable[[str], bool]:
        token = self.take()
        if token == "not":
            inner = self.not_expr()
            return lambda text: not inner(text)
        if token == "(":
            inner = self.expr()
            if self.take() != ")":
                raise KeywordError("a '(' is not closed")
            return inner
        if token in ("and", "or", ")"):
            raise KeywordError(f"unexpected {token!r}")
        word = token.lower()
        return lambda text: word in text


def _either(a, b):
    return lambda text: a(text) or b(text)


def _both(a, b):
    return lambda text: a(text) and b(text)


def keyword_matcher(expression: str) -> Callable[[str], bool]:
    """A predicate on case ids for a ``-k`` expression. Raises KeywordError."""
    parser = _Parser(_TOKEN.findall(expression))
    if not parser.tokens:
        raise KeywordError("the expression is empty")
    match = parser.expr()
    if parser.peek() is not None:
        raise KeywordError(f"unexpected {parser.peek()!r}")
    return lambda case_id: match(case_id.lower())


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` -> ``(2, 5)``. Raises ShardError."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ShardError(f"--shard takes I/N with 1 <= I <= N (e.g. 1/4), got {text!r}")
    return int(match.group(1)), int(match.group(2))


def shard(ids: list[str], index: int, count: int) -> set[str]:
    """The ids of shard ``index`` (1-based) of ``count``."""
    return {case_id for i, case_id in enumerate(sorted(ids)) if i % count == index - 1}
