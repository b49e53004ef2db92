"""Op classification: what an ATen overload's schema says it does to its arguments.

Every question the recorder, the aliasing tracker, the verifier and the passes ask about an
operator (does it write an argument? return a view? which functional op replaces it?) is
answered here, from ``op_schema(OpOverload)`` only, so that the answers agree everywhere.

Terms: an argument or return annotated ``Tensor(a)`` *aliases* (shares memory with) the
argument of the same alias set; ``Tensor(a!)`` is also *written*. A *view op* returns an alias
of an input and writes nothing (``select``, ``view``, ``split``); an *in-place op* writes its
first argument (``add_``, ``copy_``); a *functional op* writes nothing and returns fresh
tensors only.
"""
from __future__ import annotations

import functools

import torch

from ..symbolic.torch_compat import OpOverload, op_schema

__all__ = ["is_mutating", "is_view_op", "is_inplace_op", "is_functional", "written_arguments",
           "inplace_written_index", "functional_variant", "op_name", "out_variant",
           "takes_argument", "op_text", "has_dynamic_output_shape"]


def _per_op(predicate):
    """``predicate(op)`` remembered per op: a schema never changes, and reading one builds its
    argument objects anew (the recorder asks several of these of every op it records). An
    op that cannot be a key (unhashable) is asked every time."""
    answers: dict = {}

    @functools.wraps(predicate)
    def cached(op) -> bool:
        try:
            return answers[op]
        except KeyError:
            answer = answers[op] = predicate(op)
            return answer
        except TypeError:
            return predicate(op)
    return cached


def op_name(op: OpOverload) -> tuple[str, str]:
    """(namespace, name) of an overload: ``aten::relu_`` -> ('aten', 'relu_')."""
    namespace, _, name = op_schema(op).name.partition("::")
    return namespace, name


@_per_op
def is_mutating(op) -> bool:
    """True for an ``OpOverload`` that writes one of its arguments (a mutable schema)."""
    return isinstance(op, OpOverload) and op_schema(op).is_mutable


@_per_op
def is_view_op(op) -> bool:
    """The op returns an alias of an input without writing it (``select``, ``view``...)."""
    schema = op_schema(op)
    return not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


@_per_op
def is_functional(op) -> bool:
    """The op writes nothing and every output is fresh memory (``add``, ``zeros``...)."""
    schema = op_schema(op)
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


@_per_op
def is_inplace_op(op) -> bool:
    """The op writes its first, positional argument (``add_``, ``copy_``, ``fill_``...)."""
    arguments = op_schema(op).arguments
    return bool(arguments) and arguments[0].alias_info is not None and \
        arguments[0].alias_info.is_write and not arguments[0].kwarg_only


def written_arguments(op) -> list[int]:
    """Indices of the schema arguments the op writes (``Tensor(a!)``)."""
    return [i for i, a in enumerate(op_schema(op).arguments)
            if a.alias_info is not None and a.alias_info.is_write]


def inplace_written_index(op) -> int | None:
    """0 if ``op`` is an in-place op of the ``self``-writing form (``Tensor(a!) self ... ->
    Tensor(a!)``: writes only its first argument and returns it), else None."""
    if not isinstance(op, OpOverload) or written_arguments(op) != [0]:
        return None
    schema = op_schema(op)
    returns = schema.returns
    if schema.arguments[0].kwarg_only or len(returns) != 1 or returns[0].alias_info is None:
        return None
    return 0 if returns[0].alias_info.is_write else None


def _argument_key(argument) -> tuple:
    return argument.name, str(argument.type), argument.kwarg_only


def _same_arguments(functional: OpOverload, inplace: OpOverload) -> bool:
    a, b = op_schema(functional), op_schema(inplace)
    return (not a.is_mutable and len(a.returns) == len(b.returns)
            and [_argument_key(x) for x in a.arguments] == [_argument_key(x) for x in b.arguments])


def functional_variant(op: OpOverload) -> OpOverload | None:
    """The functional overload with the same arguments as in-place ``op``, found by schema.

    Looks in ``<ns>.<name without _>`` and ``<ns>.<name without _>_functional`` (``normal_``) for
    an overload with identical argument names, types and keyword-only flags that mutates nothing.
    """
    namespace, name = op_name(op)
    base = name[:-1] if name.endswith("_") else name
    ops_namespace = getattr(torch.ops, namespace)
    for packet_name in (base, base + "_functional"):
        packet = getattr(ops_namespace, packet_name, None)
        for overload in (packet.overloads() if packet is not None else ()):
            candidate = getattr(packet, overload)
            if _same_arguments(candidate, op):
                return candidate
    return None


_OUT_FORMS: dict = {}


def out_variant(op) -> tuple[OpOverload, tuple[str, ...]] | None:
    """For an ``out=`` overload (``add.out``, ``max.dim_max``: it writes only keyword-only
    arguments and returns them), the functional overload of the same packet taking the other
    arguments, found by schema, and the names of the written arguments in return order;
    None for any other op or when no such overload exists."""
    if op in _OUT_FORMS:
        return _OUT_FORMS[op]
    form = None
    if isinstance(op, OpOverload):
        schema = op_schema(op)
        written = written_arguments(op)
        outs = tuple(schema.arguments[i].name for i in written)
        if written and all(schema.arguments[i].kwarg_only for i in written) and \
                len(schema.returns) == len(written):
            kept = [_argument_key(a) for i, a in enumerate(schema.arguments) if i not in written]
            packet = getattr(getattr(torch.ops, op_name(op)[0]), op_name(op)[1])
            for overload in packet.overloads():
                candidate = getattr(packet, overload)
                other = op_schema(candidate)
                if not other.is_mutable and len(other.returns) == len(written) and \
                        [_argument_key(a) for a in other.arguments] == kept:
                    form = (candidate, outs)
                    break
    _OUT_FORMS[op] = form
    return form


@_per_op
def op_text(op) -> str:
    """``str(op)`` (``aten.add.Tensor``), which torch builds anew on each call."""
    return str(op)


@_per_op
def has_dynamic_output_shape(op) -> bool:
    """Whether the op is tagged ``dynamic_output_shape`` (its output's size depends on tensor
    values: ``nonzero``, ``unique``)."""
    return torch.Tag.dynamic_output_shape in op.tags


def takes_argument(op, name: str) -> bool:
    """True when the op's schema has an argument called ``name`` (``device``, ``dtype``)."""
    return name in _argument_names(op)


@_per_op
def _argument_names(op) -> frozenset:
    return frozenset(argument.name for argument in op_schema(op).arguments)
