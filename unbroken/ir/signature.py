"""The graph signature: what each placeholder and each output of an exported graph means.

An exported graph is a flat function. Its inputs are, in this order::

    [*parameters, *buffers, *lifted_tensor_constants, *flattened_user_inputs]

and its outputs are::

    [*mutated_buffers_and_user_inputs, *flattened_user_outputs]

The signature says, for every position, what kind of value it is and which state it belongs to
(a parameter's FQN, a buffer's FQN, the name of a mutated user input). These classes mirror
``torch.export.graph_signature`` field for field, so code written against torch's signature reads
ours; they are our own classes (nothing is imported from ``torch.export``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from types import MappingProxyType

__all__ = [
    "InputKind",
    "OutputKind",
    "TensorArgument",
    "SymIntArgument",
    "ConstantArgument",
    "ArgumentSpec",
    "InputSpec",
    "OutputSpec",
    "ExportGraphSignature",
]


class InputKind(Enum):
    """What a graph input (placeholder) is. Names and values equal torch's."""

    USER_INPUT = auto()
    PARAMETER = auto()
    BUFFER = auto()
    CONSTANT_TENSOR = auto()
    CUSTOM_OBJ = auto()
    TOKEN = auto()


class OutputKind(Enum):
    """What a graph output is. Names and values equal torch's (``PARAMETER_MUTATION`` is kept so
    that the values line up, although unbroken refuses parameter mutation)."""

    USER_OUTPUT = auto()
    LOSS_OUTPUT = auto()
    BUFFER_MUTATION = auto()
    PARAMETER_MUTATION = auto()
    GRADIENT_TO_PARAMETER = auto()
    GRADIENT_TO_USER_INPUT = auto()
    USER_INPUT_MUTATION = auto()
    TOKEN = auto()


@dataclass(frozen=True, slots=True)
class TensorArgument:
    """A tensor value in the graph. name: the fx node's name."""

    name: str


@dataclass(frozen=True, slots=True)
class SymIntArgument:
    """A symbolic integer in the graph (a dynamic int input or output). name: the fx node's name."""

    name: str


@dataclass(frozen=True, slots=True)
class ConstantArgument:
    """A Python constant that was specialized at export time.

    name:  the placeholder's name for an input ('' for an output constant).
    value: the constant (int, float, bool, str or None).
    """

    name: str
    value: int | float | bool | str | None


ArgumentSpec = TensorArgument | SymIntArgument | ConstantArgument

_ARGUMENT_TYPES = (TensorArgument, SymIntArgument, ConstantArgument)


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One graph input.

    kind:       what it is (parameter, buffer, lifted constant, user input, ...).
    arg:        the placeholder (its node name), or the specialized constant.
    target:     for state: the FQN of the parameter/buffer (``lin.weight``) or the constant's name;
                None for user inputs.
    persistent: for buffers only: whether the buffer is in the module's ``state_dict``
                (non-persistent buffers live in ``ExportedProgram.constants``); None otherwise.
    """

    kind: InputKind
    arg: ArgumentSpec
    target: str | None = None
    persistent: bool | None = None

    def __post_init__(self):
        if not isinstance(self.arg, _ARGUMENT_TYPES):
            raise TypeError(f"InputSpec.arg must be an argument spec, "
                            f"got {type(self.arg).__name__}")
        if self.kind == InputKind.BUFFER and self.persistent is None:
            raise TypeError(f"InputSpec for buffer {self.target!r} needs persistent=True/False")

    def __str__(self) -> str:
        target = "" if self.target is None else f" target='{self.target}'"
        persistent = "" if self.persistent is None else f" persistent={self.persistent}"
        return f"{self.arg.name}: {self.kind.name}{target}{persistent}"


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One graph output.

    kind:   user output, buffer mutation, user input mutation, ...
    arg:    the output node (its name), or a constant returned by the user.
    target: for BUFFER_MUTATION the buffer's FQN; for USER_INPUT_MUTATION the name of the user
            input's placeholder; None otherwise.
    """

    kind: OutputKind
    arg: ArgumentSpec
    target: str | None = None

    def __post_init__(self):
        if not isinstance(self.arg, _ARGUMENT_TYPES):
            raise TypeError(f"OutputSpec.arg must be an argument spec, "
                            f"got {type(self.arg).__name__}")

    def __str__(self) -> str:
        target = "" if self.target is None else f" target='{self.target}'"
        return f"{self.arg.name}: {self.kind.name}{target}"


def _user_value(arg: ArgumentSpec):
    """A user input/output as torch's views report it: a node name, or a constant's value."""
    return arg.value if isinstance(arg, ConstantArgument) else arg.name


@dataclass(frozen=True, slots=True)
class ExportGraphSignature:
    """The meaning of every input and output of an exported graph.

    input_specs:  one per placeholder, in placeholder order.
    output_specs: one per element of the output node's tuple, in order; mutations come first.

    The properties are views computed from the specs (same names as torch's).
    """

    input_specs: tuple[InputSpec, ...]
    output_specs: tuple[OutputSpec, ...]

    def __post_init__(self):
        object.__setattr__(self, "input_specs", tuple(self.input_specs))
        object.__setattr__(self, "output_specs", tuple(self.output_specs))

    # -- inputs ---------------------------------------------------------------------------------
    def _input_targets(self, kind: InputKind) -> tuple[str, ...]:
        return tuple(s.target for s in self.input_specs if s.kind == kind and s.target is not None)

    @property
    def parameters(self) -> tuple[str, ...]:
        """FQNs of the lifted parameters, in input order."""
        return self._input_targets(InputKind.PARAMETER)

    @property
    def buffers(self) -> tuple[str, ...]:
        """FQNs of the lifted buffers (persistent or not), in input order."""
        return self._input_targets(InputKind.BUFFER)

    @property
    def non_persistent_buffers(self) -> tuple[str, ...]:
        """FQNs of the buffers that are not part of the module's state_dict."""
        return tuple(s.target for s in self.input_specs
                     if s.kind == InputKind.BUFFER and s.persistent is False)

    @property
    def lifted_tensor_constants(self) -> tuple[str, ...]:
        """Names of tensor constants that were lifted to inputs."""
        return self._input_targets(InputKind.CONSTANT_TENSOR)

    @property
    def user_inputs(self) -> tuple:
        """Placeholder names of the flattened user inputs (a constant's value if specialized)."""
        return tuple(_user_value(s.arg) for s in self.input_specs if s.kind == InputKind.USER_INPUT)

    def _inputs_to(self, kind: InputKind) -> Mapping[str, str]:
        return MappingProxyType({s.arg.name: s.target for s in self.input_specs
                                 if s.kind == kind and isinstance(s.arg, TensorArgument)})

    @property
    def inputs_to_parameters(self) -> Mapping[str, str]:
        """Placeholder name -> parameter FQN."""
        return self._inputs_to(InputKind.PARAMETER)

    @property
    def inputs_to_buffers(self) -> Mapping[str, str]:
        """Placeholder name -> buffer FQN."""
        return self._inputs_to(InputKind.BUFFER)

    @property
    def inputs_to_lifted_tensor_constants(self) -> Mapping[str, str]:
        """Placeholder name -> lifted constant name."""
        return self._inputs_to(InputKind.CONSTANT_TENSOR)

    # -- outputs --------------------------------------------------------------------------------
    @property
    def user_outputs(self) -> tuple:
        """Node names of the flattened user outputs (a constant's value for constant outputs)."""
        kinds = (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)
        return tuple(_user_value(s.arg) for s in self.output_specs if s.kind in kinds)

    def _outputs_to(self, kind: OutputKind) -> Mapping[str, str]:
        return MappingProxyType({s.arg.name: s.target for s in self.output_specs
                                 if s.kind == kind and isinstance(s.arg, TensorArgument)})

    @property
    def buffers_to_mutate(self) -> Mapping[str, str]:
        """Output node name -> FQN of the buffer it is the new value of."""
        return self._outputs_to(OutputKind.BUFFER_MUTATION)

    @property
    def user_inputs_to_mutate(self) -> Mapping[str, str]:
        """Output node name -> placeholder name of the user input it is the new value of."""
        return self._outputs_to(OutputKind.USER_INPUT_MUTATION)

    @property
    def mutation_specs(self) -> tuple[OutputSpec, ...]:
        """The BUFFER_MUTATION / USER_INPUT_MUTATION output specs, in output order."""
        kinds = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)
        return tuple(s for s in self.output_specs if s.kind in kinds)

    @property
    def assertion_dep_token(self):
        """Always None: unbroken does not thread assertion tokens (kept for torch parity)."""
        return None

    def replace(self, *, input_specs=None, output_specs=None) -> ExportGraphSignature:
        """A copy with the given spec lists replaced."""
        return ExportGraphSignature(
            self.input_specs if input_specs is None else input_specs,
            self.output_specs if output_specs is None else output_specs,
        )

    def __str__(self) -> str:
        inputs = "\n".join(str(s) for s in self.input_specs)
        outputs = "\n".join(str(s) for s in self.output_specs)
        return f"\n# inputs\n{inputs}\n\n# outputs\n{outputs}\n"
