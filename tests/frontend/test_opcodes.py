"""The opcode handler table against the running interpreter's opcode map, and the version
table (``opcodes.versions``) against ``dis``."""
import dis

import pytest

from unbroken.frontend.opcodes import HANDLERS, unhandled_opcodes
from unbroken.frontend.opcodes.registry import opcode
from unbroken.frontend.opcodes.versions import (
    CURRENT,
    OPCODES,
    PY311,
    PY312,
    PY313,
    SUPPORTED,
    conventions,
    since,
    until,
)

pytestmark = [pytest.mark.matrix,
              pytest.mark.skipif(CURRENT not in SUPPORTED, reason="an unsupported Python")]

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).

# Instructions deliberately left without a handler: they are refused as UB100 when met.
INTENDED_UNHANDLED = {
    PY311: {"SETUP_ANNOTATIONS", "PRINT_EXPR", "LOAD_NAME", "STORE_NAME", "DELETE_NAME"},
    # module and interactive code as in 3.11; INTERPRETER_EXIT, RESERVED (3.12),
    # ENTER_EXECUTOR and EXIT_INIT_CHECK (3.13) are the interpreter's own: never in co_code.
    PY312: {"SETUP_ANNOTATIONS", "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "INTERPRETER_EXIT",
            "RESERVED"},
    PY313: {"SETUP_ANNOTATIONS", "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "INTERPRETER_EXIT",
            "RESERVED", "ENTER_EXECUTOR", "EXIT_INIT_CHECK"},
}


def _code_opcodes() -> set:
    """What the running interpreter's compiler can put in a code object."""
    return {name for name, code in dis.opmap.items()
            if code < 256 and not name.startswith("INSTRUMENTED_")}


def test_every_handler_names_a_real_opcode():
    assert set(HANDLERS) <= set(dis.opmap)


def test_version_table_is_the_running_pythons_opcode_map():
    assert OPCODES[CURRENT] == _code_opcodes()


def test_only_intended_opcodes_are_unhandled():
    assert set(unhandled_opcodes()) == INTENDED_UNHANDLED[CURRENT]


def test_registering_for_a_version_without_the_opcode_fails():
    with pytest.raises(AssertionError, match="LOAD_METHOD is not an opcode of Python 3.12"):
        opcode("LOAD_METHOD", versions=(PY311, PY312))(lambda tx, instruction: None)
    with pytest.raises(AssertionError, match="TO_BOOL is not an opcode of Python 3.11"):
        opcode("TO_BOOL", versions=since(PY311))(lambda tx, instruction: None)


def test_version_ranges():
    assert since(PY312) == (PY312, PY313)
    assert until(PY312) == (PY311, PY312)
    assert [conventions(v).null_after_callable for v in SUPPORTED] == [False, False, True]
    assert [conventions(v).for_loop_cleanup for v in SUPPORTED] == [0, 1, 2]


def test_unsupported_python_is_refused_before_tracing(monkeypatch):
    import torch

    import unbroken
    from unbroken.frontend.opcodes import versions

    monkeypatch.setattr(versions, "CURRENT", (3, 99))
    with pytest.raises(unbroken.ExportUsageError) as info:
        unbroken.export(torch.nn.ReLU(), (torch.randn(2),))
    assert info.value.code == "UB119"
    assert "unbroken interprets the bytecode of CPython 3.11, 3.12, 3.13" in str(info.value)
    assert versions.python_support_error() is not None


def test_only_the_version_table_reads_the_python_version():
    """Nothing else in the package branches on the Python version (issue: one table)."""
    from pathlib import Path

    import unbroken

    package = Path(unbroken.__file__).parent
    readers = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     if any(marker in path.read_text(encoding="utf-8")
                            for marker in ("sys.version_info", "sys.hexversion",
                                           "platform.python_version")))
    assert readers == ["frontend/opcodes/versions.py"]
