"""Hand-built graphs for the tests of ``unbroken.ir`` and ``unbroken.passes``.

These tests need graphs in exactly the shape the recorder produces, without going through the
frontend, so that a failure points at the IR or the pass and not at tracing. The helpers:

- :func:`meta` builds a ``meta``-device tensor of the given shape and dtype (no storage): the
  ``val`` a placeholder or node carries.
- :class:`Builder` builds an ``fx.Graph`` in the recorder's convention (placeholders with meta
  vals, ``call_function`` aten nodes named after their op and annotated with a ``model.py`` stack
  trace and user frame, one output tuple) together with the matching ``ExportGraphSignature``,
  and wraps both into a ``GraphModule`` or a full ``ExportedProgram``.
- :data:`aten` is ``torch.ops.aten``.
- :class:`Range` is a duck-typed value range (``lower``/``upper``) for ``range_constraints``, as
  the runtime and the printer accept.

Import them as ``from tests.graph_builder import Builder, aten, meta`` (the repository root is
on ``sys.path``: ``pythonpath = ["."]`` in pyproject.toml).
"""
import torch
import torch.utils._pytree as pytree
from torch.utils._pytree import tree_map_only

from unbroken.ir import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from unbroken.ir.parts import ProgramParts
from unbroken.program import ExportedProgram
from unbroken.symbolic.diagnostics import UserFrame

__all__ = ["Builder", "Range", "aten", "meta"]

aten = torch.ops.aten


def meta(*shape, dtype=torch.float32):
    """A tensor on the ``meta`` device with ``shape`` and ``dtype``: shape and dtype, no data."""
    return torch.empty(shape, dtype=dtype, device="meta")


class Builder:
    """Builds graphs in the recorder's convention: placeholders with meta vals, aten nodes with
    stack traces and user frames, one output tuple; collects the matching signature.

    Every node gets ``meta["val"]``, an empty ``nn_module_stack``, one ``UserFrame`` in
    ``model.py`` and the matching ``stack_trace``: placeholders at line 1, calls at ``line``
    (default 2). Inputs and outputs are appended to :attr:`input_specs` / :attr:`output_specs`
    in order; tests may edit those lists (e.g. to mark an output as a buffer mutation) before
    asking for :meth:`signature` or :meth:`program`.
    """

    def __init__(self):
        self.graph = torch.fx.Graph()
        self.input_specs, self.output_specs = [], []

    def _annotate(self, node, val, line):
        frame = UserFrame("model.py", line, "forward", f"line_{line}()")
        trace = f'  File "model.py", line {line}, in forward\n    line_{line}()'
        node.meta.update(val=val, nn_module_stack={}, user_frames=(frame,), stack_trace=trace)
        return node

    def input(self, name, val, kind=InputKind.USER_INPUT, target=None, persistent=None):
        """A placeholder ``name`` holding ``val``; its spec is a tensor, SymInt or constant
        argument according to the type of ``val``."""
        if isinstance(val, torch.Tensor):
            arg = TensorArgument(name)
        elif isinstance(val, torch.SymInt):
            arg = SymIntArgument(name)
        else:
            arg = ConstantArgument(name, val)
        self.input_specs.append(InputSpec(kind, arg, target, persistent))
        return self._annotate(self.graph.placeholder(name), val, 1)

    def param(self, fqn, val):
        """A PARAMETER placeholder ``p_<fqn with _>`` targeting ``fqn``."""
        return self.input("p_" + fqn.replace(".", "_"), val, InputKind.PARAMETER, fqn)

    def buffer(self, fqn, val, persistent=True):
        """A BUFFER placeholder ``b_<fqn with _>`` targeting ``fqn``."""
        return self.input("b_" + fqn.replace(".", "_"), val, InputKind.BUFFER, fqn, persistent)

    def const(self, name, val):
        """A CONSTANT_TENSOR placeholder ``c_<name>`` targeting ``name``."""
        return self.input("c_" + name, val, InputKind.CONSTANT_TENSOR, name)

    def call(self, target, *args, line=2, **kwargs):
        """A ``call_function`` node of ``target``, named after its schema; its ``val`` is
        computed by running ``target`` on (clones of) the argument vals, moved to ``meta``."""
        vals = tree_map_only(torch.fx.Node, lambda n: n.meta["val"], (args, kwargs))
        vals = tree_map_only(torch.Tensor, lambda t: t.clone(), vals)
        val = tree_map_only(torch.Tensor, lambda t: t.to("meta"), target(*vals[0], **vals[1]))
        name = target._schema.name.split("::")[-1] if hasattr(target, "_schema") else None
        node = self.graph.create_node("call_function", target, args, kwargs, name=name)
        return self._annotate(node, val, line)

    def output(self, *values):
        """The output node (a tuple of ``values``), each a USER_OUTPUT spec: tensor, SymInt or
        constant argument."""
        self.graph.output(tuple(values))
        for v in values:
            arg = (ConstantArgument("", v) if not isinstance(v, torch.fx.Node)
                   else SymIntArgument(v.name) if isinstance(v.meta["val"], torch.SymInt)
                   else TensorArgument(v.name))
            self.output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, arg, None))

    def graph_module(self):
        """The graph in a ``GraphModule`` over an empty ``nn.Module``."""
        return torch.fx.GraphModule(torch.nn.Module(), self.graph)

    def signature(self):
        """The ``ExportGraphSignature`` of the specs collected so far."""
        return ExportGraphSignature(self.input_specs, self.output_specs)

    def program(self, state_dict, constants, args, kwargs=None, outputs=None,
                range_constraints=None):
        """An ``ExportedProgram`` of this graph; the in/out pytree specs come from the
        structure of ``(args, kwargs)`` and of ``outputs``, which also serve as example inputs."""
        in_spec = pytree.tree_flatten((tuple(args), kwargs or {}))[1]
        out_spec = pytree.tree_flatten(outputs)[1]
        return ExportedProgram.from_parts(ProgramParts(
            self.graph_module(), self.signature(), state_dict, constants,
            range_constraints or {}, in_spec, out_spec,
            example_inputs=(tuple(args), kwargs or {}), hints=_hints(self.graph)))


def _hints(graph) -> dict:
    """symbol -> example value of the torch-made SymInts the tests put in placeholder vals."""
    hints = {}
    for node in graph.nodes:
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()) if isinstance(val, torch.Tensor) else (val,):
            if isinstance(size, torch.SymInt) and size.node.hint is not None:
                hints[size.node.expr] = int(size.node.hint)
    return hints


class Range:
    """Duck-typed range (lower/upper), as the runtime and printer accept."""

    def __init__(self, lower, upper):
        self.lower, self.upper = lower, upper
