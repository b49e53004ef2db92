"""Saving and loading exported programs: ``unbroken.save`` / ``unbroken.load``.

A saved program (``.ubp``) is a zip archive of three members, always in this order:

- ``format.json`` — ``{"format": "unbroken.exported_program", "version": 2}``;
- ``program.json`` — the graph (nodes with ops by qualified name, tagged arguments, value
  metadata with symbolic sizes as text, source locations, module stacks, the points where
  eager's autograd raises in a call that records a gradient), the ``cond`` /
  ``while_loop`` subgraphs, the signature, the symbols of dynamic sizes with their ranges and
  example values, the pytree specs of inputs and outputs (``treespec_dumps``), the index of
  the tensors (``state_dict`` and ``constants``: name, tensor key, parameter, requires_grad)
  and the example inputs (a spec and leaves);
- ``tensors.safetensors`` — every tensor once (tied weights share a key), contiguous; its
  layout is restored from the placeholder's strides;
- then, optionally, ``extra_files/<name>`` — the user's extra files (UTF-8 text), as
  ``torch.export.save(..., extra_files=...)`` stores them (any version may hold them).

**Guarantees of** :func:`load`. Loading never runs code from the file: there is no pickle in
a format-2 file, symbolic sizes are read by :mod:`unbroken.symbolic.parse` (never ``sympify``
or ``eval``), every string that torch.fx puts into generated Python (node names, placeholder
targets, keyword-argument names, subgraph names, state paths, stack traces) is checked first,
and call targets resolve only in ``torch.ops`` namespaces, ``torch.cond``/``torch.while_loop``
and the size-arithmetic builtins. Loading never hangs and never allocates what a file merely
claims: see :class:`Limits` (member sizes declared and inflated, JSON depth and integer size,
node and symbol counts, expression size and cost), each refused before the work it bounds.
Loading never lies: the version is an int from :data:`KNOWN_VERSIONS` (``true`` is not 1),
each weight's dtype, shape and strides equal its placeholder's, the signature, pytree specs
and example inputs agree with the graph, and the dialect verifier runs last. Any failure is a
:class:`SerializationError` naming the member and what was wrong. A custom op must be
registered (its library imported) before loading.

**Byte-identical saves**: canonical JSON, fixed zip timestamps, permissions and member order;
the same program saved twice, in one process or two, gives the same bytes.

Format versions (every earlier one still loads):
    1 — first version (unbroken 0.1): tensors in ``tensors.pt`` (``torch.save``). Read by a
        static scan of the pickle that admits only the globals of plain tensors and no
        integer larger than the data, then ``torch.load(weights_only=True)``
        (:mod:`unbroken.ir.serialize.v1`).
    2 — tensors in safetensors; order-carrying maps written as lists; canonical JSON; the
        tensor index and example inputs in ``program.json``. Later: optional
        ``extra_files/<name>`` members (a reader from before refuses them as unexpected).
"""
from __future__ import annotations

from .format import FORMAT_VERSION, KNOWN_VERSIONS, Limits
from .reader import read_program
from .writer import write_program

__all__ = ["save", "load", "Limits", "FORMAT_VERSION", "KNOWN_VERSIONS"]


def save(program, f, extra_files: dict[str, str] | None = None) -> None:
    """Write ``program`` (the :class:`~unbroken.ir.parts.ProgramParts` of an
    ``unbroken.ExportedProgram``, see ``unbroken.save``) to ``f`` (a path or a binary file
    object) in the current format.

    Raises SerializationError when the program holds something the format cannot keep (a call
    to a Python function outside the allow-list, a sparse or quantized tensor, an input
    structure pytree cannot serialize).

    Example::

        unbroken.ir.serialize.save(ep.parts(), "model.ubp")  # what unbroken.save(ep, ...) does
    """
    write_program(program, f, extra_files)


def load(f, build, *, limits: Limits | None = None, extra_files: dict | None = None):
    """Read a program written by :func:`save` from ``f`` (a path or a binary file object).

    Args:
        f: a path or a seekable binary file object.
        build: makes the program of the :class:`~unbroken.ir.parts.ProgramParts` read
            (``unbroken.ExportedProgram.from_parts``, which runs the verifiers); an
            ``InternalError`` it raises is reported as the file's fault.
        limits: the bounds a file must respect (default :class:`Limits`); raise
            ``tensor_bytes`` for models whose weights exceed 16 GiB.
        extra_files: a dict that receives the file's extra files (name -> text).

    Raises:
        SerializationError: the file is damaged, crafted, from an unknown version, exceeds a
            limit, or names an op that is not registered. The message names the member.

    Example::

        ep = unbroken.load("model.ubp")
        out = ep.module()(x)
    """
    return read_program(f, limits or Limits(), build, extra_files)
