"""The overlay: writes to attributes of Python objects that outlive the trace.

Traced code may change an attribute of an object from outside ``forward()`` (a config flag,
a ``ContextVar``-like holder) if it restores it before returning. The real objects are never
changed: the writes are kept here, read back by the object trackers, and checked at the end.
"""
from __future__ import annotations

from .graph_breaks import graph_break

__all__ = ["DELETED", "Overlay"]

DELETED = object()  # an overlay entry for an attribute deleted by the trace


class Overlay:
    """Writes to attributes of Python objects that outlive the trace, kept aside (the real
    objects are never changed). A write is acceptable only if undone by the end of the trace:
    ``check_restored`` refuses (UB107) any attribute left with another value than it had.

    entries: (id(obj), name) -> [obj, original tracker or None, current tracker, frames].
    """

    def __init__(self):
        self.entries: dict = {}

    def read(self, obj, name):
        entry = self.entries.get((id(obj), name))
        return None if entry is None else entry[2]

    def write(self, obj, name, value, original, frames) -> None:
        key = (id(obj), name)
        if key in self.entries:
            self.entries[key][2], self.entries[key][3] = value, frames
        else:
            self.entries[key] = [obj, original, value, frames]

    def check_restored(self) -> None:
        for obj, original, current, frames in self.entries.values():
            if not _same_value(original, current):
                name = next(n for (i, n), e in self.entries.items() if e[2] is current)
                raise graph_break("UB107", f"forward() leaves `{type(obj).__name__}.{name}` "
                                  "changed (an object that exists outside forward())",
                                  frames=frames)


def _same_value(original, current) -> bool:
    if current is DELETED:
        return original is None
    if original is None or current is None:
        return original is current or (original is None and current.is_constant()
                                       and current.as_constant() is None) or \
            (current is None and original.is_constant() and original.as_constant() is None)
    if original is current:
        return True
    if original.is_constant() and current.is_constant():
        return original.as_constant() == current.as_constant() and \
            type(original.as_constant()) is type(current.as_constant())
    for attribute in ("value", "module", "meta", "fn"):
        if hasattr(original, attribute) and hasattr(current, attribute):
            return getattr(original, attribute) is getattr(current, attribute)
    return False
