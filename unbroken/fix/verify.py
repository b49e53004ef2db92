"""Verification of a patch: the patched model exports, and matches the ORIGINAL model in eager.

Inputs are drawn so that every decision a rewrite wrote (each ``torch.cond`` /
``torch.where`` predicate and ``torch._check`` at a changed line) goes both ways: a search
over the example inputs scaled, negated, shifted, zeroed, filled and redrawn, and over the
parameters negated and scaled (a condition on weights). Each draw runs the original and the
patched model in eager from the same state and compares:

- the outputs: same structure, types, dtypes, shapes, and values (``torch.testing``'s
  tolerances for the dtype; NaN equal to NaN); an exception on both sides counts as a match;
- the gradients of every parameter and input that requires grad, for one fixed cotangent;
- the buffers and inputs after the call (what the call wrote).

A ``torch._check`` that an ``item-check`` rewrite added states an assumption: a draw that
fails it is outside what the patch claims and is counted apart, not compared. The patched
program is then exported and run on every draw at the example's state; it must match eager
too. A patch is verified only when the export succeeds, every comparison matches, and every
decision was driven both ways (an assumption's failing side excepted).
"""
from __future__ import annotations

import ast
import copy
import re
import sys
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

from .rewrites import ASSUMPTION, DROPPED, UNGUARDED

#: The comments of the rewrites that remove a condition (``unguard``, ``drop-none``): the
#: condition is group 1.
_GUARD = re.compile("|".join(
    "(?:" + re.escape(t).replace(re.escape("{}"), "(.+?)", 1).replace(re.escape("{}"), ".+")
    + ")" for t in (UNGUARDED, DROPPED)))

__all__ = ["ASSUMPTION", "Verification", "compare_eager", "draws", "observe", "verify_patch"]


@dataclass
class Verification:
    """What the checker found.

    verified:  exported, matched on every draw, every decision driven both ways.
    exported:  the patched case exported.
    matches:   eager and exported patched model matched the original on every draw compared.
    reason:    why not verified ('' when verified).
    draws:     inputs compared.
    excluded:  draws outside an assumption the patch added (``torch._check``).
    decisions: ``{"file:line": "True, False"}``: the values each decision took.
    program:   the exported patched program in one line (its ops), '' when not exported.
    """

    verified: bool = False
    exported: bool = False
    matches: bool = False
    reason: str = ""
    draws: int = 0
    excluded: int = 0
    decisions: dict = field(default_factory=dict)
    program: str = ""

    def to_dict(self) -> dict:
        return {"verified": self.verified, "exported": self.exported, "matches": self.matches,
                "reason": self.reason, "draws": self.draws, "excluded": self.excluded,
                "decisions": dict(self.decisions), "program": self.program}


# -- observing the example run ----------------------------------------------------------------

def observe(run, filename: str, questions: dict[int, list[str]]):
    """Run ``run()`` (the model in eager) and, at each line of ``filename`` in
    ``questions``, note the local names that hold tensors and the value of each expression.

    Returns ``({line: frozenset(tensor names)}, {(line, expr): value})``; a line the run
    never reaches is absent.
    """
    tensors: dict[int, set[str]] = {}
    values: dict[tuple[int, str], object] = {}
    compiled = {(line, e): compile(e, "<fix>", "eval") for line, es in questions.items()
                for e in es}

    def local_trace(frame, event, arg):
        if event == "line" and frame.f_lineno in questions:
            line = frame.f_lineno
            names = tensors.setdefault(line, set())
            names.update(k for k, v in frame.f_locals.items() if isinstance(v, torch.Tensor))
            for expr in questions[line]:
                if (line, expr) not in values:
                    try:
                        values[(line, expr)] = eval(compiled[(line, expr)], frame.f_globals,
                                                    dict(frame.f_locals))
                    except Exception as err:  # noqa: BLE001 - the user's expression failed
                        values[(line, expr)] = err
        return local_trace

    def global_trace(frame, event, arg):
        return local_trace if frame.f_code.co_filename == filename else None

    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        run()
    except Exception:  # noqa: BLE001 - the model may fail further on; what was seen counts
        pass
    finally:
        sys.settrace(previous)
    return {k: frozenset(v) for k, v in tensors.items()}, values


# -- drawing inputs ------------------------------------------------------------------------------

_FLOAT_STEPS = (
    ("example", lambda t, g: t), ("negated", lambda t, g: -t), ("×2", lambda t, g: t * 2),
    ("×0.5", lambda t, g: t * 0.5), ("+1", lambda t, g: t + 1), ("-1", lambda t, g: t - 1),
    ("abs", lambda t, g: t.abs()), ("-abs", lambda t, g: -t.abs()),
    ("×10", lambda t, g: t * 10), ("+10", lambda t, g: t + 10), ("-10", lambda t, g: t - 10),
    ("zeros", lambda t, g: torch.zeros_like(t)), ("ones", lambda t, g: torch.ones_like(t)),
    ("-ones", lambda t, g: -torch.ones_like(t)),
    ("randn", lambda t, g: torch.randn(t.shape, generator=g, dtype=t.dtype)),
    ("randn×3", lambda t, g: 3 * torch.randn(t.shape, generator=g, dtype=t.dtype)),
    ("rand", lambda t, g: torch.rand(t.shape, generator=g, dtype=t.dtype)),
    ("+1000", lambda t, g: t + 1000), ("-1000", lambda t, g: t - 1000),
    ("×1000", lambda t, g: t * 1000), ("one inf", lambda t, g: _first_set(t, float("inf"))),
    ("one nan", lambda t, g: _first_set(t, float("nan"))),
)
def _first_set(t, value):
    made = t.clone()
    if made.numel():
        made.view(-1)[0] = value
    return made


_INT_STEPS = (
    ("example", lambda t, g: t), ("+1", lambda t, g: t + 1), ("-1", lambda t, g: t - 1),
    ("zeros", lambda t, g: torch.zeros_like(t)), ("×2", lambda t, g: t * 2),
    ("negated", lambda t, g: -t), ("ones", lambda t, g: torch.ones_like(t)),
)
_PARAM_STEPS = (("example", None), ("negated", lambda p: -p), ("×10", lambda p: p * 10),
                ("+1", lambda p: p + 1), ("-1", lambda p: p - 1))


def _step(t, step, g):
    if not isinstance(t, torch.Tensor):
        return t
    if t.dtype == torch.bool:
        return {"negated": lambda: ~t, "zeros": lambda: torch.zeros_like(t),
                "ones": lambda: torch.ones_like(t)}.get(step, lambda: t.clone())()
    table = dict(_FLOAT_STEPS if t.is_floating_point() or t.is_complex() else _INT_STEPS)
    made = table.get(step, table["example"])(t.detach(), g)
    return made.clone().requires_grad_(t.requires_grad) if made.is_floating_point() \
        else made.clone()


def draws(args, kwargs, dynamic_shapes=None):
    """Candidate inputs, lazily: ``(label, args, kwargs, parameter step)``. The example
    first; then, for dynamic dims, fresh inputs at the edges of their ranges
    (:func:`edge_inputs`); then each step on every tensor input at once; then, with several
    tensor inputs,
    each step on one input alone (a decision on one input while another is held); then the
    parameters stepped (a decision on weights)."""
    steps = [s for s, _ in _FLOAT_STEPS]
    g = torch.Generator().manual_seed(0)
    tree = (args, kwargs or {})
    flat, spec = pytree.tree_flatten(tree)
    tensor_at = [i for i, t in enumerate(flat) if isinstance(t, torch.Tensor)]
    for index, label in enumerate(steps):
        made = pytree.tree_map(lambda t, label=label: _step(t, label, g), tree)
        yield label, made[0], made[1], None
        if index == 0:
            yield from edge_inputs(args, kwargs or {}, dynamic_shapes)
    if len(tensor_at) > 1:
        for position in tensor_at:
            for label in steps[1:]:
                one = list(flat)
                one[position] = _step(flat[position], label, g)
                made = pytree.tree_unflatten(one, spec)
                yield f"input {position} {label}", made[0], made[1], None
    for label, fn in _PARAM_STEPS[1:]:
        yield f"parameters {label}", args, kwargs or {}, fn


#: The largest size an edge draw uses for a dim whose range has no (or a larger) maximum.
EDGE_CAP = 64


def edge_inputs(args, kwargs, dynamic_shapes):
    """Inputs at the smallest and the largest size each dynamic dim admits (the largest capped
    at ``EDGE_CAP``); dims given one ``Dim`` share its size. A spec with derived dims or
    without named ``Dim`` objects yields nothing (the example's shapes are drawn)."""
    if dynamic_shapes is None:
        return
    dims = _dims_of(args, kwargs, dynamic_shapes)
    if not dims or any(d is None for _, _, d in dims):
        return
    g = torch.Generator().manual_seed(2)
    for edge in ("smallest", "largest"):
        sizes = {}
        for _, _size, dim in dims:
            low = max(getattr(dim, "min", 2) or 2, 1)
            high = min(getattr(dim, "max", EDGE_CAP) or EDGE_CAP, EDGE_CAP)
            sizes.setdefault(dim.__name__, low if edge == "smallest" else max(high, low))
        flat, spec = pytree.tree_flatten((args, kwargs))
        shapes = {i: list(t.shape) for i, t in enumerate(flat) if isinstance(t, torch.Tensor)}
        for position, (i, axis) in enumerate((i, a) for (i, a), _, _ in dims):
            shapes[i][axis] = sizes[dims[position][2].__name__]
        made = [_fresh(t, shapes[i], g) if isinstance(t, torch.Tensor) else t
                for i, t in enumerate(flat)]
        tree = pytree.tree_unflatten(made, spec)
        yield f"dims at their {edge} ({', '.join(f'{k}={v}' for k, v in sizes.items())})", \
            tree[0], tree[1], None


def _dims_of(args, kwargs, dynamic_shapes):
    """``[((flat input index, axis), example size, Dim or None)]`` of the spec."""
    import inspect

    flat = pytree.tree_leaves((args, kwargs))
    if isinstance(dynamic_shapes, dict) and len(dynamic_shapes) == len(args) + len(kwargs):
        entries = list(dynamic_shapes.values())
    elif isinstance(dynamic_shapes, (tuple, list)):
        entries = list(dynamic_shapes)
    else:
        return []
    found, index = [], 0
    for value, entry in zip(list(args) + list(kwargs.values()), entries):
        if not isinstance(value, torch.Tensor):
            index += len(pytree.tree_leaves(value))
            continue
        items = entry.items() if isinstance(entry, dict) else enumerate(entry or ())
        for axis, dim in items:
            if dim is None or isinstance(dim, int):
                continue
            named = inspect.isclass(dim) or hasattr(dim, "__name__")
            derived = hasattr(dim, "root") or not named
            found.append(((index, axis), value.shape[axis], None if derived else dim))
        index += 1
    return found if len(flat) >= index else []


def _fresh(t, shape, g):
    if t.is_floating_point():
        return torch.randn(shape, generator=g, dtype=t.dtype).requires_grad_(t.requires_grad)
    if t.dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    high = int(t.max()) + 1 if t.numel() else 2
    return torch.randint(0, max(high, 1), shape, generator=g, dtype=t.dtype)


#: Draws compared at least, and at most, when every decision is already driven both ways.
MIN_DRAWS, MAX_DRAWS = 12, 80


def _with_parameters(model, fn):
    """A copy of ``model`` with ``fn`` applied to every parameter and (numeric) buffer: a
    decision on weights or on a stored count goes the other way."""
    twin = copy.deepcopy(model)
    if fn is not None and isinstance(twin, torch.nn.Module):
        with torch.no_grad():
            for p in list(twin.parameters()) + list(twin.buffers()):
                if p.dtype != torch.bool and not p.is_complex():
                    p.copy_(fn(p).to(p.dtype))
    return twin


# -- comparing -----------------------------------------------------------------------------------

def _clone(tree):
    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        return c.requires_grad_(t.requires_grad)
    return pytree.tree_map(one, tree)


def _run(model, args, kwargs):
    args, kwargs = _clone((args, kwargs))
    try:
        with torch.enable_grad():
            out = model(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the user's model raised: compared, not ours
        return None, err, args, kwargs
    return out, None, args, kwargs


def _same(a, b, what: str) -> str:
    """'' when ``a`` and ``b`` agree, else what differs."""
    flat_a, spec_a = pytree.tree_flatten(a)
    flat_b, spec_b = pytree.tree_flatten(b)
    if spec_a != spec_b:
        return f"{what}: different structure ({spec_a} against {spec_b})"
    for i, (x, y) in enumerate(zip(flat_a, flat_b)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"{what}[{i}]: {type(x).__name__} against {type(y).__name__}"
        if isinstance(x, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                return f"{what}[{i}]: {x.dtype}{list(x.shape)} against {y.dtype}{list(y.shape)}"
            if x.requires_grad != y.requires_grad:
                return f"{what}[{i}]: requires_grad {x.requires_grad} against {y.requires_grad}"
            try:
                torch.testing.assert_close(y.detach(), x.detach(), equal_nan=True)
            except AssertionError as err:
                detail = next((ln.strip() for ln in str(err).splitlines()
                               if ln.strip().startswith(("Mismatched", "Greatest"))), "")
                return f"{what}[{i}]: values differ ({detail})"
        elif type(x) is not type(y) or x != y:
            return f"{what}[{i}]: {x!r} against {y!r}"
    return ""


def _grads(model, args, kwargs, out):
    leaves = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)
              and t.requires_grad and t.is_floating_point()]
    wrt = [p for p in (model.parameters() if isinstance(model, torch.nn.Module) else ())
           if p.requires_grad]
    wrt += [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
            and t.requires_grad]
    if not leaves or not wrt:
        return []
    g = torch.Generator().manual_seed(1)
    total = sum((t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum() for t in leaves)
    grads = torch.autograd.grad(total, wrt, allow_unused=True)
    return [torch.zeros_like(w) if d is None else d for w, d in zip(wrt, grads)]


def _state(model):
    """Buffers, and the numbers kept as plain attributes of each module (as 0-d tensors: a
    counter rewritten as a buffer compares with the attribute it replaces)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    state = {k: v.detach() for k, v in model.named_buffers()}
    for prefix, sub in model.named_modules():
        for name, value in vars(sub).items():
            if type(value) in (int, float) and not name.startswith("_"):
                state[f"{prefix}.{name}" if prefix else name] = torch.tensor(value)
    return dict(sorted(state.items()))


def compare_eager(original, patched, args, kwargs, calls: int = 1):
    """('' or what differs, the exception both raised or None), over ``calls`` calls in a
    row on the same two models (state a call leaves is what the next one reads)."""
    for call in range(calls):
        problem, raised = _compare_once(original, patched, args, kwargs)
        if problem or raised is not None:
            return (f"call {call + 1}: {problem}" if problem and call else problem), raised
    return "", None


def _compare_once(original, patched, args, kwargs) -> tuple[str, Exception | None]:
    out_o, err_o, args_o, kw_o = _run(original, args, kwargs)
    out_p, err_p, args_p, kw_p = _run(patched, args, kwargs)
    if err_o is not None or err_p is not None:
        if err_o is not None and err_p is not None:
            return "", err_p
        side = "the original" if err_o is not None else "the patched model"
        err = err_o if err_o is not None else err_p
        return f"only {side} raised {type(err).__name__}: {err}", err_p
    problem = _same(out_o, out_p, "output")
    if problem:
        return problem, None
    try:
        grads = (_grads(original, args_o, kw_o, out_o), _grads(patched, args_p, kw_p, out_p))
    except RuntimeError as err:
        return f"gradients: {err}", None
    problem = _same(grads[0], grads[1], "gradient") or \
        _same(_state(original), _state(patched), "buffer after the call") or \
        _same((args_o, kw_o), (args_p, kw_p), "input after the call")
    return problem, None


# -- the whole check --------------------------------------------------------------------------

def decision_sites(path: str, old: str, new: str) -> dict[int, str]:
    """``{line: kind}`` of the torch.cond / torch.where / torch._check calls on the lines of
    ``new`` that differ from ``old`` (kind: ``cond``, ``where``, ``check``, ``assumption``:
    a check an item-check rewrite added, whose failing side is outside the patch's claim)."""
    import difflib

    old_lines, new_lines = old.splitlines(), new.splitlines()
    changed = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines,
                                                     autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, j2 + 1))
    sites = {}
    for node in ast.walk(ast.parse(new)):
        if isinstance(node, ast.Call) and node.lineno in changed and \
                isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "torch" and \
                node.func.attr in ("cond", "where", "_check", "_check_is_size"):
            kind = node.func.attr.lstrip("_").replace("check_is_size", "check")
            if kind == "check" and ASSUMPTION in new_lines[node.lineno - 1]:
                kind = "assumption"
            sites[node.lineno] = kind
    for line in changed:
        if _GUARD.search(new_lines[line - 1]):
            sites[line] = "guard"
    return sites


def _guards(patched, sites_by_path) -> dict:
    """``{path: {line: expression}}`` of the conditions ``unguard`` rewrites removed."""
    found = {}
    for path, sites in sites_by_path.items():
        lines = patched.texts[path].splitlines()
        for line, kind in sites.items():
            if kind == "guard":
                match = _GUARD.search(lines[line - 1])
                found.setdefault(path, {})[line] = next(g for g in match.groups() if g)
    return found


def _drive_guards(patched, guards, recorders, model, args, kwargs) -> None:
    """Evaluate each removed condition where its body now starts, on this draw."""
    for path, conditions in guards.items():
        questions = {line + 1: [expr] for line, expr in conditions.items()}
        _, values = observe(lambda: model(*_clone(args), **_clone(kwargs)),
                            patched.scratch[path], questions)
        for line, expr in conditions.items():
            value = values.get((line + 1, expr))
            if isinstance(value, (bool, torch.Tensor)) and (
                    not isinstance(value, torch.Tensor) or value.numel() == 1):
                recorders[path].seen.setdefault(line, set()).add(bool(value))


def verify_patch(case, patched, sites_by_path, export_patched,
                 dynamic_shapes=None, calls: int = 1) -> Verification:
    """Verify ``patched`` (a :class:`~unbroken.fix.scratch.PatchedModules`) for ``case``.

    ``sites_by_path``: ``{original path: decision_sites(...)}``; ``export_patched(model)``
    exports the patched model (returns the ExportedProgram or raises).
    """
    result = Verification()
    model = case.model
    compared, excluded, problems, candidates = 0, 0, [], []
    guards = _guards(patched, sites_by_path)
    with patched.recording() as recorders:
        for label, args, kwargs, param_step in draws(case.args, case.kwargs, dynamic_shapes):
            if compared + excluded >= MAX_DRAWS or (
                    compared >= MIN_DRAWS and not _undriven(recorders, sites_by_path)):
                break
            candidates.append((label, args, kwargs, param_step))
            original = _with_parameters(model, param_step)
            twin = patched.patched_model(original)
            for r in recorders.values():
                r.failed.clear()
            problem, raised = compare_eager(original, twin, args, kwargs, calls)
            if guards:
                _drive_guards(patched, guards, recorders, twin, args, kwargs)
            assumption_failed = raised is not None and any(
                sites_by_path.get(p, {}).get(line) == "assumption"
                for p, r in recorders.items() for line in r.failed)
            if assumption_failed:
                excluded += 1
                continue
            if problem and _assumption_only(problem, recorders, sites_by_path):
                excluded += 1
                continue
            compared += 1
            if problem:
                problems.append(f"draw `{label}`: {problem}")
                break
    result.draws, result.excluded = compared, excluded
    missing = []
    for path, sites in sites_by_path.items():
        seen = recorders[path].seen if path in recorders else {}
        for line, kind in sorted(sites.items()):
            values = seen.get(line, set())
            where = f"{path.rsplit('/', 1)[-1]}:{line}"
            result.decisions[where] = ", ".join(str(v) for v in sorted(values)) or "not reached"
            need = {True} if kind == "assumption" else {True, False}
            if not need <= values:
                missing.append(f"{where} ({kind}) took only "
                               f"{result.decisions[where]}")
    if problems:
        result.reason = "differs from eager: " + problems[0]
        return result
    try:
        program = export_patched(patched.patched_model(model))
    except Exception as err:  # noqa: BLE001 - a refusal of the patched model is the finding
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        result.reason = f"the patched model does not export: {first}"
        return result
    result.exported = True
    result.program = _summary(program)
    problem = _compare_exported(model, program, candidates, calls)
    if problem:
        result.reason = "the exported patched model differs from eager: " + problem
        return result
    result.matches = True
    if missing:
        result.reason = "no draw drove every decision both ways: " + "; ".join(missing)
        return result
    result.verified = True
    return result


def _summary(program) -> str:
    """``7 ops: aten.linear, higher_order.cond, ...`` (each op once, in graph order)."""
    ops = [n.target for n in program.graph.nodes if n.op == "call_function"]
    names = list(dict.fromkeys(str(getattr(t, "__name__", t)).replace("torch.ops.", "")
                               for t in ops))
    return f"{len(ops)} op(s): " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def _undriven(recorders, sites_by_path) -> bool:
    """Whether some decision has not yet gone both ways (an assumption: held once)."""
    for path, sites in sites_by_path.items():
        seen = recorders[path].seen if path in recorders else {}
        for line, kind in sites.items():
            need = {True} if kind == "assumption" else {True, False}
            if not need <= seen.get(line, set()):
                return True
    return False


def _assumption_only(problem: str, recorders, sites_by_path) -> bool:
    return problem.startswith("only the patched model raised") and any(
        sites_by_path.get(p, {}).get(line) == "assumption"
        for p, r in recorders.items() for line in r.failed)


def _fresh_module(program):
    """``program.module()`` with buffers of its own (the program's are shared: a call that
    writes one would leak into the next draw)."""
    runner = program.module()
    for sub in runner.modules():
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None:
                sub._buffers[name] = buffer.clone()
    return runner


def _compare_exported(model, program, candidates, calls: int = 1) -> str:
    """The exported patched program against a copy of the original model, draw by draw (at
    the example's parameters), ``calls`` calls in a row on a fresh program each draw."""
    for label, args, kwargs, param_step in candidates:
        if param_step is not None:
            continue
        eager, runner = copy.deepcopy(model), _fresh_module(program)
        for call in range(calls):
            with torch.no_grad():
                try:
                    expected = eager(*_clone(args), **_clone(kwargs))
                except Exception:  # noqa: BLE001 - eager raises: nothing to compare
                    break
                try:
                    got = runner(*_clone(args), **_clone(kwargs))
                except Exception as err:  # noqa: BLE001
                    text = str(err)
                    if "_check" in text or "assert" in text.lower() or \
                            "Runtime assertion" in text:
                        break  # outside an added assumption: checked at run time, as claimed
                    return f"draw `{label}`: the exported program raised " \
                        f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"
            problem = _same(expected, got, "output")
            if problem:
                return f"draw `{label}`" + (f", call {call + 1}" if call else "") + \
                    f": {problem}"
    return ""
