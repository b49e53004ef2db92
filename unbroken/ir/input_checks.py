"""The input checks of ``ExportedProgram.module()``: :class:`InputGuard`, its forward pre-hook.

1. ``(args, kwargs)`` must have the structure of the example inputs (wrong count or structure
   is an :class:`InputMismatchError` that shows the expected structure);
2. every user input is checked against the graph (:class:`InputChecker`): dtype, rank,
   specialized sizes, dynamic dims against ``range_constraints`` (shared symbols must agree,
   derived dims like ``2*s0`` must be consistent), specialized non-tensor inputs;
3. the graph's run-time assertions over input sizes only (``aten._assert_scalar`` on a relation
   no ``dynamic_shapes`` spec can state) are checked before the graph runs, so the error names
   the sizes and the model's line rather than failing inside the graph;
4. when the program holds for the example's layout only (``graph_module.meta[LAYOUT_READ]``:
   the trace read ``x.stride()``/``is_contiguous()``, or the program writes an input after an
   op that copies or aliases by layout), every input's strides must be the example's (except
   along dims of size 1);
5. an input the program writes in place may not share memory with another input (eager would
   see the write through both names; the program was traced with separate inputs);
6. when a torch.nn module chose its fused fast path or its differentiable path by the grad mode
   (``graph_module.meta[GRAD_MODE_DECISIONS]``, :class:`GradModeDecision`), the call must be
   one in which eager chooses the same: same grad mode, or nothing requiring grad.

``module.check_inputs(*args, **kwargs)`` runs checks 1-4 alone (``AdditionalInputs`` uses it).
While the module is being traced (:func:`is_traced`: ``torch.compile``, ``torch.export``,
unbroken's own export, fake tensors), the checks step aside: the tracer has its own, and they
would only specialize the sizes they read. The module itself is :mod:`unbroken.ir.runtime`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import sympy
import torch
import torch.utils._pytree as pytree

from unbroken.ir.meta_keys import GRAD_MODE_DECISIONS, LAYOUT_READ, SIZE_ONE_REFUSED
from unbroken.ir.signature import ConstantArgument, InputKind, OutputKind
from unbroken.symbolic.diagnostics import InputMismatchError
from unbroken.symbolic.diagnostics.drop_in import torch_compatible
from unbroken.symbolic.ranges import finite_bound
from unbroken.symbolic.torch_compat import FakeTensor

__all__ = ["GradModeDecision", "InputChecker", "InputGuard",
           "flatten_user_inputs", "is_traced", "size_assertions"]

_SIZE_HINT = (
    "pass inputs with the sizes the program was exported for, or re-export with a "
    "`dynamic_shapes` spec that marks this dimension dynamic (e.g. torch.export.Dim(...))."
)


class _Name(str):
    """A string that prints without quotes, to render input structures as ``(x, [y_0, y_1])``."""

    def __repr__(self) -> str:
        return str(self)


def mismatch(message: str, hint: str = "", torch_also: tuple = ()) -> InputMismatchError:
    """The error of an input the program was not exported for; it reaches the caller of the
    module directly, so it is already what torch raises there (an ``AssertionError``, and
    ``torch_also``)."""
    return torch_compatible(InputMismatchError(message, hint=hint, torch_also=torch_also))


# ---------------------------------------------------------------------------------------------
# Structure: flattening (args, kwargs)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _UserInput:
    """One flattened user input the graph expects.

    name: the placeholder's name (``x``, ``xs_0``), used in every message.
    spec: the input spec (its ``arg`` says tensor / symint / specialized constant).
    val:  the placeholder's ``meta["val"]`` (meta tensor, SymInt, or the constant).
    """

    name: str
    spec: object
    val: object


def _describe_structure(in_spec, names) -> str:
    """``(x, [ys_0, ys_1]), {mask: mask}``-style rendering of the expected inputs."""
    args, kwargs = pytree.tree_unflatten([_Name(n) for n in names], in_spec)
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _describe_received(args, kwargs) -> str:
    """The same rendering for what the caller passed, leaves shown by type."""
    def kind(leaf):
        return _Name(type(leaf).__name__)
    args, kwargs = pytree.tree_map(kind, (args, kwargs))
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _check_kwarg_names(kwargs: dict, expected: list, structure) -> None:
    missing = [k for k in expected if k not in kwargs]
    unexpected = [k for k in kwargs if k not in expected]
    if missing or unexpected:
        said = []
        if missing:
            said.append(f"missing keyword argument(s) {', '.join(map(repr, missing))}")
        if unexpected:
            said.append(f"unexpected keyword argument(s) {', '.join(map(repr, unexpected))}")
        raise mismatch(f"The exported program was called with {' and '.join(said)}; "
                        f"it expects {structure()}.",
                        hint="call it with the same arguments (by position and by keyword) "
                             "that were given to export().")


def flatten_user_inputs(in_spec, names, args, kwargs) -> list:
    """Flatten ``(args, kwargs)`` exactly as at export time, or raise InputMismatchError.

    in_spec: the TreeSpec of the example ``(args, kwargs)``; names: placeholder names of the
    flattened leaves (for the messages).
    """
    def structure() -> str:  # only built for an error message
        return _describe_structure(in_spec, names)

    expected_positional = in_spec.child(0).num_children
    if len(args) != expected_positional:
        raise mismatch(f"The exported program expects {expected_positional} positional "
                        f"argument(s) {structure()}, got {len(args)}.",
                        hint="pass the same number of positional arguments as to export().")
    expected_keys = list(in_spec.child(1).context)
    _check_kwarg_names(kwargs, expected_keys, structure)
    kwargs = {k: kwargs[k] for k in expected_keys}
    leaves, received = pytree.tree_flatten((tuple(args), kwargs))
    if received != in_spec:
        raise mismatch(f"The inputs do not have the structure the program was exported with: "
                        f"expected {structure()}, got {_describe_received(args, kwargs)}.",
                        hint="pass containers (tuples, lists, dicts) with the same types, "
                             "lengths and keys as the example inputs given to export().")
    return leaves


# ---------------------------------------------------------------------------------------------
# Leaf checks: dtypes, sizes, dynamic dims
# ---------------------------------------------------------------------------------------------
def _format_range(value_range) -> str:
    lower, upper = finite_bound(value_range.lower), finite_bound(value_range.upper)
    return f"[{'-inf' if lower is None else lower}, {'inf' if upper is None else upper}]"


class _SymbolBinder:
    """Binds the program's size symbols to the sizes seen in one call, and checks them.

    bindings: symbol -> (value, where) with ``where`` like ``x.shape[0]``.
    derived:  (expr, value, where) for dims whose size is an expression (``2*s0``); resolved after
              the plain symbols are bound.
    """

    def __init__(self, range_constraints, size_one_reasons=None):
        self.range_constraints = range_constraints
        self.size_one_reasons = size_one_reasons or {}
        self.bindings: dict = {}
        self.derived: list = []

    def add(self, expr, value: int, where: str) -> None:
        """Record that the dim ``where`` (symbolic size ``expr``) has ``value`` in this call."""
        if expr.is_number:
            if int(expr) != value:
                raise mismatch(f"{where} is specialized at {int(expr)}, got {value}.",
                                hint=_SIZE_HINT)
        elif isinstance(expr, sympy.Symbol):
            self._bind(expr, value, where)
        else:
            self.derived.append((expr, value, where))

    def _bind(self, symbol, value: int, where: str) -> None:
        if symbol in self.bindings and self.bindings[symbol][0] != value:
            first_value, first_where = self.bindings[symbol]
            raise mismatch(
                f"{where} = {value} but {first_where} = {first_value}: the program was exported "
                f"with these dimensions equal (both are {symbol}).",
                hint="pass inputs whose sizes agree, or re-export with separate Dims for them.")
        self.bindings.setdefault(symbol, (value, where))

    def finish(self) -> None:
        """Resolve derived dims, then check every bound symbol against its range."""
        self._resolve_derived()
        for symbol, (value, where) in self.bindings.items():
            self._check_range(symbol, value, where)

    def _resolve_derived(self) -> None:
        pending = list(self.derived)
        while pending:
            progress = [d for d in pending if len(self._unbound(d[0])) <= 1]
            if not progress:
                expr, value, where = pending[0]
                raise mismatch(f"{where} = {value} has size {expr}, whose symbols cannot be "
                                f"determined from the other inputs.", hint=_SIZE_HINT)
            for item in progress:
                self._check_derived(*item)
            pending = [d for d in pending if d not in progress]

    def _unbound(self, expr) -> list:
        return [s for s in expr.free_symbols if s not in self.bindings]

    def _check_derived(self, expr, value: int, where: str) -> None:
        unbound = self._unbound(expr)
        if unbound:
            self._solve(expr, unbound[0], value, where)
        known = {s: v for s, (v, _) in self.bindings.items()}
        expected = expr.xreplace(known)
        if expected != value:
            sources = ", ".join(f"{s} = {known[s]} from {self.bindings[s][1]}"
                                for s in sorted(expr.free_symbols, key=str))
            raise mismatch(f"{where} = {value} but the program requires it to equal {expr} = "
                            f"{expected} ({sources}).",
                            hint="pass inputs whose sizes keep this relation: the model's code "
                                 "needs it (it was exported for those sizes only).")

    def _solve(self, expr, symbol, value: int, where: str) -> None:
        try:
            solutions = [s for s in sympy.solve(sympy.Eq(expr, value), symbol) if s.is_integer]
        except (NotImplementedError, TypeError, ValueError):
            raise mismatch(f"{where} = {value} has size {expr}, which cannot be solved for "
                            f"{symbol}.", hint=_SIZE_HINT) from None
        if not solutions:
            raise mismatch(f"{where} = {value} is not of the form {expr} for an integer "
                            f"{symbol}.", hint=_SIZE_HINT)
        self.bindings[symbol] = (int(solutions[0]), f"{where} (= {expr})")

    def _check_range(self, symbol, value: int, where: str) -> None:
        value_range = self.range_constraints.get(symbol)
        if value_range is None:
            return
        lower, upper = finite_bound(value_range.lower), finite_bound(value_range.upper)
        if (lower is not None and value < lower) or (upper is not None and value > upper):
            hint = "pass a size inside the range, or re-export with a wider Dim (min=/max=)."
            reason = self.size_one_reasons.get(str(symbol)) if value == 1 else None
            if reason is not None:
                hint = (f"size 1 is refused for {where}: {reason}. For size 1, export a separate "
                        f"program from an example of size 1.")
            elif value in (0, 1) and lower is not None and lower >= 2:
                hint += (" Sizes 0 and 1 are refused for dims exported as >= 2: the graph may "
                         "have been specialized for them (broadcasting, empty tensors).")
            raise mismatch(f"{where}: {symbol} = {value} is outside the range the program was "
                            f"exported for: {symbol} in {_format_range(value_range)}.", hint=hint)


def _check_tensor(user: _UserInput, value, binder: _SymbolBinder) -> None:
    expected = user.val
    if not isinstance(value, torch.Tensor):
        raise mismatch(f"Input {user.name} must be a tensor, got {type(value).__name__}.",
                        hint="pass a tensor like the example input given to export().")
    if value.dtype != expected.dtype:
        raise mismatch(f"Input {user.name} must have dtype {expected.dtype}, got {value.dtype}.",
                        hint=f"convert it with .to({expected.dtype}).")
    if value.layout != torch.strided or value.is_nested:  # the program was traced dense
        raise mismatch(f"Input {user.name} must be a dense (strided) tensor, got "
                        f"{'a nested tensor' if value.is_nested else value.layout}.",
                        hint="convert it with .to_dense().")
    if value.dim() != expected.dim():
        raise mismatch(f"Input {user.name} must have {expected.dim()} dimension(s) (shape "
                        f"{_shape_text(expected.shape)}), got {value.dim()} (shape "
                        f"{_shape_text(value.shape)}).", hint=_SIZE_HINT)
    for index, (want, got) in enumerate(zip(expected.shape, value.shape)):
        _check_dim(want, int(got), f"{user.name}.shape[{index}]", binder)


_LAYOUT_HINT = ("pass a tensor laid out like the example given to export() (e.g. "
                "x.contiguous(), or .contiguous(memory_format=torch.channels_last)), or "
                "re-export with an example of this layout.")


def _check_layout(user: _UserInput, value, known: dict) -> None:
    """When the trace read layout facts (``x.stride()``, ``is_contiguous()``) or the program
    writes its inputs after a ``reshape``/``flatten``/``contiguous`` (which copy or alias
    depending on the layout), every input must have the example's strides, except along dims
    of size 1, whose stride never changes an element's address."""
    if value.numel() == 0:
        return
    for index, (want, got) in enumerate(zip(user.val.stride(), value.stride())):
        if value.shape[index] == 1:
            continue
        expected = sympy.sympify(want.node.expr).xreplace(known) \
            if isinstance(want, torch.SymInt) else want
        if expected != got:
            raise mismatch(
                f"Input {user.name} has strides {tuple(value.stride())}; the program was "
                f"exported for the layout of the example input (stride[{index}] = {expected}, "
                f"got {got}).", hint=_LAYOUT_HINT)


def _blame_layout(users, leaves, error: RuntimeError) -> None:
    """A kernel failed inside the graph: when an input's layout differs from the example's,
    the trace's ``view`` decisions (a ``reshape`` that was a view on the example) are the
    likely cause; say so, as an InputMismatchError naming the input."""
    for user, value in zip(users, leaves):
        if isinstance(value, torch.Tensor) and isinstance(user.val, torch.Tensor) and any(
                size > 1 and not isinstance(want, torch.SymInt) and want != got
                for size, want, got in zip(value.shape, user.val.stride(), value.stride())):
            raise mismatch(
                f"Input {user.name} has strides {tuple(value.stride())}, unlike the example "
                f"given to export(), and the program failed on it: {str(error).splitlines()[0]}",
                hint=_LAYOUT_HINT) from error


def _check_user_aliasing(names, written, leaves) -> None:
    """A program that writes a user input in place was traced with that input separate from
    the others: called with an input sharing memory with the written one, eager would see the
    write through the other name and the program would not. ``names``: placeholder names of
    ``leaves``; ``written``: the names the program writes."""
    tensors = [(n, v) for n, v in zip(names, leaves) if isinstance(v, torch.Tensor)]
    for name, value in tensors:
        if name not in written:
            continue
        for other, other_value in tensors:
            if other != name and _overlap(value, other_value):
                raise mismatch(
                    f"Inputs {name} and {other} share memory, and the program writes {name} in "
                    "place: eager would see the write through both.",
                    hint=f"pass separate tensors (e.g. {other}.clone()).")


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    start_a, end_a = _extent(a)
    start_b, end_b = _extent(b)
    return start_a < end_b and start_b < end_a


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """[first byte, last byte + 1) that ``t`` may touch."""
    start = t.data_ptr()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_dim(want, got: int, where: str, binder: _SymbolBinder) -> None:
    if isinstance(want, torch.SymInt):
        binder.add(sympy.sympify(want.node.expr), got, where)
    elif int(want) != got:
        raise mismatch(f"{where} is specialized at {int(want)}, got {got}.", hint=_SIZE_HINT)


def _check_symint_input(user: _UserInput, value, binder: _SymbolBinder) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise mismatch(f"Input {user.name} must be an int, got {type(value).__name__}.",
                        hint="pass an int like the example input given to export().")
    binder.add(sympy.sympify(user.val.node.expr), value, user.name)


def _same_constant(expected, value) -> bool:
    if type(expected) is not type(value):
        return False
    if isinstance(expected, float) and math.isnan(expected):
        return math.isnan(value)
    return expected == value


def _check_constant(user: _UserInput, value) -> None:
    expected = user.spec.arg.value if isinstance(user.spec.arg, ConstantArgument) else user.val
    if not _same_constant(expected, value):
        raise mismatch(f"Input {user.name} was specialized to {expected!r} at export time, "
                        f"got {value!r}.",
                        hint="pass the same value as at export time, or re-export with a tensor "
                             "(or a dynamic int) so the value is not baked into the graph.")


@dataclass(frozen=True, slots=True)
class _SizeAssertion:
    """A run-time assertion of the graph on input sizes (``aten._assert_scalar``).

    fact: the sympy boolean over the program's size symbols; message: the node's message.
    """

    fact: object
    message: str


def size_assertions(graph) -> tuple[_SizeAssertion, ...]:
    """The ``aten._assert_scalar`` nodes of ``graph`` whose condition is a symbolic boolean
    (their ``meta["val"]``), in graph order."""
    found = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.aten._assert_scalar.default:
            continue
        condition = node.args[0]
        value = condition.meta.get("val") if isinstance(condition, torch.fx.Node) else None
        if isinstance(value, (torch.SymBool, torch.SymInt)) and \
                not isinstance(value.node.expr, sympy.Expr):
            found.append(_SizeAssertion(sympy.sympify(value.node.expr), str(node.args[1])))
    return tuple(found)


class InputChecker:
    """Checks flattened user inputs against the placeholders of an exported graph.

    users:             one :class:`_UserInput` per flattened user input, in order.
    range_constraints: symbol -> range (``lower``/``upper``) of the dynamic dims.
    assertions:        run-time assertions of the graph; those over input sizes only (relations
                       no ``dynamic_shapes`` spec can state) are checked before the graph runs.
    """

    def __init__(self, users, range_constraints, assertions=(), strict_layout: bool = False,
                 size_one_reasons=None):
        self.users = tuple(users)
        self.range_constraints = range_constraints
        self.size_one_reasons = size_one_reasons or {}
        self.assertions = tuple(assertions)
        self.strict_layout = strict_layout

    def check(self, leaves) -> None:
        """Raise InputMismatchError naming the first input that does not fit."""
        binder = _SymbolBinder(self.range_constraints, self.size_one_reasons)
        for user, value in zip(self.users, leaves):
            self._check_one(user, value, binder)
        binder.finish()
        for assertion in self.assertions:
            _check_assertion(assertion, binder)
        if self.strict_layout:
            known = {s: v for s, (v, _) in binder.bindings.items()}
            for user, value in zip(self.users, leaves):
                if isinstance(user.val, torch.Tensor):
                    _check_layout(user, value, known)

    def _check_one(self, user: _UserInput, value, binder: _SymbolBinder) -> None:
        if isinstance(user.val, torch.Tensor):
            _check_tensor(user, value, binder)
        elif isinstance(user.val, torch.SymInt):
            _check_symint_input(user, value, binder)
        else:
            _check_constant(user, value)


def _check_assertion(assertion: _SizeAssertion, binder: _SymbolBinder) -> None:
    symbols = assertion.fact.free_symbols
    if not symbols or not symbols <= set(binder.bindings):
        return  # data-dependent: the graph checks it when the value is known
    holds = assertion.fact.xreplace({s: sympy.Integer(binder.bindings[s][0]) for s in symbols})
    if holds is sympy.false:
        sizes = ", ".join(f"{binder.bindings[s][1]} = {binder.bindings[s][0]}"
                          for s in sorted(symbols, key=str))
        raise mismatch(f"{assertion.message}, which these inputs break ({sizes}).",
                        hint="pass inputs whose sizes satisfy it: the program was exported for "
                             "them only (the model's code needs this relation between sizes).")


@dataclass(frozen=True, slots=True)
class GradModeDecision:
    """A torch.nn fast-path choice the trace made by the grad mode: eager chooses the fused
    path unless ``torch.is_grad_enabled() and any(t.requires_grad for t in <its tensors>)``
    (``unbroken.frontend.variables.nn_fast_paths``).

    module:        the torch.nn class deciding (``MultiheadAttention``...).
    frames:        the user's stack at the call of that module (``UserFrame``s, outermost first).
    grad_enabled:  the export's grad mode.
    requires_grad: a parameter, buffer or input of the export required grad.
    """

    module: str
    frames: tuple
    grad_enabled: bool
    requires_grad: bool

    def differentiable(self) -> bool:
        """True when the program records the differentiable path (or, when the module's own
        tensors did not require grad though others did, a fused one eager takes in this mode
        only: the check is then stricter than eager)."""
        return self.grad_enabled and self.requires_grad


def _check_grad_mode(decisions, module, leaves) -> None:
    """Raise InputMismatchError when eager would choose the other side of a
    :class:`GradModeDecision` in this call."""
    if not decisions:
        return
    requires_grad = any(p.requires_grad for p in module.parameters()) or any(
        isinstance(leaf, torch.Tensor) and leaf.requires_grad for leaf in leaves)
    differentiable = torch.is_grad_enabled() and requires_grad
    decision = decisions[0]
    if differentiable == decision.differentiable():
        return
    frame = decision.frames[-1] if decision.frames else None
    where = f" at {Path(frame.filename).name}:{frame.lineno} (`{frame.source}`)" if frame else ""
    if decision.differentiable():
        exported, taken, called, other = (
            "with grad mode on and a tensor requiring grad", "its differentiable path",
            "no gradient is recorded (grad mode off, or no tensor requires grad)",
            "its fused fast path")
    else:
        exported, taken, called, other = (
            "with no gradient recorded", "its fused fast path",
            "grad mode is on and a tensor requires grad", "its differentiable path")
    raise mismatch(
        f"the program was exported {exported}: torch.nn.{decision.module}{where} took "
        f"{taken}, which the program records. In this call {called}, and eager would take "
        f"{other} instead (another kernel: the results differ in the last bits, and "
        "TransformerEncoder's nested-tensor path returns zeros at padded positions).",
        hint="call the program in the grad mode it was exported in, or export it in the mode "
             "you run it in (`with torch.no_grad(): unbroken.export(...)` for inference).")


def _user_inputs(program) -> list:
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    return [_UserInput(s.arg.name, s, n.meta.get("val"))
            for s, n in zip(program.graph_signature.input_specs, placeholders)
            if s.kind == InputKind.USER_INPUT]


def is_traced(leaves) -> bool:
    """True when the call is being traced: compiling/exporting, or fake/symbolic inputs."""
    if torch.compiler.is_compiling():
        return True
    for leaf in leaves:
        if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool, FakeTensor)):
            return True
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "meta":
            return True
    return False


class InputGuard:
    """The forward pre-hook of ``ExportedProgram.module()``: checks ``(args, kwargs)`` against
    the program (structure, then :class:`InputChecker`, then that no input the program writes
    shares memory with another input) and raises InputMismatchError.

    in_spec: the TreeSpec of the example ``(args, kwargs)``.
    users:   the flattened user inputs (placeholder names and example values).
    names:   their placeholder names (for the messages).
    written: names of the user inputs the program writes in place.
    checker: the :class:`InputChecker` of the program's user inputs (strides included when
             the program's graph module says :data:`LAYOUT_READ`).
    """

    def __init__(self, program):
        self.users = _user_inputs(program)
        self.in_spec = program.call_spec.in_spec
        self.names = [u.name for u in self.users]
        self.written = frozenset(s.target for s in program.graph_signature.output_specs
                                 if s.kind == OutputKind.USER_INPUT_MUTATION)
        strict = bool(program.graph_module.meta.get(LAYOUT_READ, False))
        self.grad_mode_decisions = tuple(program.graph_module.meta.get(GRAD_MODE_DECISIONS, ()))
        self.checker = InputChecker(
            self.users, program.range_constraints, size_assertions(program.graph),
            strict_layout=strict,
            size_one_reasons=program.graph_module.meta.get(SIZE_ONE_REFUSED))

    def check_inputs(self, *args, **kwargs) -> None:
        """Raise InputMismatchError unless the program admits ``(args, kwargs)``; runs
        nothing (also ``module.check_inputs``)."""
        self.checker.check(flatten_user_inputs(self.in_spec, self.names, args, kwargs))

    def blame_layout(self, args, kwargs, error: RuntimeError) -> None:
        """Raise InputMismatchError when ``error`` (raised by a kernel of the graph) is likely
        due to an input laid out unlike the example; return otherwise."""
        leaves = flatten_user_inputs(self.in_spec, self.names, args, kwargs)
        _blame_layout(self.users, leaves, error)

    def __call__(self, module, args, kwargs):
        if torch.compiler.is_compiling():
            return None
        leaves = pytree.tree_leaves((args, kwargs))
        if is_traced(leaves):
            return None
        leaves = flatten_user_inputs(self.in_spec, self.names, args, kwargs)
        self.checker.check(leaves)
        _check_user_aliasing(self.names, self.written, leaves)
        _check_grad_mode(self.grad_mode_decisions, module, leaves)
        return None
