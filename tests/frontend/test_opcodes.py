"""The opcode handler table against the running interpreter's opcode map."""
import dis
import sys

import pytest

from unbroken.frontend.opcodes import HANDLERS, unhandled_opcodes

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

# Instructions deliberately left without a handler: they are refused as UB100 when met.
INTENDED_UNHANDLED = {
    "SETUP_ANNOTATIONS", "PRINT_EXPR",                               # module/interactive code
    "LOAD_NAME", "STORE_NAME", "DELETE_NAME",                        # module-level code
}


def test_every_handler_names_a_real_opcode():
    assert set(HANDLERS) <= set(dis.opmap)


def test_only_intended_opcodes_are_unhandled():
    if sys.version_info[:2] != (3, 11):
        return  # the table is for 3.11; other versions are refused before tracing
    assert set(unhandled_opcodes()) == INTENDED_UNHANDLED
