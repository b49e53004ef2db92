"""Other Python objects: Python modules, plain objects (from outside the trace or created in
it), partials, getters, context managers, ``super()``.

Attribute reads go through the object protocol (``protocol.lookup``), so user objects,
modules, classes, namedtuples and ``super()`` all follow the same rules.
"""
from __future__ import annotations

import abc
import contextlib
import functools
import operator
import threading
import types

import torch
from torch.overrides import TorchFunctionMode

from ...symbolic.diagnostics.catalogue import GraphBreakError, TracedException, graph_break
from ..overlay import DELETED, contents_key, refuse_in_branch
from ..protocol import (
    CallbackVariable,
    call_python,
    call_special,
    class_attribute,
    getattr_fallback,
    has_plain_attribute,
    is_data_descriptor,
    load_attribute,
    lookup,
    raw_instance_dict,
    subscript,
)
from ..sources import AttrSource
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .builtin_methods import BUILTIN_TYPES, call_natively
from .constant import ConstantVariable, SetVariable
from .containers import (
    ITERATOR_TYPES,
    ContainerMethodVariable,
    DictVariable,
    GeneratorVariable,
    IteratorVariable,
    ListVariable,
    TupleVariable,
    check_mutable,
)
from .functions import is_pytorch_module_name
from .native import PureCallableVariable

__all__ = ["GetterVariable", "ObjectVariable", "NewObjectVariable", "construct_user_object",
           "drain", "iterator_of", "next_of", "send_to", "yield_from_iterator",
           "PythonModuleVariable", "PartialVariable", "ContextManagerVariable", "SuperVariable",
           "IgnoredContextVariable", "IGNORED_CONTEXTS", "AnnotateVariable",
           "ObjectNewVariable", "ObjectSetattrVariable", "state_copy"]



def iterator_of(tx, value: VariableTracker) -> VariableTracker:
    """``iter(value)``: an iterator tracker (lists, generators...), or the object an
    object's ``__iter__`` returned when its class defines ``__next__`` (the iterator protocol
    of the program's own classes: ``__iter__`` returning ``self``, the same object as
    CPython's, advanced by :func:`next_of`)."""
    if isinstance(value, IteratorVariable):
        return value
    if isinstance(value, _UserProtocols):
        iterator = value.special(tx, "__iter__", [])
        if iterator is not None:
            return _as_iterator(tx, iterator, value)
    return IteratorVariable(value.items(tx), kind=_iterator_kind(value))


def _iterator_kind(value: VariableTracker) -> type | None:
    """The class of CPython's iterator over ``value``: that of the builtin iterable its class
    derives from (None: not one of those)."""
    try:
        mro = value.python_type().__mro__
    except (NotImplementedError, AttributeError, GraphBreakError):
        return None
    return next((ITERATOR_TYPES[cls] for cls in mro if cls in ITERATOR_TYPES), None)


def _as_iterator(tx, iterator: VariableTracker, owner) -> VariableTracker:
    """What ``owner.__iter__()`` returned, as something :func:`next_of` advances."""
    if isinstance(iterator, IteratorVariable):
        return iterator
    if isinstance(iterator, _UserProtocols):
        if isinstance(class_attribute(type(iterator.value), "__next__"), types.FunctionType):
            return iterator
        if class_attribute(type(iterator.value), "__next__") is not None:
            # a C iterator (a real deque's, ``__iter__`` called natively on an object from
            # outside): a fresh one is drawn natively; the object's own would be consumed
            if iterator.value is owner.value:
                raise graph_break("UB107", f"iterating {owner.describe()}, an iterator that "
                                  "exists outside forward(), would consume it",
                                  frames=tx.user_frames())
            return IteratorVariable([tx.wrap(v) for v in iterator.value])
    raise tx.user_exception(TypeError(
        f"iter() returned non-iterator of type '{iterator.python_type().__name__}'"))


def next_of(tx, iterator: VariableTracker) -> VariableTracker | None:
    """``next(iterator)``: the next element, None once exhausted (its ``__next__`` raised
    StopIteration); TypeError for what is not an iterator, as CPython's."""
    if isinstance(iterator, IteratorVariable):
        return iterator.next()
    if isinstance(iterator, _UserProtocols) and \
            isinstance(class_attribute(type(iterator.value), "__next__"), types.FunctionType):
        try:
            return iterator.special(tx, "__next__", [])
        except TracedException as error:
            if isinstance(error.exception, StopIteration):
                return None
            raise
    raise tx.user_exception(TypeError(
        f"'{iterator.python_type().__name__}' object is not an iterator"))


def yield_from_iterator(tx, value: VariableTracker) -> VariableTracker:
    """What ``yield from value`` delegates to (GET_YIELD_FROM_ITER): a generator itself,
    else ``iter(value)``."""
    return value if isinstance(value, GeneratorVariable) else iterator_of(tx, value)


def send_to(tx, receiver: VariableTracker, sent: VariableTracker):
    """One step of ``yield from receiver`` (SEND): ``sent`` resumes a generator (None: as
    ``next()``), and ``next()`` draws from another iterator (a value other than None is
    passed to the iterator's ``send``, as CPython's). ``(yielded, None)`` while it yields,
    ``(None, returned)`` once it is done: what a generator returned, else None."""
    if isinstance(receiver, GeneratorVariable):
        sending = not (sent.is_constant() and sent.as_constant() is None)
        if sending and not receiver.started:
            raise tx.user_exception(TypeError(
                "can't send non-None value to a just-started generator"))
        yielded = receiver._advance(sent)
        return (yielded, None) if yielded is not None else (None, receiver.returned())
    if sent.is_constant() and sent.as_constant() is None:
        item = next_of(tx, receiver)
        return (item, None) if item is not None else (None, ConstantVariable(None))
    if not isinstance(receiver, _UserProtocols):
        raise tx.user_exception(AttributeError(
            f"'{receiver.python_type().__name__}' object has no attribute 'send'"))
    try:
        item = receiver.special(tx, "send", [sent])
    except TracedException as error:
        if isinstance(error.exception, StopIteration):
            return None, tx.wrap(error.exception.value)
        raise
    if item is None:
        raise tx.user_exception(AttributeError(
            f"'{receiver.python_type().__name__}' object has no attribute 'send'"))
    return item, None


def drain(tx, iterator: VariableTracker) -> list:
    """Every element :func:`next_of` draws from ``iterator``."""
    values = []
    while (value := next_of(tx, iterator)) is not None:
        values.append(value)
    return values


class _UserProtocols:
    """Iteration, len() and subscript of a user object go through its class's own special
    methods (``__iter__``, ``__len__``, ``__getitem__``), traced."""

    __slots__ = ()

    def special(self, tx, name: str, args: list, kwargs=None) -> VariableTracker | None:
        """Call the special method ``name`` of the object's class; None if it has none."""
        return call_special(tx, self, self.value, name, args, kwargs=kwargs)

    def items(self, tx) -> list:
        iterator = self.special(tx, "__iter__", [])
        if iterator is None:
            return super().items(tx)
        return drain(tx, _as_iterator(tx, iterator, self))

    def length(self, tx):
        result = self.special(tx, "__len__", [])
        return super().length(tx) if result is None else result

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        result = self.special(tx, "__getitem__", [index])
        return super().getitem(tx, index) if result is None else result


class ObjectVariable(_UserProtocols, VariableTracker):
    """A Python object read during tracing (a config object, an enum...). ``value``: the object.

    Its attribute writes are kept in the trace's overlay (the object itself never changes).
    An object the model holds (reached through the attributes and items of the model's own
    modules: a cache object, ``self.cache.layers[0]``) is the model's state, written as the
    modules' own attributes are (kept, see ``overlay``); any other object's writes must be
    undone before forward() returns. ``held``: the model holds it (None: not asked yet)."""

    __slots__ = ("value", "held")

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value
        self.held = None

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        if self.source is not None:
            return f"the {type(self.value).__name__} object `{self.source.name()}`"
        shown = _native_repr(self.value)  # a value the program made: `dict[str, int]`
        return f"the {type(self.value).__name__} object" + (f" `{shown}`" if shown else "")

    def model_state(self, tx) -> bool:
        """The model holds this object (not one of PyTorch's own, which native code reads)."""
        if self.held is None:
            self.held = tx.output.model_holds(self.source) and \
                not type(self.value).__module__.startswith("torch")
        return self.held

    def unwrap(self, tx):
        return self.value

    def truth(self, tx) -> bool:
        cls = type(self.value)
        if hasattr(cls, "__bool__") or hasattr(cls, "__len__"):
            raise graph_break("UB117", f"truth value of {self.describe()} (a user-defined "
                              "__bool__/__len__)", frames=tx.user_frames())
        return True

    def getattr(self, tx, name: str) -> VariableTracker:
        custom = class_attribute(type(self.value), "__getattribute__")
        if isinstance(custom, types.FunctionType):  # the class decides every lookup
            if type(self) is ObjectVariable and not tx.output.find_all:
                return _custom_getattribute(tx, self, custom, name)
            return call_python(tx, custom, [self, ConstantVariable(name)])
        return self.plain_getattr(tx, name)

    def plain_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__`` (then ``__getattr__``), seeing the trace's writes; a
        list, dict or set of an object the model holds is the trace's copy (``state_copy``)."""
        written = tx.output.overlay.read(self.value, name)
        if written is DELETED:
            return getattr_fallback(tx, self, type(self.value), name)
        if written is not None:
            return written
        held = self.model_state(tx)
        if held:
            tx.output.overlay.note_read(self.value, name)
        found = lookup(tx, self, name, instance=self.value, source=self.source)
        if found is None:
            return getattr_fallback(tx, self, type(self.value), name)
        return state_copy(tx, self.value, name, found) if held else found

    def delattr(self, tx, name: str) -> None:
        """``del obj.name``: an overlay entry (kept for an object the model holds, else it
        must end restored)."""
        held = self._check_writable(tx, name)
        original = None if held or not has_plain_attribute(self.value, name) else \
            self.plain_getattr(tx, name)
        tx.output.overlay.write(self.value, name, DELETED, original, tx.user_frames(),
                                kept=held)

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``obj.name = value``: the class's own ``__setattr__`` when it defines one in Python
        (a config mapping attribute aliases), interpreted; else ``raw_setattr``."""
        custom = class_attribute(type(self.value), "__setattr__")
        if isinstance(custom, types.FunctionType):
            call_python(tx, custom, [self, ConstantVariable(name), value])
            return
        self.raw_setattr(tx, name, value)

    def raw_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__``: a write to an object that outlives forward(), kept in the
        trace's overlay. An object the model holds keeps it as the model's state (as a module
        attribute: the program computes what eager's first call computes, the object is left
        unchanged); any other must be undone before forward() returns (``token = var.set(x)
        ... var.reset(token)``), else export refuses it (UB107)."""
        if isinstance(class_attribute(type(self.value), name), property) or \
                type(self.value).__module__.startswith("torch"):
            # PyTorch's own objects are read by native code, which the overlay cannot reach
            return VariableTracker.setattr(self, tx, name, value)
        held = self._check_writable(tx, name)
        original = None if held or not has_plain_attribute(self.value, name) else \
            self.plain_getattr(tx, name)
        tx.output.overlay.write(self.value, name, value, original, tx.user_frames(), kept=held)

    def _check_writable(self, tx, name: str) -> bool:
        """Whether the model holds the object; a write to it in a torch.cond branch is
        refused (both branches are traced)."""
        held = self.model_state(tx)
        if held:
            refuse_in_branch(tx, f"assignment to `{self.source.name()}.{name}`")
        return held

    def call(self, tx, args, kwargs):
        call = getattr(type(self.value), "__call__", None)  # noqa: B004 (the method itself)
        if isinstance(call, types.FunctionType):
            return call_python(tx, call, [self, *args], kwargs)
        if type(self.value) is types.GenericAlias:
            return _call_generic_alias(tx, self.value, args, kwargs)
        return super().call(tx, args, kwargs)


def _native_repr(value) -> str | None:
    """``repr(value)`` when C code makes it (no program code runs) and it is short, else
    None."""
    if isinstance(class_attribute(type(value), "__repr__"), types.FunctionType):
        return None
    try:
        shown = repr(value)
    except Exception:  # a C repr that fails says nothing more than the type
        return None
    return shown if len(shown) <= 60 else None


def _call_generic_alias(tx, alias: types.GenericAlias, args, kwargs) -> VariableTracker:
    """``dict[str, int]()``: ``GenericAlias.__call__`` calls the origin class and records
    itself as the result's ``__orig_class__`` where the result takes attributes (an object
    of a class of the program's; a builtin container takes none, and CPython ignores that)."""
    made = tx.wrap(alias.__origin__).call(tx, list(args), dict(kwargs))
    if isinstance(made, NewObjectVariable) and "__dict__" in dir(type(made.value)):
        made.setattr(tx, "__orig_class__", tx.wrap(alias))
    return made


class NewObjectVariable(_UserProtocols, VariableTracker):
    """An instance of a user class created while tracing (a dataclass output, a helper object,
    a context manager). It is local to the trace, so its attributes may be written.

    value:      the instance, made by its class's ``__new__`` without ``__init__`` (its own
                state stays empty: the trackers below hold it);
    attributes: attribute name -> tracker, in assignment order;
    mapping:    for a ``dict`` subclass (Hugging Face's ``ModelOutput``), the dict part, as a
                DictVariable that the inherited C methods (``__setitem__``, ``keys``...) act on;
    native:     None until the object is handed to native code (a leaf call: a method of a
                torch base class, ``Independent.__init__(self, ...)``); then the state written
                into ``value`` for it (name -> the unwrapped value), from which the writes the
                native code made are read back (``sync_from_native``). From then on ``value``
                is the object native code sees: a leaf call that returns it (or an object
                holding it) gives back this tracker (``TraceContext.native_objects``), and the
                trace's own writes go through to it.
    """

    __slots__ = ("value", "attributes", "created", "mapping", "native", "native_entries",
                 "native_contents", "_unwrapping")

    def __init__(self, value, mapping=None):
        super().__init__(None)
        self.value = value
        self.attributes: dict[str, VariableTracker] = {}
        self.created = next(CREATION_ORDER)
        self.mapping = mapping
        self.native: dict | None = None
        self.native_entries: dict | None = None  # the same for the dict part
        self.native_contents: dict = {}  # name -> what a list/dict/set attribute held then
        self._unwrapping = False

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"the {type(self.value).__name__} object created in forward()"

    def special(self, tx, name: str, args: list, kwargs=None) -> VariableTracker | None:
        return call_special(tx, self, self.value, name, args, native=self.native_method,
                            kwargs=kwargs)

    def getattr(self, tx, name: str) -> VariableTracker:
        static = class_attribute(type(self.value), name)
        # the trackers hold the state, ``__slots__`` members included; other data descriptors
        # (properties) take precedence over it, as over an instance dict
        if name in self.attributes and (not is_data_descriptor(static) or
                                        isinstance(static, types.MemberDescriptorType)):
            return self.attributes[name]
        if name == "__dict__":  # a live view: `obj.__dict__[k] = v` sets the attribute
            view = DictVariable({})
            view.entries = self.attributes
            return view
        native = self.native_method(name, static)
        if native is not None:
            return native
        found = lookup(tx, self, name, instance=self.value)
        if found is None:
            return getattr_fallback(tx, self, type(self.value), name)
        return found

    def native_method(self, name: str, static) -> VariableTracker | None:
        """An inherited C method acting on this object's trackers (dict methods on the mapping,
        ``object.__setattr__`` on the attributes), or None."""
        owner = getattr(static, "__objclass__", None)
        missing = class_attribute(type(self.value), "__missing__")
        if self.mapping is not None and name == "__getitem__" and owner is dict and \
                isinstance(missing, types.FunctionType):
            # dict's own lookup calls the subclass's ``__missing__`` for a key it lacks
            # (``Counter()["x"]`` is 0)
            def getitem(tx, args):
                if len(args) == 1 and self.mapping.has_key(args[0], tx):
                    return ContainerMethodVariable(self.mapping, name).call(tx, args, {})
                return call_python(tx, missing, [self, *args])
            return CallbackVariable(getitem, f"`{type(self.value).__name__}.__getitem__`")
        if self.mapping is not None and owner is not None and issubclass(owner, dict) \
                and owner is not object:
            return ContainerMethodVariable(self.mapping, name)
        if name == "__setattr__" and owner is object:
            return _raw_setattr(self)
        return None

    def raw_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__``: store the attribute, ignoring the class's ``__setattr__``."""
        check_mutable(tx, self, f"setting `.{name}`")
        self.attributes[name] = value
        if self.native is not None:  # native code may hold the object: it sees the write
            try:
                self.native[name] = value.unwrap(tx)
                object.__setattr__(self.value, name, self.native[name])
                self.native_contents[name] = _contents(self.native[name])
            except GraphBreakError as exc:  # no native value (a traced function): native
                if exc.code != "UB113":     # code cannot be given the object from now on
                    raise
                self.native.pop(name, None)
                if name in _instance_state(self.value):
                    object.__delattr__(self.value, name)

    def delattr(self, tx, name: str) -> None:
        """``del obj.name`` on an object the trace made: its attribute goes."""
        check_mutable(tx, self, f"deleting `.{name}`")
        if name not in self.attributes:
            raise tx.user_exception(AttributeError(name))
        del self.attributes[name]
        if self.native is not None and self.native.pop(name, self) is not self:
            object.__delattr__(self.value, name)

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        custom = class_attribute(type(self.value), "__setattr__")
        if isinstance(custom, types.FunctionType):  # the class's own __setattr__ decides
            call_python(tx, custom, [self, ConstantVariable(name), value])
            return
        static = class_attribute(type(self.value), name)
        if isinstance(static, property):
            if static.fset is None:
                raise tx.user_exception(AttributeError(f"can't set attribute '{name}'"))
            call_python(tx, static.fset, [self, value])
            return
        self.raw_setattr(tx, name, value)

    def unwrap(self, tx):
        """The instance itself, holding the unwrapped attribute values and dict entries (for a
        leaf call, which may change it, see ``native``; for outputs: pytree then flattens it if
        its class is registered). An object that holds itself is handed over as it is."""
        if self._unwrapping:
            return self.value
        state, entries = self._unwrapped_state(tx)
        instance = self.value
        for name in [n for n in _instance_state(instance) if n not in state]:
            object.__delattr__(instance, name)
        for name, value in state.items():
            object.__setattr__(instance, name, value)
        if entries is not None:
            base = self._mapping_base()
            base.clear(instance)
            for key, value in entries.items():
                base.__setitem__(instance, key, value)
        self.native, self.native_entries = state, entries
        self.native_contents = {name: _contents(value) for name, value in state.items()}
        tx.output.native_objects[id(instance)] = self
        return instance

    def _unwrapped_state(self, tx) -> tuple[dict, dict | None]:
        """(attribute name -> unwrapped value, the dict part's entries unwrapped or None)."""
        self._unwrapping = True
        try:
            state = {name: value.unwrap(tx) for name, value in self.attributes.items()}
            entries = None if self.mapping is None else \
                {key: value.unwrap(tx) for key, value in self.mapping.entries.items()}
        finally:
            self._unwrapping = False
        return state, entries

    def snapshot(self, tx):
        """A separate instance holding the unwrapped state, for native reads that must not be
        mistaken for the object (``super(cls, obj)`` reading a base class's descriptor); the
        object itself (its class only, no state) when a value has no native counterpart."""
        if self._unwrapping:
            return self.value
        try:
            state, entries = self._unwrapped_state(tx)
        except GraphBreakError as exc:
            if exc.code != "UB113":
                raise
            return self.value
        cls = type(self.value)
        instance = cls.__new__(cls)
        for name, value in state.items():
            object.__setattr__(instance, name, value)
        if entries is not None:
            for key, value in entries.items():
                self._mapping_base().__setitem__(instance, key, value)
        return instance

    def _mapping_base(self) -> type:
        return next(k for k in type(self.value).__mro__
                    if k.__module__ in ("builtins", "collections"))

    def restore_native(self) -> None:
        """Put back the state read by the last ``sync_from_native`` (a leaf call re-run in a
        dry run, at size 1, wrote to the object again; nothing of that run is the program's)."""
        if not _same_state(_instance_state(self.value), self.native):
            for name in [n for n in _instance_state(self.value) if n not in self.native]:
                object.__delattr__(self.value, name)
            for name, value in self.native.items():
                object.__setattr__(self.value, name, value)
        if self.native_entries is not None:
            base = self._mapping_base()
            if not _same_state(dict(base.items(self.value)), self.native_entries):
                base.clear(self.value)
                for key, value in self.native_entries.items():
                    base.__setitem__(self.value, key, value)

    def sync_from_native(self, tx) -> None:
        """Read back what native code wrote to the object since it was handed over: attributes
        set, replaced or deleted (and dict entries of a ``dict`` subclass). Values it did not
        replace keep their trackers; new ones are wrapped (tensors a leaf call made are the
        recorder's)."""
        current = _instance_state(self.value)
        unchanged = _same_state(current, self.native)
        for name, contents in self.native_contents.items():
            if contents is not None and name in current and current[name] is \
                    self.native.get(name) and _contents(current[name]) != contents:
                # the list the tracker stands for was changed in place by native code
                raise graph_break("UB107", f"a PyTorch function changed the "
                                  f"{type(current[name]).__name__} `.{name}` of "
                                  f"{self.describe()} in place", frames=tx.user_frames())
        if not unchanged:
            check_mutable(tx, self, "a PyTorch function's write to an attribute")
            # attributes native code was never given (no native value) stay as they are
            attributes = {name: value for name, value in self.attributes.items()
                          if name not in self.native and name not in current}
            for name, value in current.items():
                kept = name in self.attributes and self.native.get(name, _ABSENT) is value
                attributes[name] = self.attributes[name] if kept else tx.wrap(value)
            self.attributes = attributes
            self.native = current
            self.native_contents = {name: _contents(value) for name, value in current.items()}
        if self.mapping is not None:
            entries = dict(self._mapping_base().items(self.value))
            known = self.native_entries
            if not _same_state(entries, known):
                check_mutable(tx, self, "a PyTorch function's write to an item")
                self.mapping.entries = {
                    key: self.mapping.entries[key] if key in known and known[key] is value
                    and key in self.mapping.entries else tx.wrap(value)
                    for key, value in entries.items()}
                self.native_entries = entries

    def truth(self, tx) -> bool:
        if self.mapping is not None and not isinstance(
                class_attribute(type(self.value), "__bool__"), types.FunctionType):
            return bool(self.mapping.entries)
        for method in ("__bool__", "__len__"):
            result = self.special(tx, method, [])
            if result is not None:
                return bool(result.as_constant()) if result.is_constant() else result.truth(tx)
        return True

    def call(self, tx, args, kwargs):
        result = self.special(tx, "__call__", list(args), kwargs)
        if result is None:
            raise tx.user_exception(TypeError(
                f"'{type(self.value).__name__}' object is not callable"))
        return result


_ABSENT = object()


def _same_state(current: dict, known: dict) -> bool:
    """The same keys, each holding the same object (identity: tensors have no truth)."""
    return len(current) == len(known) and all(
        known.get(key, _ABSENT) is value for key, value in current.items())


def _contents(value) -> tuple | None:
    """What a mutable builtin container holds, by identity (None for any other value)."""
    if isinstance(value, (list, set)):
        return tuple(map(id, value))
    if isinstance(value, dict):
        return tuple((id(k), id(v)) for k, v in value.items())
    return None


def _instance_state(instance) -> dict:
    """An object's own attributes: its ``__dict__`` and the ``__slots__`` members set."""
    try:
        state = dict(object.__getattribute__(instance, "__dict__"))
    except AttributeError:  # only __slots__
        state = {}
    for name in _slot_names(type(instance)):
        if name not in state:
            try:
                state[name] = object.__getattribute__(instance, name)
            except AttributeError:  # an empty slot
                pass
    return state


@functools.cache
def _slot_names(cls: type) -> tuple:
    """The attribute names of the ``__slots__`` along ``cls``'s MRO (private ones mangled)."""
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):  # stored mangled
                name = f"_{klass.__name__.lstrip('_')}{name}"
            names.append(name)
    return tuple(names)


def construct_user_object(tx, cls, args, kwargs):
    """``cls(*args, **kwargs)`` for a plain user class: a new instance whose ``__init__`` is
    interpreted. Returns None when the class is not plain (custom ``__new__`` or metaclass)."""
    mapping_base = issubclass(cls, dict) and not isinstance(
        class_attribute(cls, "__new__"), (types.FunctionType, staticmethod))
    if (cls.__new__ is not object.__new__ and not mapping_base) or \
            type(cls) not in (type, abc.ABCMeta):
        return None
    instance = NewObjectVariable(cls.__new__(cls), DictVariable({}) if mapping_base else None)
    init = class_attribute(cls, "__init__")
    if isinstance(init, types.FunctionType):
        call_python(tx, init, [instance, *args], kwargs)
    elif mapping_base:
        instance.native_method("update", class_attribute(cls, "update")).call(
            tx, list(args[:1]), kwargs)
    elif args or kwargs:
        raise tx.user_exception(TypeError(f"{cls.__name__}() takes no arguments"))
    return instance


class ObjectSetattrVariable(PureCallableVariable):
    """``object.__setattr__`` itself (frozen dataclasses' ``__init__`` call it): on an object
    created in the trace it stores the attribute's tracker; on any other value it is that
    value's own attribute write (the overlay of a module or an outside object, or a refusal),
    never a native write to the caller's object."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 3 or kwargs:
            raise tx.user_exception(TypeError("object.__setattr__() takes 3 arguments"))
        if isinstance(args[0], NewObjectVariable):
            args[0].attributes[args[1].as_constant()] = args[2]
        elif isinstance(args[0], ObjectVariable):  # past the class's own __setattr__
            args[0].raw_setattr(tx, args[1].as_constant(), args[2])
        elif args[0].python_type() in BUILTIN_TYPES:  # no attributes: CPython's AttributeError
            call_natively(tx, object.__setattr__, [args[0].unwrap(tx), args[1].as_constant(),
                                                  None], {})
        else:
            args[0].setattr(tx, args[1].as_constant(), args[2])
        return ConstantVariable(None)


class ObjectNewVariable(PureCallableVariable):
    """``object.__new__`` itself: ``cls.__new__(cls)`` of a plain user class makes an empty
    instance created in the trace (no ``__init__``: the caller fills its ``__dict__``, as
    unpicklers and pytree unflatten functions do)."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        cls = args[0].as_constant() if len(args) == 1 and not kwargs else None
        if not isinstance(cls, type) or type(cls) not in (type, abc.ABCMeta) or \
                cls.__new__ is not object.__new__ or cls.__module__.startswith("torch"):
            raise graph_break("UB108", f"`object.__new__` of {args[0].describe() if args else '?'}"
                              " (only a plain Python class)", frames=tx.user_frames())
        return NewObjectVariable(cls.__new__(cls))


class PythonModuleVariable(ConstantVariable):
    """A Python module object (``torch``, ``math``, ``F``): a constant whose attributes are
    wrapped with their source. ``value``: the module."""

    __slots__ = ()

    def describe(self) -> str:
        return f"the module `{self.value.__name__}`"

    def getattr(self, tx, name):
        # a module's namespace is its attributes, PEP 562 ``__getattr__`` included: read natively
        try:
            value = getattr(self.value, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        return tx.wrap(value, AttrSource(self.source, name) if self.source else None)


class PartialVariable(VariableTracker):
    """``functools.partial(func, *args, **kwargs)``: calls ``func`` with the stored arguments.
    ``attributes``: those the program wrote on a partial it made (``partialmethod`` sets
    ``__self__``), None for one from outside (read-only). ``outside``: that partial, set only
    for one from outside (``is`` compares it: two reads of a class's partial are one object)."""

    __slots__ = ("func", "args", "kwargs", "attributes", "outside")

    def __init__(self, func, args, kwargs, created: bool = False, outside=None):
        super().__init__(None)
        self.func, self.args, self.kwargs = func, list(args), dict(kwargs)
        self.attributes: dict | None = {} if created else None
        if outside is not None:
            self.outside = outside

    def python_type(self) -> type:
        return functools.partial

    def describe(self) -> str:
        return f"a partial of {self.func.describe()}"

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def getattr(self, tx, name: str) -> VariableTracker:
        """``func``, ``args``, ``keywords``, and what the ``partial`` class gives every
        instance (``__module__``, ``__doc__``: what ``functools.wraps`` copies); a partial has
        no ``__name__``. Its ``__dict__`` is empty here (no attribute of it is written)."""
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "keywords":
            return DictVariable(dict(self.kwargs), external=True)
        if self.attributes and name in self.attributes:
            return self.attributes[name]
        if name == "__dict__":
            return DictVariable(dict(self.attributes or {}), external=True)
        if name in ("__module__", "__doc__", "__class__"):
            return tx.wrap(getattr(functools.partial, name))
        if class_attribute(functools.partial, name) is not None:  # (its methods)
            return super().getattr(tx, name)
        raise AttributeMissing(name)

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        """An attribute written on a partial the program made (its ``__dict__``)."""
        if self.attributes is None or name in ("func", "args", "keywords", "__dict__"):
            super().setattr(tx, name, value)
        self.attributes[name] = value


class GetterVariable(VariableTracker):
    """``operator.itemgetter(*items)`` / ``operator.attrgetter(*names)`` made in forward.
    kind: the class (itemgetter or attrgetter); keys: the constant items or dotted names."""

    __slots__ = ("kind", "keys")

    def __init__(self, kind, keys):
        super().__init__(None)
        self.kind, self.keys = kind, list(keys)

    def describe(self) -> str:
        return f"`{self.kind.__name__}({', '.join(map(repr, self.keys))})`"

    def call(self, tx, args, kwargs):
        values = [self._get(tx, args[0], key) for key in self.keys]
        return values[0] if len(values) == 1 else TupleVariable(values)

    def _get(self, tx, obj, key):
        if self.kind is operator.itemgetter:
            return subscript(tx, obj, ConstantVariable(key))
        for name in key.split("."):
            obj = load_attribute(tx, obj, name)
        return obj


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class ContextManagerVariable(ObjectVariable):
    """A context manager that is entered natively: ``torch.autocast`` (the recorder records
    the casts its state implies), a ``threading`` lock, which changes no recorded op, or a
    torch function mode of torch's own (``TransformGetItemToIndex``, which transformers' masks
    enter around ``vmap``): the leaf calls of the block run natively through it, as eager's
    calls do. ``value``: the instance. The trace exits it if it stops inside the block
    (``TraceContext.exit_native_contexts``). Grad modes are ``GradModeVariable``; the
    profiler's ranges are ``IgnoredContextVariable``."""

    __slots__ = ()

    @staticmethod
    def supports(value) -> bool:
        # a lock guards Python state across threads; holding it while the trace runs the block
        # is what eager does, and it changes no recorded op
        # autocast changes the live autocast state, which the recorder reads to record the
        # casts eager makes (ir.autocast)
        # a function mode of torch's: its __torch_function__ is torch's code, which the leaf
        # calls run natively anyway (a mode of the program's own would run its code unseen)
        return isinstance(value, (torch.autocast, *_LOCK_TYPES)) or (
            issubclass(type(value), TorchFunctionMode) and is_pytorch_module_name(
                type(value).__module__))

    def describe(self) -> str:
        return f"the context manager `{type(self.value).__name__}`"

    def enter(self, tx) -> tuple[VariableTracker, VariableTracker]:
        """Enter natively; returns (the exit callable to push, the value ``as`` binds)."""
        result = self.value.__enter__()
        tx.output.entered_natively(self.value)
        exit_fn = _native_exit(self.value)
        return exit_fn, (ConstantVariable(None) if result is None else tx.wrap(result))


def _custom_getattribute(tx, receiver: ObjectVariable, custom, name: str) -> VariableTracker:
    """``receiver.name`` through its class's ``__getattribute__`` written in Python, for an
    object from outside the trace. transformers' configs define one (two, through ``super``):
    each ``config.use_cache`` interprets some 60 instructions (~0.3 ms; a tenth of a static
    GPT-2 export). A read that gave an immutable constant and changed nothing (no mutation of
    what the trace sees, no op recorded, no guard) is a function of the state it read, all
    of which only a mutation counted by ``Overlay.mutations`` can change: it is answered
    again without interpreting while that count, the grad mode and the inference mode are
    what they were."""
    output = tx.output
    overlay, recorder = output.overlay, output.recorder

    def marks():
        env = recorder.env
        return (overlay.mutations, output.grad_enabled, output.inference_mode,
                len(recorder.builder.graph.nodes),
                (env.version, len(env.guards)) if env is not None else None)

    key = (id(receiver.value), name)
    known = output.getattribute_reads.get(key)
    before = marks()
    if known is not None and known[0] is receiver.value and known[1] is custom \
            and known[2] == before[:3]:
        return known[3]
    result = call_python(tx, custom, [receiver, ConstantVariable(name)])
    if type(result) is ConstantVariable and type(result.value) in _IMMUTABLE_CONSTANTS \
            and marks() == before:
        output.getattribute_reads[key] = (receiver.value, custom, before[:3], result)
    return result


_IMMUTABLE_CONSTANTS = frozenset([int, float, bool, str, type(None)])


def _raw_setattr(target):
    def callback(tx, args):
        target.raw_setattr(tx, args[0].as_constant(), args[1])
        return ConstantVariable(None)

    return CallbackVariable(callback, "object.__setattr__")


def _raw_getattr(target):
    def callback(tx, args):
        name = args[0].as_constant()
        try:
            return target.plain_getattr(tx, name)
        except AttributeMissing:
            raise tx.user_exception(AttributeError(name)) from None

    return CallbackVariable(callback, "object.__getattribute__")


class IgnoredContextVariable(VariableTracker):
    """A context manager that reports and does not compute (``IGNORED_CONTEXTS``: a profiler
    range, ``torch.autograd.detect_anomaly``): ``with`` on it enters nothing (as
    ``IgnoredCallVariable`` drops ``warnings.warn``; torch's strict export drops the profiler's
    ranges too). ``cls``: its class."""

    __slots__ = ("cls",)

    def __init__(self, cls):
        super().__init__(None)
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"the context manager `{self.cls.__name__}`"

    def enter(self, tx) -> tuple[VariableTracker, VariableTracker]:
        """Returns (the exit callable to push, the value ``as`` binds)."""
        return CallbackVariable(lambda tx, args: ConstantVariable(False),
                                f"`{self.cls.__name__}.__exit__`"), ConstantVariable(None)


class AnnotateVariable(VariableTracker):
    """``torch.fx.traceback.annotate``: called with a dict of constants, the context that
    puts them on the nodes recorded inside it (an ``AnnotationContextVariable``)."""

    def describe(self) -> str:
        return "`torch.fx.traceback.annotate`"

    def call(self, tx, args, kwargs):
        given = [*args, *kwargs.values()]
        if len(given) != 1 or set(kwargs) - {"annotation_dict"}:
            raise tx.user_exception(TypeError(
                f"annotate() takes 1 argument (annotation_dict), {len(given)} given"))
        if not isinstance(given[0], DictVariable) or not given[0].is_constant():
            raise graph_break("UB108", f"`torch.fx.traceback.annotate` given "
                              f"{given[0].describe()}", frames=tx.user_frames(),
                              details="Its annotations are copied onto the program's nodes "
                              "(`node.meta['custom']`): they must be a dict of constants.",
                              hint="Annotate with Python constants (numbers, strings, tuples "
                              "of them), not tensors.")
        return AnnotationContextVariable(given[0].as_constant())


class AnnotationContextVariable(IgnoredContextVariable):
    """``with torch.fx.traceback.annotate(annotations):``: computes nothing; every node recorded
    inside carries the annotations in force (these over the enclosing ones') as
    ``meta["custom"]``, as torch.export's nodes do. ``annotations``: the dict given."""

    __slots__ = ("annotations",)

    def __init__(self, annotations: dict):
        super().__init__(contextlib._GeneratorContextManager)
        self.annotations = dict(annotations)

    def describe(self) -> str:
        return "the context manager `torch.fx.traceback.annotate(...)`"

    def enter(self, tx) -> tuple[VariableTracker, VariableTracker]:
        regions = tx.output.site.annotations
        regions.append({**(regions[-1] if regions else {}), **self.annotations})

        def leave(tx, args):
            regions.pop()
            return ConstantVariable(False)

        return CallbackVariable(leave, "`annotate.__exit__`"), ConstantVariable(None)


# What reports and does not compute: the profiler's ranges; anomaly detection (it checks
# backward's values and keeps forward's stack traces for its messages: forward computes the
# same values, and the mode is restored on exit; ``set_detect_anomaly`` sets it when built, so
# it stays a setting that forward() must restore)
IGNORED_CONTEXTS = (torch.autograd.profiler.record_function, torch.autograd.detect_anomaly)


def _native_exit(manager):
    def callback(tx, args):
        raw = [a.unwrap(tx) for a in args] or [None, None, None]
        tx.output.exited_natively(manager)
        return ConstantVariable(bool(manager.__exit__(*raw)))

    return CallbackVariable(callback, f"`{type(manager).__name__}.__exit__`")


class SuperVariable(VariableTracker):
    """``super(cls, obj)``. ``cls``: the class to start after; ``receiver``: obj's tracker;
    ``obj``: the underlying Python object."""

    __slots__ = ("cls", "receiver", "obj")

    def __init__(self, cls, receiver, obj):
        super().__init__(None)
        self.cls, self.receiver, self.obj = cls, receiver, obj

    def describe(self) -> str:
        return f"super({self.cls.__name__})"

    def getattr(self, tx, name):
        static = class_attribute(type(self.obj), name, after=self.cls)
        if not isinstance(static, (types.FunctionType, property)):
            native = self._native(name, static)
            if native is not None:
                return native
        found = lookup(tx, self.receiver, name, instance=self.obj, after=self.cls)
        if found is None:
            raise AttributeMissing(name)
        return found

    def _native(self, name: str, static) -> VariableTracker | None:
        """A C-level method of a base class acting on the receiver's own trackers (a dict
        base's methods, ``object.__setattr__``/``__getattribute__``), or None."""
        if isinstance(self.receiver, NewObjectVariable):
            return self.receiver.native_method(name, static)
        if isinstance(self.receiver, ObjectVariable) and \
                getattr(static, "__objclass__", None) is object:
            if name == "__getattribute__":
                return _raw_getattr(self.receiver)
            if name == "__setattr__":
                return _raw_setattr(self.receiver)
        return None


#: The trackers :func:`state_copy` copies (others it returns as they are).
STATE_CONTAINERS = (ListVariable, DictVariable, SetVariable)


def state_copy(tx, owner, name: str, found, *, instance_only: bool = True):
    """A list, dict or set that the model's state holds (an attribute of one of its modules, or
    of a plain object it holds: a cache filled by item assignment, a list appended to): the
    trace works on its own copy, kept in the overlay like an attribute write, so forward()
    reads back what it wrote and the model is left unchanged (torch.export restores it
    likewise). A change to it warns as an attribute write does. ``owner``: the object whose
    attribute ``name`` it is; instance_only: only one in its instance dict (a module's class
    attributes are the model's too, as they always were here)."""
    if not isinstance(found, STATE_CONTAINERS) or not found.external \
            or tx.output.branch_starts or name == "__dict__" or \
            instance_only and name not in raw_instance_dict(owner):
        return found  # `__dict__` is the attributes themselves, and a class attribute of a
        # plain object is every instance's: changing them stays refused, as in a cond branch
    copy = _owned(found)
    tx.output.overlay.write(owner, name, copy, None, tx.user_frames(), kept=True,
                            snapshot=contents_key(copy))
    return copy


def _owned(tracker):
    """``tracker`` and the containers inside it made the trace's own (no longer external; a
    set's value copied, since its tracker holds the set itself)."""
    if isinstance(tracker, SetVariable):
        return SetVariable(set(tracker.value), tracker.source)
    if isinstance(tracker, ListVariable):
        tracker.elements[:] = [_owned(e) for e in tracker.elements]
    elif isinstance(tracker, DictVariable):
        tracker.entries.update({k: _owned(v) for k, v in tracker.entries.items()})
    else:
        return tracker
    tracker.external = False
    return tracker
