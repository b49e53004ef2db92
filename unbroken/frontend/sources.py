"""Sources: where a traced value came from.

A source is a small immutable description of how to reach a value from the inputs of
``forward`` or from the Python world (an argument, a global, an attribute chain, an item).
Sources name lifted constants (``c_mask``), describe values in messages (``self.layers[0]``),
and will key guards on Python state in later versions.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

__all__ = ["Source", "LocalSource", "GlobalSource", "AttrSource", "ItemSource", "ClosureSource",
           "ConstantSource", "ModuleSource"]


@dataclass(frozen=True, slots=True)
class Source(abc.ABC):
    """Base class. ``name()`` renders the access path as Python code."""

    @abc.abstractmethod
    def name(self) -> str:
        """The access path as Python code (``self.layers[0].weight``)."""

    def path(self) -> str:
        """A dotted path usable as an identifier stem (``layers.0.weight``)."""
        return self.name()


@dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """A parameter or local variable of the traced function. ``local_name``: its name."""

    local_name: str

    def name(self) -> str:
        return self.local_name


@dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A module-level global of the user's code. ``global_name``: its name."""

    global_name: str

    def name(self) -> str:
        return self.global_name


@dataclass(frozen=True, slots=True)
class ClosureSource(Source):
    """A variable captured by a closure. ``var_name``: the free variable's name."""

    var_name: str

    def name(self) -> str:
        return self.var_name


@dataclass(frozen=True, slots=True)
class AttrSource(Source):
    """``base.attr``."""

    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def path(self) -> str:
        base = self.base.path()
        return self.attr if base == "self" else f"{base}.{self.attr}"


@dataclass(frozen=True, slots=True)
class ItemSource(Source):
    """``base[index]`` with a constant index."""

    base: Source
    index: object

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def path(self) -> str:
        return f"{self.base.path()}.{self.index}"


@dataclass(frozen=True, slots=True)
class ConstantSource(Source):
    """A value written literally in the code (``description``: what it is)."""

    description: str

    def name(self) -> str:
        return self.description


@dataclass(frozen=True, slots=True)
class ModuleSource(Source):
    """A submodule of the exported module. ``fqn``: its qualified name ('' for the root)."""

    fqn: str

    def name(self) -> str:
        return f"self.{self.fqn}" if self.fqn else "self"

    def path(self) -> str:
        return self.fqn or "self"
