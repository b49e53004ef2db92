"""Saving and loading exported programs.

A saved program is a zip archive:

- ``format.json`` — ``{"format": "unbroken.exported_program", "version": N}``;
- ``program.json`` — the graph (nodes with ops by qualified name, arguments, value metadata,
  source locations), any ``torch.cond`` subgraphs, the signature, the symbols of dynamic sizes
  and their ranges, and the pytree specs of inputs and outputs (``treespec_dumps``);
- ``tensors.pt`` — parameters, buffers, constants and example inputs, written by
  ``torch.save`` and read back with ``torch.load(weights_only=True)``.

Loading never unpickles code: tensors are read with ``weights_only=True``, and every op is
resolved by name inside ``torch.ops`` (or an allow-list of size-arithmetic builtins), so a
custom op must be registered (its library imported) before loading. A file from an unknown
format version, a missing member, bad JSON or an unknown op raises ``SerializationError``.

Format versions (keep loading every earlier one):
    1 — first version (unbroken 0.1).
"""
from __future__ import annotations

import io
import json
import math
import operator
import zipfile

import sympy
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..symbolic.diagnostics import SerializationError
from ..symbolic.env import ShapeEnvironment
from ..symbolic.ranges import ValueRange
from .program import ProgramParts
from .signature import (ConstantArgument, ExportGraphSignature, InputKind, InputSpec,
                        OutputKind, OutputSpec, SymIntArgument, TensorArgument)
from .verifier import ALLOWED_BUILTINS

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT_NAME = "unbroken.exported_program"
FORMAT_VERSION = 1
_BUILTINS = {f"{f.__module__}.{f.__name__}": f
             for f in (*ALLOWED_BUILTINS, operator.getitem)}
_ARGUMENTS = {"tensor": TensorArgument, "symint": SymIntArgument, "constant": ConstantArgument}


# ================================================================== save
def save(program, f) -> None:
    """Write ``program`` (an ``unbroken.ExportedProgram``) to ``f`` (a path or a binary file
    object)."""
    document = {
        "graph": _graph(program.graph_module),
        "signature": _signature(program.graph_signature),
        "symbols": _symbols(program),
        "in_spec": _treespec(program.in_spec, "inputs"),
        "out_spec": _treespec(program.out_spec, "outputs"),
    }
    tensors = io.BytesIO()
    torch.save({"state_dict": dict(program.state_dict), "constants": dict(program.constants),
                "example_inputs": program.example_inputs}, tensors)
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("format.json", json.dumps({"format": FORMAT_NAME,
                                                    "version": FORMAT_VERSION}))
        archive.writestr("program.json", json.dumps(document))
        archive.writestr("tensors.pt", tensors.getvalue())


def _graph(graph_module: fx.GraphModule) -> dict:
    nodes, modules = [], {}
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            modules[node.target] = _graph(getattr(graph_module, node.target))
        nodes.append({
            "name": node.name, "op": node.op, "target": _target_name(node),
            "args": _encode(node.args), "kwargs": _encode(node.kwargs),
            "val": _encode_val(node.meta.get("val")),
            "stack_trace": node.meta.get("stack_trace", ""),
            "nn_module_stack": {k: list(v) for k, v in node.meta.get("nn_module_stack", {}).items()},
        })
    return {"nodes": nodes, "modules": modules}


def _target_name(node) -> str | None:
    target = node.target
    if node.op in ("placeholder", "output", "get_attr"):
        return target if isinstance(target, str) else None
    if isinstance(target, torch._ops.OpOverload):
        return f"op:{target._schema.name}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"hop:{target.name()}"
    name = f"{target.__module__}.{target.__name__}"
    if name not in _BUILTINS:
        raise SerializationError(f"cannot save the call to {target!r} in node {node.name}")
    return f"builtin:{name}"


def _encode(value):
    if isinstance(value, fx.Node):
        return {"node": value.name}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": {k: _encode(v) for k, v in value.items()}}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    for kind, types in (("dtype", torch.dtype), ("device", torch.device),
                        ("layout", torch.layout), ("memory_format", torch.memory_format)):
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
        return {"value": _encode(val)}
    except SerializationError:
        return None


def _size(size):
    return str(size.node.expr) if isinstance(size, torch.SymInt) else int(size)


def _signature(signature: ExportGraphSignature) -> dict:
    def argument(arg):
        kind = {TensorArgument: "tensor", SymIntArgument: "symint",
                ConstantArgument: "constant"}[type(arg)]
        data = {"kind": kind, "name": arg.name}
        if isinstance(arg, ConstantArgument):
            data["value"] = _encode(arg.value)
        return data

    return {
        "inputs": [{"kind": s.kind.name, "arg": argument(s.arg), "target": s.target,
                    "persistent": s.persistent} for s in signature.input_specs],
        "outputs": [{"kind": s.kind.name, "arg": argument(s.arg), "target": s.target}
                    for s in signature.output_specs],
    }


def _symbols(program) -> list:
    hints = _symbol_hints(program)
    return [{"name": str(symbol), "lower": _bound(r.lower), "upper": _bound(r.upper),
             "hint": hints.get(symbol)} for symbol, r in program.range_constraints.items()]


def _symbol_hints(program) -> dict:
    return program.symbol_hints


def _bound(value):
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if abs(number) < 2 ** 62 else None


def _treespec(spec, what: str) -> str:
    try:
        return pytree.treespec_dumps(spec)
    except Exception as exc:
        raise SerializationError(
            f"the structure of the program's {what} cannot be saved: {exc}",
            hint="Register custom containers for serialization (namedtuples with "
                 "torch.utils._pytree._register_namedtuple, dataclasses with "
                 "torch.export.register_dataclass).") from None


# ================================================================== load
def load(f) -> ProgramParts:
    """Read the parts of a program written by :func:`save` from ``f`` (a path or a binary file
    object); ``unbroken.load`` makes the program of them."""
    try:
        with zipfile.ZipFile(f) as archive:
            header = _json(archive, "format.json")
            _check_header(header)
            document = _json(archive, "program.json")
            tensors = _tensors(archive.read("tensors.pt"))
    except zipfile.BadZipFile as exc:
        raise SerializationError(f"not an unbroken program archive: {exc}") from None
    except KeyError as exc:
        raise SerializationError(f"the archive is missing {exc}") from None
    try:
        return _program(document, tensors)
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"the saved program is corrupt: {type(exc).__name__}: {exc}",
                                 hint="Save the program again with unbroken.save.") from exc


def _tensors(data: bytes) -> dict:
    """The tensors, read without running any pickled code (``weights_only=True``)."""
    try:
        tensors = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # UnpicklingError for anything but plain tensors and containers
        raise SerializationError(f"tensors.pt cannot be read safely: {type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}",
                                 hint="Only files written by unbroken.save can be loaded.") \
            from None
    if not isinstance(tensors, dict) or not {"state_dict", "constants"} <= set(tensors):
        raise SerializationError("tensors.pt does not hold a program's tensors")
    return tensors


def _json(archive, name: str):
    try:
        return json.loads(archive.read(name))
    except json.JSONDecodeError as exc:
        raise SerializationError(f"{name} is not valid JSON: {exc}") from None


def _check_header(header) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise SerializationError("not an unbroken program archive (format.json names another "
                                 "format)")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise SerializationError(
            f"format version {version!r} is not supported by this unbroken (it reads versions "
            f"1 to {FORMAT_VERSION})", hint="Upgrade unbroken to load this file.")


def _program(document: dict, tensors: dict) -> ProgramParts:
    env = ShapeEnvironment()
    symbols = _rebuild_symbols(env, document["symbols"])
    graph_module = _rebuild_graph(document["graph"], env, symbols)
    signature = _rebuild_signature(document["signature"])
    ranges = {symbols[s["name"]]: ValueRange(s["lower"], s["upper"])
              for s in document["symbols"]}
    return ProgramParts(graph_module, signature, tensors["state_dict"], tensors["constants"],
                        ranges, pytree.treespec_loads(document["in_spec"]),
                        pytree.treespec_loads(document["out_spec"]),
                        example_inputs=tensors.get("example_inputs"),
                        hints={symbols[s["name"]]: s["hint"] for s in document["symbols"]})


def _rebuild_symbols(env: ShapeEnvironment, entries: list) -> dict:
    symbols = {}
    for entry in entries:
        if entry["hint"] is None:  # a data-dependent value (.item(), nonzero count)
            kind = "float" if entry["name"].startswith("zuf") else "int"
            symbol = env.create_unbacked_symbol(kind, source=entry["name"])
            env.set_range(symbol, ValueRange(entry["lower"], entry["upper"]), spec=True)
        else:
            symbol = env.create_symbol(entry["name"], entry["hint"], lower=entry["lower"],
                                       upper=entry["upper"], source=entry["name"])
        symbols[entry["name"]] = symbol
    return symbols


def _rebuild_graph(data: dict, env, symbols) -> fx.GraphModule:
    graph, owner = fx.Graph(), torch.nn.Module()
    nodes: dict[str, fx.Node] = {}
    for name, sub in data["modules"].items():
        owner.add_module(name, _rebuild_graph(sub, env, symbols))
    for entry in data["nodes"]:
        args = _decode(entry["args"], nodes)
        kwargs = _decode(entry["kwargs"], nodes)
        target = _resolve(entry["target"], entry["op"])
        node = graph.create_node(entry["op"], target, tuple(args) if entry["op"] != "output"
                                 else args, kwargs, name=entry["name"])
        node.meta["val"] = _decode_val(entry["val"], env, symbols)
        node.meta["stack_trace"] = entry.get("stack_trace", "")
        node.meta["nn_module_stack"] = {k: tuple(v) for k, v in
                                        entry.get("nn_module_stack", {}).items()}
        node.meta["user_frames"] = ()
        nodes[entry["name"]] = node
    return fx.GraphModule(owner, graph)


def _resolve(name, op: str):
    if op in ("placeholder", "output", "get_attr"):
        return name
    kind, _, qualified = name.partition(":")
    if kind == "builtin" and qualified in _BUILTINS:
        return _BUILTINS[qualified]
    if kind == "hop":
        return getattr(torch.ops.higher_order, qualified)
    if kind == "op":
        namespace, _, rest = qualified.partition("::")
        packet, _, overload = rest.partition(".")
        try:
            return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
        except (AttributeError, RuntimeError):
            raise SerializationError(
                f"the operator {qualified} is not registered",
                hint="Import the library that defines it (torch.library / custom_op) before "
                     "loading.") from None
    raise SerializationError(f"the saved program calls an unknown target {name!r}")


def _decode(value, nodes):
    if isinstance(value, dict):
        if "node" in value:
            return nodes[value["node"]]
        if "list" in value:
            return [_decode(v, nodes) for v in value["list"]]
        if "tuple" in value:
            return tuple(_decode(v, nodes) for v in value["tuple"])
        if "dict" in value:
            return {k: _decode(v, nodes) for k, v in value["dict"].items()}
        if "float" in value:
            return float(value["float"])
        if "dtype" in value:
            return getattr(torch, value["dtype"].removeprefix("torch."))
        if "device" in value:
            return torch.device(value["device"])
        if "layout" in value:
            return getattr(torch, value["layout"].removeprefix("torch."))
        if "memory_format" in value:
            return getattr(torch, value["memory_format"].removeprefix("torch."))
        raise SerializationError(f"unknown argument encoding {sorted(value)}")
    return value


def _decode_val(value, env, symbols):
    if value is None:
        return None
    if "tensor" in value:
        spec = value["tensor"]
        shape = [_sym_size(s, env, symbols) for s in spec["shape"]]
        stride = [_sym_size(s, env, symbols) for s in spec["stride"]]
        return torch.empty_strided(shape, stride, dtype=getattr(torch, spec["dtype"][6:]),
                                   device="meta")
    if "tuple" in value:
        return tuple(_decode_val(v, env, symbols) for v in value["tuple"])
    if "sym" in value:
        expr = sympy.sympify(value["sym"], locals=symbols)
        return env.symbool(expr) if value["type"] == "SymBool" else env.symint(expr)
    return _decode(value["value"], {})


def _sym_size(size, env, symbols):
    if isinstance(size, int):
        return size
    return env.symint(sympy.sympify(size, locals=symbols))


def _rebuild_signature(data: dict) -> ExportGraphSignature:
    def argument(entry):
        cls = _ARGUMENTS[entry["kind"]]
        if cls is ConstantArgument:
            return ConstantArgument(entry["name"], _decode(entry["value"], {}))
        return cls(entry["name"])

    inputs = [InputSpec(InputKind[e["kind"]], argument(e["arg"]), e["target"], e["persistent"])
              for e in data["inputs"]]
    outputs = [OutputSpec(OutputKind[e["kind"]], argument(e["arg"]), e["target"])
               for e in data["outputs"]]
    return ExportGraphSignature(inputs, outputs)
