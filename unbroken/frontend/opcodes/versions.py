"""What differs between the CPython versions whose bytecode unbroken interprets.

The handler modules hold one semantics for every version; this module is the table of what
differs, and the only place in the frontend that reads ``sys.version_info``:

- ``OPCODES``: the instruction names each version's compiler can put in a code object
  (``dis.opmap`` without pseudo-instructions, which never reach a code object, and without the
  ``INSTRUMENTED_`` forms, which ``co_code`` never shows). The registry checks every handler
  against it for the versions the handler claims; a test checks it against ``dis.opmap``.
- ``Conventions``: the stack layouts that moved between versions (where the NULL of a call
  goes, what ends a ``for`` loop, how a closure cell is loaded, how a comparison feeds a
  branch).

An interpreter not in ``SUPPORTED`` is refused before any tracing (``python_support_error``):
its bytecode is not known to this table, so nothing it would run can be trusted.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["ALL", "CURRENT", "OPCODES", "PY311", "PY312", "PY313", "SUPPORTED", "Conventions",
           "conventions", "python_support_error", "since", "until"]

PY311, PY312, PY313 = (3, 11), (3, 12), (3, 13)
SUPPORTED = (PY311, PY312, PY313)
ALL = SUPPORTED
CURRENT = sys.version_info[:2]


def since(version: tuple) -> tuple:
    """The supported versions from ``version`` on (``@opcode(..., versions=since(PY312))``)."""
    return tuple(v for v in SUPPORTED if v >= version)


def until(version: tuple) -> tuple:
    """The supported versions up to ``version`` included."""
    return tuple(v for v in SUPPORTED if v <= version)


_OPCODES_311 = frozenset("""
ASYNC_GEN_WRAP BEFORE_ASYNC_WITH BEFORE_WITH BINARY_OP BINARY_SUBSCR BUILD_CONST_KEY_MAP
BUILD_LIST BUILD_MAP BUILD_SET BUILD_SLICE BUILD_STRING BUILD_TUPLE CACHE CALL
CALL_FUNCTION_EX CHECK_EG_MATCH CHECK_EXC_MATCH COMPARE_OP CONTAINS_OP COPY COPY_FREE_VARS
DELETE_ATTR DELETE_DEREF DELETE_FAST DELETE_GLOBAL DELETE_NAME DELETE_SUBSCR DICT_MERGE
DICT_UPDATE END_ASYNC_FOR EXTENDED_ARG FORMAT_VALUE FOR_ITER GET_AITER GET_ANEXT GET_AWAITABLE
GET_ITER GET_LEN GET_YIELD_FROM_ITER IMPORT_FROM IMPORT_NAME IMPORT_STAR IS_OP JUMP_BACKWARD
JUMP_BACKWARD_NO_INTERRUPT JUMP_FORWARD JUMP_IF_FALSE_OR_POP JUMP_IF_TRUE_OR_POP KW_NAMES
LIST_APPEND LIST_EXTEND LIST_TO_TUPLE LOAD_ASSERTION_ERROR LOAD_ATTR LOAD_BUILD_CLASS
LOAD_CLASSDEREF LOAD_CLOSURE LOAD_CONST LOAD_DEREF LOAD_FAST LOAD_GLOBAL LOAD_METHOD LOAD_NAME
MAKE_CELL MAKE_FUNCTION MAP_ADD MATCH_CLASS MATCH_KEYS MATCH_MAPPING MATCH_SEQUENCE NOP
POP_EXCEPT POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE POP_JUMP_BACKWARD_IF_NOT_NONE
POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_NONE
POP_JUMP_FORWARD_IF_NOT_NONE POP_JUMP_FORWARD_IF_TRUE POP_TOP PRECALL PREP_RERAISE_STAR
PRINT_EXPR PUSH_EXC_INFO PUSH_NULL RAISE_VARARGS RERAISE RESUME RETURN_GENERATOR RETURN_VALUE
SEND SETUP_ANNOTATIONS SET_ADD SET_UPDATE STORE_ATTR STORE_DEREF STORE_FAST STORE_GLOBAL
STORE_NAME STORE_SUBSCR SWAP UNARY_INVERT UNARY_NEGATIVE UNARY_NOT UNARY_POSITIVE UNPACK_EX
UNPACK_SEQUENCE WITH_EXCEPT_START YIELD_VALUE
""".split())

# 3.12: PEP 709 inlines comprehensions (LOAD_FAST_AND_CLEAR); LOAD_METHOD folds into LOAD_ATTR's
# low bit; super() gets LOAD_SUPER_ATTR; branches lose their direction; small operations move
# into CALL_INTRINSIC_1/2; a for loop ends with END_FOR.
_ADDED_312 = frozenset("""
BINARY_SLICE CALL_INTRINSIC_1 CALL_INTRINSIC_2 CLEANUP_THROW END_FOR END_SEND INTERPRETER_EXIT
LOAD_FAST_AND_CLEAR LOAD_FAST_CHECK LOAD_FROM_DICT_OR_DEREF LOAD_FROM_DICT_OR_GLOBALS
LOAD_LOCALS LOAD_SUPER_ATTR POP_JUMP_IF_FALSE POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE
POP_JUMP_IF_TRUE RESERVED RETURN_CONST STORE_SLICE
""".split())
_REMOVED_312 = frozenset("""
ASYNC_GEN_WRAP IMPORT_STAR JUMP_IF_FALSE_OR_POP JUMP_IF_TRUE_OR_POP LIST_TO_TUPLE
LOAD_CLASSDEREF LOAD_METHOD POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE
POP_JUMP_BACKWARD_IF_NOT_NONE POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_FORWARD_IF_FALSE
POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE POP_JUMP_FORWARD_IF_TRUE PRECALL
PREP_RERAISE_STAR PRINT_EXPR UNARY_POSITIVE
""".split())
# 3.13: keyword calls carry their names on the stack (CALL_KW), truth tests are explicit
# (TO_BOOL), f-strings are split (CONVERT_VALUE, FORMAT_*), a function's defaults and closure
# are set one by one (SET_FUNCTION_ATTRIBUTE), pairs of local loads/stores are fused, and
# LOAD_CLOSURE becomes a LOAD_FAST of the cell.
_ADDED_313 = frozenset("""
CALL_KW CONVERT_VALUE ENTER_EXECUTOR EXIT_INIT_CHECK FORMAT_SIMPLE FORMAT_WITH_SPEC
LOAD_FAST_LOAD_FAST SET_FUNCTION_ATTRIBUTE STORE_FAST_LOAD_FAST STORE_FAST_STORE_FAST TO_BOOL
""".split())
_REMOVED_313 = frozenset({"FORMAT_VALUE", "KW_NAMES", "LOAD_CLOSURE"})

_OPCODES_312 = (_OPCODES_311 - _REMOVED_312) | _ADDED_312
OPCODES = {
    PY311: _OPCODES_311,
    PY312: _OPCODES_312,
    PY313: (_OPCODES_312 - _REMOVED_313) | _ADDED_313,
}


@dataclass(frozen=True, slots=True)
class Conventions:
    """The stack conventions of one version (the handlers read these, never the version).

    null_after_callable: a call's NULL is pushed after the callable (3.13: ``LOAD_GLOBAL``,
        ``LOAD_ATTR`` with the method bit, ``PUSH_NULL`` after the callee), not before it.
    for_loop_cleanup: instructions at a ``FOR_ITER`` target that an exhausted iterator skips
        (3.11: none; 3.12: ``END_FOR``; 3.13: ``END_FOR`` and ``POP_TOP``).
    end_for_pops: values ``END_FOR`` pops when it is executed (3.12: the iterator and the
        value; 3.13: the value, a ``POP_TOP`` follows).
    closure_by_load_fast: a closure's cells are loaded with ``LOAD_FAST`` of the cell
        variable's name (3.13), not ``LOAD_CLOSURE``.

    How arguments are packed (what ``frontend.decoding`` reads):
    attr_method_bit: ``LOAD_ATTR``'s low bit says "load a method" (3.12+; LOAD_METHOD before).
    fast_locals_cover_cells: a local index runs on into the cell and free variables (3.13:
        ``LOAD_FAST`` of a cell), not over the plain locals alone.
    compare_shift, compare_bool_bit: ``COMPARE_OP``'s comparison is its argument shifted right
        (3.12: by 4, the low bits a cache mask; 3.13: by 5), and 3.13's bit 16 ("convert the
        result to bool") is kept as ``bytecode.Compare``'s ``*_CAST`` values (+16).
    """

    version: tuple
    null_after_callable: bool
    for_loop_cleanup: int
    end_for_pops: int
    closure_by_load_fast: bool
    attr_method_bit: bool
    fast_locals_cover_cells: bool
    compare_shift: int
    compare_bool_bit: int

    def comparison(self, arg: int) -> int:
        """The ``bytecode.Compare`` value of a ``COMPARE_OP`` argument."""
        return (arg >> self.compare_shift) + (16 if arg & self.compare_bool_bit else 0)


_CONVENTIONS = {
    PY311: Conventions(PY311, null_after_callable=False, for_loop_cleanup=0, end_for_pops=0,
                       closure_by_load_fast=False, attr_method_bit=False,
                       fast_locals_cover_cells=False, compare_shift=0, compare_bool_bit=0),
    PY312: Conventions(PY312, null_after_callable=False, for_loop_cleanup=1, end_for_pops=2,
                       closure_by_load_fast=False, attr_method_bit=True,
                       fast_locals_cover_cells=False, compare_shift=4, compare_bool_bit=0),
    PY313: Conventions(PY313, null_after_callable=True, for_loop_cleanup=2, end_for_pops=1,
                       closure_by_load_fast=True, attr_method_bit=True,
                       fast_locals_cover_cells=True, compare_shift=5, compare_bool_bit=16),
}


def conventions(version: tuple = CURRENT) -> Conventions:
    """The conventions of ``version`` (the running one by default); an unsupported version
    gets the newest known table, and is refused before tracing anyway."""
    return _CONVENTIONS.get(version, _CONVENTIONS[SUPPORTED[-1]])


def python_support_error() -> str | None:
    """Why the running interpreter cannot be used (None when it can): the message of the one
    usage error that ``export``, ``unbroken check`` and the pytest plugin raise."""
    if CURRENT in SUPPORTED:
        return None
    running = ".".join(map(str, sys.version_info[:3]))
    known = ", ".join(".".join(map(str, v)) for v in SUPPORTED)
    return (f"this is Python {running}; unbroken interprets the bytecode of CPython {known}. "
            f"Run it with one of those (e.g. python{'.'.join(map(str, SUPPORTED[-1]))}).")
