"""JSON members of saved programs, read as untrusted data.

:func:`decode_json` refuses, as :class:`SerializationError` naming the member: bytes that are
not UTF-8 JSON, ``NaN``/``Infinity``, integers of more digits than the limit (before they are
converted), duplicate object keys (two readers could disagree on which wins), and nesting
deeper than the limit. :class:`Fields` reads typed fields out of decoded objects with messages
that say where in the document a value was wrong.
"""
from __future__ import annotations

import json
import math

from .format import Limits, fail

__all__ = ["decode_json", "Fields"]


class _Refused(Exception):
    """Raised by the decoder's hooks; turned into a SerializationError by decode_json."""


def decode_json(data: bytes, member: str, limits: Limits):
    """The JSON value in ``data``, within ``limits`` (see the module docstring)."""
    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > limits.integer_digits:
            raise _Refused(f"an integer of {len(text)} digits exceeds the limit of "
                           f"{limits.integer_digits}")
        return int(text)

    def parse_float(text: str) -> float:
        value = float(text) if len(text) <= 64 else math.inf
        if not math.isfinite(value):
            raise _Refused(f"the number {text[:40]} is out of range")
        return value

    def parse_constant(text: str):
        raise _Refused(f"{text} is not a JSON number")

    def pairs(items: list) -> dict:
        value = dict(items)
        if len(value) != len(items):
            raise _Refused("an object repeats a key")
        return value

    try:
        value = json.loads(data.decode("utf-8"), parse_int=parse_int, parse_float=parse_float,
                           parse_constant=parse_constant, object_pairs_hook=pairs)
    except _Refused as refused:
        raise fail(member, str(refused)) from None
    except UnicodeDecodeError as error:
        raise fail(member, f"is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise fail(member, f"is not valid JSON ({error.msg} at line {error.lineno} column "
                           f"{error.colno})") from None
    except RecursionError:  # the C decoder recurses per nesting level
        raise fail(member, f"JSON nests deeper than {limits.json_depth} levels") from None
    _check_depth(value, member, limits.json_depth)
    return value


def _check_depth(value, member: str, limit: int) -> None:
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            raise fail(member, f"JSON nests deeper than {limit} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else ()
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, (dict, list)))


_KINDS = {
    "str": ((str,), "a string"),
    "int": ((int,), "an integer"),
    "bool": ((bool,), "true or false"),
    "list": ((list,), "a list"),
    "dict": ((dict,), "an object"),
}


class Fields:
    """Typed access to decoded JSON. ``member`` names the file member for every message."""

    def __init__(self, member: str):
        self.member = member

    def get(self, obj, key: str, kind: str, where: str, *, optional: bool = False):
        """``obj[key]``, which must be of ``kind`` (``str``, ``int``, ``bool``, ``list``,
        ``dict``) or, when ``optional``, null. ``bool`` is not an ``int`` here."""
        if not isinstance(obj, dict):
            raise fail(self.member, f"{where} must be an object")
        if key not in obj:
            raise fail(self.member, f"{where} has no field {key!r}")
        return self.check(obj[key], kind, f"{where}.{key}", optional=optional)

    def check(self, value, kind: str, where: str, *, optional: bool = False):
        """``value`` itself, checked as in :meth:`get`."""
        if value is None and optional:
            return None
        types, description = _KINDS[kind]
        if not isinstance(value, types) or (kind == "int" and isinstance(value, bool)):
            raise fail(self.member, f"{where} must be {description}"
                                    f"{' or null' if optional else ''}, got {_kind(value)}")
        return value

    def pairs(self, value, where: str) -> list:
        """A list of ``[string, value]`` pairs (how order-carrying maps are written)."""
        self.check(value, "list", where)
        for index, pair in enumerate(value):
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
                raise fail(self.member, f"{where}[{index}] must be a [name, value] pair")
        return value

    def fail(self, where: str, what: str):
        return fail(self.member, f"{where}: {what}")


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__.replace("dict", "object")
