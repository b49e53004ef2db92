"""Read a saved program: a parser that trusts nothing (see :mod:`unbroken.ir.serialize`).

The order of the checks is the order of the file: the archive (``archive``), the
header (``format.json``: the format's name and a version from :data:`KNOWN_VERSIONS`, an int
that is not a bool), the JSON document (``json_document``), the symbols, the graphs
(``graph``), the signature, the tensors (safetensors for format 2, ``v1``
for format 1), then everything against everything: each weight's dtype, shape and strides
against its placeholder, the example inputs against the user-input placeholders, the pytree
specs against the signature, and last the dialect verifier. Every failure is one
``SerializationError`` that names the member and what was wrong.
"""
from __future__ import annotations

import re

import safetensors
import safetensors.torch
import torch
from torch.utils import _pytree as pytree

from ...symbolic.auto import Specialization
from ...symbolic.diagnostics import SerializationError, UnsupportedError, UserFrame
from ...symbolic.env import ShapeEnvironment
from ...symbolic.ranges import ValueRange
from ...symbolic.spec import INT_INPUT_MIN
from ..parts import ModuleCall, ProgramParts
from ..signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from ..verifier import DialectViolation, verify
from .archive import open_archive, read_extra_files, read_member, read_members
from .check import check_values, same_value
from .format import (
    FORMAT_NAME,
    KNOWN_VERSIONS,
    MEMBERS,
    Limits,
    check_attribute_path,
    check_identifier,
    check_text,
    fail,
)
from .graph import GraphReader
from .json_document import Fields, decode_json
from .v1 import read_v1_tensors

__all__ = ["read_program"]

HEADER, DOCUMENT = "format.json", "program.json"
_SYMBOL = re.compile(r"(s|u|zuf)(0|[1-9][0-9]{0,8})\Z")
_BOUND = 1 << 62
_CALL_INDEX = re.compile(r"[1-9][0-9]{0,8}\Z")
_INPUT_KINDS = ("USER_INPUT", "PARAMETER", "BUFFER", "CONSTANT_TENSOR")
_OUTPUT_KINDS = ("USER_OUTPUT", "PARAMETER_MUTATION", "BUFFER_MUTATION",
                 "USER_INPUT_MUTATION")


def read_program(f, limits: Limits, build, extra_files: dict | None = None):
    """``build(parts)`` of the program in ``f`` (a path or a binary file object), or
    SerializationError; an InternalError of ``build`` (the verifiers) judges the file. When
    ``extra_files`` is a dict, the file's extra files (name -> text) are put into it."""
    archive = open_archive(f, limits)
    with archive:
        version = _version(decode_json(read_member(archive, HEADER, 4096), HEADER, limits))
        names = MEMBERS[version]
        sizes = {names[0]: 4096, names[1]: limits.json_bytes, names[2]: limits.tensor_bytes}
        members = read_members(archive, names, limits, sizes)
        extras = read_extra_files(archive, limits.json_bytes) if extra_files is not None \
            else {}
    document = decode_json(members[DOCUMENT], DOCUMENT, limits)
    program = _Loader(document, version, limits).program(members[names[2]], build)
    if extra_files is not None:
        extra_files.update(extras)
    return program


def _version(header) -> int:
    fields = Fields(HEADER)
    if fields.get(header, "format", "str", "the header") != FORMAT_NAME:
        raise fail(HEADER, "names another format: this is not an unbroken program")
    version = header.get("version")
    if type(version) is not int or version not in KNOWN_VERSIONS:
        raise SerializationError(
            f"{HEADER}: format version {str(version)[:20]!r} is not supported (this unbroken "
            f"reads versions {', '.join(map(str, KNOWN_VERSIONS))})",
            hint="Upgrade unbroken to load a file from a newer version.")
    return version


class _Loader:
    """Builds the program of one decoded document, checking as it goes."""

    def __init__(self, document, version: int, limits: Limits):
        self.document, self.version, self.limits = document, version, limits
        self.fields = Fields(DOCUMENT)
        self.env = ShapeEnvironment()

    def program(self, tensor_bytes: bytes, build):
        f, doc = self.fields, self.document
        symbols, ranges = self._symbols(f.get(doc, "symbols", "list", "the document"))
        reader = GraphReader(self.env, symbols, self.limits, self.version, DOCUMENT)
        graph_module = reader.graph_module(f.get(doc, "graph", "dict", "the document"))
        signature = self._signature(f.get(doc, "signature", "dict", "the document"))
        _verify(graph_module, signature)
        check_values(graph_module, DOCUMENT)
        in_spec = self._treespec(doc, "in_spec")
        out_spec = self._treespec(doc, "out_spec")
        state, constants, examples = self._tensors(tensor_bytes, reader)
        placeholders = {n.name: n for n in graph_module.graph.nodes if n.op == "placeholder"}
        _check_state(signature, placeholders, state, constants)
        _check_mutations(graph_module, signature, placeholders)
        _check_specs(signature, in_spec, out_spec)
        if examples is not None and not _examples_fit(examples, in_spec, signature,
                                                      placeholders):
            raise fail(DOCUMENT, "the example inputs do not fit the program's inputs")
        try:
            return build(ProgramParts(
                graph_module, signature, state, constants, ranges, in_spec, out_spec,
                example_inputs=examples, hints={s: self.env.hint_of(s) for s in ranges},
                env=self.env, specializations=self._specializations(doc),
                strict_layout=self._strict_layout(doc),
                module_calls=self._module_calls(doc, graph_module)))
        except DialectViolation as error:  # the verifiers judge the file's content here
            raise _verifier_failure(error) from None
        except UnsupportedError as error:  # a module call signature the graph cannot keep
            raise fail(DOCUMENT, f"module_calls: {error.message}") from None

    # -- program facts ----------------------------------------------------------------------------
    def _strict_layout(self, doc) -> bool:
        """Whether ``module()`` checks input strides. A file without the field (written before
        it existed) is read as True: the program's layout needs are unknown, so the example's
        strides are required (never a wrong result, at worst a refused call)."""
        if "strict_layout" not in doc:
            return True
        return self.fields.get(doc, "strict_layout", "bool", "the document")

    def _module_calls(self, doc, graph_module) -> tuple:
        """The preserved module call signatures (absent in older files: none); each names
        tensor values of the top-level graph, with specs that fit its leaves."""
        f = self.fields
        if "module_calls" not in doc:
            return ()
        entries = f.get(doc, "module_calls", "list", "the document")
        tensors = {n.name for n in graph_module.graph.nodes
                   if isinstance(n.meta.get("val"), torch.Tensor)}
        calls, seen = [], set()
        for index, entry in enumerate(entries):
            where = f"module_calls[{index}]"
            fqn = f.get(entry, "fqn", "str", where)
            path, _, call = fqn.partition("@")  # "sub@1": the second call of sub
            check_attribute_path(path, DOCUMENT, where)
            if "@" in fqn and not _CALL_INDEX.match(call):
                raise f.fail(where, f"{fqn[:60]!r}: a call index is @<n>, n >= 1")
            if fqn in seen:
                raise f.fail(where, f"{fqn!r} appears twice")
            seen.add(fqn)
            sides = []
            for side, spec_key in (("inputs", "in_spec"), ("outputs", "out_spec")):
                args = tuple(self._argument(a, f"{where}.{side}[{i}]")
                             for i, a in enumerate(f.get(entry, side, "list", where)))
                spec = _load_treespec(f.get(entry, spec_key, "str", where),
                                      f"{where}.{side}", self.limits)
                if spec.num_leaves != len(args):
                    raise f.fail(where, f"{len(args)} {side} for a spec of {spec.num_leaves}")
                for arg in args:
                    if isinstance(arg, SymIntArgument) or (
                            isinstance(arg, TensorArgument) and arg.name not in tensors):
                        raise f.fail(where, f"{side} name {arg.name!r}, not a tensor value "
                                            "of the graph")
                sides.append((args, spec))
            (inputs, in_spec), (outputs, out_spec) = sides
            calls.append(ModuleCall(fqn, inputs, in_spec, outputs, out_spec))
        return tuple(calls)

    def _specializations(self, doc) -> tuple:
        """The ``Dim.AUTO`` dims export made static (absent in older files: none recorded)."""
        f = self.fields
        if "specializations" not in doc:
            return ()
        entries = f.get(doc, "specializations", "list", "the document")
        if len(entries) > self.limits.symbols:
            raise f.fail("specializations", f"more than {self.limits.symbols} entries")
        return tuple(self._specialization(e, f"specializations[{i}]")
                     for i, e in enumerate(entries))

    def _specialization(self, entry, where: str) -> Specialization:
        f, chars = self.fields, self.limits.text_chars
        value = f.get(entry, "value", "int", where)
        if not 0 <= value < _BOUND:
            raise f.fail(where, f"value {value} is not a size")
        frames = f.get(entry, "frames", "list", where)
        if len(frames) > self.limits.json_depth:
            raise f.fail(where, f"more than {self.limits.json_depth} frames")
        return Specialization(
            check_text(f.get(entry, "source", "str", where), DOCUMENT, f"{where}.source", chars),
            value,
            check_text(f.get(entry, "reason", "str", where), DOCUMENT, f"{where}.reason", chars),
            tuple(self._frame(frame, f"{where}.frames[{i}]") for i, frame in enumerate(frames)))

    def _frame(self, entry, where: str) -> UserFrame:
        f, chars = self.fields, self.limits.text_chars
        lineno = f.get(entry, "lineno", "int", where)
        if not 0 <= lineno < _BOUND:
            raise f.fail(where, f"line {lineno} is not a line number")
        return UserFrame(
            check_text(f.get(entry, "filename", "str", where), DOCUMENT, f"{where}.filename",
                       chars),
            lineno,
            check_text(f.get(entry, "function", "str", where), DOCUMENT, f"{where}.function",
                       chars),
            check_text(f.get(entry, "source", "str", where), DOCUMENT, f"{where}.source", chars))

    # -- symbols ----------------------------------------------------------------------------------
    def _symbols(self, entries: list) -> tuple[dict, dict]:
        f = self.fields
        if len(entries) > self.limits.symbols:
            raise f.fail("symbols", f"more than {self.limits.symbols} symbols")
        symbols, ranges = {}, {}
        for index, entry in enumerate(entries):
            where = f"symbols[{index}]"
            name = f.get(entry, "name", "str", where)
            match = _SYMBOL.match(name)
            if match is None or name in symbols:
                raise f.fail(where, f"{name[:40]!r} is not a new symbol name (s<n>, u<n>, "
                                    f"zuf<n>)")
            lower = self._bound(entry, "lower", where)
            upper = self._bound(entry, "upper", where)
            if lower is not None and upper is not None and lower > upper:
                raise f.fail(where, f"empty range [{lower}, {upper}]")
            hint = f.get(entry, "hint", "int", where, optional=True)
            symbol = self._symbol(match.group(1), hint, lower, upper, where)
            symbols[name], ranges[symbol] = symbol, ValueRange(lower, upper)
        return symbols, ranges

    def _bound(self, entry, key: str, where: str):
        value = self.fields.get(entry, key, "int", where, optional=True)
        if value is not None and abs(value) >= _BOUND:
            raise self.fields.fail(where, f"{key} {value} is out of range")
        return value

    def _symbol(self, prefix: str, hint, lower, upper, where: str):
        f = self.fields
        if prefix == "s":  # an input size (lower >= 0) or a Python int input (any range)
            if hint is None or (lower is not None and lower > hint) or \
                    (upper is not None and hint > upper):
                raise f.fail(where, "an input's symbol needs a range [lower, upper] holding "
                                    "its example value (hint)")
            return self.env.create_symbol("", hint, lower=INT_INPUT_MIN if lower is None
                                          else lower, upper=upper)
        if hint is not None:
            raise f.fail(where, "a data-dependent symbol has no example value (hint)")
        symbol = self.env.create_unbacked_symbol("float" if prefix == "zuf" else "int")
        self.env.set_range(symbol, ValueRange(lower, upper), spec=True)
        return symbol

    # -- signature --------------------------------------------------------------------------------
    def _signature(self, data) -> ExportGraphSignature:
        f = self.fields
        inputs = [self._input_spec(e, f"signature.inputs[{i}]")
                  for i, e in enumerate(f.get(data, "inputs", "list", "signature"))]
        outputs = [self._output_spec(e, f"signature.outputs[{i}]")
                   for i, e in enumerate(f.get(data, "outputs", "list", "signature"))]
        return ExportGraphSignature(inputs, outputs)

    def _input_spec(self, entry, where: str) -> InputSpec:
        f = self.fields
        kind = self._kind(entry, _INPUT_KINDS, where)
        target = f.get(entry, "target", "str", where, optional=True)
        persistent = f.get(entry, "persistent", "bool", where, optional=True)
        if (kind == "USER_INPUT") != (target is None):
            raise f.fail(where, "state inputs (and only they) have a target")
        if target is not None:
            check_attribute_path(target, DOCUMENT, f"{where}.target")
        if (kind == "BUFFER") != (persistent is not None):
            raise f.fail(where, "buffers (and only they) say whether they are persistent")
        return InputSpec(InputKind[kind], self._argument(entry, where), target, persistent)

    def _output_spec(self, entry, where: str) -> OutputSpec:
        f = self.fields
        kind = self._kind(entry, _OUTPUT_KINDS, where)
        target = f.get(entry, "target", "str", where, optional=True)
        if (kind == "USER_OUTPUT") != (target is None):
            raise f.fail(where, "mutation outputs (and only they) have a target")
        if kind in ("PARAMETER_MUTATION", "BUFFER_MUTATION"):
            check_attribute_path(target, DOCUMENT, f"{where}.target")
        elif kind == "USER_INPUT_MUTATION":
            check_identifier(target, DOCUMENT, f"{where}.target")
        return OutputSpec(OutputKind[kind], self._argument(entry, where), target)

    def _kind(self, entry, kinds: tuple, where: str) -> str:
        kind = self.fields.get(entry, "kind", "str", where)
        if kind not in kinds:
            raise self.fields.fail(where, f"unknown kind {kind[:40]!r} (expected one of "
                                          f"{', '.join(kinds)})")
        return kind

    def _argument(self, entry, where: str):
        f = self.fields
        arg = f.get(entry, "arg", "dict", where)
        kind = f.get(arg, "kind", "str", f"{where}.arg")
        name = f.get(arg, "name", "str", f"{where}.arg")
        if kind == "constant":
            return ConstantArgument(name if name == "" else check_identifier(
                name, DOCUMENT, f"{where}.arg.name"), _constant(arg.get("value"), where))
        if kind not in ("tensor", "symint"):
            raise f.fail(where, f"unknown argument kind {kind[:40]!r}")
        check_identifier(name, DOCUMENT, f"{where}.arg.name")
        return TensorArgument(name) if kind == "tensor" else SymIntArgument(name)

    # -- pytree specs -----------------------------------------------------------------------------
    def _treespec(self, doc, key: str):
        text = self.fields.get(doc, key, "str", "the document")
        return _load_treespec(text, key, self.limits)

    # -- tensors ----------------------------------------------------------------------------------
    def _tensors(self, data: bytes, reader: GraphReader):
        if self.version == 1:
            tensors = read_v1_tensors(data, self.limits)
            for group in ("state_dict", "constants"):
                for name, value in tensors[group].items():
                    check_attribute_path(name, "tensors.pt", f"{group} entry")
                    if not isinstance(value, torch.Tensor):
                        raise fail("tensors.pt", f"{group} entry {name!r} is not a tensor")
            return tensors["state_dict"], tensors["constants"], tensors.get("example_inputs")
        return _TensorIndex(self.fields, data, self.limits).read(self.document, reader)


def _constant(value, where: str):
    """A specialized constant: null, a bool, an int, a float (special floats tagged) or a short
    string."""
    if isinstance(value, dict) and value.get("float") in ("inf", "-inf", "nan") and \
            len(value) == 1:
        return float(value["float"])
    if value is None or isinstance(value, (bool, int, float)) or \
            (isinstance(value, str) and len(value) <= 256):
        return value
    raise fail(DOCUMENT, f"{where}: a constant is null, a bool, a number or a short string")


_SPEC_ERRORS = (ValueError, TypeError, KeyError, NotImplementedError, AttributeError, IndexError)


def _load_treespec(text: str, key: str, limits: Limits):
    decode_json(text.encode("utf-8", "surrogatepass"), f"{DOCUMENT} {key}", limits)  # depth
    try:
        return pytree.treespec_loads(text)
    except _SPEC_ERRORS as error:  # what pytree raises on a spec it cannot rebuild
        raise fail(DOCUMENT, f"{key} is not a valid pytree spec ({type(error).__name__}: "
                             f"{str(error)[:200]})") from None


class _TensorIndex:
    """The format-2 tensor member (safetensors) and the document's index into it."""

    MEMBER = "tensors.safetensors"

    def __init__(self, fields: Fields, data: bytes, limits: Limits):
        self.fields, self.limits = fields, limits
        try:
            self.stored = safetensors.torch.load(data)
        except safetensors.SafetensorError as error:
            raise fail(self.MEMBER, f"is not a valid safetensors file ({error})") from None
        self.used: set[str] = set()
        self.built: dict[str, torch.Tensor] = {}

    def read(self, document, reader: GraphReader):
        f = self.fields
        index = f.get(document, "tensors", "dict", "the document")
        state = self._group(f.get(index, "state_dict", "list", "tensors"), "state_dict")
        constants = self._group(f.get(index, "constants", "list", "tensors"), "constants")
        examples = self._examples(document.get("example_inputs"))
        unused = sorted(set(self.stored) - self.used)
        if unused:
            raise fail(self.MEMBER, f"holds tensors the program does not use: {unused[:5]}")
        return state, constants, examples

    def _group(self, entries: list, group: str) -> dict:
        f, result = self.fields, {}
        for index, entry in enumerate(entries):
            where = f"tensors.{group}[{index}]"
            name = check_attribute_path(f.get(entry, "name", "str", where), DOCUMENT, where)
            if name in result:
                raise f.fail(where, f"{name!r} appears twice")
            result[name] = self._tensor(entry, where)
        return result

    def _tensor(self, entry, where: str) -> torch.Tensor:
        f = self.fields
        key = f.get(entry, "tensor", "str", where)
        parameter = f.get(entry, "parameter", "bool", where)
        requires_grad = f.get(entry, "requires_grad", "bool", where)
        if key not in self.stored:
            raise f.fail(where, f"names the tensor {key[:40]!r}, which {self.MEMBER} lacks")
        if key in self.built:
            tensor = self.built[key]
            if isinstance(tensor, torch.nn.Parameter) != parameter or \
                    tensor.requires_grad != requires_grad:
                raise f.fail(where, f"uses the tensor {key!r} as two different kinds")
            return tensor
        tensor = self.stored[key]
        if requires_grad and not (tensor.is_floating_point() or tensor.is_complex()):
            raise f.fail(where, f"an integer tensor ({tensor.dtype}) cannot require grad")
        tensor = torch.nn.Parameter(tensor, requires_grad) if parameter else \
            tensor.requires_grad_(requires_grad)
        self.used.add(key)
        self.built[key] = tensor
        return tensor

    def _examples(self, data):
        f = self.fields
        if data is None:
            return None
        spec = _load_treespec(f.get(data, "spec", "str", "example_inputs"), "example_inputs",
                              self.limits)
        leaves = []
        for index, leaf in enumerate(f.get(data, "leaves", "list", "example_inputs")):
            where = f"example_inputs.leaves[{index}]"
            if isinstance(leaf, dict) and "tensor" in leaf:
                key = f.check(leaf["tensor"], "str", where)
                if key not in self.stored:
                    raise f.fail(where, f"names the tensor {key[:40]!r}, which "
                                        f"{self.MEMBER} lacks")
                self.used.add(key)
                leaves.append(self.built.get(key, self.stored[key]))
            elif isinstance(leaf, dict) and "value" in leaf and (
                    leaf["value"] is None or isinstance(leaf["value"], (int, float, bool, str))):
                leaves.append(leaf["value"])
            else:
                raise f.fail(where, "an example input is a tensor or a constant")
        if len(leaves) != spec.num_leaves:
            raise f.fail("example_inputs", f"{len(leaves)} leaves for a spec of "
                                           f"{spec.num_leaves}")
        return pytree.tree_unflatten(leaves, spec)


def _verify(graph_module, signature) -> None:
    """The dialect verifier on the graph and signature alone (before tensors are checked)."""
    try:
        verify(graph_module, signature)
    except DialectViolation as error:  # the verifier judges the file's content here
        raise _verifier_failure(error) from None


def _verifier_failure(error: DialectViolation) -> SerializationError:
    message = error.message.removeprefix("Internal error in unbroken: ")
    return fail(DOCUMENT, f"the program fails the verifier: {message}")


# -- everything against everything ---------------------------------------------------------------
def _store_of(spec, state: dict, constants: dict):
    if spec.kind.name == "PARAMETER" or (spec.kind.name == "BUFFER" and spec.persistent):
        return state, "state_dict"
    return constants, "constants"


def _check_state(signature, placeholders: dict, state: dict, constants: dict) -> None:
    """Each lifted input's tensor has its placeholder's dtype, shape and strides."""
    for spec in signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            continue
        store, store_name = _store_of(spec, state, constants)
        node, tensor = placeholders.get(spec.arg.name), store.get(spec.target)
        meta = node.meta.get("val") if node is not None else None
        where = f"{store_name}[{spec.target!r}] (input {spec.arg.name})"
        if not isinstance(tensor, torch.Tensor) or not isinstance(meta, torch.Tensor):
            raise fail(DOCUMENT, f"{where} is missing or its placeholder is not a tensor")
        if any(isinstance(s, torch.SymInt) for s in (*meta.shape, *meta.stride())):
            raise fail(DOCUMENT, f"{where}: the placeholder of a weight has symbolic sizes")
        store[spec.target] = _with_layout(tensor, meta, where)


def _with_layout(tensor: torch.Tensor, meta: torch.Tensor, where: str) -> torch.Tensor:
    if tensor.dtype != meta.dtype or tuple(tensor.shape) != tuple(meta.shape):
        raise fail(DOCUMENT, f"{where} is {tensor.dtype}{list(tensor.shape)} but the graph "
                             f"says {meta.dtype}{list(meta.shape)}")
    if tensor.stride() == meta.stride():
        return tensor
    if not _dense(meta.shape, meta.stride()):
        raise fail(DOCUMENT, f"{where} has strides {list(meta.stride())}, which no dense "
                             f"tensor of shape {list(meta.shape)} has")
    with torch.no_grad():
        laid_out = torch.empty_strided(meta.shape, meta.stride(), dtype=tensor.dtype)
        laid_out.copy_(tensor)
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(laid_out, tensor.requires_grad)
    return laid_out.requires_grad_(tensor.requires_grad)


def _dense(shape, stride) -> bool:
    """Strides of a non-overlapping, dense layout (a permutation of a contiguous one)."""
    expected = 1
    for size, step in sorted(zip(shape, stride), key=lambda p: (p[1], p[0])):
        if size != 1 and step != expected:
            return False
        expected *= size
    return True


def _check_mutations(graph_module, signature, placeholders: dict) -> None:
    """A mutation output has the dtype and shape of the parameter, buffer or input it is
    written to."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    state = {(s.kind.name, s.target): s.arg.name for s in signature.input_specs
             if s.kind.name in ("PARAMETER", "BUFFER")}
    for value, spec in zip(output.args[0], signature.output_specs):
        if spec.kind.name == "USER_OUTPUT":
            continue
        kind = spec.kind.name.removesuffix("_MUTATION")
        name = spec.target if kind == "USER_INPUT" else state.get((kind, spec.target))
        target = placeholders.get(name)
        new, old = value.meta.get("val"), target.meta.get("val") if target is not None else None
        if not (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor)
                and same_value(new, old)):
            raise fail(DOCUMENT, f"the mutation output {spec.arg.name} does not fit "
                                 f"{spec.target!r}")


def _check_specs(signature, in_spec, out_spec) -> None:
    users = sum(1 for s in signature.input_specs if s.kind.name == "USER_INPUT")
    outputs = sum(1 for s in signature.output_specs if s.kind.name == "USER_OUTPUT")
    if in_spec.type is not tuple or in_spec.num_children != 2 or \
            in_spec.child(0).type is not tuple or in_spec.child(1).type is not dict:
        raise fail(DOCUMENT, "in_spec must describe (args, kwargs)")
    if in_spec.num_leaves != users:
        raise fail(DOCUMENT, f"in_spec has {in_spec.num_leaves} leaves but the signature has "
                             f"{users} user inputs")
    if out_spec.num_leaves != outputs:
        raise fail(DOCUMENT, f"out_spec has {out_spec.num_leaves} leaves but the signature has "
                             f"{outputs} user outputs")


def _examples_fit(examples, in_spec, signature, placeholders: dict) -> bool:
    leaves, spec = pytree.tree_flatten(examples)
    if spec != in_spec:
        return False
    users = [s for s in signature.input_specs if s.kind.name == "USER_INPUT"]
    for spec, leaf in zip(users, leaves):
        meta = placeholders[spec.arg.name].meta.get("val")
        if isinstance(meta, torch.Tensor) != isinstance(leaf, torch.Tensor):
            return False
        if isinstance(leaf, torch.Tensor) and (leaf.dtype != meta.dtype or leaf.dim() != meta.dim()
                                               or any(isinstance(m, int) and m != s for m, s in
                                                      zip(meta.shape, leaf.shape))):
            return False
    return True
