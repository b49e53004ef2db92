"""``ExportedProgram``: the result of ``unbroken.export``.

It packages one functional ATen-level ``torch.fx`` graph with everything needed to run it:

- ``graph_module`` / ``graph``: the flat graph; its placeholders are
  ``[*parameters, *buffers, *lifted constants, *flattened user inputs]`` and it returns
  ``(*mutated buffers and inputs, *flattened user outputs)``;
- ``graph_signature``: what each placeholder and output means (:mod:`unbroken.ir.signature`);
- ``state_dict``: parameters and persistent buffers by FQN;
- ``constants``: lifted tensor constants and non-persistent buffers by name/FQN;
- ``range_constraints``: ``sympy.Symbol`` -> range (``lower``/``upper``) of each dynamic size;
- ``in_spec`` / ``out_spec``: pytree specs of the user's ``(args, kwargs)`` and outputs.

It mirrors ``torch.export.ExportedProgram``'s public surface so tools written for torch's class
read ours. Call it through ``ep.module()(...)``.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator
from typing import Any

import torch

from unbroken.ir import printer, runtime, verifier
from unbroken.ir.signature import ExportGraphSignature
from unbroken.symbolic.diagnostics import ExportUsageError, InternalError

__all__ = ["ExportedProgram", "CallSpec", "register_decomposer"]

# The implementation of run_decompositions lives in unbroken.passes.decompose (a transform;
# ir may not import passes), which registers it here when it is imported.
_DECOMPOSER = None


def register_decomposer(decomposer) -> None:
    """Install ``decomposer(program, decomp_table) -> ExportedProgram``."""
    global _DECOMPOSER
    _DECOMPOSER = decomposer

CallSpec = namedtuple("CallSpec", ["in_spec", "out_spec"])


def _as_graph_module(graph_module) -> torch.fx.GraphModule:
    """A GraphModule with plain (flat) code generation, like torch's exported graphs."""
    if isinstance(graph_module, torch.fx.Graph):
        graph_module = torch.fx.GraphModule(torch.nn.Module(), graph_module)
    if type(graph_module.graph._codegen) is not torch.fx.graph.CodeGen:
        graph_module.graph._codegen = torch.fx.graph.CodeGen()
        graph_module.recompile()
    return graph_module


class ExportedProgram:
    """A captured program: a functional graph, its signature, its state and its constraints.

    Args:
        graph_module: the exported ``torch.fx.GraphModule`` (or a bare ``torch.fx.Graph``).
        graph_signature: an :class:`ExportGraphSignature` matching the graph's placeholders
            and outputs.
        state_dict: parameters and persistent buffers by FQN.
        constants: lifted tensor constants and non-persistent buffers by name.
        range_constraints: ``sympy.Symbol`` -> range with ``lower``/``upper``.
        in_spec: ``TreeSpec`` of the example ``(args, kwargs)``.
        out_spec: ``TreeSpec`` of the user outputs.
        example_inputs: the ``(args, kwargs)`` used for export, or None.
        specializations: the ``Dim.AUTO`` dims export made static because the code pins them
            (``symbolic.auto.Specialization``: dim, value, reason, user frames), in order.
        verifier: run :func:`unbroken.ir.verifier.verify` now (default True).

    Example::

        ep = unbroken.export(model, (x,))
        print(ep)                  # graph, signature, range constraints
        out = ep.module()(x)       # run it
    """

    def __init__(self, graph_module, graph_signature: ExportGraphSignature, state_dict: dict,
                 constants: dict, range_constraints: dict, in_spec, out_spec,
                 example_inputs=None, verifier: bool = True, specializations=()):
        self._graph_module = _as_graph_module(graph_module)
        self._graph_signature = graph_signature
        self._state_dict = dict(state_dict)
        self._constants = dict(constants or {})
        self._range_constraints = dict(range_constraints or {})
        self._in_spec = in_spec
        self._out_spec = out_spec
        self._example_inputs = example_inputs
        self._specializations = tuple(specializations)
        if verifier:
            self.validate()

    # -- the parts ------------------------------------------------------------------------------
    @property
    def graph_module(self) -> torch.fx.GraphModule:
        """The flat functional graph module (takes state + user inputs)."""
        return self._graph_module

    @property
    def graph(self) -> torch.fx.Graph:
        """``graph_module.graph``."""
        return self._graph_module.graph

    @property
    def graph_signature(self) -> ExportGraphSignature:
        """What each placeholder and output is."""
        return self._graph_signature

    @property
    def state_dict(self) -> dict:
        """Parameters and persistent buffers by FQN (``lin.weight``)."""
        return self._state_dict

    @property
    def constants(self) -> dict:
        """Lifted tensor constants and non-persistent buffers by name."""
        return self._constants

    @property
    def tensor_constants(self) -> dict:
        """Alias of :attr:`constants` (torch's older name)."""
        return self._constants

    @property
    def range_constraints(self) -> dict:
        """``sympy.Symbol`` -> range (``lower``, ``upper``) of every dynamic size."""
        return self._range_constraints

    @property
    def in_spec(self):
        """Pytree spec of the user's ``(args, kwargs)``."""
        return self._in_spec

    @property
    def out_spec(self):
        """Pytree spec of the user outputs."""
        return self._out_spec

    @property
    def call_spec(self) -> CallSpec:
        """``(in_spec, out_spec)``, as torch's ``ExportedProgram.call_spec``."""
        return CallSpec(self._in_spec, self._out_spec)

    @property
    def example_inputs(self):
        """The ``(args, kwargs)`` given to export, or None."""
        return self._example_inputs

    @property
    def specializations(self) -> tuple:
        """The ``Dim.AUTO`` dims export made static, each with the fact and the line that pin
        it (``Specialization.describe()``); empty when every AUTO dim stayed dynamic."""
        return self._specializations

    @property
    def dialect(self) -> str:
        """The IR dialect: ATen, functional."""
        return "ATEN"

    # -- state views ----------------------------------------------------------------------------
    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """``(fqn, parameter)`` of the original module's parameters, in input order."""
        for fqn in self._graph_signature.parameters:
            yield fqn, self._state_dict[fqn]

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The original module's parameters, in input order."""
        for _, param in self.named_parameters():
            yield param

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        """``(fqn, buffer)`` of the original module's buffers (non-persistent ones included)."""
        non_persistent = set(self._graph_signature.non_persistent_buffers)
        for fqn in self._graph_signature.buffers:
            store = self._constants if fqn in non_persistent else self._state_dict
            yield fqn, store[fqn]

    def buffers(self) -> Iterator[torch.Tensor]:
        """The original module's buffers, in input order."""
        for _, buffer in self.named_buffers():
            yield buffer

    # -- use ------------------------------------------------------------------------------------
    def module(self) -> torch.nn.Module:
        """A callable ``nn.Module`` with the original FQNs that checks its inputs, runs the graph
        and writes mutations back. See :class:`unbroken.ir.runtime.ExportedModule`."""
        return runtime.build_module(self)

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """A new program whose ops are lowered through ``decomp_table``.

        With no table, lower to the core ATen operator set (every composite decomposes). With a
        table (e.g. ``torch.export.default_decompositions()`` with entries added or removed),
        the ops in it are replaced by their decompositions and other ops are kept whole; an
        empty table keeps the graph as it is. ``decompose_custom_triton_ops`` is accepted for
        compatibility (there are no Triton ops on CPU).

        Example::

            core = ep.run_decompositions()          # conv2d -> convolution, linear -> addmm...
        """
        if _DECOMPOSER is None:
            raise InternalError("run_decompositions needs unbroken.passes.decompose; "
                                "import unbroken first")
        return _DECOMPOSER(self, decomp_table)

    def validate(self) -> None:
        """Run the dialect verifier; raises ``InternalError`` if the program is malformed."""
        verifier.verify(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ExportUsageError(
            "An ExportedProgram cannot be called directly.",
            hint="call `ep.module()(...)` instead: it returns an nn.Module that checks the "
                 "inputs, runs the graph and writes buffer/input mutations back.")

    def __str__(self) -> str:
        return printer.format_program(self)

    def __repr__(self) -> str:
        n_nodes = len(self.graph.nodes)
        return (f"<ExportedProgram: {n_nodes} nodes, {len(self._graph_signature.input_specs)} "
                f"inputs, {len(self._graph_signature.output_specs)} outputs>")
