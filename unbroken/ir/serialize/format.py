"""The vocabulary of saved programs: format versions, members, limits, names and op targets.

Everything here is shared by the writer (``writer``) and the reader
(``reader``); see :mod:`unbroken.ir.serialize` for the layout of a file.

Names are the one place where file content could reach Python source: torch.fx generates the
``forward`` of a graph module from node names, placeholder targets, keyword-argument names and
attribute paths. So every such name is checked here before a node is built:
:func:`check_identifier` (a Python identifier, not a keyword), :func:`check_attribute_path`
(dotted identifiers or indices, none shadowing an ``nn.Module`` attribute), and call targets
resolve only through :func:`resolve_target` (``torch.ops`` namespaces, two higher-order ops,
the symbolic-int builtins of :data:`unbroken.ir.verifier.ALLOWED_BUILTINS` and the grad-mode
calls of :data:`unbroken.ir.verifier.GRAD_MODE_BUILTINS`).
"""
from __future__ import annotations

import keyword
import operator
import re
from dataclasses import dataclass

import torch

from ...symbolic.diagnostics import SerializationError
from ...symbolic.torch_compat import HigherOrderOperator, OpOverload, op_schema, overload_name
from ..verifier import ALLOWED_BUILTINS, GRAD_MODE_BUILTINS

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "KNOWN_VERSIONS", "MEMBERS", "Limits",
           "check_identifier", "check_attribute_path", "check_text", "resolve_target",
           "target_name", "DTYPES", "fail"]

FORMAT_NAME = "unbroken.exported_program"
#: The version :func:`unbroken.ir.serialize.save` writes.
FORMAT_VERSION = 2
#: Versions :func:`unbroken.ir.serialize.load` reads.
KNOWN_VERSIONS = (1, 2)
#: The members of a file of each version, in the order they are written.
MEMBERS = {
    1: ("format.json", "program.json", "tensors.pt"),
    2: ("format.json", "program.json", "tensors.safetensors"),
}


@dataclass(frozen=True, slots=True)
class Limits:
    """What :func:`unbroken.load` accepts before it refuses a file (``SerializationError``).

    Each bound is checked before the thing it bounds is allocated: member sizes from the zip's
    central directory and again while inflating, so a small archive that claims or inflates
    to gigabytes stops at the bound.

    json_bytes:       inflated size of ``format.json`` and ``program.json`` each.
    tensor_bytes:     inflated size of the tensor member (raise it for models over 16 GiB).
    archive_entries:  entries in the zip's central directory.
    json_depth:       nesting of JSON arrays/objects.
    nodes:            nodes over the graph and all its subgraphs.
    symbols:          symbols of dynamic sizes.
    integer_digits:   digits of any integer in JSON.
    text_chars:       characters of one string (names, stack traces, expressions).
    expression_operations / expression_divisions: operations over the distinct symbolic
                      expressions of a file (see ``unbroken.symbolic.parse``).
    """

    json_bytes: int = 64 << 20
    tensor_bytes: int = 16 << 30
    archive_entries: int = 16
    json_depth: int = 64
    nodes: int = 200_000
    symbols: int = 10_000
    integer_digits: int = 20
    text_chars: int = 1 << 16
    expression_operations: int = 4096
    expression_divisions: int = 128


def fail(member: str, what: str) -> SerializationError:
    """The one error of a bad file: which member, what was wrong."""
    return SerializationError(f"{member}: {what}",
                              hint="Only files written by unbroken.save can be loaded; save "
                                   "the program again if this file was damaged.")


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDEX = re.compile(r"(0|[1-9][0-9]{0,8})\Z")
# Attributes every nn.Module / GraphModule has: a state path through one would replace them.
_MODULE_ATTRIBUTES = frozenset(dir(torch.fx.GraphModule))


def check_identifier(name, member: str, what: str) -> str:
    """``name`` if it is a Python identifier that is no keyword and no dunder, else refuse."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or keyword.iskeyword(name) \
            or name.startswith("__") or len(name) > 256:
        raise fail(member, f"{what} {_show(name)} is not a plain Python identifier")
    return name


def check_attribute_path(path, member: str, what: str) -> str:
    """A state FQN (``layers.0.weight``): dot-separated identifiers or indices, none naming an
    attribute ``nn.Module`` already has (``forward``, ``training``...)."""
    if not isinstance(path, str) or not 0 < len(path) <= 1024:
        raise fail(member, f"{what} {_show(path)} is not an attribute path")
    for atom in path.split("."):
        if not (_IDENTIFIER.match(atom) or _INDEX.match(atom)) or keyword.iskeyword(atom) \
                or atom.startswith("__") or atom in _MODULE_ATTRIBUTES:
            raise fail(member, f"{what} {_show(path)} has the invalid component {_show(atom)}")
    return path


def check_text(text, member: str, what: str, limit: int) -> str:
    """A free-text string (stack trace, module path) without control characters other than
    newline: fx copies stack traces into generated code as comments, where a carriage return
    would end the comment and start a statement."""
    if not isinstance(text, str) or len(text) > limit:
        raise fail(member, f"{what} must be a string of at most {limit} characters")
    if any((ord(c) < 32 and c != "\n") or c in "\x7f\u2028\u2029\x85" for c in text):
        raise fail(member, f"{what} contains control characters")
    return text


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- dtypes -------------------------------------------------------------------------------------
#: ``str(dtype)`` -> dtype for every dtype torch has (a closed table, no attribute lookup).
DTYPES = {str(d): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


# -- call targets ---------------------------------------------------------------------------------
#: Higher-order ops unbroken records (``torch.cond``, ``torch.while_loop``).
HIGHER_ORDER_OPS = {"cond": torch.ops.higher_order.cond,
                    "while_loop": torch.ops.higher_order.while_loop,
                    # a custom autograd.Function exported under grad mode (forward, backward)
                    "autograd_function_apply":
                        torch.ops.higher_order.autograd_function_apply}
#: ``module.name`` -> function, for the Python callables a graph may call.
BUILTINS = {f"{f.__module__}.{f.__name__}": f
            for f in (*ALLOWED_BUILTINS, *GRAD_MODE_BUILTINS, operator.getitem)}
_OP_NAME = re.compile(r"op:([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)"
                      r"(?:\.([A-Za-z_][A-Za-z0-9_]*))?\Z")
# Registered ops that read or write files or processes: never from a program file.
_REFUSED_OPS = frozenset({"aten::from_file", "aten::save", "aten::_save_jit_module",
                          "aten::_load_for_mobile", "debugprims::load_tensor"})


def target_name(node) -> str:
    """How a ``call_function`` target is written: ``op:ns::name.overload``, ``hop:name`` or
    ``builtin:module.name``."""
    target = node.target
    if isinstance(target, OpOverload):
        return f"op:{op_schema(target).name}.{overload_name(target)}"
    if isinstance(target, HigherOrderOperator) and \
            HIGHER_ORDER_OPS.get(target.name()) is target:
        return f"hop:{target.name()}"
    name = f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', '')}"
    if BUILTINS.get(name) is not target:
        raise SerializationError(f"cannot save the call to {target!r} in node {node.name}",
                                 hint="Only ATen/registered ops, torch.cond, torch.while_loop "
                                      "and size arithmetic can be saved.")
    return f"builtin:{name}"


def resolve_target(name, member: str, where: str):
    """The callable a saved ``call_function`` target names; nothing outside the allow-list."""
    if not isinstance(name, str):
        raise fail(member, f"{where}: the target {_show(name)} is not a string")
    kind, _, rest = name.partition(":")
    if kind == "builtin" and rest in BUILTINS:
        return BUILTINS[rest]
    if kind == "hop" and rest in HIGHER_ORDER_OPS:
        return HIGHER_ORDER_OPS[rest]
    match = _OP_NAME.match(name)
    if kind != "op" or match is None:
        raise fail(member, f"{where}: unknown call target {_show(name)}")
    return _resolve_op(*match.groups(), member=member, where=where)


def _resolve_op(namespace: str, packet: str, overload: str | None, *, member: str, where: str):
    qualified = f"{namespace}::{packet}"
    if namespace.startswith("_") or packet.startswith("__") or (overload or "").startswith("__") \
            or qualified in _REFUSED_OPS:
        raise fail(member, f"{where}: the operator {qualified} may not be called from a file")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    except (AttributeError, RuntimeError):
        raise SerializationError(
            f"{member}: {where}: the operator {qualified}.{overload or 'default'} is not "
            f"registered", hint="Import the library that defines it (torch.library / "
                                "custom_op) before loading.") from None
    if not isinstance(op, OpOverload) or op_schema(op).name != qualified \
            or overload_name(op) != (overload or "default"):
        raise fail(member, f"{where}: {qualified} does not name an operator overload")
    return op
