"""The boundary to torch's symbolic machinery, crossed after the capture.

unbroken traces on ``meta`` tensors whose symbolic sizes are backed by its own shape
environment (:mod:`unbroken.symbolic.env`). torch's tools (``torch.export.save``,
AOTInductor, ``move_to_device_pass``, ONNX) read ``node.meta["val"]`` as torch writes it:
fake tensors on the real device, with sizes from a torch ``ShapeEnv``. This module converts
in both directions, keeping the *same* sympy symbols, so ``range_constraints`` and every
expression mean the same on both sides:

- :func:`torch_shape_env` builds a torch ``ShapeEnv`` that knows unbroken's symbols, their
  ranges and example values (hints);
- :func:`to_fake_graph` replaces every ``meta["val"]`` of a graph by its fake counterpart
  (and sets ``meta["tensor_meta"]`` as torch's export does);
- :func:`hints_of` reads the hints back from the fake values;
- :func:`to_meta` turns a fake value back into a meta tensor of a fresh unbroken environment
  (what ``run_decompositions`` re-records from).

Nothing here traces: the values are rebuilt from shapes, strides, dtypes and devices.
"""
from __future__ import annotations

import sympy
import torch
import torch.fx as fx

from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.node import sym_expr
from unbroken.symbolic.ranges import ValueRange, finite_bound
from unbroken.symbolic.torch_compat import (
    FakeTensor,
    FakeTensorMode,
    ShapeEnv,
    TensorMetadata,
    ValueRanges,
    extract_tensor_metadata,
    fake_of_meta,
    forget_static_answers,
    has_symbolic_sizes,
    int_oo,
)

__all__ = ["torch_range", "torch_shape_env", "to_fake_graph", "hints_of", "to_meta",
           "unbroken_env"]


#: Boolean expressions (a plain ``Symbol`` is also a sympy ``Boolean``, hence not that class).
_BOOLEAN = (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanFunction,
            sympy.logic.boolalg.BooleanAtom)

def _bound(value, infinite):
    """An integer bound, or ``infinite`` (torch's ``int_oo`` with a sign, or None) when
    unbounded."""
    number = finite_bound(value)
    return infinite if number is None else number


def torch_range(value_range) -> ValueRanges:
    """torch's ``ValueRanges`` for any range with ``lower``/``upper`` (None = unbounded)."""
    if isinstance(value_range, ValueRanges):
        return value_range
    lower = None if value_range.lower is None else value_range.lower
    upper = None if value_range.upper is None else value_range.upper
    return ValueRanges(_bound(lower, -int_oo), _bound(upper, int_oo))


def torch_shape_env(range_constraints: dict, hints: dict) -> ShapeEnv:
    """A torch ``ShapeEnv`` whose symbols are unbroken's: ranges from ``range_constraints``,
    example values from ``hints`` (backed symbols only)."""
    env = ShapeEnv()
    _set_ranges(env, range_constraints, hints)
    return env


#: (sizes, strides) of a static layout -> its memory format as ``extract_tensor_metadata``
#: gives it (None for none of torch's formats), for every program of the process; emptied
#: when it reaches STATIC_FORMATS_MAX entries.
_STATIC_FORMATS: dict = {}
STATIC_FORMATS_MAX = 4096
#: (size exprs, stride exprs, the range and example value of each of their symbols) -> the
#: memory format of that symbolic layout, for the programs whose ShapeEnv is made here from
#: ranges and example values alone (:func:`torch_shape_env`): torch answers the contiguity
#: questions from those (``guard_or_false`` reads the ranges, then the example values), so
#: the answer is the same in every such environment; emptied at STATIC_FORMATS_MAX entries.
_SYMBOLIC_FORMATS: dict = {}
_UNKNOWN = object()


class _Converter:
    """Rebuilds values under one ``FakeTensorMode`` (``mode``: an existing one, whose values
    are kept as they are); caches SymInts by expression."""

    def __init__(self, env: ShapeEnv, hints: dict, mode: FakeTensorMode | None = None):
        self.env, self.hints = env, {s: sympy.Integer(int(v)) for s, v in hints.items()
                                     if v is not None}
        self.mode = mode if mode is not None else FakeTensorMode(shape_env=env,
                                                                 allow_non_fake_inputs=True)
        # an environment of ranges and example values alone (not a mode torch's tools used)
        self.shares_formats = mode is None
        self.symbols: dict = {}
        self.layouts: dict = {}  # (size exprs, stride exprs) -> the memory format of that layout
        self.extents: dict = {}  # (size exprs, stride exprs) -> its storage's elements (SymInt), or
        # None (a data-dependent size)

    def _hint(self, expr):
        value = expr.xreplace(self.hints)
        return int(value) if value.is_number else None

    def symint(self, value):
        """A plain int, or the torch SymInt of ``value``'s expression (one per expression)."""
        if not isinstance(value, torch.SymInt):
            return int(value)
        return self.symbolic(value.node.expr)

    def symbolic(self, expr, real: bool = False):
        """The torch value of a sympy expression, by the expression's kind (unbroken records a
        comparison such as ``s0 > 4`` as a SymInt whose expression is boolean); ``real``: the
        value is a SymFloat (``IntTrueDiv(s0, 3)``, which sympy cannot tell from an integer)."""
        if isinstance(expr, _BOOLEAN):
            if expr in (sympy.true, sympy.false):
                return bool(expr)
            return self.symbols.setdefault(expr, self.env.create_symboolnode(expr))
        if expr.is_number:
            return float(expr) if expr.is_Float else int(expr)
        if expr not in self.symbols:
            if real or expr.is_integer is False or any(s.name.startswith("zuf")
                                               for s in expr.free_symbols):
                self.symbols[expr] = self.env.create_symfloatnode(expr, hint=None)
            else:
                self.symbols[expr] = self.env.create_symintnode(expr, hint=self._hint(expr))
        return self.symbols[expr]

    def tensor_meta(self, fake: torch.Tensor) -> TensorMetadata:
        """``extract_tensor_metadata(fake)``, as torch's passes read it. Its memory format
        (a contiguity question per format, each a dozen symbolic operations) is computed once
        per layout: the nodes of a graph share a few, and the programs of a process share
        their static ones (the format is a function of the sizes and strides alone)."""
        if fake.is_quantized or fake.layout != torch.strided:
            return extract_tensor_metadata(fake)
        stride = fake.stride()
        if not has_symbolic_sizes(fake):
            key, known_formats = (tuple(fake.shape), stride), _STATIC_FORMATS
        else:
            key = (tuple(map(sym_expr, fake.shape)), tuple(map(sym_expr, stride)))
            known_formats = self.layouts
        memory_format = known_formats.get(key, _UNKNOWN)
        if memory_format is _UNKNOWN:
            # a symbolic layout: the process's answer for the same ranges and example values
            shared = self._format_key(key) if known_formats is self.layouts else None
            memory_format = _SYMBOLIC_FORMATS.get(shared, _UNKNOWN)
            if memory_format is _UNKNOWN:
                memory_format = extract_tensor_metadata(fake).memory_format
                if shared is not None:
                    _keep(_SYMBOLIC_FORMATS, shared, memory_format)
            _keep(known_formats, key, memory_format)
        return TensorMetadata(fake.shape, fake.dtype, fake.requires_grad, stride,
                              memory_format, False, {})

    def _format_key(self, layout: tuple):
        """``layout`` (size and stride exprs) with the range and example value of each of its
        symbols: what the memory format's questions read in an environment of ranges and
        example values alone; None in another one (a mode torch's tools may have used)."""
        if not self.shares_formats:
            return None
        symbols = set().union(*(e.free_symbols for part in layout for e in part
                                if isinstance(e, sympy.Basic)))
        ranges = self.env.var_to_range
        context = tuple(sorted(((s, ranges.get(s), self.hints.get(s)) for s in symbols),
                               key=lambda item: item[0].name))
        return layout, context

    def value(self, val, device):
        if self.own(val):
            return val
        if isinstance(val, torch.Tensor):
            if val.device.type != "meta" and not val.is_meta:
                device = val.device
            if not has_symbolic_sizes(val):  # (a static program's every value)
                meta = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                           device="meta")
                return fake_of_meta(self.mode, meta, device)
            shape = [self.symint(s) for s in val.shape]
            stride = [self.symint(s) for s in val.stride()]
            # the meta tensor wrapped as a fake one on ``device`` (what the mode's own
            # empty_strided builds, without re-deriving its layout through Python refs)
            meta = None
            symbolic = [isinstance(s, torch.SymInt) for s in (*shape, *stride)]
            if any(symbolic) and all(is_sym or s != 0 for s, is_sym in zip(shape, symbolic)):
                meta = self._symbolic_strided(val, shape, stride)
            if meta is None:
                meta = torch.empty_strided(shape, stride, dtype=val.dtype, device="meta")
            return fake_of_meta(self.mode, meta, device)
        if isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return self.symbolic(val.node.expr, real=isinstance(val, torch.SymFloat))
        if isinstance(val, (tuple, list)):
            return type(val)(self.value(v, device) for v in val)
        return val

    def _symbolic_strided(self, val: torch.Tensor, shape: list, stride: list):
        """``torch.empty_strided(shape, stride)`` for a layout with symbolic sizes, on a storage
        of its own. ``empty_strided`` derives the storage's size with torch's symbolic
        arithmetic, a dozen operations per tensor (most of a program's build under dynamic
        shapes); here the size is torch's formula (``1 + sum(stride * (size - 1))``
        elements, no size being 0) in sympy, one SymInt per layout, and the tensor is a view
        of a fresh one-dimensional tensor that size, detached (no view of anything: torch's
        passes find aliasing by storage). None when a size is data-dependent (an unbacked
        symbol): torch's own checks there answer what is unknown as false, ours would ask."""
        key = (tuple(map(sym_expr, val.shape)), tuple(map(sym_expr, val.stride())))
        extent = self.extents.get(key, False)
        if extent is False:
            elements = sympy.expand(sympy.Integer(1) + sympy.Add(
                *(stride * (size - 1) for size, stride in zip(*key))))
            extent = self.extents[key] = (self.symbolic(elements) if all(
                s in self.hints for s in elements.free_symbols) else None)
        if extent is None:
            return None
        return torch.empty((extent,), dtype=val.dtype, device="meta").as_strided(
            shape, stride).detach()

    def own(self, val) -> bool:
        """Whether ``val`` is already a value of this converter's mode (a fake tensor of it,
        or a SymInt of its ShapeEnv)."""
        if isinstance(val, FakeTensor):
            return val.fake_mode is self.mode
        if isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return val.node.shape_env is self.env
        return False


def _keep(table: dict, key, value) -> None:
    """``table[key] = value``, the table emptied first once it holds STATIC_FORMATS_MAX."""
    if len(table) >= STATIC_FORMATS_MAX:
        table.clear()
    table[key] = value


def _node_device(node: fx.Node, devices: dict, default: torch.device) -> torch.device:
    """The device of a node's value: a ``device=`` argument, else its first tensor input's."""
    requested = node.kwargs.get("device")
    if isinstance(requested, (torch.device, str)):
        return torch.device(requested)
    for arg in node.all_input_nodes:
        if arg in devices:
            return devices[arg]
    return default


def to_fake_graph(graph_module: fx.GraphModule, range_constraints: dict, hints: dict,
                  placeholder_devices: dict) -> None:
    """Replace every ``meta["val"]`` in ``graph_module`` (and its subgraphs) by a fake value
    whose sizes are symbols of a torch ``ShapeEnv`` with ``range_constraints`` and ``hints``
    (:func:`torch_shape_env`).

    placeholder_devices: placeholder name -> the device of the real tensor it stands for;
    other nodes take the device of their first tensor input (or their ``device=`` argument).
    Building the values records no guard in the ShapeEnv: unbroken decided the program's
    guards during the capture, and torch would otherwise print (and check) what building them
    asked.

    A graph whose inputs are already fake under one mode (a program rebuilt with other
    ranges or a node erased: the size-1 admission) keeps that mode: its ShapeEnv takes
    ``range_constraints`` and ``hints``, and only the values not yet its own (nodes added
    since) are built. Building a value with symbolic sizes costs torch's symbolic arithmetic
    on each size and stride; a graph is most of a program's build.
    """
    mode = _fake_mode_of(graph_module.graph)
    if mode is None:
        converter = _Converter(torch_shape_env(range_constraints, hints), hints)
    else:
        _set_ranges(mode.shape_env, range_constraints, hints)
        # the ranges may be wider (the size-1 admission): answers cached under the old ones
        # (``s0 != 1`` proven for ``s0 >= 2``) must not reach torch's tools reading this env
        forget_static_answers(mode.shape_env)
        converter = _Converter(mode.shape_env, hints, mode)
    env = converter.env
    default = next(iter(placeholder_devices.values()), torch.device("cpu"))
    # Each value is built once: the mode's dispatch cache would only cost (keying symbolic
    # sizes and storing an entry was twice the building). Torch's tools that later run the
    # program under this mode get it back enabled.
    caching, converter.mode.cache_enabled = converter.mode.cache_enabled, False
    try:
        with env.suppress_guards():
            _convert(graph_module, converter, placeholder_devices, default)
    finally:
        converter.mode.cache_enabled = caching


def _fake_mode_of(graph: fx.Graph):
    """The fake mode of the graph's placeholders, when every tensor one is a fake tensor of
    one mode with a ShapeEnv; else None."""
    modes = {id(v.fake_mode): v.fake_mode for v in
             (n.meta.get("val") for n in graph.nodes if n.op == "placeholder")
             if isinstance(v, FakeTensor)}
    tensors = [n for n in graph.nodes if n.op == "placeholder"
               and isinstance(n.meta.get("val"), torch.Tensor)]
    if len(modes) != 1 or len(tensors) != sum(
            isinstance(n.meta["val"], FakeTensor) for n in tensors):
        return None
    mode = next(iter(modes.values()))
    return mode if mode.shape_env is not None else None


def _set_ranges(env: ShapeEnv, range_constraints: dict, hints: dict) -> None:
    """``env``'s ranges and example values for the symbols of ``range_constraints``, as
    :func:`torch_shape_env` sets them in a new one."""
    for symbol, value_range in range_constraints.items():
        env.var_to_range[symbol] = torch_range(value_range)
        env.var_to_sources.setdefault(symbol, [])
        if hints.get(symbol) is not None:
            env.backed_var_to_val[symbol] = sympy.Integer(int(hints[symbol]))


def _convert(graph_module, converter, placeholder_devices, default) -> None:
    devices: dict = {}
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            sub = getattr(graph_module, node.target, None)
            if isinstance(sub, fx.GraphModule):
                _convert(sub, converter, {}, default)
            continue
        if "val" not in node.meta:
            continue
        if node.op == "placeholder":
            device = placeholder_devices.get(node.name, default)
        else:
            device = _node_device(node, devices, default)
        devices[node] = device
        if converter.own(node.meta["val"]) and (
                "tensor_meta" in node.meta or not isinstance(node.meta["val"], torch.Tensor)):
            continue  # built before, under this mode
        node.meta["val"] = converter.value(node.meta["val"], device)
        if isinstance(node.meta["val"], torch.Tensor):  # read by torch's passes, as export sets it
            node.meta["tensor_meta"] = converter.tensor_meta(node.meta["val"])


def _shape_env_of(graph: fx.Graph):
    for node in graph.nodes:
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()) if isinstance(val, torch.Tensor) else (val,):
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def hints_of(graph: fx.Graph, symbols) -> dict:
    """symbol -> example value, for the given symbols, from the graph's fake values (symbols
    without one, such as data-dependent ones, map to None)."""
    env = _shape_env_of(graph)
    if env is None:
        known = {}
    elif hasattr(env, "backed_var_to_val"):  # an empty one too: var_to_val warns it is deprecated
        known = env.backed_var_to_val
    else:
        known = env.var_to_val
    return {s: int(known[s]) if s in known else None for s in symbols}


def unbroken_env(range_constraints: dict, hints: dict) -> tuple[ShapeEnvironment, dict]:
    """A fresh unbroken environment holding a symbol for each of ``range_constraints``, and the
    map from the old symbols to the new ones (``expr.xreplace(mapping)``)."""
    env = ShapeEnvironment()
    mapping = {}
    for symbol in sorted(range_constraints, key=lambda s: s.name):
        value_range = range_constraints[symbol]
        lower = _bound(value_range.lower, None)
        upper = _bound(value_range.upper, None)
        if hints.get(symbol) is None:
            kind = "float" if symbol.name.startswith("zuf") else "int"
            new = env.create_unbacked_symbol(kind, source=symbol.name)
            env.set_range(new, ValueRange(lower, upper), spec=True)
        else:
            new = env.create_symbol(symbol.name, int(hints[symbol]),
                                    lower=lower if lower is not None else 0, upper=upper,
                                    source=symbol.name)
        mapping[symbol] = new
    return env, mapping


def to_meta(val, env: ShapeEnvironment, mapping: dict):
    """``val`` (a fake or meta tensor, SymInt, or tuple of them) rebuilt on the meta device with
    sizes from unbroken's ``env``."""
    def size(value):
        if isinstance(value, torch.SymInt):
            expr = value.node.expr.xreplace(mapping)
            return int(expr) if expr.is_number else env.symint(expr)
        return int(value)

    if isinstance(val, torch.Tensor):
        return torch.empty_strided([size(s) for s in val.shape], [size(s) for s in val.stride()],
                                   dtype=val.dtype, device="meta")
    if isinstance(val, torch.SymInt):
        return size(val)
    if isinstance(val, (tuple, list)):
        return type(val)(to_meta(v, env, mapping) for v in val)
    return val
