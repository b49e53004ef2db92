"""The pytree structure of forward()'s inputs, as the trace sees it.

Plain containers (tuples, lists, dicts, namedtuples: the nodes PyTorch itself registers) hold
the input trackers directly. An object of a class registered by the program or a library
(``transformers``' ``DynamicCache`` as ``past_key_values``) is rebuilt *inside* the trace: its
unflatten function is interpreted on the input trackers, so what its constructor does (a cache
initialises layers, concatenates its tensors) is recorded, and the object is one of the trace's
own. As with ``torch.export``, the caller's object is never changed: a cache forward() updates
is returned (if forward() returns it) as a new object.

Example tensors must be plain dense tensors (:func:`check_traceable_tensor`). The call itself
is checked here too: the example inputs (:func:`check_call`), their binding to forward()'s
parameters and names (:func:`bind_inputs`, :func:`top_level_names`, :func:`leaves_with_paths`),
and what forward() returns (:func:`check_outputs`).
"""
from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from ..frontend.tracer import trace_call
from ..symbolic.diagnostics import ExportUsageError, frame_from_code
from ..symbolic.torch_compat import unmodelled_tensor_class
from .fix_rendering import TensorDims

__all__ = ["Rebuild", "check_traceable_tensor", "dims_of", "leaf_entries", "materialize",
           "unflatten_inputs"]


def _is_plain(spec) -> bool:
    """A node PyTorch registers (builtins, collections, torch's own structs)."""
    module = getattr(spec.type, "__module__", "") or ""
    return module.split(".")[0] in ("builtins", "collections", "torch")


def leaf_entries(spec, mirrored) -> list:
    """The entries of ``mirrored`` (a tree shaped as ``spec``, registered classes as the list
    of their children: ``symbolic.spec``'s resolved dims) at the leaves of ``spec``, in
    order."""
    if spec.is_leaf():
        return [mirrored]
    if _is_plain(spec):
        mirrored = pytree.SUPPORTED_NODES[spec.type].flatten_fn(mirrored)[0]
    return [entry for child, part in zip(spec.children(), mirrored, strict=True)
            for entry in leaf_entries(child, part)]


@dataclass(frozen=True, slots=True)
class Rebuild:
    """An input object of a registered class, to rebuild inside the trace: ``unflatten``
    (the class's pytree unflatten function) called on ``children`` (trackers, plain containers
    of them, or other Rebuilds) and ``context``."""

    unflatten: Callable
    context: object
    children: tuple


def unflatten_inputs(leaves: list, spec):
    """``spec`` unflattened over the input trackers ``leaves``: plain containers natively,
    registered classes as :class:`Rebuild` (see :func:`materialize`)."""
    return _unflatten(iter(leaves), spec)


def _unflatten(leaves, spec):
    if spec.is_leaf():
        return next(leaves)
    children = [_unflatten(leaves, child) for child in spec.children()]
    node = pytree.SUPPORTED_NODES[spec.type]
    if _is_plain(spec):
        return node.unflatten_fn(children, spec.context)
    return Rebuild(node.unflatten_fn, spec.context, tuple(children))


def materialize(output, value):
    """``value`` with each :class:`Rebuild` replaced by the tracker its unflatten function
    returns, interpreted in the trace ``output`` (inside the trace's context managers)."""
    def build(leaf):
        if not isinstance(leaf, Rebuild):
            return leaf
        children = [materialize(output, child) for child in leaf.children]
        result, _ = trace_call(output, leaf.unflatten, [children, leaf.context], {},
                               inputs_are_external=False)
        return result

    return pytree.tree_map(build, value, is_leaf=lambda v: isinstance(v, Rebuild))


def dims_of(value, spec, trackers: list):
    """The dims of an argument for rendering fixes: a tuple for a tensor, the container with a
    ``TensorDims`` per tensor, or None when it holds no tensor. ``spec``: its pytree spec;
    ``trackers``: the tracker of each leaf, in order (None for a leaf that is no tensor)."""
    if isinstance(value, torch.Tensor):
        return _tensor_dims(trackers[0])
    if all(t is None for t in trackers):
        return None
    return _dims_tree(spec, iter(trackers))


def _dims_tree(spec, trackers):
    """The dims tree of ``spec``: a ``TensorDims`` per tensor, None for other leaves. A
    registered class becomes the list of its children, as ``dynamic_shapes`` states it (it is
    never rebuilt here: its constructor may read its tensors)."""
    if spec.is_leaf():
        tracker = next(trackers)
        return None if tracker is None else TensorDims(_tensor_dims(tracker))
    dims = [_dims_tree(child, trackers) for child in spec.children()]
    if _is_plain(spec):
        return pytree.SUPPORTED_NODES[spec.type].unflatten_fn(dims, spec.context)
    return dims


def _tensor_dims(tracker) -> tuple:
    return tuple(s.node.expr if isinstance(s, torch.SymInt) else int(s)
                 for s in tracker.meta.shape)


_TENSOR_HOOKS = ("__torch_function__", "__torch_dispatch__")


def check_traceable_tensor(tensor: torch.Tensor) -> None:
    """The trace sees every example tensor as a dense (strided) tensor of its dtype and sizes:
    refuse one whose behaviour that would drop (a sparse or nested tensor, a tensor subclass
    with its own ``__torch_function__``/``__torch_dispatch__``), since the program would
    compute something else than eager (``x.is_sparse`` read as False)."""
    if tensor.is_nested:
        what, fix = "a nested tensor", "pass dense (padded) tensors"
    elif tensor.layout != torch.strided:
        what, fix = f"a tensor of layout {tensor.layout}", "pass a dense tensor (`x.to_dense()`)"
    else:
        cls = unmodelled_tensor_class(tensor)
        if cls is None:
            return
        what = f"a {cls.__name__}, a tensor subclass with its own {' / '.join(_TENSOR_HOOKS)}"
        fix = "pass a plain tensor (`x.as_subclass(torch.Tensor)`)"
    raise ExportUsageError(
        f"unsupported example input: {what}; the trace would see a plain dense tensor, and "
        f"the program would not compute what eager computes on it",
        hint=f"Export with plain dense tensors: {fix}.")


# ----- forward()'s call: the example inputs, their names, and what it returns -----
_OPAQUE_INPUT_HINTS = {
    torch.Generator: "A torch.Generator cannot be an input of an exported program (its state "
                     "is not a tensor the program could take): draw from the default generator "
                     "(seeded with torch.manual_seed outside the model), or pass the random "
                     "tensor itself as an input.",
}


_MODULE_INPUT_HINT = (
    "A module passed to forward() is not an input unbroken takes yet (torch.export's "
    "non-strict mode passes its parameters and buffers as inputs; strict mode refuses it "
    "too): make it a submodule of the model (`self.head = head` in __init__), whose "
    "parameters the program then holds, or pass its tensors and call "
    "`torch.func.functional_call(head, params, (x,))` in forward().")


def check_call(mod, args, kwargs):
    if not (isinstance(mod, torch.nn.Module) or callable(mod)):
        raise ExportUsageError(f"export() expects an nn.Module or a function, got "
                               f"{type(mod).__name__}", hint="Pass the model object itself.",
                               torch_also=(ValueError,))
    if isinstance(args, (list, tuple)):  # a namedtuple as the whole ``args`` too: its
        args = tuple(args)  # type never reaches the input spec (as torch.export's)
    if not isinstance(args, tuple):
        raise ExportUsageError(
            f"`args` must be a tuple of example inputs, got {type(args).__name__}",
            hint="Wrap a single input in a tuple: export(model, (x,)).")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ExportUsageError(f"`kwargs` must be a dict, got {type(kwargs).__name__}")
    for leaf in user_pytree_leaves((args, kwargs or {}), "the example inputs"):
        if not isinstance(leaf, (torch.Tensor, int, float, bool, str, type(None), torch.dtype,
                                 torch.device)):
            raise ExportUsageError(
                f"unsupported example input of type {type(leaf).__name__}",
                hint=_MODULE_INPUT_HINT if isinstance(leaf, torch.nn.Module) else
                _OPAQUE_INPUT_HINTS.get(type(leaf), "Inputs must be tensors, Python "
                                        "numbers/strings, or tuples/lists/dicts of them "
                                        "(register other containers with "
                                        "torch.utils._pytree)."))
        if isinstance(leaf, torch.Tensor):
            check_traceable_tensor(leaf)
    return args, dict(kwargs or {})



def user_pytree_leaves(value, what: str) -> list:
    """``pytree.tree_leaves(value)``; a flatten function the user registered for a container
    type (``register_pytree_node``) that raises is the user's error, reported at its line."""
    try:
        return pytree.tree_leaves(value)
    except Exception as exc:  # only a flatten function registered by the user can raise here
        culprit = _failing_container(value)
        name = culprit.__qualname__ if culprit else "a container type"
        last = traceback.extract_tb(exc.__traceback__)[-1]
        frame = frame_from_code(last.filename, last.lineno, last.name)
        raise ExportUsageError(
            f"flattening {what} failed: the pytree flatten function registered for {name} "
            f"raised {type(exc).__name__}: {exc}", frames=(frame,),
            hint=f"Make the flatten function registered for {name} (with "
                 "torch.utils._pytree.register_pytree_node) return (children, context) for "
                 "every instance.") from exc


def _failing_container(value):
    """The innermost registered container type in ``value`` whose flatten function raises."""
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return None
    try:
        children, _ = node.flatten_fn(value)
    except Exception:  # the same failure tree_leaves met, found
        return type(value)
    return next((t for t in map(_failing_container, children) if t is not None), None)


_OUTPUT_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device)


def check_outputs(leaves, frames) -> None:
    """Outputs must flatten (torch.utils._pytree) to tensors, sizes and Python constants."""
    for leaf in leaves:
        if not isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool,
                                 *_OUTPUT_CONSTANTS)):
            kind = type(leaf)
            raise ExportUsageError(
                f"forward() returns an object of type {kind.__qualname__}, which unbroken cannot "
                "flatten into graph outputs", frames=frames, hint=_registration_hint(kind))


def _registration_hint(kind: type) -> str:
    """How to register ``kind`` with pytree: ``transformers`` ships the registration of its
    cache classes (its export integration), other classes need their own."""
    if kind.__module__.startswith("transformers.") and kind.__name__.endswith("Cache"):
        return ("transformers registers its cache classes with pytree for export; before "
                "exporting, call:\n"
                "    from transformers.exporters.exporter_dynamo import "
                "register_cache_pytrees_for_model\n"
                "    register_cache_pytrees_for_model(model)")
    return (f"Register the class as a pytree node, e.g. torch.export.register_dataclass("
            f"{kind.__name__}) for a dataclass or torch.utils._pytree.register_pytree_node("
            f"{kind.__name__}, flatten_fn, unflatten_fn), or return a tuple/dict.")


def signature_of(forward) -> inspect.Signature:
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError) as exc:
        raise ExportUsageError(f"cannot read the signature of {forward!r}: {exc}") from None


def bind_inputs(signature, forward, args, kwargs) -> dict:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        names = ", ".join(signature.parameters)
        raise ExportUsageError(
            f"the example inputs do not match forward({names}): {exc}",
            hint="Pass one example value per parameter of "
                 f"{getattr(forward, '__qualname__', 'forward')}.",
            torch_also=(TypeError,)) from None
    return dict(bound.arguments)


def top_level_names(signature, args, kwargs):
    """(name, value) for each positional then keyword input, named after ``forward``'s
    parameters (extra positionals of ``*args`` as ``args_0``, ``args_1``, ...)."""
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    for i, value in enumerate(args):
        name = positional[i].name if i < len(positional) else \
            f"{var_positional}_{i - len(positional)}"
        yield name, value
    yield from kwargs.items()


def leaves_with_paths(value) -> list:
    """``(path, leaf)`` pairs of ``value``. A container type registered without a
    ``flatten_with_keys_fn`` (allowed by ``register_pytree_node``) has no keys: its leaves are
    then named by position, as if ``value`` were a flat sequence."""
    if _keyed(value):
        return pytree.tree_flatten_with_path(value)[0]
    return [((pytree.SequenceKey(i),), leaf) for i, leaf in enumerate(pytree.tree_leaves(value))]


def _keyed(value) -> bool:
    """Whether every registered container type in ``value`` can name its children."""
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:  # a leaf, or a namedtuple / structseq (keyed by torch itself)
        return True
    if node.flatten_with_keys_fn is None:
        return False
    return all(_keyed(child) for child in node.flatten_fn(value)[0])


def path_suffix(key) -> str:
    for attribute in ("idx", "key", "name"):
        if hasattr(key, attribute):
            return f"_{getattr(key, attribute)}"
    return f"_{key}"
