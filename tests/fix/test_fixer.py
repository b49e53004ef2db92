"""unbroken.fix.fixer and verify, end to end: patches that export and match eager are
verified; a wrong patch, or one whose decisions the draws cannot drive both ways, is not."""
import torch

from unbroken.fix import fix_case, rewrites
from unbroken.fix.source import Edit

BRANCHY = """\
import torch
import unbroken


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            h = h.relu() * 2
            z = h + x
        else:
            z = x - h
        return z


unbroken.case(Branchy(), (torch.randn(3, 4),))
"""


def test_cond_fix_is_verified_exported_and_drives_both_branches(case_file, tmp_path):
    (case,) = case_file(BRANCHY)
    before = (tmp_path / "m.py").read_text()
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [r.rule for r in fix.rewrites] == ["cond"]
    assert fix.verification.exported and fix.verification.matches
    assert set(fix.verification.decisions.values()) == {"False, True"}
    assert "cond" in fix.verification.program
    assert (tmp_path / "m.py").read_text() == before  # the original is never touched
    assert "torch.cond(h.sum() > 0, _true_branch, _false_branch" in fix.diffs()["m.py"]


def test_a_wrong_rewrite_is_labelled_unverified(case_file, tmp_path, monkeypatch):
    """A deliberately broken rewrite (the arms swapped) exports but differs from eager."""
    real = rewrites.rewrites_for

    def swapped(src, code, line, message, tensors):
        found = real(src, code, line, message, tensors)
        out = []
        for r in found:
            new = r.edits[0].new.replace("_true_branch, _false_branch",
                                         "_false_branch, _true_branch")
            out.append(rewrites.Rewrite(r.rule, r.path, r.line,
                                        (Edit(r.edits[0].start, r.edits[0].end, new),),
                                        r.summary))
        return out

    monkeypatch.setattr("unbroken.fix.fixer.rewrites_for", swapped)
    (case,) = case_file(BRANCHY)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "unverified"
    assert "differs from eager" in fix.verification.reason


def test_a_decision_no_draw_can_flip_is_not_verified(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken

        class AlwaysTrue(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("flag", torch.tensor(True))  # no draw changes a flag

            def forward(self, x):
                if self.flag:
                    return x + 1
                return x - 1

        unbroken.case(AlwaysTrue(), (torch.randn(3),))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "unverified"
    assert "took only True" in fix.verification.reason


def test_where_that_does_not_hold_falls_back_to_cond(case_file, tmp_path):
    """Arms of different shapes: torch.where broadcasts, so eager differs; torch.cond
    refuses different shapes at export. Neither verifies; the report says why."""
    (case,) = case_file("""\
        import torch
        import unbroken

        class Shapes(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x.sum(0)
                return x

        unbroken.case(Shapes(), (torch.randn(3, 3),))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "unverified" and fix.verification.reason


def test_untaken_branch_breaks_are_found_and_fixed_in_later_rounds(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken

        class Nested(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    y = x * 2
                else:
                    if x.mean() < -1:
                        y = x - 1
                    else:
                        y = x + 1
                return y

        unbroken.case(Nested(), (torch.ones(3),))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert {b.round for b in fix.breaks} == {1, 2}  # the inner if sits on the untaken side
    assert [r.rule for r in fix.rewrites] == ["cond", "where"]


def test_no_break_no_fix(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken
        unbroken.case(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
        """)
    assert fix_case(case, str(tmp_path)).status == "clean"
    assert torch.is_grad_enabled()


def test_dynamic_dims_are_drawn_at_the_edges_of_their_ranges(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken
        from torch.export import Dim

        class Rows(torch.nn.Module):
            def forward(self, x, y):
                if x.mean() > 0:
                    return x * y
                return x - y

        n = Dim("n", min=3, max=40)
        unbroken.case(Rows(), (torch.randn(8, 3), torch.randn(8, 3)),
                      dynamic_shapes={"x": {0: n}, "y": {0: n}})
        """)
    from unbroken.fix.verify import edge_inputs

    edges = list(edge_inputs(case.args, case.kwargs or {}, case.dynamic_shapes))
    assert [[t.shape[0] for t in args] for _, args, _, _ in edges] == [[3, 3], [40, 40]]
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason


def test_a_spec_that_does_not_hold_is_replaced_in_the_declaration(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken
        from torch.export import Dim


        class Halves(torch.nn.Module):
            def forward(self, x):
                a, b = x.split(x.shape[0] // 2)
                if a.sum() > b.sum():
                    return a - b
                return b - a


        unbroken.case(Halves(), (torch.randn(8, 3),),
                      dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}})
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [r.rule for r in fix.rewrites] == ["where", "dynamic-shapes"]
    assert "dynamic_shapes={'x':" in fix.texts[case.filename][1]


GUARDED = """\
import torch
import unbroken


class Guarded(torch.nn.Module):
    def forward(self, scores, target):
        scores = scores.clone()
        pad = target.eq(0)
        if GUARD:
            scores[pad] = 0.0
        return scores


unbroken.case(Guarded(), (torch.randn(2, 5), torch.tensor([[3, 0, 1, 1, 2], [1, 1, 1, 1, 2]])))
"""


def test_a_guard_whose_body_is_a_no_op_when_false_is_dropped(case_file, tmp_path):
    (case,) = case_file(GUARDED.replace("GUARD", "pad.any()"))
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [r.rule for r in fix.rewrites] == ["unguard"]
    assert set(fix.verification.decisions.values()) == {"False, True"}


def test_a_guard_that_matters_is_not_dropped(case_file, tmp_path):
    """Unguarded, the write happens where the guard said no: verification rejects it."""
    (case,) = case_file(GUARDED.replace("GUARD", "target.sum() > 100"))
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "unverified" and "differs from eager" in fix.verification.reason


def test_a_counter_on_self_becomes_a_buffer_and_matches_eager_over_two_calls(case_file,
                                                                               tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken


        class Counting(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0
                self.lin = torch.nn.Linear(3, 3)

            def forward(self, x):
                self.calls = self.calls + 1
                return self.lin(x) * self.calls


        unbroken.case(Counting(), (torch.randn(2, 3),))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [(b.code, r.rule) for b, r in zip(fix.breaks, fix.rewrites)] == [("UB107", "counter")]
    assert case.model.calls == 0  # the user's model is never run for the check


def test_a_guarded_masked_write_that_matters_is_fixed_with_a_functional_cond(case_file,
                                                                              tmp_path):
    """Unguarded, the write would happen where the guard said no (rejected); the torch.cond
    with the write made functional exports and matches, requires_grad included (a parameter
    written under the mask)."""
    (case,) = case_file("""\
        import torch
        import unbroken


        class Indicator(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Parameter(torch.randn(4))

            def forward(self, ids, x):
                x = x.clone()
                mask = ids == 7
                if mask.any():
                    x[mask] = self.emb.to(x.dtype)
                return x


        unbroken.case(Indicator(), (torch.tensor([[1, 7], [2, 3]]), torch.randn(2, 2, 4)))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [r.rule for r in fix.rewrites] == ["cond"]
    assert "x = x.index_put((mask,), self.emb.to(x.dtype))" in fix.diffs()["m.py"]
    assert set(fix.verification.decisions.values()) == {"False, True"}


def test_a_continue_guard_in_a_loop_is_fixed(case_file, tmp_path):
    (case,) = case_file("""\
        import torch
        import unbroken


        class Chains(torch.nn.Module):
            def forward(self, x, ids):
                best = torch.zeros(())
                for i in range(3):
                    c = (ids == i).float()
                    if c.sum() == 0:
                        continue
                    best = torch.maximum(best, (x * c).sum() / c.sum())
                return best


        unbroken.case(Chains(), (torch.rand(6), torch.tensor([0, 0, 1, 1, 1, 0])))
        """)
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert "torch.cond(c.sum() == 0, _skip_branch, _rest_branch" in fix.diffs()["m.py"]


NONE_MASK = """\
import torch
import unbroken


class PaddingMask(torch.nn.Module):
    def forward(self, ids, scores):
        mask = ids.eq(1)
        if not mask.any():
            mask = None
        if mask is not None:
            USE
        return scores


unbroken.case(PaddingMask(), (torch.tensor([[5, 6, 1], [7, 1, 1]]), torch.randn(2, 3)))
"""


def test_a_none_mask_sentinel_is_dropped_when_the_empty_mask_does_the_same(case_file,
                                                                           tmp_path):
    (case,) = case_file(NONE_MASK.replace(
        "USE", 'scores = scores.masked_fill(mask, float("-inf"))'))
    fix = fix_case(case, str(tmp_path))
    assert fix.status == "verified", fix.verification.reason
    assert [r.rule for r in fix.rewrites] == ["drop-none"]
    assert set(fix.verification.decisions.values()) == {"False, True"}


def test_a_none_mask_sentinel_that_matters_is_not_dropped(case_file, tmp_path):
    """With the empty mask kept, the division by its count gives inf/nan where the original
    skipped it: verification rejects the rewrite."""
    (case,) = case_file(NONE_MASK.replace("USE", "scores = scores / mask.sum()"))
    fix = fix_case(case, str(tmp_path))
    assert fix.status != "verified"
