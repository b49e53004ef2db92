"""The graph-break catalogue: every construct the frontend refuses, with a stable id.

A *graph break* is a construct that cannot be captured soundly into one graph. Strict export
refuses it with :class:`GraphBreakError`, which carries the catalogue entry (id, explanation,
hint), the specific reason, and the user's stack.

The catalogue is code; ``docs/graph-breaks.md`` is generated from it
(``python -m unbroken.symbolic.diagnostics.catalogue --markdown``, which runs :func:`main`)
and a test keeps the two in sync. It lives with the error types, in the lowest layer, because every
layer raises errors with its ids (the recorder's UB105, UB114, UB117, the passes' UB121...).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import RefusalError

__all__ = ["BreakKind", "CATALOGUE", "GraphBreakError", "TracedException", "graph_break",
           "main", "render_markdown"]


@dataclass(frozen=True, slots=True)
class BreakKind:
    """One kind of graph break.

    id:      stable diagnostic id (``UB1xx``); never reused for another meaning.
    title:   short name, used as the first words of the message.
    explain: why unbroken cannot capture this construct.
    hint:    how to rewrite the code so that it exports.
    example: a minimal snippet that triggers it.
    fix:     the same snippet, rewritten so that it exports.
    """

    id: str
    title: str
    explain: str
    hint: str
    example: str
    fix: str


_KINDS = [
    BreakKind(
        "UB100", "Unsupported bytecode instruction",
        "The interpreter met a CPython instruction it does not implement yet (every "
        "instruction a function body compiles to under CPython 3.11 is implemented; module "
        "and class bodies, which forward() does not run, are not).",
        "Rewrite the statement with simpler Python (plain loops, assignments and calls), "
        "or move it out of forward().",
        "# a statement compiled to an instruction the interpreter lacks",
        "# the same computation written with plain assignments, loops and calls",
    ),
    BreakKind(
        "UB101", "Data-dependent control flow",
        "A branch depends on the value stored in a tensor, which is unknown at export time: "
        "the graph would silently keep only the branch the example input took.",
        "Express both branches with torch.cond(pred, true_fn, false_fn, (operands,)), or compute "
        "both and select with torch.where(pred, a, b).",
        "if x.sum() > 0:\n    return x.sin()\nreturn x.cos()",
        "return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))",
    ),
    BreakKind(
        "UB102", "Access to Tensor.data",
        "`.data` gives an alias that bypasses tracking: writes through it cannot be captured.",
        "Use the tensor itself, `x.detach()` for a non-differentiable view, or an out-of-place "
        "op (e.g. `x = x.clone(); x[0, 0] = 3`).",
        "x.data[0, 0] = 3",
        "x = x.clone()\nx[0, 0] = 3",
    ),
    BreakKind(
        "UB103", "Unsupported builtin function",
        "This Python builtin has no meaning in a captured graph (object identity, I/O, "
        "introspection of the running interpreter).",
        "Remove the call from forward(), or compute the value outside the model and pass it in.",
        "return x + id(x)",
        "return x + 1",
    ),
    BreakKind(
        "UB104", "Uncaught exception in traced code",
        "The traced program raised an exception that none of its own `except` clauses caught. "
        "unbroken then runs the model eagerly on copies of the same inputs: the details say "
        "whether eager fails too (when it does not, the error is reported as a bug in unbroken "
        "instead).",
        "Fix the failing statement, or catch the exception in forward(). For a condition on "
        "sizes, state it as torch._check(cond, lambda: 'message'): unbroken proves it from "
        "dynamic_shapes (or reports the guard).",
        "if x.shape[0] > 4:\n    raise ValueError('too big')",
        "torch._check(x.shape[0] <= 4, lambda: 'too big')",
    ),
    BreakKind(
        "UB105", "Decision on a data-dependent value",
        "A value read from a tensor (`.item()`, `int(t)`, `float(t)`, `bool(t)` of a "
        "one-element tensor, a `nonzero()` count) is a symbol whose value is "
        "known only at run time: it can flow into sizes and computations, but a Python decision "
        "on it (`if`, `int()`, `range()`, an index bound no fact covers) or reading a tensor's "
        "values into Python (`.tolist()` of more than 64 elements or of a dynamic shape, "
        "`float()` or `.tolist()` of a NumPy array made with `.numpy()`) cannot be made at "
        "export time.",
        "State what holds with torch._check(...) (checked at run time), branch with torch.cond, "
        "or keep the value as a tensor.",
        "n = t.item()\nif n > 0:\n    x = x[:n]",
        "n = t.item()\ntorch._check(n > 0)\ntorch._check(n <= x.shape[0])\nx = x[:n]",
    ),
    BreakKind(
        "UB106", "Coroutine or async generator",
        "Generators run lazily through the interpreter (`next()`, `send()`, `throw()`, "
        "`close()` and `yield from` too), but `async` functions and async generators are not "
        "supported, nor a `throw()` into a `yield from` over an object with its own `throw`.",
        "Keep async code out of forward(): call the synchronous function it awaits, or write "
        "the loop as a plain generator.",
        "async def halves(x):\n    return x.chunk(2)",
        "def halves(x):\n    return x.chunk(2)",
    ),
    BreakKind(
        "UB107", "Mutation of Python state outside forward()",
        "Writing a global variable, or an attribute of an object that exists outside forward() "
        "and is not the model's (a config, a registry) without restoring it, is a side effect "
        "that an exported program cannot replay. Attributes of the model's own modules, and "
        "of the plain objects they hold (a cache object), may be written: forward() reads them "
        "back, the model itself is left unchanged (as torch.export); replacing a parameter or "
        "a submodule, or writing the model's state inside a torch.cond branch, is refused.",
        "Return the value instead, or register a buffer and update it in place "
        "(`self.count.add_(1)`).",
        "CALLS[0] = CALLS[0] + 1   # CALLS: a global list",
        "self.calls.add_(1)   # with self.register_buffer('calls', torch.zeros(()))",
    ),
    BreakKind(
        "UB108", "Call to an unsupported function",
        "The function is neither Python code that can be traced nor a PyTorch operator (for "
        "example a C extension, a NumPy function torch has no NumPy-on-torch version of, or "
        "one given a tensor where it takes a NumPy array), so its effect cannot be captured.",
        "Use the PyTorch equivalent, or register the function as a custom operator with "
        "torch.library.custom_op and a fake (meta) implementation.",
        "return x + np.sum(x.numpy())",
        "return x + x.sum()",
    ),
    BreakKind(
        "UB109", "Unsupported module hook",
        "Hooks registered on this module cannot be captured (backward hooks, global hooks, or "
        "hooks on PyTorch's built-in modules). Forward hooks and pre-hooks that forward() "
        "itself registers are kept by the trace (later calls run them, as in eager; the model "
        "is not changed), except a hook with always_call=True, a hook on a module that only "
        "runs inside one of PyTorch's own modules, and reading a module's hook dicts after "
        "forward() changed its hooks.",
        "Remove the hook before exporting, or call its logic explicitly from forward().",
        "model.lin.register_forward_hook(log_hook)",
        "model.lin._forward_hooks.clear()",
    ),
    BreakKind(
        "UB110", "Unsupported context manager",
        "Understood inside forward(): torch.no_grad, torch.enable_grad, torch.set_grad_enabled, "
        "torch.inference_mode, torch.autocast (over CPU tensors), threading locks, context "
        "managers written in Python (the program's own classes and `@contextmanager` functions, "
        "and torch's, such as torch.nn.attention.sdpa_kernel), torch's own torch-function modes "
        "and the profiler's record_function ranges and torch.autograd.detect_anomaly (dropped, "
        "as they only report). Other "
        "native context managers are not.",
        "Move the `with` statement outside the model.",
        "with open('log.txt') as f: ...",
        "# open files outside forward()",
    ),
    BreakKind(
        "UB111", "Import inside forward()",
        "Importing a module for the first time runs its code, with side effects (a module "
        "that is already imported is only looked up, which is fine).",
        "Move the import to the top of the file.",
        "def forward(self, x):\n    import math\n    ...",
        "import math  # at module level",
    ),
    BreakKind(
        "UB112", "Class definition inside traced code",
        "Defining classes while tracing creates new types on every call.",
        "Define the class at module level.",
        "class Helper: ...   # inside forward()",
        "# define Helper at module level",
    ),
    BreakKind(
        "UB113", "Python callable passed to a PyTorch function",
        "A PyTorch function would call back into Python code that unbroken cannot trace from "
        "there.",
        "Call the Python function yourself, or use a control-flow operator (torch.cond, torch.map) "
        "whose branches are traced.",
        "torch.autograd.Function.apply(...)",
        "# express the computation with PyTorch operators",
    ),
    BreakKind(
        "UB114", "Operator with a data-dependent output shape",
        "The output size of this operator depends on tensor values in a way unbroken does not "
        "model (a boolean mask indexing together with other index tensors). The ones it models "
        "(`nonzero`, `masked_select`, `x[mask]`, `unique`, `unique_consecutive`, "
        "`repeat_interleave` by a tensor, `bincount`) export: their sizes become symbols known "
        "at run time.",
        "Index with the mask alone (then with the other index), or use a fixed-size formulation "
        "such as torch.where(mask, x, 0) instead of selecting.",
        "return x[torch.tensor([0, 1]), x[0] > 0]",
        "return x[torch.tensor([0, 1])][:, x[0] > 0]",
    ),
    BreakKind(
        "UB116", "Attribute assignment on a tensor",
        "Setting Python attributes on tensors (or `requires_grad`, `grad`) cannot be captured.",
        "Keep the value in a local variable or a module attribute set in __init__.",
        "x.tag = 'input'",
        "tag = 'input'",
    ),
    BreakKind(
        "UB117", "Unsupported value in traced code",
        "A value of this type cannot be tracked during export (for example an iterator over a "
        "tensor of unknown length, or an object that cannot be inspected).",
        "Convert it to a list, a tuple or a tensor before using it in forward().",
        "for row in some_c_extension_object: ...",
        "for row in list_of_rows: ...",
    ),
    BreakKind(
        "UB118", "Recursion too deep",
        "Inlined user calls went deeper than unbroken's limit, which usually means unbounded "
        "recursion driven by a tensor value.",
        "Rewrite the recursion as a loop with a bound known at export time.",
        "def f(n): return f(n - 1) if n else 0",
        "for _ in range(n): ...",
    ),
    BreakKind(
        "UB119", "Unsupported Python version",
        "The bytecode interpreter supports CPython 3.11, 3.12 and 3.13; bytecode changes "
        "between versions, so any other version is refused before tracing (a usage error: "
        "`unbroken check` exits 2).",
        "Run the export under CPython 3.11, 3.12 or 3.13.",
        "python3.14 -m unbroken check model.py",
        "python3.13 -m unbroken check model.py",
    ),
    BreakKind(
        "UB120", "PyTorch raised an error while tracing",
        "A PyTorch call failed on the example inputs (for instance a shape mismatch), eager's "
        "autograd refuses it (an in-place write into an output of `split`, `chunk` or `unbind` "
        "while a gradient is recorded), or eager's kernel refuses an in-place write over "
        "memory another argument partly overlaps (`y.add_(y[0])`); eager execution would fail "
        "the same way.",
        "Fix the call so that the model runs eagerly on the example inputs first.",
        "return x @ torch.ones(3, 3)   # x is [2, 4]",
        "return x @ torch.ones(4, 3)",
    ),
    BreakKind(
        "UB121", "Mutation not supported",
        "This in-place update cannot be made functional: it writes a parameter or a lifted "
        "constant, changes a tensor's shape or strides in place (`resize_`, `t_`, "
        "`unsqueeze_`), writes through a view that has no inverse (`as_strided`, `expand`, "
        "`unfold`), or uses `out=` where eager's kernel does more than write values (it "
        "resizes a tensor that is not a fresh empty one, computes in the target's dtype, or "
        "writes inside PyTorch where no tracer sees it).",
        "Keep changing state in buffers (`self.register_buffer`), rebind instead of resizing "
        "(`x = x.unsqueeze(0)`), or write into a clone.",
        "self.weight[0] = 0.0",
        "self.register_buffer('scale', torch.ones(3))\n...\nself.scale[0] = 0.0",
    ),
    BreakKind(
        "UB122", "Interpreter budget exhausted",
        "Tracing ran more bytecode instructions, or longer, than the interpreter's budget: "
        "usually a loop whose exit depends on a tensor value or never comes (`while True:`).",
        "Bound the loop by a number known at export time, or use torch.while_loop; a model "
        "that is just very large can raise the budget: "
        "`with unbroken.budget(instructions=..., seconds=...): unbroken.export(...)`.",
        "while True:\n    x = x * 2",
        "for _ in range(10):\n    x = x * 2",
    ),
    BreakKind(
        "UB123", "Parameters outside the exported module",
        "forward() uses an nn.Module (or a tensor that requires grad) that is not part of the "
        "exported model: reached through a global, a closure or a plain object rather than "
        "as a registered submodule. Its parameters would be baked into the program as "
        "constants: the output would not require grad, no gradient would reach them, and "
        "the program's state_dict would not hold them (torch.export refuses it too).",
        "Register the module as a submodule in __init__ (`self.proj = proj`) and call it "
        "through `self`; a tensor that requires grad becomes an nn.Parameter of the model.",
        "PROJ = nn.Linear(4, 4)\n...\n    def forward(self, x):\n        return PROJ(x)",
        "def __init__(self):\n    super().__init__()\n    self.proj = PROJ\n"
        "...\n    def forward(self, x):\n        return self.proj(x)",
    ),
    BreakKind(
        "UB124", "Output layout eager's kernel decides",
        "The strides of this operator's output are chosen by eager's CPU kernel by rules no "
        "meta kernel reproduces (an FFT puts the transformed dims innermost, max_unpool keeps "
        "a channels_last input's layout); unbroken learns them by running the kernel once on "
        "stand-ins with the example's sizes and strides. Here it cannot: eager's kernel "
        "refuses the stand-ins, or its output is not a dense layout of its sizes, which no "
        "symbolic strides describe. A program that reads the layout (`stride()`, "
        "`is_contiguous()`, `view()`) could take another branch than eager.",
        "Pass the operator a contiguous input (`x.contiguous()`); for an operator of your own "
        "(torch.library), return a dense tensor from its kernel (`.contiguous()` inside it).",
        "y = torch.ops.mylib.every_other_column(x)  # kernel returns out[:, ::2]",
        "y = torch.ops.mylib.every_other_column(x)  # kernel returns out[:, ::2].contiguous()",
    ),
]

CATALOGUE: dict[str, BreakKind] = {kind.id: kind for kind in _KINDS}


class GraphBreakError(RefusalError):
    """Export refused: the model contains a construct that breaks the graph.

    ``kind`` is the catalogue entry (see ``docs/graph-breaks.md``); ``reason`` the specific
    text for this occurrence; ``frames`` the user's stack, innermost last.
    """

    default_code = "UB100"
    _torch_equivalents = ("Unsupported",)  # torch.export (strict): any graph break

    def __init__(self, kind_id: str, reason: str, *, frames=(), details: str = "",
                 hint: str = ""):
        self.kind = CATALOGUE[kind_id]
        self.reason = reason
        super().__init__(f"{self.kind.title}: {reason}", code=kind_id, frames=frames,
                         details=details or self.kind.explain, hint=hint or self.kind.hint)

    def torch_equivalents(self) -> tuple:
        """``Unsupported`` for every break; a decision on data (UB101, UB105) is also what
        non-strict export raises (``GuardOnDataDependentSymNode``), and UB105 what strict
        export raises for a guard on an unbacked size (``UserError``, ``ANTI_PATTERN``)."""
        return self._torch_equivalents + _DATA_DEPENDENT.get(self.code, ())


class TracedException(GraphBreakError):
    """An exception raised by the traced program itself (``raise``, a failed ``d[k]``, an
    ``AttributeError``...). The interpreter delivers it to the program's own ``except``
    handlers; only when none catches it does export fail, as UB104.

    exception: the Python exception object the program raised.
    """

    def __init__(self, exception: BaseException, *, frames=()):
        self.exception = exception
        super().__init__("UB104", f"{type(exception).__name__}: {exception}", frames=frames)

    def torch_equivalents(self) -> tuple:
        """Strict export raises ``Unsupported`` ("Observed exception"); non-strict export lets
        the model's own exception through: this error is both."""
        return ("Unsupported", type(self.exception))


_DATA_DEPENDENT = {
    "UB101": ("GuardOnDataDependentSymNode",),
    "UB105": ("UserError:ANTI_PATTERN", "GuardOnDataDependentSymNode"),
}


def graph_break(kind_id: str, reason: str, *, frames=(), details: str = "",
                hint: str = "") -> GraphBreakError:
    """Build (not raise) a :class:`GraphBreakError`; the caller raises it. ``hint`` replaces
    the catalogue's generic fix when the caller knows a more precise one."""
    return GraphBreakError(kind_id, reason, frames=frames, details=details, hint=hint)


def render_markdown() -> str:
    """The catalogue as Markdown: the content of ``docs/graph-breaks.md``."""
    lines = [
        "# Graph-break catalogue",
        "",
        "<!-- Generated by `python -m unbroken.symbolic.diagnostics.catalogue --markdown`; "
        "do not edit. -->",
        "",
        "Every construct that `unbroken.export` refuses has a stable id. The error names the id,",
        "your file and line, the reason and the fix.",
        "",
    ]
    for kind in _KINDS:
        lines += [f"## {kind.id}: {kind.title}", "", kind.explain, "", f"**Fix:** {kind.hint}", "",
                  "Refused:", "", "```python", kind.example, "```", "", "Exports:", "",
                  "```python", kind.fix, "```", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    """``--markdown``: print ``docs/graph-breaks.md``; otherwise list the ids and titles."""
    if "--markdown" in (sys.argv[1:] if argv is None else argv):
        sys.stdout.write(render_markdown())
    else:
        for kind in _KINDS:
            print(f"{kind.id}  {kind.title}")


if __name__ == "__main__":  # pragma: no cover - exercised through `make docs`
    main()
