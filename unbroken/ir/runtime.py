"""``ExportedProgram.module()``: a callable ``nn.Module`` that runs an exported graph.

The returned :class:`ExportedModule` owns the program's parameters and buffers under their
original FQNs (``lin.weight``), in a submodule hierarchy rebuilt from those names, so that
``state_dict()``/``load_state_dict()`` work like on the original model. Calling it:

1. flattens ``(args, kwargs)`` with the program's ``in_spec`` (wrong count or structure is an
   :class:`InputMismatchError` that shows the expected structure);
2. checks every user input against the graph (:class:`InputChecker`): dtype, rank,
   specialized sizes, dynamic dims against
   ``range_constraints`` (shared symbols must agree, derived dims like ``2*s0`` must be
   consistent), specialized non-tensor inputs;
3. runs the flat graph on ``parameters + buffers + constants + user inputs``;
4. writes mutations back (new buffer values are copied into the module's buffers, new user input
   values into the caller's tensors);
5. returns the user outputs rebuilt with ``out_spec``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
import torch
import torch.utils._pytree as pytree

from unbroken.ir.signature import ConstantArgument, InputKind, OutputKind
from unbroken.symbolic.diagnostics import InputMismatchError, InternalError

__all__ = ["ExportedModule", "InputChecker", "build_module"]

_SIZE_HINT = (
    "pass inputs with the sizes the program was exported for, or re-export with a "
    "`dynamic_shapes` spec that marks this dimension dynamic (e.g. torch.export.Dim(...))."
)


class _Name(str):
    """A string that prints without quotes, to render input structures as ``(x, [y_0, y_1])``."""

    def __repr__(self) -> str:
        return str(self)


def _mismatch(message: str, hint: str = "") -> InputMismatchError:
    return InputMismatchError(message, hint=hint)


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
        raise _mismatch(f"The exported program was called with {' and '.join(said)}; "
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
        raise _mismatch(f"The exported program expects {expected_positional} positional "
                        f"argument(s) {structure()}, got {len(args)}.",
                        hint="pass the same number of positional arguments as to export().")
    expected_keys = list(in_spec.child(1).context)
    _check_kwarg_names(kwargs, expected_keys, structure)
    kwargs = {k: kwargs[k] for k in expected_keys}
    leaves, received = pytree.tree_flatten((tuple(args), kwargs))
    if received != in_spec:
        raise _mismatch(f"The inputs do not have the structure the program was exported with: "
                        f"expected {structure()}, got {_describe_received(args, kwargs)}.",
                        hint="pass containers (tuples, lists, dicts) with the same types, "
                             "lengths and keys as the example inputs given to export().")
    return leaves


# ---------------------------------------------------------------------------------------------
# Leaf checks: dtypes, sizes, dynamic dims
# ---------------------------------------------------------------------------------------------
def _bound_to_int(bound):
    """An integer range bound, or None for an infinite/unknown one."""
    try:
        value = float(bound)
        return None if math.isinf(value) else int(bound)
    except (TypeError, ValueError, OverflowError):
        return None


def _format_range(value_range) -> str:
    lower, upper = _bound_to_int(value_range.lower), _bound_to_int(value_range.upper)
    return f"[{'-inf' if lower is None else lower}, {'inf' if upper is None else upper}]"


class _SymbolBinder:
    """Binds the program's size symbols to the sizes seen in one call, and checks them.

    bindings: symbol -> (value, where) with ``where`` like ``x.shape[0]``.
    derived:  (expr, value, where) for dims whose size is an expression (``2*s0``); resolved after
              the plain symbols are bound.
    """

    def __init__(self, range_constraints):
        self.range_constraints = range_constraints
        self.bindings: dict = {}
        self.derived: list = []

    def add(self, expr, value: int, where: str) -> None:
        """Record that the dim ``where`` (symbolic size ``expr``) has ``value`` in this call."""
        if expr.is_number:
            if int(expr) != value:
                raise _mismatch(f"{where} is specialized at {int(expr)}, got {value}.",
                                hint=_SIZE_HINT)
        elif isinstance(expr, sympy.Symbol):
            self._bind(expr, value, where)
        else:
            self.derived.append((expr, value, where))

    def _bind(self, symbol, value: int, where: str) -> None:
        if symbol in self.bindings and self.bindings[symbol][0] != value:
            first_value, first_where = self.bindings[symbol]
            raise _mismatch(
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
                raise _mismatch(f"{where} = {value} has size {expr}, whose symbols cannot be "
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
            raise _mismatch(f"{where} = {value} but the program requires it to equal {expr} = "
                            f"{expected} ({sources}).",
                            hint="pass inputs whose sizes keep this relation: the model's code "
                                 "needs it (it was exported for those sizes only).")

    def _solve(self, expr, symbol, value: int, where: str) -> None:
        try:
            solutions = [s for s in sympy.solve(sympy.Eq(expr, value), symbol) if s.is_integer]
        except (NotImplementedError, TypeError, ValueError):
            raise _mismatch(f"{where} = {value} has size {expr}, which cannot be solved for "
                            f"{symbol}.", hint=_SIZE_HINT) from None
        if not solutions:
            raise _mismatch(f"{where} = {value} is not of the form {expr} for an integer "
                            f"{symbol}.", hint=_SIZE_HINT)
        self.bindings[symbol] = (int(solutions[0]), f"{where} (= {expr})")

    def _check_range(self, symbol, value: int, where: str) -> None:
        value_range = self.range_constraints.get(symbol)
        if value_range is None:
            return
        lower, upper = _bound_to_int(value_range.lower), _bound_to_int(value_range.upper)
        if (lower is not None and value < lower) or (upper is not None and value > upper):
            hint = "pass a size inside the range, or re-export with a wider Dim (min=/max=)."
            if value in (0, 1) and lower is not None and lower >= 2:
                hint += (" Sizes 0 and 1 are refused for dims exported as >= 2: the graph may "
                         "have been specialized for them (broadcasting, empty tensors).")
            raise _mismatch(f"{where}: {symbol} = {value} is outside the range the program was "
                            f"exported for: {symbol} in {_format_range(value_range)}.", hint=hint)


def _check_tensor(user: _UserInput, value, binder: _SymbolBinder) -> None:
    expected = user.val
    if not isinstance(value, torch.Tensor):
        raise _mismatch(f"Input {user.name} must be a tensor, got {type(value).__name__}.",
                        hint="pass a tensor like the example input given to export().")
    if value.dtype != expected.dtype:
        raise _mismatch(f"Input {user.name} must have dtype {expected.dtype}, got {value.dtype}.",
                        hint=f"convert it with .to({expected.dtype}).")
    if value.dim() != expected.dim():
        raise _mismatch(f"Input {user.name} must have {expected.dim()} dimension(s) (shape "
                        f"{_shape_text(expected.shape)}), got {value.dim()} (shape "
                        f"{_shape_text(value.shape)}).", hint=_SIZE_HINT)
    for index, (want, got) in enumerate(zip(expected.shape, value.shape)):
        _check_dim(want, int(got), f"{user.name}.shape[{index}]", binder)


_LAYOUT_HINT = ("pass a tensor laid out like the example given to export() (e.g. "
                "x.contiguous(), or .contiguous(memory_format=torch.channels_last)), or "
                "re-export with an example of this layout.")


#: ``graph_module.meta`` key: the program holds for the example's strides only (the trace read
#: a layout fact, or it writes an input and called an op that aliases or copies by layout).
LAYOUT_READ = "unbroken_layout_read"


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
            raise _mismatch(
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
            raise _mismatch(
                f"Input {user.name} has strides {tuple(value.stride())}, unlike the example "
                f"given to export(), and the program failed on it: {str(error).splitlines()[0]}",
                hint=_LAYOUT_HINT) from error


def _check_user_aliasing(runner, leaves) -> None:
    """A program that writes a user input in place was traced with that input separate from
    the others: called with an input sharing memory with the written one, eager would see the
    write through the other name and the program would not."""
    tensors = [(n, v) for n, v in zip(runner.user_names, leaves) if isinstance(v, torch.Tensor)]
    written = {target for kind, target in runner.mutations
               if kind == OutputKind.USER_INPUT_MUTATION}
    for name, value in tensors:
        if name not in written:
            continue
        for other, other_value in tensors:
            if other != name and _overlap(value, other_value):
                raise _mismatch(
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
        raise _mismatch(f"{where} is specialized at {int(want)}, got {got}.", hint=_SIZE_HINT)


def _check_symint_input(user: _UserInput, value, binder: _SymbolBinder) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _mismatch(f"Input {user.name} must be an int, got {type(value).__name__}.",
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
        raise _mismatch(f"Input {user.name} was specialized to {expected!r} at export time, "
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

    def __init__(self, users, range_constraints, assertions=(), strict_layout: bool = False):
        self.users = tuple(users)
        self.range_constraints = range_constraints
        self.assertions = tuple(assertions)
        self.strict_layout = strict_layout

    def check(self, leaves) -> None:
        """Raise InputMismatchError naming the first input that does not fit."""
        binder = _SymbolBinder(self.range_constraints)
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
        raise _mismatch(f"{assertion.message}, which these inputs break ({sizes}).",
                        hint="pass inputs whose sizes satisfy it: the program was exported for "
                             "them only (the model's code needs this relation between sizes).")


# ---------------------------------------------------------------------------------------------
# The module
# ---------------------------------------------------------------------------------------------
def _split_fqn(fqn: str) -> tuple[str, str]:
    owner, _, name = fqn.rpartition(".")
    return owner, name


def _owner(root: torch.nn.Module, owner_path: str) -> torch.nn.Module:
    """The submodule at ``owner_path``, creating empty ``nn.Module`` containers on the way."""
    module = root
    for atom in owner_path.split(".") if owner_path else ():
        child = module._modules.get(atom)
        if child is None:
            child = torch.nn.Module()
            module.add_module(atom, child)
        module = child
    return module


def _attach_state(root: torch.nn.Module, spec, program) -> None:
    """Register one lifted input on ``root`` at its FQN: parameter, buffer or constant."""
    owner_path, name = _split_fqn(spec.target)
    owner = _owner(root, owner_path)
    if spec.kind == InputKind.PARAMETER:
        value = program.state_dict[spec.target]
        if not isinstance(value, torch.nn.Parameter):
            value = torch.nn.Parameter(value, requires_grad=value.requires_grad)
        owner.register_parameter(name, value)
    elif spec.kind == InputKind.BUFFER:
        store = program.constants if spec.persistent is False else program.state_dict
        owner.register_buffer(name, store[spec.target], persistent=spec.persistent is not False)
    elif spec.kind == InputKind.CONSTANT_TENSOR:
        setattr(owner, name, program.constants[spec.target])
    else:
        raise InternalError(f"input kind {spec.kind.name} of {spec.arg.name!r} cannot be lifted "
                            f"into a module yet")


class _Runner:
    """Everything ``ExportedModule.forward`` needs, computed once per ``module()`` call.

    graph_module:  the flat exported graph (takes state + user inputs, returns a tuple).
    state_fqns:    FQN of each lifted input, in placeholder order.
    user_names:    placeholder names of the user inputs.
    checker:       the :class:`InputChecker`.
    in_spec, out_spec: pytree specs of ``(args, kwargs)`` and of the user outputs.
    mutations:     (kind, target) of each mutation output, in output order.
    """

    def __init__(self, program):
        sig = program.graph_signature
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
        pairs = list(zip(sig.input_specs, placeholders))
        users = [_UserInput(s.arg.name, s, n.meta.get("val")) for s, n in pairs
                 if s.kind == InputKind.USER_INPUT]
        self.graph_module = program.graph_module
        self.state_fqns = [s.target for s in sig.input_specs if s.kind != InputKind.USER_INPUT]
        self.user_names = [u.name for u in users]
        self.in_spec, self.out_spec = program.in_spec, program.out_spec
        self.mutations = [(s.kind, s.target) for s in sig.mutation_specs]
        strict = program.graph_module.meta.get(LAYOUT_READ, False)
        self.checker = InputChecker(users, program.range_constraints,
                                    size_assertions(program.graph), strict_layout=strict)
        self.users = users


class ExportedModule(torch.nn.Module):
    """The callable form of an exported program (what ``ExportedProgram.module()`` returns).

    Parameters and buffers live under their original FQNs. ``forward`` takes the same arguments
    as the original model's ``forward``, checks them, runs the exported graph, writes buffer and
    input mutations back and returns the outputs in the original structure.
    """

    def __init__(self, program):
        super().__init__()
        for spec in program.graph_signature.input_specs:
            if spec.kind != InputKind.USER_INPUT:
                _attach_state(self, spec, program)
        self.__dict__["_runner"] = _Runner(program)

    @property
    def graph(self) -> torch.fx.Graph:
        """The exported (flat, functional) graph this module runs."""
        return self._runner.graph_module.graph

    @property
    def code(self) -> str:
        """Python code of the exported graph."""
        return self._runner.graph_module.code

    def _lookup(self, fqn: str) -> torch.Tensor:
        owner_path, name = _split_fqn(fqn)
        owner = self.get_submodule(owner_path) if owner_path else self
        return getattr(owner, name)

    def check_inputs(self, *args, **kwargs) -> None:
        """Raise InputMismatchError unless the program admits these inputs; runs nothing."""
        runner = self._runner
        runner.checker.check(flatten_user_inputs(runner.in_spec, runner.user_names, args, kwargs))

    def forward(self, *args, **kwargs):
        runner = self._runner
        leaves = flatten_user_inputs(runner.in_spec, runner.user_names, args, kwargs)
        runner.checker.check(leaves)
        _check_user_aliasing(runner, leaves)
        state = [self._lookup(fqn) for fqn in runner.state_fqns]
        # the graph sets grad mode in its no_grad regions: the caller's comes back however
        # the graph ends
        with torch.set_grad_enabled(torch.is_grad_enabled()):
            try:
                results = runner.graph_module(*state, *leaves)
            except RuntimeError as error:
                _blame_layout(runner.users, leaves, error)
                raise
        self._write_back(results, leaves)
        return self._unflatten(list(results[len(runner.mutations):]))

    def _unflatten(self, outputs: list):
        try:
            return pytree.tree_unflatten(outputs, self._runner.out_spec)
        except (ValueError, TypeError) as error:
            raise InternalError(f"the graph returned {len(outputs)} user outputs, which do not "
                                f"fit the output structure {self._runner.out_spec}",
                                cause=error) from error

    def _write_back(self, results, leaves) -> None:
        """Copy new buffer values into the buffers and new input values into the inputs."""
        runner = self._runner
        for (kind, target), value in zip(runner.mutations, results):
            if kind == OutputKind.BUFFER_MUTATION:
                with torch.no_grad():
                    self._lookup(target).copy_(value)
            elif kind == OutputKind.USER_INPUT_MUTATION:
                leaves[runner.user_names.index(target)].copy_(value)


def build_module(program) -> ExportedModule:
    """``ExportedProgram.module()``: see :class:`ExportedModule`."""
    return ExportedModule(program)
