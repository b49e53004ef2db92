"""Differential test over fixed programs: generated ``if``/``else`` programs (random
conditions, random arms, every syntactic form the rewrites cover); whenever ``unbroken fix``
calls a patch verified, the patched model, in eager and exported, matches the original on
further inputs that hypothesis draws (and the decision goes both ways among them)."""
import tempfile
import textwrap
from pathlib import Path

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
