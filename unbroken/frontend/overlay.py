"""The overlay: writes to attributes of Python objects that outlive the trace.

The real objects are never changed: the writes are kept here, read back by the object
trackers, and checked at the end. Two kinds of write:

- to an outside object (a config flag, a ``ContextVar``-like holder): acceptable only if
  undone before forward() returns, since the exported program cannot replay it;
- to the model's own state (an attribute of one of its modules or of a plain object it holds,
  such as a cache object; a Python attribute of an input tensor): *kept*, as ``torch.export``
  does. The program computes what eager's forward
  computes from the model as it was at export time; the model itself is left unchanged
  (export never changes the caller's model).

Forward hooks and pre-hooks that forward() registers on a module (or removes through the
handle it got) are kept here the same way: the trace's later calls of that module run the
hooks eager would run, and the module's own hook dicts are never touched. A hook on one of
the model's modules may stay registered; one on an outside module must be removed by the end.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..symbolic.diagnostics.catalogue import graph_break

__all__ = ["DELETED", "HookTable", "Overlay", "StateWriteWarning", "TracedHook", "Write",
           "contents_key", "refuse_in_branch"]

DELETED = object()  # an overlay entry for an attribute deleted by the trace


@dataclass(slots=True)
class Write:
    """One attribute of one object as the trace left it.

    obj: the object (kept alive, so its id stays its own); name: the attribute; original: its
    tracker before the first write (None: it had none); current: the latest tracker (or
    DELETED); frames: the user's frames of the latest write; kept: a write to the model's own
    state, which may stay changed (see the module docstring); snapshot: for the trace's copy
    of a container the model holds (not a write: a read), its ``contents_key`` when taken."""

    obj: object
    name: str
    original: object
    current: object
    frames: object
    kept: bool
    read_first: bool = False
    snapshot: object = None


@dataclass(frozen=True, slots=True)
class TracedHook:
    """One forward hook or forward pre-hook of a module, as the trace sees it.

    hook_id: its key in the module's hook dict (a hook the module had: its own id; a hook the
    trace registered: a negative int, which torch never hands out); hook: the callable (the
    Python function of a hook the module had, the tracker of one the trace registered);
    with_kwargs: it is called with the call's keyword arguments too."""

    hook_id: int
    hook: object
    with_kwargs: bool


@dataclass(slots=True)
class HookTable:
    """The forward hooks (kind ``"forward"``) or pre-hooks (``"forward_pre"``) of one module
    whose hooks the trace changed.

    module: the module (kept alive); hooks: its hooks as the trace sees them, in the order eager
    runs them; original: the ids of the hooks it had; kept: the model's own module (a hook left
    registered is kept, as attribute writes are); frames: the user's frames of the latest
    change."""

    module: object
    hooks: list
    original: tuple
    kept: bool
    frames: object


class Overlay:
    """Writes to attributes of Python objects that outlive the trace, kept aside (the real
    objects are never changed). ``check_restored`` refuses (UB107) a write that must be undone
    (``kept=False``) and is left with another value than it had, and a hook left registered on
    a module that is not the model's.

    entries: (id(obj), name) -> Write.
    hooks:   (id(module), kind) -> HookTable.
    """

    def __init__(self):
        self.entries: dict[tuple[int, str], Write] = {}
        self._written: set[int] = set()  # ids of the objects with an entry
        self.reads: set[tuple[int, str]] = set()  # model attributes read before any write
        self.hooks: dict[tuple[int, str], HookTable] = {}
        self._next_hook_id = -1
        # changes of the state the trace sees outside its own locals: writes here, hooks,
        # and every mutation the trace makes of a container, cell or object
        # (``builtin_methods.check_mutable``) or lets native code make (an outside object
        # handed to a leaf call); what was read before is unchanged while this stays put
        self.mutations = 0

    def hooks_of(self, module, kind: str) -> list[TracedHook] | None:
        """The ``kind`` hooks of ``module`` in the trace, or None if the trace changed none
        (then they are the module's own)."""
        table = self.hooks.get((id(module), kind))
        return None if table is None else list(table.hooks)

    def add_hook(self, module, kind: str, current: list[TracedHook], hook, *,
                 with_kwargs: bool, prepend: bool, kept: bool, frames) -> int:
        """Register ``hook`` as eager's ``register_<kind>_hook`` would, after the hooks
        ``current`` (the module's hooks as the trace sees them); returns its id. kept: the
        module is the model's own."""
        self.mutations += 1
        hook_id, self._next_hook_id = self._next_hook_id, self._next_hook_id - 1
        table = self.hooks.setdefault((id(module), kind), HookTable(
            module, list(current), tuple(h.hook_id for h in current), kept, frames))
        table.frames = frames
        added = TracedHook(hook_id, hook, with_kwargs)
        if prepend:
            table.hooks.insert(0, added)
        else:
            table.hooks.append(added)
        return hook_id

    def remove_hook(self, module, kind: str, hook_id: int) -> None:
        """``handle.remove()`` of a hook the trace registered (again: nothing, as eager)."""
        self.mutations += 1
        table = self.hooks[(id(module), kind)]
        table.hooks[:] = [hook for hook in table.hooks if hook.hook_id != hook_id]

    def note_read(self, obj, name: str) -> None:
        """The trace read ``obj.name`` (a module attribute)."""
        self.reads.add((id(obj), name))

    def written(self, obj) -> bool:
        """True when the trace wrote (or deleted) an attribute of ``obj``."""
        return id(obj) in self._written

    def read(self, obj, name):
        """The tracker the trace last wrote to ``obj.name`` (DELETED, or None: no write)."""
        entry = self.entries.get((id(obj), name))
        return None if entry is None else entry.current

    def write(self, obj, name, value, original, frames, *, kept: bool = False,
              snapshot=None) -> None:
        """Record ``obj.name = value`` (``original``: the tracker it had, read before the
        first write only); ``kept``: the model's own state, see the module docstring;
        ``snapshot``: see ``Write``."""
        self.mutations += 1
        entry = self.entries.get((id(obj), name))
        if entry is None:
            self._written.add(id(obj))
            self.entries[(id(obj), name)] = Write(obj, name, original, value, frames, kept,
                                                  (id(obj), name) in self.reads, snapshot)
        else:
            entry.current, entry.frames = value, frames
            entry.kept = entry.kept and kept

    def check_restored(self) -> None:
        for entry in self.entries.values():
            if not entry.kept and not _same_value(entry.original, entry.current):
                raise graph_break("UB107", f"forward() leaves `{type(entry.obj).__name__}."
                                  f"{entry.name}` changed (an object that exists outside "
                                  "forward())", frames=entry.frames)
        for (_, kind), table in self.hooks.items():
            if not table.kept and tuple(h.hook_id for h in table.hooks) != table.original:
                raise graph_break("UB107", f"forward() leaves a {kind.replace('_', ' ')} hook "
                                  f"registered on a {type(table.module).__name__} that is not "
                                  "part of the model (an object that exists outside forward())",
                                  frames=table.frames,
                                  details="Remove it before forward() returns (keep the "
                                  "handle), or register it on a module of the model.")


    def warn_changed_state(self) -> None:
        """A :class:`StateWriteWarning` for each attribute of the model that forward() read and
        then left with another value: eager's next call would read the new one, each call of
        the program reads the value as exported (and its tensor state as the last call left
        it)."""
        for entry in self.entries.values():
            if not (entry.kept and entry.read_first) or entry.current is DELETED or \
                    entry.original is not None:  # a kept write with an original: a buffer,
                continue                          # which the program writes back
            if entry.snapshot is not None and entry.snapshot == contents_key(entry.current):
                continue  # the trace's copy of a container, left as it was read
            before = vars(entry.obj).get(entry.name) if hasattr(entry.obj, "__dict__") else None
            if entry.current.is_constant() and entry.current.as_constant() == before:
                continue
            where = f" at {entry.frames[-1].short()} (`{entry.frames[-1].source}`)" \
                if entry.frames else ""
            # a container's copy is taken where it is first read, not where it is changed
            what = f"reads `{type(entry.obj).__name__}.{entry.name}`{where} and then changes " \
                "its contents" if entry.snapshot is not None else \
                f"reads `{type(entry.obj).__name__}.{entry.name}` and then changes it{where}"
            warnings.warn(StateWriteWarning(
                f"forward() {what}: the exported program does not keep the change, so each "
                "call runs as eager's first call with the attribute as exported (eager's next "
                "call would read the new value), on the parameters and buffers the previous "
                "call left (a one-time in-place update guarded by it is made again by every "
                "call)."),
                stacklevel=2)


class StateWriteWarning(UserWarning):
    """forward() changes an attribute of the model that it also reads: each call of the
    exported program runs as eager's first call (see ``Overlay.warn_changed_state``)."""


def contents_key(container) -> tuple:
    """What a list, dict or set tracker holds, by identity of its element trackers (a set's
    constants by value): equal keys, unchanged contents."""
    if hasattr(container, "elements"):
        return ("list", tuple(id(e) for e in container.elements))
    if hasattr(container, "entries"):
        return ("dict", tuple((k, id(v)) for k, v in container.entries.items()))
    return ("set", frozenset(container.value))


def refuse_in_branch(tx, what: str) -> None:
    """Refuse (UB107) a write to the model's own state from inside a torch.cond branch: both
    branches are traced and the overlay would show one branch's write to the other."""
    if tx.output.branch_starts:
        raise graph_break("UB107", f"{what} from inside a torch.cond branch (both branches "
                          "are traced, one runs)", frames=tx.user_frames(),
                          details="Return the value from the branch instead.")


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
