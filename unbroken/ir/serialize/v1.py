"""Tensors of format-1 files (``tensors.pt``, written by ``torch.save``).

Format 1 stored tensors as a pickle. They are read in two steps, so that no pickle a file
could hold runs anything but the rebuilding of plain tensors:

1. a static scan of the pickle's opcodes (``pickletools.genops`` parses, it never executes):
   the only globals allowed are the ones ``torch.save`` writes for plain tensors, parameters,
   storages and ordered dicts (:data:`ALLOWED_GLOBALS`); no integer may exceed the size of the
   member (a storage, size or offset larger than the data could only make the unpickler
   allocate what the file claims);
2. ``torch.load(weights_only=True)``: torch's restricted unpickler, which again admits only
   tensors and primitive containers (unbroken registers no extra safe globals).

The result must be the dict ``{"state_dict": {...}, "constants": {...}, "example_inputs": ...}``
of tensors that format 1 wrote. New files never contain a pickle (format 2 uses safetensors).
"""
from __future__ import annotations

import io
import pickle
import pickletools
import zipfile

import torch

from .archive import ZIP_ERRORS
from .format import Limits, fail

__all__ = ["read_v1_tensors", "ALLOWED_GLOBALS"]

MEMBER = "tensors.pt"
#: ``module name`` pairs a format-1 pickle may name.
ALLOWED_GLOBALS = frozenset({
    "torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_parameter",
    "collections OrderedDict",
    *(f"torch {name}" for name in ("FloatStorage", "DoubleStorage", "HalfStorage",
                                   "BFloat16Storage", "LongStorage", "IntStorage",
                                   "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage")),
})
_INT_OPCODES = {"BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG"}


def read_v1_tensors(data: bytes, limits: Limits) -> dict:
    """The tensors of a format-1 file (see the module docstring)."""
    pickled = _pickle_of(data, limits)
    _scan(pickled, bound=max(len(data), 1 << 20))
    try:
        tensors = torch.load(io.BytesIO(data), weights_only=True, mmap=False)
    except (pickle.UnpicklingError, RuntimeError, ValueError, TypeError, KeyError,
            EOFError) as error:
        raise fail(MEMBER, f"cannot be read safely ({type(error).__name__}: "
                           f"{str(error).splitlines()[0][:200] if str(error) else ''})") from None
    if not isinstance(tensors, dict) or not {"state_dict", "constants"} <= set(tensors) or \
            not all(isinstance(tensors[k], dict) for k in ("state_dict", "constants")):
        raise fail(MEMBER, "does not hold a program's tensors")
    return tensors


def _pickle_of(data: bytes, limits: Limits) -> bytes:
    """``data.pkl`` of the inner archive ``torch.save`` writes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            names = [n for n in inner.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(names) != 1:
                raise fail(MEMBER, "is not a torch.save archive (no single data.pkl)")
            info = inner.getinfo(names[0])
            if info.file_size > min(limits.json_bytes, len(data)) or \
                    info.compress_type != zipfile.ZIP_STORED:
                raise fail(MEMBER, "holds an oversized or compressed pickle")
            return inner.read(info)
    except ZIP_ERRORS as error:
        raise fail(MEMBER, f"is not a readable torch.save archive ({type(error).__name__})") \
            from None


def _scan(pickled: bytes, bound: int) -> None:
    """Refuse any global outside the allow-list and any integer above ``bound``."""
    strings: list = []
    try:
        for opcode, argument, _ in pickletools.genops(pickled):
            if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                strings = (strings + [argument])[-2:]
            elif opcode.name == "GLOBAL" and argument not in ALLOWED_GLOBALS:
                raise fail(MEMBER, f"the pickle names {str(argument)[:80]!r}, which is not "
                                   f"a tensor")
            elif opcode.name == "STACK_GLOBAL" and " ".join(map(str, strings)) \
                    not in ALLOWED_GLOBALS:
                raise fail(MEMBER, f"the pickle names {' '.join(map(str, strings))[:80]!r}, "
                                   f"which is not a tensor")
            elif opcode.name in ("INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4"):
                raise fail(MEMBER, f"the pickle builds objects ({opcode.name})")
            elif opcode.name in _INT_OPCODES and isinstance(argument, int) and \
                    abs(argument) > bound:
                raise fail(MEMBER, f"the pickle holds the integer {argument}, larger than "
                                   f"the data")
    except (ValueError, EOFError, UnicodeDecodeError) as error:  # not a well-formed pickle
        raise fail(MEMBER, f"the pickle is malformed ({error})") from None
