"""unbroken's errors are also the exception classes torch.export raises in the same situation
(unbroken.symbolic.diagnostics.drop_in): each row runs torch.export and unbroken side by side
and catches both with torch's class. The table is docs/user-guide.md, "Errors"."""
from __future__ import annotations

import io
import pickle
import zipfile

import pytest
import torch
from torch.export import Dim

import unbroken
from unbroken.symbolic.diagnostics.drop_in import torch_compatible


def _dynamo_exc():
    import torch._dynamo.exc as exc

    return exc


def _guard_on_data():
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return GuardOnDataDependentSymNode


class TensorBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


class CountBranch(torch.nn.Module):
    def forward(self, x):
        n = x.nonzero().shape[0]
        if n > 2:
            return x * 2
        return x


class Pairs(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 4, 2).sum(1)


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class OpensAFile(torch.nn.Module):
    def forward(self, x):
        open("/dev/null").close()
        return x + 1


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("negative sizes are not supported")


def _export(exporter, model, args, dynamic_shapes=None, strict=True):
    if exporter is unbroken.export:
        return unbroken.export(model, args, dynamic_shapes=dynamic_shapes)
    return torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=strict)


#: (situation, how to get there with an exporter, torch's class (a function: dynamo is loaded
#: on demand), strict?, UserErrorType name or None, unbroken's class)
EXPORT_ROWS = [
    ("data-dependent branch on a tensor's truth value",
     lambda e: _export(e, TensorBranch(), (torch.randn(4),)),
     lambda: _dynamo_exc().Unsupported, True, None, unbroken.GraphBreakError),
    ("data-dependent branch on a tensor's truth value",
     lambda e: _export(e, TensorBranch(), (torch.randn(4),), strict=False),
     _guard_on_data, False, None, unbroken.GraphBreakError),
    ("decision on a data-dependent size",
     lambda e: _export(e, CountBranch(), (torch.ones(6),), {"x": {0: Dim("n", max=64)}}),
     lambda: _dynamo_exc().UserError, True, "ANTI_PATTERN", unbroken.GraphBreakError),
    ("decision on a data-dependent size",
     lambda e: _export(e, CountBranch(), (torch.ones(6),), {"x": {0: Dim("n", max=64)}},
                       strict=False),
     _guard_on_data, False, None, unbroken.GraphBreakError),
    ("constraint violation",
     lambda e: _export(e, Pairs(), (torch.randn(16, 2),), {"x": {0: Dim("n", max=100)}}),
     lambda: _dynamo_exc().UserError, True, "CONSTRAINT_VIOLATION",
     unbroken.ConstraintViolationError),
    ("dynamic_shapes names no argument",
     lambda e: _export(e, AddOne(), (torch.randn(4),), {"y": {0: Dim("n")}}),
     lambda: _dynamo_exc().UserError, True, "INVALID_INPUT", unbroken.ExportUsageError),
    ("example input of an unsupported type",
     lambda e: _export(e, AddOne(), (object(),)),
     lambda: _dynamo_exc().UserError, True, "INVALID_INPUT", unbroken.ExportUsageError),
    ("example inputs that do not bind to forward's signature",
     lambda e: _export(e, AddOne(), (torch.randn(4), torch.randn(4))),
     lambda: TypeError, True, None, unbroken.ExportUsageError),
    ("something else than a module or a function",
     lambda e: _export(e, 42, (torch.randn(4),)),
     lambda: ValueError, True, None, unbroken.ExportUsageError),
    ("call to an unsupported function",
     lambda e: _export(e, OpensAFile(), (torch.randn(4),)),
     lambda: _dynamo_exc().Unsupported, True, None, unbroken.GraphBreakError),
    ("forward raises",
     lambda e: _export(e, Raises(), (torch.randn(4),)),
     lambda: _dynamo_exc().Unsupported, True, None, unbroken.GraphBreakError),
    ("forward raises",
     lambda e: _export(e, Raises(), (torch.randn(4),), strict=False),
     lambda: ValueError, False, None, unbroken.GraphBreakError),
]


@pytest.mark.parametrize("situation, reach, torch_class, strict, error_type, ours",
                         EXPORT_ROWS, ids=[f"{r[0]}{'' if r[3] else ' (non-strict)'}"
                                           for r in EXPORT_ROWS])
def test_export_errors_are_torchs(situation, reach, torch_class, strict, error_type, ours):
    with pytest.raises(torch_class()) as theirs:
        reach(torch.export.export)
    with pytest.raises(torch_class()) as mine:
        reach(unbroken.export)
    assert isinstance(mine.value, ours) and isinstance(mine.value, unbroken.RefusalError)
    if error_type is not None:
        kind = getattr(_dynamo_exc().UserErrorType, error_type)
        assert theirs.value.error_type is kind and mine.value.error_type is kind
    assert type(mine.value).__name__ == ours.__name__ if ours is not unbroken.GraphBreakError \
        else type(mine.value).__name__ in ("GraphBreakError", "TracedException")


def _program(exporter):
    model, spec = AddOne(), {"x": {0: Dim("n", min=2, max=10)}}
    return _export(exporter, model, (torch.randn(4, 3),), spec)


MODULE_ROWS = [
    ("a specialized size differs", lambda m: m(torch.randn(4, 5)), AssertionError,
     unbroken.InputMismatchError),
    ("a dynamic size above its max", lambda m: m(torch.randn(11, 3)), AssertionError,
     unbroken.InputMismatchError),
]


@pytest.mark.parametrize("situation, call, torch_class, ours", MODULE_ROWS,
                         ids=[r[0] for r in MODULE_ROWS])
def test_module_input_errors_are_torchs(situation, call, torch_class, ours):
    with pytest.raises(torch_class, match="Guard failed"):
        call(_program(torch.export.export).module())
    with pytest.raises(torch_class) as mine:
        call(_program(unbroken.export).module())
    assert isinstance(mine.value, ours)


def test_calling_the_program_is_torchs_runtime_error():
    with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
        _program(torch.export.export)(torch.randn(4, 3))
    with pytest.raises(RuntimeError) as mine:
        _program(unbroken.export)(torch.randn(4, 3))
    assert isinstance(mine.value, unbroken.ExportUsageError)


def test_loading_what_is_not_an_archive_is_torchs_bad_zip_file():
    with pytest.raises(zipfile.BadZipFile):
        torch.export.load(io.BytesIO(b"not a program"))
    with pytest.raises(zipfile.BadZipFile) as mine:
        unbroken.load(io.BytesIO(b"not a program"))
    assert isinstance(mine.value, unbroken.SerializationError)


def test_the_classes_inside_unbroken_stay_unbrokens_own():
    # inside, a graph break must not be caught by a handler for RuntimeError (unbroken's or
    # torch's own fallbacks): only the error that leaves unbroken becomes torch's class too
    assert not issubclass(unbroken.GraphBreakError, RuntimeError)
    assert not issubclass(unbroken.InputMismatchError, AssertionError)
    error = unbroken.ConstraintViolationError("spec too wide")
    assert not isinstance(error, RuntimeError)
    assert torch_compatible(error) is error and isinstance(error, RuntimeError)
    assert type(error).__name__ == "ConstraintViolationError"
    assert type(torch_compatible(unbroken.ConstraintViolationError("again"))) is type(error)


def test_a_compatible_error_keeps_its_data_and_pickles():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(TensorBranch(), (torch.randn(4),))
    error = info.value
    assert error.code == "UB101" and error.msg == str(error) and error.gb_type == "UB101"
    assert error.real_stack[-1].line == "if x.sum() > 0:"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert isinstance(again, _guard_on_data()) and again.frames == error.frames


def test_listed_graph_breaks_are_torchs_classes_too():
    (error,) = unbroken.find_graph_breaks(TensorBranch(), (torch.randn(4),))
    assert isinstance(error, _dynamo_exc().Unsupported) and isinstance(error, _guard_on_data())


def _chunk_written(x):
    a, _ = (x * 2).chunk(2)
    a.zero_()  # eager's autograd refuses this write when x requires grad
    return a


def test_a_write_eager_autograd_refuses_in_module_is_eagers_runtime_error():
    x = torch.randn(4)
    with pytest.raises(RuntimeError, match="is being modified inplace"):
        _chunk_written(x.clone().requires_grad_())
    module = unbroken.export(_chunk_written, (x,)).module()
    with pytest.raises(RuntimeError) as mine:
        module(x.clone().requires_grad_())
    assert isinstance(mine.value, unbroken.InputMismatchError)
    assert isinstance(mine.value, AssertionError)
