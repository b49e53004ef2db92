"""The frontend: a CPython 3.11 bytecode interpreter over variable trackers.

``trace_call`` interprets a module call for ``export``; ``interpret`` runs a pure-Python
function (the oracle tests compare it with CPython); ``GraphBreakError`` is what both raise
for constructs that cannot be captured (see ``symbolic.diagnostics.catalogue.CATALOGUE``,
with the error types in the lowest layer: every layer raises errors with its ids).

Layers
------
The modules form layers; a module imports only from its own layer or lower ones, and no two
modules import each other, directly or not (``tests/test_layers.py`` checks both, on every
import statement, function-local ones included). ``LAYERS`` below is the one declaration.

====================  =====================================================================
layer                 modules (what they hold)
====================  =====================================================================
foundation            ``sources`` (where a
                      value came from), ``overlay`` (writes to outside objects),
                      ``budget`` (the tracing budget and its meter), ``opcodes.versions``
                      (what differs between the CPython versions interpreted),
                      ``decoding`` (code objects into instructions, read from the bytes),
                      ``trace_site`` (where the trace is: what the recorder and the shape
                      environment read the user's location from), ``paths`` (decisions on
                      tensor data in "find them all" mode: the path a trace follows),
                      ``equivalents`` (Python equivalents of the standard library's C
                      functions, interpreted in their place)
value model           ``variables.base`` (``VariableTracker`` and ``Interpreter``, the
                      interface through which trackers reach the interpreter),
                      ``variables.text`` (text computed when used), ``variables.native``
                      (native callables), ``variables.builtin_methods`` (the methods of
                      builtin types: what reads, what mutates), ``variables.constant``,
                      ``variables.binding`` (arguments bound to a signature's parameters)
object protocol       ``protocol``: attribute lookup and method binding, special-method
                      calls, subscript, iteration, calls: one implementation for all
trackers              ``variables.tensor`` < ``grad_mode`` < ``containers`` <
                      ``tensor_data`` (tensors built from symbolic Python data) <
                      ``ndarray`` (NumPy on traced tensors) < ``nn_fast_paths`` <
                      ``torch_calls`` < ``functions`` < ``objects``
                      < ``autograd_function`` < ``module_hooks`` < ``nn_module``
builtins              ``builtins``: builtin functions, classes and constructors
builder               ``variables.builder``: ``wrap``, the tracker for any Python value
opcodes               ``opcodes.registry`` and the handler families
interpreter           ``translator``: ``InstructionTranslator`` (implements ``Interpreter``)
entry points          ``output`` (``TraceContext``), ``tracer``, this package
====================  =====================================================================

The value model never imports the interpreter: a tracker that must wrap a value, inline a
user function or make a leaf call asks ``tx`` (``variables.base.Interpreter``), which the
translator implements and passes down with every call.
"""
from ..symbolic.diagnostics.catalogue import CATALOGUE, GraphBreakError
from .tracer import interpret, trace_call

__all__ = ["CATALOGUE", "GraphBreakError", "interpret", "trace_call", "LAYERS"]

# (layer, modules relative to this package), lowest first; "" is this package itself.
LAYERS = (
    ("foundation", ("sources", "overlay", "budget", "opcodes.versions", "decoding",
                    "trace_site", "paths", "equivalents")),
    ("value model", ("variables", "variables.base", "variables.text", "variables.native",
                     "variables.builtin_methods", "variables.constant",
                     "variables.numpy_values", "variables.binding")),
    ("object protocol", ("protocol",)),
    ("trackers", ("variables.tensor", "variables.grad_mode", "variables.containers",
                  "variables.tensor_data", "variables.ndarray", "variables.nn_fast_paths",
                  "variables.torch_calls",
                  "variables.functions",
                  "variables.objects",
                  "variables.autograd_function", "variables.module_hooks",
                  "variables.nn_module")),
    ("builtins", ("builtins",)),
    ("builder", ("variables.builder",)),
    ("opcodes", ("opcodes.registry", "opcodes.arithmetic", "opcodes.calls",
                 "opcodes.containers", "opcodes.control", "opcodes.loads",
                 "opcodes.matching", "opcodes.stack", "opcodes")),
    ("interpreter", ("translator",)),
    ("entry points", ("output", "tracer", "")),
)
