"""Differential test over fixed programs: generated ``if``/``else`` programs (random
conditions, random arms, every syntactic form the rewrites cover); whenever ``unbroken fix``
calls a patch verified, the patched model, in eager and exported, matches the original on
further inputs that hypothesis draws (and the decision goes both ways among them)."""
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbroken.cases import collect_cases
from unbroken.exporter.pipeline import export
from unbroken.fix import fix_case
from unbroken.fix.scratch import PatchedModules
from unbroken.fix.verify import compare_eager

REDUCTIONS = ["{v}.sum()", "{v}.mean()", "{v}.max()", "{v}.min()", "{v}[0, 0]",
              "({v} * 2 - 1).sum()"]
ARMS = ["x * 2", "x.sin()", "x + y", "x - 1", "x.relu() * y", "-x", "x.abs() + 0.5",
        "torch.tanh(x) * 3"]
FORMS = ["return", "assign_else", "assign_no_else", "ternary", "statements"]


def _program(form, cond, a, b) -> str:
    body = {
        "return": f"if {cond}:\n    return {a}\nreturn {b}",
        "assign_else": f"if {cond}:\n    z = {a}\nelse:\n    z = {b}\nreturn z",
        "assign_no_else": f"z = {b}\nif {cond}:\n    z = {a}\nreturn z",
        "ternary": f"z = {a} if {cond} else {b}\nreturn z",
        "statements": (f"if {cond}:\n    t = {a}\n    z = t * t\nelse:\n    t = {b}\n"
                       "    z = t + 1\nreturn z + t"),
    }[form]
    return ("import torch\nimport unbroken\n\n\nclass Generated(torch.nn.Module):\n"
            "    def forward(self, x, y):\n" + textwrap.indent(body, " " * 8) +
            "\n\n\nunbroken.case(Generated(), (torch.randn(3, 4), torch.randn(3, 4)))\n")


programs = st.builds(
    lambda form, reduction, on_y, op, threshold, a, b: _program(
        form, f"{reduction.format(v='y' if on_y else 'x')} {op} {threshold}", a, b),
    st.sampled_from(FORMS), st.sampled_from(REDUCTIONS), st.booleans(),
    st.sampled_from([">", "<", ">=", "<="]), st.sampled_from([0, 0.5, -1, 2]),
    st.sampled_from(ARMS), st.sampled_from(ARMS))

tensors = st.lists(st.floats(-4, 4, width=32), min_size=12, max_size=12).map(
    lambda v: torch.tensor(v).reshape(3, 4))


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(code=programs, data=st.data())
def test_every_verified_fix_matches_eager_on_drawn_inputs(code, data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "generated.py")
        path.write_text(code)
        (case,) = collect_cases(path)
        fix = fix_case(case, folder)
        assert fix.status in ("verified", "unverified"), fix.hints
        if fix.status != "verified":
            return
        texts = {p: new for p, (_, new) in fix.texts.items()}
        with PatchedModules(texts) as patched:
            twin = patched.patched_model(case.model)
            program = export(twin, case.args).module()
            with patched.recording() as recorders:
                for _ in range(5):
                    x, y = data.draw(tensors), data.draw(tensors)
                    problem, raised = compare_eager(case.model, twin, (x, y), {})
                    assert problem == "" and raised is None, code
                    with torch.no_grad():
                        torch.testing.assert_close(program(x, y), case.model(x, y))
            assert any(r.seen for r in recorders.values())


# -- the other rewrite classes, with a dynamic dim, on inputs that drive every decision --------

GUARDED_FORMS = ["masked_write", "guarded_write", "continue", "raise_if"]
MASK_VALUES = ["0.0", "-1", "y[m] * 2", "x[m].abs()"]


def _guarded_program(form, reduction, op, threshold, arm, value) -> str:
    cond = f"{reduction.format(v='y')} {op} {threshold}"
    body = {
        "masked_write": (f"x = x.clone()\nm = y {op} {threshold}\nif m.any():\n"
                         f"    x[m] = {value}\nreturn x * 2"),
        "continue": (f"acc = torch.zeros(())\nfor i in range(3):\n"
                     f"    if {reduction.format(v='y')} * (i - 1) {op} {threshold}:\n"
                     f"        continue\n    acc = acc + ({arm}).sum() * (i + 1)\n"
                     "return acc"),
        "guarded_write": (f"x = x.clone()\nm = x > 1\nif {cond}:\n    x[m] = {value}\n"
                          "return x * 2"),
        "raise_if": f"if {cond}:\n    raise ValueError('refused')\nreturn {arm}",
    }[form]
    return ("import torch\nimport unbroken\nfrom torch.export import Dim\n\n\n"
            "class Generated(torch.nn.Module):\n"
            "    def forward(self, x, y):\n" + textwrap.indent(body, " " * 8) +
            "\n\n\nn = Dim('n', min=2, max=12)\n"
            "unbroken.case(Generated(), (torch.randn(3, 4), torch.randn(3, 4)),\n"
            "              dynamic_shapes={'x': {0: n}, 'y': {0: n}})\n")


guarded_programs = st.builds(
    _guarded_program, st.sampled_from(GUARDED_FORMS), st.sampled_from(REDUCTIONS[:4]),
    st.sampled_from([">", "<"]), st.sampled_from([0, 0.5, -1, 2]), st.sampled_from(ARMS),
    st.sampled_from(MASK_VALUES))


def _inputs(data):
    """x, y of a drawn size (the dim's edges 2 and 12 among them), and the same shifted by
    +10 and -10: every condition of the programs goes both ways among the three."""
    size = data.draw(st.sampled_from([2, 12]) | st.integers(2, 12))
    values = st.lists(st.floats(-4, 4, width=32), min_size=4 * size, max_size=4 * size)
    x, y = (torch.tensor(data.draw(values)).reshape(size, 4) for _ in range(2))
    return [(x, y), (x + 10, y + 10), (x - 10, y - 10)]


def _outcome(fn, *args):
    try:
        with torch.no_grad():
            return fn(*args), None
    except Exception as err:  # noqa: BLE001 - the program's own refusal is compared
        return None, err


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(code=guarded_programs, data=st.data())
def test_every_verified_guard_loop_and_check_fix_matches_eager_at_the_dim_edges(code, data):
    """Masked writes under a condition (unguarded, or a torch.cond with a functional update),
    ``if c: continue`` in a loop and ``if c: raise``, with a dynamic dim: a
    verified fix matches the original, in eager (outputs, gradients, inputs after the call)
    and exported, on drawn inputs at sizes from the dim's range, its edges included, and every
    decision the patch wrote goes both ways among them."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "generated.py")
        path.write_text(code)
        (case,) = collect_cases(path)
        fix = fix_case(case, folder)
        assert fix.status in ("verified", "unverified"), (code, fix.hints)
        if fix.status != "verified":
            return
        texts = {p: new for p, (_, new) in fix.texts.items()}
        with PatchedModules(texts) as patched:
            twin = patched.patched_model(case.model)
            program = export(twin, case.args, dynamic_shapes=case.dynamic_shapes).module()
            with patched.recording() as recorders:
                for x, y in _inputs(data):
                    problem, _ = compare_eager(case.model, twin, (x, y), {})
                    assert problem == "", (code, problem)
                    expected, refused = _outcome(case.model, x, y)
                    got, raised = _outcome(program, x, y)
                    assert (refused is None) == (raised is None), (code, refused, raised)
                    if refused is None:
                        torch.testing.assert_close(got, expected, equal_nan=True)
            seen = [values for r in recorders.values() for values in r.seen.values()]
            if "unguarded" not in "".join(texts.values()):
                assert seen and all(v == {True, False} for v in seen), (code, seen)


@pytest.mark.parametrize("form,rules", [("masked_write", ["unguard"]),
                                        ("guarded_write", ["cond"]),
                                        ("continue", ["cond"]), ("raise_if", ["check"])])
def test_each_guarded_form_gets_a_verified_fix(form, rules):
    """The property above is not vacuous: each form has a verified fix (by the rewrite class
    it exercises) for a representative condition."""
    code = _guarded_program(form, "{v}.sum()", ">", 0, "x * 2", "y[m] * 2")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "generated.py")
        path.write_text(code)
        (case,) = collect_cases(path)
        fix = fix_case(case, folder)
        assert fix.status == "verified", (fix.verification.reason, fix.hints)
        assert [r.rule for r in fix.rewrites] == rules
