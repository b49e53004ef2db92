"""The process-wide PyTorch state an export must leave as it found it.

Tracing runs user code and PyTorch's own Python code inside this process, with the Python
dispatcher on, a recording ``TorchDispatchMode``, Python kernels installed on composite ops,
and (in the user's code) grad-mode and autocast context managers. Whatever happens inside
``export``/``find_graph_breaks`` (a program, a refusal, a bug in unbroken, a
``KeyboardInterrupt``), the caller's process must come back unchanged: :func:`isolated`
snapshots the state before and puts it back after.

:class:`ProcessState` is the snapshot: what a later eager call in the process depends on.
Tests compare two snapshots with ``==``.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..ir.composites import PRESERVED
from ..symbolic.torch_compat import (
    DispatchKey,
    dispatch_modes,
    function_modes,
    functorch_depth,
    global_settings,
    inference_mode_guard,
    local_dispatch_keys,
    op_python_kernels,
    restore_functorch_depth,
    restore_mode_stacks,
    restore_settings,
    set_grad_enabled,
    set_local_dispatch_key,
)

__all__ = ["ProcessState", "isolated"]

_KEYS = tuple(DispatchKey.__members__.values())


def _keys_in(key_set) -> frozenset:
    return frozenset(key for key in _KEYS if key_set.has(key))


def _python_kernels() -> tuple:
    """The Python kernels installed on the composite ops unbroken patches while tracing."""
    return tuple((str(op), tuple(sorted((str(k), id(v)) for k, v in op_python_kernels(op).items())))
                 for op in PRESERVED)


@dataclass(frozen=True, slots=True)
class ProcessState:
    """What a later eager op in this process depends on.

    grad_enabled / inference_mode: autograd's thread-local modes;
    default_dtype: ``torch.get_default_dtype()``;
    dispatch_modes / function_modes: the ``TorchDispatchMode`` / ``TorchFunctionMode`` stacks
        (the mode objects, outermost first);
    included / excluded: the thread-local dispatch keys forced on / off (the Python dispatcher,
        inference mode and autocast live there);
    python_kernels: the Python kernels registered on the ops unbroken patches (None in the
        snapshot :func:`isolated` restores from: ``restore`` does not read them, and
        ``ir.composites`` puts them back itself; tests compare full snapshots);
    settings: torch's process-wide settings (``torch_compat.GLOBAL_SETTINGS``: anomaly
        detection, deterministic algorithms, matmul precision, threads, CPU autocast, backend
        flags);
    functorch_depth: how many functorch transforms (``torch.vmap``...) are open;
    rng_state: the default CPU generator's state (running the model eagerly beside a trace,
        as ``find_graph_breaks`` and the check of an error against eager do, draws from it);
        restored, but not compared (``==`` is for tests, whose own draws change it).
    """

    grad_enabled: bool
    inference_mode: bool
    default_dtype: torch.dtype
    dispatch_modes: tuple
    function_modes: tuple
    included: frozenset
    excluded: frozenset
    python_kernels: tuple | None
    settings: tuple
    functorch_depth: int
    rng_state: bytes = field(compare=False)  # a test's own draws change it

    @classmethod
    def capture(cls, python_kernels: bool = True) -> ProcessState:
        return cls(
            grad_enabled=torch.is_grad_enabled(),
            inference_mode=torch.is_inference_mode_enabled(),
            default_dtype=torch.get_default_dtype(),
            dispatch_modes=dispatch_modes(),
            function_modes=function_modes(),
            included=_keys_in(local_dispatch_keys()[0]),
            excluded=_keys_in(local_dispatch_keys()[1]),
            python_kernels=_python_kernels() if python_kernels else None,
            settings=global_settings(),
            functorch_depth=functorch_depth(),
            rng_state=bytes(torch.get_rng_state().numpy()))

    def restore(self) -> None:
        """Put the process back in this state (modes popped or pushed back, keys reset)."""
        restore_mode_stacks(self.dispatch_modes, self.function_modes)
        restore_functorch_depth(self.functorch_depth)  # before the keys: it resets some
        if torch.is_inference_mode_enabled() != self.inference_mode:
            # the mode lives in an RAII guard someone did not close: hold a counter-guard for
            # the rest of the process (its dispatch keys are reset just below)
            _COUNTER_GUARDS.append(inference_mode_guard(self.inference_mode))
        now = ProcessState.capture(python_kernels=False)
        for key in now.included ^ self.included:
            set_local_dispatch_key(key, included=key in self.included)
        for key in now.excluded ^ self.excluded:
            set_local_dispatch_key(key, excluded=key in self.excluded)
        if now.default_dtype != self.default_dtype:
            torch.set_default_dtype(self.default_dtype)
        restore_settings(self.settings)
        if now.rng_state != self.rng_state:
            torch.set_rng_state(torch.frombuffer(bytearray(self.rng_state), dtype=torch.uint8))
        set_grad_enabled(self.grad_enabled)


_COUNTER_GUARDS: list = []


@contextlib.contextmanager
def isolated():
    """Run the body, then restore the process state found on entry, however the body ends.

    Example::

        with isolated():
            trace(model)   # may raise anything, KeyboardInterrupt included
    """
    before = ProcessState.capture(python_kernels=False)
    try:
        yield before
    finally:
        before.restore()
