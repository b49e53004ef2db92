"""Side-by-side harness: one program, torch.export.export(strict=True) and unbroken.export.

A :class:`Behaviour` is a promise torch.export makes its users (learned from PyTorch's own
``test/export/test_export.py``, written here as our own small programs): a model, example
inputs, the export options, and what a correct exporter does with them —

- ``expect="matches"``: the program exports, and ``ep.module()`` agrees with eager on the
  example inputs and on every input of ``more`` (other admitted sizes): outputs (values, dtypes,
  shapes, ``requires_grad``), inputs and buffers after the call (mutation semantics), over
  ``calls`` successive calls of the same module (state carried between calls);
- every input of ``rejects`` makes ``ep.module()`` raise (a guard, not a wrong answer);
- ``expect="refuses"``: export raises (for unbroken: a :class:`unbroken.RefusalError`, never an
  internal error or a raw exception);
- ``check(ep)``: a further assertion on the program (signature, constants, unflatten, ...).

The oracle is eager PyTorch; torch strict's answer is measured, not assumed. A behaviour
"torch strict passes" when torch strict gives the expected answer; unbroken must then give it
too. Where torch strict fails, unbroken must pass or refuse cleanly (the same or a better
answer: never a silent wrong answer or a crash). Every model and input is built fresh, from the
same seed, for each side, so that a mutation by one run never leaks into another.

``python -m tests.behaviours.report`` runs every behaviour and prints the table and the
percentage "unbroken passes / torch strict passes".
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree

import unbroken

TORCH = "torch strict"
UNBROKEN = "unbroken"

PASS = "pass"
REFUSED = "refused"   # export raised a clean refusal (for torch: any export error)
CRASHED = "crashed"   # an internal error of unbroken, or a raw exception out of the exporter
WRONG = "wrong"       # exported, but a check failed: a wrong answer or a missing guard


@dataclasses.dataclass(frozen=True)
class Behaviour:
    """One behaviour, run the same way by both exporters.

    name: a short id (the pytest parameter).
    make: builds a fresh model (called under a fixed seed).
    inputs: builds fresh example ``args`` (a tuple) or ``(args, kwargs)`` when ``kwargs=True``.
    expect: "matches" or "refuses".
    dynamic_shapes: as for torch.export.export.
    options: further export keywords (``preserve_module_call_signature``).
    more: builders of further admitted inputs, run after the example inputs.
    rejects: builders of inputs ``ep.module()`` must refuse with an exception.
    check: ``check(ep)`` asserts something more about the program.
    calls: how many successive calls of one module to compare (state between calls).
    grad: False runs eager and the exported module under ``torch.no_grad()``.
    unbroken_fails: why unbroken does not pass yet (the issue that owns it): the test is
        then an expected failure (xfail, strict) that a fix flips.
    torch_fails: why torch strict does not give the expected answer (measured; pinned).
    slow: the behaviour takes more than about a second.
    context: a context manager factory wrapped around each side's whole run (a process
        group for the collectives).
    """

    name: str
    make: Callable[[], Any]
    inputs: Callable[[], Any]
    expect: str = "matches"
    dynamic_shapes: Any = None
    options: dict = dataclasses.field(default_factory=dict)
    kwargs: bool = False
    more: tuple = ()
    rejects: tuple = ()
    check: Callable | None = None
    calls: int = 1
    grad: bool = True
    unbroken_fails: str | None = None
    torch_fails: str | None = None
    slow: bool = False
    context: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.kind == PASS


def program(forward, setup=None, name="Program"):
    """A factory of fresh ``nn.Module`` instances whose ``forward`` is ``forward``;
    ``setup(self)`` (if given) registers parameters, buffers and submodules."""

    def __init__(self):
        torch.nn.Module.__init__(self)
        if setup is not None:
            setup(self)

    cls = type(name, (torch.nn.Module,), {"__init__": __init__, "forward": forward})
    return cls


def _fresh(builder):
    torch.manual_seed(0)
    return builder()


def _split(behaviour, built):
    if behaviour.kwargs:
        return built
    return built, {}


def _export(exporter, behaviour, model, args, kwargs):
    if exporter == TORCH:
        return torch.export.export(model, args, kwargs, dynamic_shapes=behaviour.dynamic_shapes,
                                   strict=True, **behaviour.options)
    return unbroken.export(model, args, kwargs, dynamic_shapes=behaviour.dynamic_shapes,
                           **behaviour.options)


def _is_clean_refusal(exporter, err) -> bool:
    if exporter == TORCH:
        return True
    return isinstance(err, unbroken.RefusalError)


def _grad_context(behaviour):
    return contextlib.nullcontext() if behaviour.grad else torch.no_grad()


def assert_same(expected, got, what="output"):
    """Pytree equality: tensors by value, dtype, shape and ``requires_grad``; others by ==."""
    exp_leaves, exp_spec = pytree.tree_flatten(expected)
    got_leaves, got_spec = pytree.tree_flatten(got)
    assert len(exp_leaves) == len(got_leaves), f"{what}: {exp_spec} != {got_spec}"
    for i, (e, g) in enumerate(zip(exp_leaves, got_leaves)):
        where = f"{what} leaf {i}"
        if isinstance(e, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{where}: expected a tensor, got {g!r}"
            assert e.dtype == g.dtype, f"{where}: dtype {g.dtype} != eager's {e.dtype}"
            assert e.shape == g.shape, f"{where}: shape {g.shape} != eager's {e.shape}"
            assert e.requires_grad == g.requires_grad, f"{where}: requires_grad differs"
            torch.testing.assert_close(g.detach(), e.detach(), equal_nan=True, msg=where)
        else:
            assert type(e) is type(g) or (isinstance(e, int | float | bool)
                                          and isinstance(g, int | float | bool)), \
                f"{where}: {type(g).__name__} != eager's {type(e).__name__}"
            assert e == g, f"{where}: {g!r} != eager's {e!r}"


def _agree(behaviour, model, module, builder):
    """One input: eager ``model`` and exported ``module`` on equal fresh copies agree."""
    eager_args, eager_kwargs = _split(behaviour, _fresh(builder))
    args, kwargs = _split(behaviour, _fresh(builder))
    for _ in range(behaviour.calls):
        with _grad_context(behaviour):
            expected = model(*eager_args, **eager_kwargs)
            got = module(*args, **kwargs)
        assert_same(expected, got)
        assert_same((eager_args, eager_kwargs), (args, kwargs), "inputs after the call")
        buffers = dict(module.named_buffers())
        for fqn, value in model.named_buffers():
            if fqn in buffers:
                assert_same(value, buffers[fqn], f"buffer {fqn} after the call")


def run(behaviour: Behaviour, exporter: str) -> Outcome:
    """Run ``behaviour`` with ``exporter`` (TORCH or UNBROKEN) and classify the result."""
    with behaviour.context() if behaviour.context else contextlib.nullcontext():
        return _run(behaviour, exporter)


def _run(behaviour, exporter):
    model = _fresh(behaviour.make)
    args, kwargs = _split(behaviour, _fresh(behaviour.inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = _export(exporter, behaviour, model, args, kwargs)
        except unbroken.InternalError as err:
            return Outcome(CRASHED, _one_line(err))
        except Exception as err:  # noqa: BLE001 - the outcome is the classification
            if behaviour.expect == "refuses" and _is_clean_refusal(exporter, err):
                return Outcome(PASS, f"refused: {_one_line(err)}")
            kind = REFUSED if _is_clean_refusal(exporter, err) else CRASHED
            return Outcome(kind, _one_line(err))
        if behaviour.expect == "refuses":
            return Outcome(WRONG, "exported where an error is expected")
        return _judge(behaviour, ep)


def _judge(behaviour, ep) -> Outcome:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = ep.module()
            model = _fresh(behaviour.make)
            for builder in (behaviour.inputs, *behaviour.more):
                _agree(behaviour, model, module, builder)
            for builder in behaviour.rejects:
                _assert_rejected(behaviour, ep, builder)
            if behaviour.check is not None:
                behaviour.check(ep)
        except AssertionError as err:  # torch's guards raise AssertionError too
            return Outcome(WRONG, _one_line(err))
        except unbroken.RefusalError as err:  # a guard of unbroken's module() refused
            return Outcome(WRONG, _one_line(err))
        except Exception as err:  # noqa: BLE001 - internal errors, raw exceptions
            return Outcome(CRASHED, _one_line(err))
    return Outcome(PASS)


def _assert_rejected(behaviour, ep, builder):
    args, kwargs = _split(behaviour, _fresh(builder))
    try:
        with _grad_context(behaviour):
            ep.module()(*args, **kwargs)
    except unbroken.InternalError:
        raise
    except Exception:  # noqa: BLE001 - any guard error is a rejection
        return
    raise AssertionError("module() accepted an input outside the exported constraints")


def _one_line(err) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def side_by_side(behaviour: Behaviour) -> tuple[Outcome, Outcome]:
    """Both outcomes; the assertions of a behaviour's test."""
    torch_outcome = run(behaviour, TORCH)
    unbroken_outcome = run(behaviour, UNBROKEN)
    torch_expected = behaviour.torch_fails is None
    assert torch_outcome.passed == torch_expected, (
        f"torch strict's answer changed: {torch_outcome} (pinned: "
        f"{'passes' if torch_expected else behaviour.torch_fails})")
    if torch_outcome.passed:
        assert unbroken_outcome.passed, f"unbroken: {unbroken_outcome}"
    else:
        assert unbroken_outcome.kind in (PASS, REFUSED), (
            f"torch strict fails ({torch_outcome.detail}); unbroken must pass or refuse "
            f"cleanly, not {unbroken_outcome}")
    return torch_outcome, unbroken_outcome


def params(behaviours):
    """pytest parameters, one per behaviour; an ``unbroken_fails`` reason is a strict xfail."""
    names = [b.name for b in behaviours]
    assert len(names) == len(set(names)), "behaviour names must be unique"
    out = []
    for b in behaviours:
        marks = []
        if b.unbroken_fails:
            marks.append(pytest.mark.xfail(strict=True, reason=b.unbroken_fails))
        if b.slow:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(b, id=b.name, marks=marks))
    return out
