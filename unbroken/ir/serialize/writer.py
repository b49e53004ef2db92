"""Write an ``ExportedProgram`` as a format-2 file (see :mod:`unbroken.ir.serialize`).

Everything written is canonical: JSON with sorted keys, fixed separators and ASCII only, where
order matters it is a list (nodes, keyword arguments, subgraphs, module stacks, tensor
indexes); tensors are keyed ``t0, t1, ...`` in the order they are first met; the zip is
written by :func:`archive.write_members`. So saving the same program twice, in the
same or another process, gives the same bytes.
"""
from __future__ import annotations

import json
import math

import safetensors.torch
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics import SerializationError
from ...symbolic.ranges import finite_bound
from ..meta_keys import EAGER_REFUSES, NEW_VALUE_OF_FIRST, SAVED_THEN_WRITTEN
from .archive import EXTRA_FILES, write_members
from .format import FORMAT_NAME, FORMAT_VERSION, MEMBERS, target_name

__all__ = ["write_program", "canonical_json"]


def canonical_json(value) -> bytes:
    """The one byte string a JSON value is written as."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def write_program(program, f, extra_files: dict[str, str] | None = None) -> None:
    """Write ``program`` (:class:`~unbroken.ir.parts.ProgramParts`) to ``f`` (a path or a
    binary file object) in format 2, with ``extra_files`` (name -> text) after the program
    as ``extra_files/<name>`` members."""
    tensors = _TensorTable()
    document = {
        "graph": _graph(program.graph_module),
        "signature": _signature(program.graph_signature),
        "symbols": _symbols(program),
        "in_spec": _treespec(program.in_spec, "inputs"),
        "out_spec": _treespec(program.out_spec, "outputs"),
        "tensors": {"state_dict": tensors.index(program.state_dict),
                    "constants": tensors.index(program.constants)},
        "example_inputs": _example_inputs(program.example_inputs, tensors),
        "strict_layout": bool(program.strict_layout),
        "specializations": [_specialization(s) for s in program.specializations],
        "module_calls": [_module_call(c) for c in program.module_calls],
    }
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    format_member, program_member, tensor_member = MEMBERS[FORMAT_VERSION]
    write_members(f, [(format_member, canonical_json(header), True),
                      (program_member, canonical_json(document), True),
                      (tensor_member, tensors.to_bytes(), False),
                      *[(EXTRA_FILES + name, text.encode("utf-8"), True)
                        for name, text in (extra_files or {}).items()]])


# -- graph ----------------------------------------------------------------------------------------
def _graph(graph_module: fx.GraphModule) -> dict:
    nodes, modules = [], []
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            modules.append([node.target, _graph(getattr(graph_module, node.target))])
        nodes.append(_eager_refusal(node) | _write_mark(node) | _saved_then_written(node) | {
            "name": node.name, "op": node.op, "target": _target(node),
            "args": encode_argument(tuple(node.args)), "kwargs":
                [[key, encode_argument(value)] for key, value in node.kwargs.items()],
            "val": _encode_val(node.meta.get("val")),
            "stack_trace": node.meta.get("stack_trace") or "",
            "nn_module_stack": [[key, *map(str, value)] for key, value in
                                node.meta.get("nn_module_stack", {}).items()],
        })
    return {"nodes": nodes, "modules": modules}


def _eager_refusal(node: fx.Node) -> dict:
    """``{"eager_refuses": [message, hint, argument positions]}`` for a node marked
    ``EAGER_REFUSES`` (an op eager's autograd refuses in a call that records a gradient)."""
    if EAGER_REFUSES not in node.meta:
        return {}
    message, hint, positions = node.meta[EAGER_REFUSES]
    return {"eager_refuses": [message, hint, list(positions)]}


def _saved_then_written(node: fx.Node) -> dict:
    """``{"saved_then_written": [message, positions, patterns]}`` for a node marked
    ``SAVED_THEN_WRITTEN`` (autograd saves a tensor a later write changes: the loaded
    program's backward raises where eager's does, as the original's)."""
    if SAVED_THEN_WRITTEN not in node.meta:
        return {}
    message, positions, patterns = node.meta[SAVED_THEN_WRITTEN]
    return {"saved_then_written": [message, list(positions), [list(p) for p in patterns]]}


def _write_mark(node: fx.Node) -> dict:
    """``{"writes_first": true}`` for a node standing for an in-place write of its first
    argument (``NEW_VALUE_OF_FIRST``: ``run_decompositions`` of the loaded program keeps the
    writes of preserved module calls with it)."""
    return {"writes_first": True} if node.meta.get(NEW_VALUE_OF_FIRST) else {}


def _target(node: fx.Node) -> str:
    if node.op in ("placeholder", "output", "get_attr"):
        return node.target
    return target_name(node)


_ENUMS = (("dtype", torch.dtype), ("device", torch.device), ("layout", torch.layout),
          ("memory_format", torch.memory_format))


def encode_argument(value):
    """A node argument as JSON: nodes by name, containers tagged, torch enums by name."""
    if isinstance(value, fx.Node):
        return {"node": value.name}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [encode_argument(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[k, encode_argument(v)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    for kind, types in _ENUMS:
        if isinstance(value, types):
            return {kind: str(value)}
    raise SerializationError(f"cannot save the argument {value!r} ({type(value).__name__})")


def _encode_val(val):
    if isinstance(val, torch.Tensor):
        return {"tensor": {"dtype": str(val.dtype), "shape": [_size(s) for s in val.shape],
                           "stride": [_size(s) for s in val.stride()],
                           "requires_grad": bool(val.requires_grad)}}
    if isinstance(val, (tuple, list)):
        return {"tuple": [_encode_val(v) for v in val]}
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"sym": str(val.node.expr), "type": type(val).__name__}
    try:
        return {"value": encode_argument(val)}
    except SerializationError:  # metadata of a kind the format does not keep
        return None


def _size(size):
    return str(size.node.expr) if isinstance(size, torch.SymInt) else int(size)


# -- signature, symbols, specs --------------------------------------------------------------------
def _argument(arg) -> dict:
    """An argument spec by its fields (the class may be unbroken's or torch's)."""
    if hasattr(arg, "value") and type(arg).__name__ == "ConstantArgument":
        return {"kind": "constant", "name": arg.name, "value": encode_argument(arg.value)}
    kinds = {"TensorArgument": "tensor", "SymIntArgument": "symint"}
    kind = kinds.get(type(arg).__name__)
    if kind is None:
        raise SerializationError(f"cannot save the signature argument {arg!r}")
    return {"kind": kind, "name": arg.name}


def _signature(signature) -> dict:
    return {
        "inputs": [{"kind": s.kind.name, "arg": _argument(s.arg), "target": s.target,
                    "persistent": s.persistent} for s in signature.input_specs],
        "outputs": [{"kind": s.kind.name, "arg": _argument(s.arg), "target": s.target}
                    for s in signature.output_specs],
    }


def _symbols(program) -> list:
    hints = program.hints
    return [{"name": str(symbol), "lower": finite_bound(r.lower), "upper": finite_bound(r.upper),
             "hint": hints.get(symbol)}
            for symbol, r in sorted(program.range_constraints.items(), key=lambda i: str(i[0]))]


def _module_call(call) -> dict:
    return {"fqn": call.fqn, "inputs": [{"arg": _argument(a)} for a in call.inputs],
            "in_spec": _treespec(call.in_spec, f"`{call.fqn}` inputs"),
            "outputs": [{"arg": _argument(a)} for a in call.outputs],
            "out_spec": _treespec(call.out_spec, f"`{call.fqn}` outputs")}


def _specialization(specialization) -> dict:
    return {"source": specialization.source, "value": int(specialization.value),
            "reason": specialization.reason,
            "frames": [{"filename": f.filename, "lineno": int(f.lineno), "function": f.function,
                        "source": f.source} for f in specialization.frames]}


def _treespec(spec, what: str) -> str:
    try:
        return pytree.treespec_dumps(spec)
    except (TypeError, NotImplementedError) as exc:
        raise SerializationError(
            f"the structure of the program's {what} cannot be saved: {exc}",
            hint="Register custom containers for serialization (namedtuples with "
                 "torch.utils._pytree._register_namedtuple, dataclasses with "
                 "torch.export.register_dataclass).") from None


def _example_inputs(example_inputs, tensors: _TensorTable):
    if example_inputs is None:
        return None
    leaves, spec = pytree.tree_flatten(example_inputs)
    try:
        encoded = [{"tensor": tensors.key(leaf)} if isinstance(leaf, torch.Tensor)
                   else {"value": encode_argument(leaf)} for leaf in leaves]
        return {"spec": pytree.treespec_dumps(spec), "leaves": encoded}
    except (SerializationError, TypeError, NotImplementedError):
        return None  # example inputs are a convenience; a program without them still loads


# -- tensors --------------------------------------------------------------------------------------
class _TensorTable:
    """Tensors to store, each once: the same tensor object (tied weights) gets one key.

    Stored data is contiguous; the layout (strides) is restored on load from the placeholder
    metadata. Distinct tensors that share memory are copied (safetensors stores each alone).
    """

    def __init__(self):
        self._keys: dict[int, str] = {}
        self._data: dict[str, torch.Tensor] = {}
        self._held: list[torch.Tensor] = []  # keep ids stable while saving
        self._storages: set[int] = set()

    def key(self, tensor: torch.Tensor) -> str:
        if id(tensor) in self._keys:
            return self._keys[id(tensor)]
        key = f"t{len(self._keys)}"
        self._keys[id(tensor)] = key
        self._held.append(tensor)
        self._data[key] = self._storable(tensor)
        return key

    def _storable(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type == "meta":
            raise SerializationError(f"cannot save a {tensor.layout} / quantized / meta tensor",
                                     hint="Convert state to dense CPU tensors before saving.")
        data = tensor.detach().to("cpu").contiguous()
        storage = data.untyped_storage().data_ptr()
        if storage in self._storages and data.numel():
            data = data.clone()
        self._storages.add(data.untyped_storage().data_ptr())
        return data

    def index(self, tensors: dict) -> list:
        """The index entries of one group (``state_dict`` or ``constants``), in its order."""
        return [{"name": name, "tensor": self.key(tensor),
                 "parameter": isinstance(tensor, torch.nn.Parameter),
                 "requires_grad": _leaf_requires_grad(tensor)}
                for name, tensor in tensors.items()]

    def to_bytes(self) -> bytes:
        try:
            return safetensors.torch.save(self._data)
        except (ValueError, TypeError, RuntimeError) as error:  # an unsupported dtype
            raise SerializationError(f"the program's tensors cannot be stored: {error}") \
                from None


def _leaf_requires_grad(tensor: torch.Tensor) -> bool:
    """The ``requires_grad`` flag a loaded tensor gets: the saved tensor's, when it is a leaf.
    A state tensor with autograd history (a buffer the program wrote with a value that
    requires grad, as eager's ``copy_`` leaves it) is saved as eager's ``state_dict()`` saves
    it: detached, a leaf that requires no grad."""
    return bool(tensor.requires_grad and tensor.is_leaf)
