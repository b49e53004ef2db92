"""Where the trace is: the one object the shape environment and the recorder read the
user's location from, built before either of them.

The trace context (``output.TraceContext``) holds the recorder, and the recorder and the
environment need the user's stack at every recorded op, guard and error: this object breaks
that loop. It is made first, handed to the environment and the recorder (their providers are
its bound methods) and then to the trace context, which pushes onto it as translators and
module calls start and end.
"""
from __future__ import annotations

import os

import torch

__all__ = ["TraceSite"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_UNBROKEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_internal(filename: str) -> bool:
    """True for a file of torch or of unbroken (never the user's frame)."""
    return filename.startswith((_TORCH_DIR, _UNBROKEN_DIR))


class TraceSite:
    """The running translators, the modules being called and the eager ``requires_grad`` of
    the tensors the trace knows.

    translators:     the running translators, outermost first (each has ``frame()``);
    module_stack:    ``(fqn, type)`` of the modules being called, outermost first;
    module_suffixes: ``"@n"`` per ``module_stack`` entry for the n-th call of a module whose
                     call signature is preserved (``""`` mostly);
    eager_requires_grad: id(meta tensor) -> whether eager's tensor behind it requires grad.
    grad_made_here:  id(meta tensor) -> (it, the user's frames of the line that made a tensor of
                     forward() require grad) for a tensor that requires grad in eager only
                     through tensors forward() made require grad (``requires_grad=True`` of a
                     factory, ``requires_grad_()``): a program cannot make a tensor require grad
                     (its values require grad through its inputs and parameters only), so such
                     a tensor must not reach an output or the state (``TraceContext``).
    frames:          ``(file, line, function) -> UserFrame`` made so far (``frame()``).
    stacks:          the ``nn_module_stack()`` of each stack of modules met so far.
    annotations:     the ``torch.fx.traceback.annotate`` regions the trace is in, outermost
                     first: each the annotations in force there (its own over the outer
                     ones'), which every node recorded in it carries as ``meta["custom"]``.
    """

    __slots__ = ("translators", "module_stack", "module_suffixes", "eager_requires_grad",
                 "grad_made_here", "frames", "stacks", "annotations")

    def __init__(self):
        self.frames: dict = {}
        self.stacks: dict = {}  # (module_stack, module_suffixes) -> nn_module_stack()
        self.translators: list = []
        self.module_stack: list[tuple[str, type]] = []
        self.module_suffixes: list[str] = []
        self.eager_requires_grad: dict[int, bool] = {}
        self.grad_made_here: dict[int, tuple] = {}
        self.annotations: list[dict] = []

    def user_frames(self) -> tuple:
        """The user's stack: the frames of running translators outside torch and unbroken."""
        frames = [tx.frame() for tx in self.translators]
        user = tuple(f for f in frames if not is_internal(f.filename))
        return user or tuple(frames[-1:])

    def nn_module_stack(self) -> dict:
        """``{key: (fqn, class name)}`` of the modules being called. The n-th call (n >= 1) of
        a module whose call signature is preserved has keys ending ``@n`` (its submodules'
        too), as torch.export marks them, so each call is told apart. Asked for every node
        recorded: one dict per stack, shared (callers copy it before changing it)."""
        key = (tuple(self.module_stack), tuple(self.module_suffixes))
        known = self.stacks.get(key)
        if known is None:
            known = self.stacks[key] = self._nn_module_stack()
        return known

    def _nn_module_stack(self) -> dict:
        stack, suffix = {}, ""
        for (fqn, cls), own in zip(self.module_stack, self.module_suffixes):
            suffix = own or suffix
            if not fqn:
                continue  # the exported module itself is not part of the stack (as in torch)
            stack[stack_key(fqn, suffix)] = (fqn, f"{cls.__module__}.{cls.__qualname__}")
        return stack

    def custom_meta(self) -> dict | None:
        """The ``meta["custom"]`` of a node recorded now (None outside any annotation)."""
        return self.annotations[-1] if self.annotations else None

    def requires_grad(self, meta) -> bool:
        """Whether eager's tensor behind the meta tensor ``meta`` requires grad."""
        return self.eager_requires_grad.get(id(meta), False)


def stack_key(fqn: str, suffix: str = "") -> str:
    """The ``nn_module_stack`` key of a call of the module at ``fqn``."""
    return "L__self___" + fqn.replace(".", "_") + suffix
