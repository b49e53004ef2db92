"""unbroken.symbolic.torch_compat: the one module that reaches into torch's internals."""
import ast
import functools
import warnings
from pathlib import Path

import pytest
import torch

import unbroken
from unbroken.symbolic import torch_compat

PACKAGE = Path(unbroken.__file__).parent
COMPAT = PACKAGE / "symbolic" / "torch_compat.py"

# Private torch modules that are public in all but name, used directly everywhere (see the
# module docstring of torch_compat).
_ALLOWED_PRIVATE = ("torch.utils._pytree",)


def _package_sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != COMPAT:
            yield path, ast.parse(path.read_text(), str(path))


def _private(dotted: str) -> bool:
    """``torch._C``, ``torch.export._unlift``...: a torch module path with a private part."""
    parts = dotted.split(".")
    return parts[0] == "torch" and any(p.startswith("_") and not p.startswith("__")
                                       for p in parts[1:]) and \
        not dotted.startswith(_ALLOWED_PRIVATE)


def _dotted(node) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(names)])
    return None


def test_no_module_outside_compat_tests_the_torch_version():
    offenders = []
    for path, tree in _package_sources():
        for node in ast.walk(tree):
            dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
            if dotted in ("torch.__version__", "torch.version") or (
                    dotted or "").startswith("torch.version."):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {dotted}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "hasattr" and len(node.args) == 2 and \
                    (_dotted(node.args[0]) or "").startswith("torch") and \
                    isinstance(node.args[1], ast.Constant):  # hasattr(torch.x, "new_api")
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: hasattr(torch...)")
    assert not offenders, "torch version tests belong in torch_compat:\n" + "\n".join(offenders)


def test_no_module_outside_compat_reaches_into_private_torch():
    offenders = []
    for path, tree in _package_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                modules = [_dotted(node) or ""]
            else:
                continue
            for module in modules:
                if _private(module) and not module.startswith(("torch._check",
                                                               "torch.ops.")):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {module}")
    assert not offenders, "private torch names belong in torch_compat:\n" + "\n".join(
        sorted(set(offenders)))


def test_every_entry_resolves_on_the_running_torch():
    for name in torch_compat.__all__:
        value = getattr(torch_compat, name)
        if name != "OPAQUE_SQRT":  # optional by design (None where torch has no sqrt function)
            assert value is not None, name


def test_every_entry_is_documented():
    """Each name in ``__all__`` has a docstring (a constant: the string right after it)."""
    documented = set()
    body = ast.parse(COMPAT.read_text()).body
    for node, after in zip(body, body[1:] + [None]):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
            documented.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(after, ast.Expr) and \
                isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            documented.update(t.id for t in node.targets if isinstance(t, ast.Name))
    documented.update(name for name, (_, _, doc) in torch_compat._LAZY.items() if doc)
    assert [n for n in torch_compat.__all__ if n not in documented] == []


def test_lazy_entries_resolve_to_torch_objects():
    """A lazy entry is torch's object itself (``from ... import`` sees the same)."""
    import torch.export._unlift
    import torch.utils._sympy.functions
    import torch.utils._sympy.value_ranges

    from unbroken.symbolic.torch_compat import FloorDiv, ValueRanges
    assert FloorDiv is torch.utils._sympy.functions.FloorDiv
    assert ValueRanges is torch.utils._sympy.value_ranges.ValueRanges
    assert torch_compat.StatefulGraphModule is torch.export._unlift._StatefulGraphModule
    with pytest.raises(AttributeError):
        torch_compat.no_such_entry  # noqa: B018


def test_running_torch_is_tested():
    assert torch_compat.TORCH_VERSION in torch_compat.TESTED_TORCH, torch.__version__


@pytest.mark.parametrize("text, version", [("2.14.1+cu130", (2, 14)), ("2.13.0", (2, 13)),
                                           ("2.16.0.dev20260101", (2, 16)), ("garbage", (0, 0))])
def test_parse_version(text, version):
    assert torch_compat.parse_version(text) == version


def test_untested_torch_warns_once(monkeypatch):
    monkeypatch.setattr(torch_compat, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch_compat.warn_if_untested("2.16.0") is True
        assert torch_compat.warn_if_untested("2.16.0") is False
        assert torch_compat.warn_if_untested("2.12.1") is False
    assert [type(w.message) for w in caught] == [torch_compat.UntestedTorchWarning]
    message = str(caught[0].message)
    assert "2.16.0" in message and "2.13, 2.14, 2.15" in message
    assert unbroken.UntestedTorchWarning is torch_compat.UntestedTorchWarning


@pytest.mark.parametrize("version", ["2.13.0", "2.14.1+cu130", "2.15.0"])
def test_tested_torch_does_not_warn(monkeypatch, version):
    monkeypatch.setattr(torch_compat, "_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch_compat.warn_if_untested(version) is False


def test_import_warns_on_an_untested_torch(tmp_path):
    """A fresh process whose torch claims 2.99 warns once at ``import unbroken``."""
    import subprocess
    import sys
    code = ("import warnings, torch\n"
            "torch.__version__ = '2.99.0'\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import unbroken, unbroken.exporter.pipeline\n"
            "print(sum(type(w.message).__name__ == 'UntestedTorchWarning' for w in caught))\n")
    root = PACKAGE.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


def test_function_apply_is_what_a_function_class_binds():
    assert torch_compat.function_apply_class(_Double.apply) is _Double
    assert torch_compat.function_apply_class(torch.relu) is None
    assert torch_compat.function_apply_class(_Double.forward) is None
    # FUNCTION_APPLY called with the class first runs the Function, on every release
    assert torch.equal(torch_compat.FUNCTION_APPLY(_Double, torch.ones(2)), torch.full((2,), 2.))


def test_view_helpers():
    base = torch.zeros(4)
    view = base[1:]
    assert torch_compat.is_view(view) and torch_compat.view_base(view) is base
    before = torch_compat.version_counter(base)
    view.add_(1)
    assert torch_compat.version_counter(base) == before + 1
    assert torch_compat.overload_name(torch.ops.aten.add.Tensor) == "Tensor"
    assert torch_compat.op_schema(torch.ops.aten.add_.Tensor).is_mutable


def _same_decomposition(mine, torch_s) -> bool:
    """The same function, or torch's per-call wrapper of one op's C++ decomposition (a
    ``functools.partial`` made anew on each materialization) of the same op."""
    if mine is torch_s:
        return True
    return isinstance(mine, functools.partial) and isinstance(torch_s, functools.partial) \
        and mine.func.__qualname__ == torch_s.func.__qualname__ \
        and mine.args == torch_s.args and mine.keywords == torch_s.keywords


def test_core_table_is_torch_s_materialized_table():
    mine = torch_compat.core_aten_decompositions()
    again = torch_compat.core_aten_decompositions()
    reference = dict(torch._decomp.core_aten_decompositions().items())
    assert mine.keys() == reference.keys() == again.keys()
    assert all(_same_decomposition(mine[op], reference[op]) for op in reference)
    mine.clear()  # each call gives a dict of its own
    assert torch_compat.core_aten_decompositions().keys() == reference.keys()


def test_core_table_follows_new_registrations():
    """A custom op given a CompositeImplicitAutograd kernel after a table was made is in the
    next one; gone again once its library is destroyed; a decomposition registered over a
    core entry replaces it, and the old one is back when it is removed."""
    torch_compat.core_aten_decompositions()
    library = torch.library.Library("unbroken_core_table", "DEF")
    try:
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x + x, "CompositeImplicitAutograd")
        op = torch.ops.unbroken_core_table.twice.default
        table = torch_compat.core_aten_decompositions()
        assert op in table
        assert torch.equal(table[op](torch.ones(2)), torch.full((2,), 2.))
    finally:
        library._destroy()
    assert op not in torch_compat.core_aten_decompositions()

    registry = torch._decomp.global_decomposition_table["post_autograd"]
    target = torch.ops.aten.addr.default
    old = registry[target]

    def replacement(*args, **kwargs):
        return old(*args, **kwargs)

    registry[target] = replacement
    try:
        assert torch_compat.core_aten_decompositions()[target] is replacement
    finally:
        registry[target] = old
    assert torch_compat.core_aten_decompositions()[target] is old


class _Stateful(torch.nn.Module):
    """Parameters, a buffer written in place, a constant tensor, two outputs."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros(3))
        self.scale = torch.tensor(2.0)

    def forward(self, x, y):
        self.count.add_(1)
        out = self.linear(x).relu() * self.scale
        return out, out.sum(-1) + y


def _program_inputs():
    return torch.randn(5, 4), torch.randn(5)


@pytest.mark.matrix
@pytest.mark.parametrize("dynamic", [False, True])
def test_new_exported_program_is_torch_s_constructor(dynamic):
    """``new_exported_program`` sets what torch's own ``ExportedProgram(...)`` sets, to equal
    values, on the running release (a new torch that adds a field fails here), and only
    differs in generating the graph module's code when first needed."""
    from unbroken.ir.parts import torch_program_args

    spec = ({0: torch.export.Dim("b")}, {0: torch.export.Dim("b")}) if dynamic else None
    program = unbroken.export(_Stateful(), _program_inputs(), dynamic_shapes=spec)
    ours = torch_compat.new_exported_program(type(program), **torch_program_args(program.parts()))
    torch_s = type(program)(**torch_program_args(program.parts()))
    assert set(vars(ours)) == set(vars(torch_s))
    for name in vars(torch_s):
        if name != "_graph_module":
            assert repr(getattr(ours, name)) == repr(getattr(torch_s, name)), name
    assert isinstance(ours.graph_module, torch_compat.DeferredCodeGraphModule)
    assert type(ours.graph_module)._needs_recompile()  # no code generated by the constructor
    assert ours.graph_module.code == torch_s.graph_module.code
    assert set(vars(ours.graph_module)) >= set(vars(torch_s.graph_module)) - {"_code"}


@pytest.mark.matrix
def test_deferred_code_is_generated_when_needed():
    """The program's graph module generates its code at the first call, ``forward`` read,
    ``.code``, ``str()`` or pickle, and again after the graph changes and ``recompile()``."""
    import copy
    import inspect
    import pickle

    x, y = _program_inputs()
    model = _Stateful()
    expected = copy.deepcopy(model)(x, y)

    def fresh():
        module = unbroken.export(copy.deepcopy(model), (x, y)).graph_module
        assert type(module)._needs_recompile()
        return module

    params = dict(model.named_parameters())
    state = (params["linear.weight"], params["linear.bias"], torch.zeros(3), torch.tensor(2.0))
    module = fresh()
    assert list(inspect.signature(module.forward).parameters) == [
        "p_linear_weight", "p_linear_bias", "b_count", "c_scale", "x", "y"]
    new_count, *outputs = fresh()(*state, x, y)
    torch.testing.assert_close(tuple(outputs), expected)
    torch.testing.assert_close(new_count, torch.ones(3))
    assert "aten.relu" in fresh().code and "aten.relu" in str(fresh())
    assert "aten.relu" in pickle.loads(pickle.dumps(fresh())).code
    module = fresh()
    traced = torch.fx.symbolic_trace(module)
    assert [n.target for n in traced.graph.nodes if n.op == "placeholder"][-2:] == ["x", "y"]
    relu = next(n for n in module.graph.nodes if n.target is torch.ops.aten.relu.default)
    relu.target = torch.ops.aten.sigmoid.default
    module.recompile()
    assert type(module)._needs_recompile()
    assert "aten.sigmoid" in module.code and "aten.relu" not in module.code
