"""fix_rendering: a Fix as a dynamic_shapes spec (object and pasteable code), and the
constraint error that shows the violated guards, driven directly (no export)."""
import sympy
import torch
from torch.export import Dim

from unbroken.exporter.fix_rendering import TensorDims, constraint_error, render_fix
from unbroken.symbolic.diagnostics import ConstraintViolationError, UserFrame
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.fixes import Fix
from unbroken.symbolic.guards import Guard
from unbroken.symbolic.solver import Decision, Violation

FRAME = UserFrame("/src/model.py", 31, "forward", "return x * 2 + y")


def _env():
    env = ShapeEnvironment()
    batch = env.create_symbol("batch", 8, source="x.shape[0]")
    other = env.create_symbol("", 16, source="y.shape[0]")
    return env, batch, other


def _pasted(code: str) -> dict:
    scope: dict = {}
    exec(code, scope)  # as a user pastes it
    return scope["dynamic_shapes"]


def _same_dims(a, b) -> bool:
    return str(a) == str(b)  # Dim objects compare by identity; their text says it all


def test_a_derived_dim_is_rendered_over_its_root_with_the_fixed_range():
    env, batch, other = _env()
    fix = Fix(derived={other: 2 * batch}, ranges={batch: (2, 32)}, notes=["y is twice x"])
    spec, code = render_fix(fix, {"x": (batch, 3), "y": (other,), "flag": None}, env)
    assert code == "\n".join([
        "from torch.export import Dim", "", 'batch = Dim("batch", min=2, max=32)',
        "dynamic_shapes = {", '    "x": {0: batch},', '    "y": {0: 2 * batch},',
        '    "flag": None,', "}"])
    pasted = _pasted(code)
    assert pasted.keys() == spec.keys() == {"x", "y", "flag"}
    assert spec["flag"] is None and pasted["flag"] is None
    assert _same_dims(spec["x"][0], Dim("batch", min=2, max=32))
    assert _same_dims(spec["y"][0], pasted["y"][0])
    assert 1 not in spec["x"]  # static dims are left out


def test_a_dim_made_static_is_left_out_and_an_unnamed_symbol_is_named_after_its_source():
    env, batch, other = _env()
    fix = Fix(static={batch: 8}, derived={}, ranges={other: (4, None)})
    spec, code = render_fix(fix, {"x": (batch,), "y": (other, other + 1)}, env)
    assert spec["x"] is None
    assert 'y_dim0 = Dim("y_dim0", min=4)' in code
    assert '"y": {0: y_dim0, 1: y_dim0 + 1},' in code
    assert _pasted(code).keys() == {"x", "y"}


def test_names_never_collide_nor_shadow_keywords():
    env = ShapeEnvironment()
    a = env.create_symbol("in", 4, source="x.shape[0]")
    b = env.create_symbol("in", 5, source="x.shape[1]")
    _, code = render_fix(Fix(), {"x": (a, b)}, env)
    assert 'in_2 = Dim("in_2", min=2)' in code and 'in_3 = Dim("in_3", min=2)' in code
    assert _pasted(code)["x"].keys() == {0, 1}


def test_what_a_dynamic_shapes_dict_cannot_state_is_not_rendered():
    env, batch, other = _env()
    assert render_fix(Fix(), {"*args[0]": (batch,)}, env) is None  # no parameter name
    two_roots = Fix(derived={other: batch + sympy.Symbol("fresh", integer=True)})
    assert render_fix(two_roots, {"y": (other,)}, env) is None  # a Dim has one root


def _violation(env, expr, frames=(FRAME,), counterexample=None):
    guard = Guard(expr, True, frames)
    return Violation(guard, Decision("inconclusive", counterexample), counterexample)


def test_the_constraint_error_lists_each_violated_guard_once_in_the_users_terms():
    env, batch, other = _env()
    same = _violation(env, sympy.Eq(other, batch), counterexample={batch: 2, other: 3})
    violations = [same, same, _violation(env, sympy.Le(batch, 64), frames=())]
    error = constraint_error(env, violations)
    assert isinstance(error, ConstraintViolationError) and error.code == "UB003"
    assert error.frames == (FRAME,)
    lines = error.details.splitlines()
    assert lines[0] == "Guards not implied by the spec:"
    assert lines[1] == ("- y.shape[0] == x.shape[0]  (fails for x.shape[0] = 2, "
                        "y.shape[0] = 3)  at model.py:31: return x * 2 + y")
    assert lines[2] == "- x.shape[0] <= 64"
    assert len(lines) == 3
    assert "Narrow the Dim ranges" in error.hint


def test_the_constraint_error_carries_a_verified_suggestion():
    env, batch, other = _env()
    spec = {"x": {0: torch.export.Dim("batch")}, "y": {0: torch.export.Dim("batch")}}
    suggestion = (["y.shape[0] equals x.shape[0]"], "dynamic_shapes = {...}", spec)
    error = constraint_error(env, [_violation(env, sympy.Eq(other, batch))], suggestion)
    assert "Suggested fix (proven for every admitted size, and verified by exporting again " \
           "with it):\n- y.shape[0] equals x.shape[0]\n\ndynamic_shapes = {...}" in error.details
    assert error.hint == "Use the suggested dynamic_shapes above."
    assert error.suggested_dynamic_shapes is spec
    assert error.suggested_code == "dynamic_shapes = {...}"
    assert len(error.violations) == 1 and "==" in error.violations[0].guard


def test_dims_inside_containers_are_rendered_in_the_same_structure():
    env, batch, other = _env()
    nested = env.create_symbol("", 3, source="xs[0].shape[0]")
    spec, code = render_fix(Fix(), {"xs": [TensorDims((nested, 4)), TensorDims((5,))],
                                    "y": (other,)}, env)
    assert isinstance(spec["xs"], list) and spec["xs"][1] is None
    assert set(spec["xs"][0]) == {0} and spec["y"] is not None
    assert '"xs": [{0: xs_0__dim0}, None],' in code
