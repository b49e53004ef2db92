"""unbroken.fix.rewrites: each rewrite as text (no tracing): the construct found by ``ast``,
the edit minimal, the result valid Python that keeps comments and formatting around it."""
import ast
import textwrap

from unbroken.fix.rewrites import NoRewrite, rewrites_for
from unbroken.fix.source import SourceFile, apply_edits


def _rewrite(code, kind, line, message="", tensors=("x",), rule=None):
    src = SourceFile("m.py", textwrap.dedent(code))
    found = rewrites_for(src, kind, line, message, frozenset(tensors))
    if isinstance(found, NoRewrite):
        return found
    chosen = next(r for r in found if rule is None or r.rule == rule)
    text = apply_edits(src.text, chosen.edits)
    ast.parse(text)  # every rewrite is valid Python
    return text


IF_RETURN = """\
    import torch
    def f(x):
        if x.sum() > 0:  # the sign decides
            return torch.sin(x)
        return torch.cos(x)
    """


def test_if_return_becomes_torch_where_with_the_comment_kept():
    text = _rewrite(IF_RETURN, "UB101", 3, rule="where")
    assert "return torch.where(x.sum() > 0, torch.sin(x), torch.cos(x))  # the sign decides" \
        in text


def test_if_return_becomes_torch_cond_with_operands():
    text = _rewrite(IF_RETURN, "UB101", 3, rule="cond")
    assert "def _true_branch(x):\n        return torch.sin(x)" in text
    assert "def _false_branch(x):\n        return torch.cos(x)" in text
    assert "return torch.cond(x.sum() > 0, _true_branch, _false_branch, (x,))" in text


def test_if_else_assignments_become_torch_cond_returning_the_assigned_names():
    code = """\
    import torch
    def f(self, x, y):
        h = x * 2
        if h.mean() > 0:
            # comment in the branch
            h = h.relu()
            out = h + y
        else:
            out = y
        return out * h
    """
    text = _rewrite(code, "UB101", 4, tensors=("x", "y", "h"), rule="cond")
    assert "    # comment in the branch" in text
    assert "return (h, out)" in text and "return (h.clone(), out.clone())" in text
    assert "h, out = torch.cond(h.mean() > 0, _true_branch, _false_branch, (h, y))" in text
    assert "self" not in text.split("def _true_branch(")[1].split(")")[0]  # a closure


def test_single_assignment_without_else_becomes_torch_where():
    code = "import torch\ndef f(x):\n    if x.mean() > 0:\n        x = x * 2\n    return x\n"
    assert "x = torch.where(x.mean() > 0, x * 2, x)" in _rewrite(code, "UB101", 3, rule="where")


def test_augmented_assignment_and_boolean_operators():
    code = ("import torch\ndef f(x):\n    if x.sum() > 0 and not x.max() > 5:\n"
            "        x += 1\n    return x\n")
    text = _rewrite(code, "UB101", 3, rule="where")
    assert "x = torch.where((x.sum() > 0) & (~(x.max() > 5)), x + (1), x)" in text


def test_elif_chain_goes_into_the_false_branch():
    code = """\
    import torch
    def f(x):
        if x.sum() > 0:
            y = x + 1
        elif x.sum() < -1:
            y = x - 1
        else:
            y = x
        return y
    """
    text = _rewrite(code, "UB101", 3, rule="cond")
    false_branch = text.split("def _false_branch(x):")[1]
    assert "        if x.sum() < -1:" in false_branch and "        else:" in false_branch


def test_ternary_becomes_where_or_cond():
    code = "import torch\ndef f(x):\n    y = x * 2 if x.sum() > 0 else x - 1\n    return y\n"
    assert "y = torch.where(x.sum() > 0, x * 2, x - 1)" in _rewrite(code, "UB101", 3,
                                                                    rule="where")
    assert "torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))" in \
        _rewrite(code, "UB101", 3, rule="cond")


def test_assert_becomes_torch_check_with_its_message():
    code = "import torch\ndef f(x):\n    assert (x > 0).all(), 'positive'\n    return x\n"
    assert "torch._check((x > 0).all().item(), lambda: 'positive')" in \
        _rewrite(code, "UB101", 3)


def test_item_used_as_index_gets_checks_after_the_binding():
    code = "import torch\ndef f(x, i):\n    j = i.item()\n    return x[j]\n"
    text = _rewrite(code, "UB105", 4, "Could not decide `5 <= -i.item() - 1`")
    assert "    j = i.item()\n    torch._check(j >= 0)  # assumption" in text
    assert "torch._check(j < x.shape[0])" in text


def test_tolist_length_and_loop():
    code = ("import torch\ndef f(x):\n    n = len(x.tolist())\n    s = 0\n"
            "    for v in x.tolist():\n        s = s + v\n    return x * n * s\n")
    assert "n = x.shape[0]" in _rewrite(code, "UB105", 3, "`.tolist()` on the tensor `x`")
    assert "for v in x:" in _rewrite(code, "UB105", 5, "`.tolist()` on the tensor `x`")


def test_data_write_and_numpy():
    code = "import torch\ndef f(x):\n    x.data[0, 0] = 3\n    return x\n"
    assert "x.detach()[0, 0] = 3" in _rewrite(code, "UB102", 3)
    code = ("import numpy as np\nimport torch\ndef f(x):\n    a = x.numpy()\n"
            "    return torch.from_numpy(np.exp(a) * 2)\n")
    text = _rewrite(code, "UB105", 4, "`.numpy()` on the tensor `x`")
    assert "a = x.detach()" in text and "return (torch.exp(a) * 2)" in text


def test_tabs_and_crlf_survive_a_cond_rewrite():
    code = "import torch\r\ndef f(x):\r\n\tif x.sum() > 0:\r\n\t\tx = x.sin()\r\n\t\ty = x\r\n" \
           "\telse:\r\n\t\ty = x.cos()\r\n\treturn y\r\n"
    src = SourceFile("m.py", code)
    found = rewrites_for(src, "UB101", 3, "", frozenset({"x"}))
    text = apply_edits(code, next(r for r in found if r.rule == "cond").edits)
    assert "\n" not in text.replace("\r\n", "")
    assert "\tdef _true_branch(x):\r\n\t\tx = x.sin()\r\n" in text
    ast.parse(text)


def test_loops_whose_trip_count_is_tensor_data_have_no_rewrite():
    code = "import torch\ndef f(x):\n    while x.sum() < 10:\n        x = x * 2\n    return x\n"
    found = _rewrite(code, "UB101", 3)
    assert isinstance(found, NoRewrite) and "trip count" in found.reason
    code = "import torch\ndef f(x, n):\n    for _ in range(n.item()):\n        x = x * 2\n" \
           "    return x\n"
    found = _rewrite(code, "UB105", 3, "`range()` bounded by the symbolic value u0")
    assert isinstance(found, NoRewrite) and "trip count" in found.reason


def test_a_break_without_a_rewrite_says_so():
    code = "import torch\ndef f(x):\n    return x + id(x)\n"
    found = _rewrite(code, "UB103", 3, "Unsupported builtin function: `id()` is called")
    assert isinstance(found, NoRewrite) and "UB103" in found.reason


def test_decision_on_a_value_read_with_item_keeps_the_tensor():
    code = ("import torch\ndef f(x, y):\n    a = x.item()\n    if a < 6:\n"
            "        return y.sin()\n    return y.cos()\n")
    text = _rewrite(code, "UB105", 4, "Could not decide `u0 < 6`", rule="where")
    assert "return torch.where((x) < 6, y.sin(), y.cos())" in text
    code = ("import torch\ndef f(m, h):\n    g = m.flatten().any().item()\n    if g:\n"
            "        h = h * 2\n    return h\n")
    text = _rewrite(code, "UB105", 4, "Could not decide `u0 != 0`", tensors=("m", "h"),
                    rule="where")
    assert "h = torch.where((m.flatten().any()).bool(), h * 2, h)" in text


def test_if_raise_becomes_torch_check_of_the_negation():
    code = ("import torch\ndef f(t):\n    if torch.any(t < 0):\n"
            "        raise ValueError('t cannot be negative')\n    return t.log1p()\n")
    text = _rewrite(code, "UB101", 3, tensors=("t",))
    assert "torch._check((~(torch.any(t < 0))).item(), lambda: 't cannot be negative')" in text


def test_counter_on_self_becomes_a_buffer_updated_in_place():
    code = ("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.calls = 0\n"
            "    def forward(self, x):\n        self.calls += 1\n        return x * self.calls\n")
    src = SourceFile("m.py", code)
    (rewrite,) = rewrites_for(src, "UB107", 7, "changes (StateWriteWarning)", frozenset())
    text = apply_edits(code, rewrite.edits)
    assert 'self.register_buffer("calls", torch.tensor(0))' in text
    assert "        self.calls.add_(1)\n" in text
    assert rewrite.buffers == ("M.calls",)


def test_masked_write_in_a_cond_branch_is_made_functional():
    """A torch.cond branch may not write into a tensor: ``t[mask] = v`` becomes
    ``t = t.index_put((mask,), v)`` (a number cast to t's dtype) and ``t.op_(...)``
    ``t = t.op(...)``; an index that is a slice or an int keeps the write on a copy."""
    code = ("import torch\ndef f(x, m):\n    x = x.clone()\n    if m.any():\n"
            "        x[m.eq(1)] = 1\n        x.clamp_(0, 5)\n    return x\n")
    text = _rewrite(code, "UB101", 4, tensors=("x", "m"), rule="cond")
    assert "x = x.index_put((m.eq(1),), torch.tensor(1, dtype=x.dtype, device=x.device))" \
        in text
    assert "x = x.clamp(0, 5)" in text and "x = x.clone()\n        x = x.index_put" not in text
    code = ("import torch\ndef f(x, v):\n    if v.any():\n        x[v, 0] = v.float()\n"
            "    return x\n")
    text = _rewrite(code, "UB101", 3, tensors=("x", "v"), rule="cond")
    assert "        x = x.clone()\n        x[v, 0] = v.float()" in text  # an int index: a copy


def test_continue_guard_becomes_torch_cond_over_the_rest_of_the_loop_body():
    code = """\
    import torch
    def f(x, ids):
        best = torch.zeros(())
        for i in range(3):
            c = (ids == i).float()
            if c.sum() == 0:  # empty
                continue
            avg = (x * c).sum() / c.sum()
            best = torch.maximum(best, avg)
        return best
    """
    text = _rewrite(code, "UB101", 6, tensors=("x", "ids", "best", "c", "avg"))
    assert "def _skip_branch(c, x, best):\n            return best.clone()" in text
    assert "def _rest_branch(c, x, best):\n            avg = (x * c).sum()" in text
    assert "best = torch.cond(c.sum() == 0, _skip_branch, _rest_branch, (c, x, best))  # empty" \
        in text
    assert "continue" not in text


def test_continue_guard_over_a_python_value_has_no_rewrite():
    code = ("import torch\ndef f(x):\n    n = 0\n    for i in range(3):\n"
            "        if x[i].sum() > 0:\n            continue\n        n = n + 1\n"
            "    return x * n\n")
    found = _rewrite(code, "UB101", 5)
    assert isinstance(found, NoRewrite) and "`n`" in found.reason


def test_a_none_sentinel_for_an_empty_mask_is_dropped_with_its_condition_kept():
    code = ("import torch\ndef f(ids, s):\n    m = ids.eq(1)\n    if not m.any():  # none\n"
            "        m = None\n    if m is not None:\n        s = s.masked_fill(m, 0.0)\n"
            "    return s\n")
    text = _rewrite(code, "UB101", 4, tensors=("ids", "s", "m"))
    assert "    # unbroken fix: dropped `if not m.any():` (it set `m` to None" in text
    assert "m = None" not in text and "    if m is not None:\n" in text
    # without a later `is None` test the None is a value the code uses: no such rewrite
    code = code.replace("if m is not None:", "if s.dim() > 0:")
    found = _rewrite(code, "UB101", 4, tensors=("ids", "s", "m"))
    assert isinstance(found, NoRewrite) or "dropped" not in found


def test_if_raise_keeps_the_comments_of_both_lines():
    code = ("import torch\ndef f(x):\n    if x.sum() < 0:  # sign\n"
            "        raise ValueError('negative')  # noqa: EM101\n    return x\n")
    text = _rewrite(code, "UB101", 3)
    assert "torch._check((~(x.sum() < 0)).item(), lambda: 'negative')  # sign  # noqa: EM101" \
        in text
