"""The error taxonomy: every error unbroken raises is an UnbrokenError; refusals (raised on
purpose) and internal errors (unbroken's bugs) are disjoint branches under it."""
import pytest

import unbroken
from unbroken.symbolic import diagnostics

REFUSALS = [unbroken.ExportUsageError, unbroken.InputMismatchError,
            unbroken.ConstraintViolationError, unbroken.DataDependentError,
            unbroken.UnsupportedError, unbroken.SerializationError, unbroken.GraphBreakError]


@pytest.mark.parametrize("kind", REFUSALS)
def test_refusals_share_one_base(kind):
    assert issubclass(kind, unbroken.RefusalError)
    assert issubclass(kind, unbroken.UnbrokenError)


def test_internal_error_is_not_a_refusal():
    assert issubclass(unbroken.InternalError, unbroken.UnbrokenError)
    assert not issubclass(unbroken.InternalError, unbroken.RefusalError)
    with pytest.raises(unbroken.UnbrokenError):  # `except UnbrokenError` still catches all
        raise unbroken.InternalError("boom")
    try:
        raise unbroken.InternalError("boom")
    except unbroken.RefusalError:  # pragma: no cover - the assertion below is the test
        pytest.fail("an InternalError was caught as a refusal")
    except unbroken.InternalError as error:
        assert diagnostics.BUG_NOTE in error.render()


def test_add_details_appends_and_rerenders():
    error = unbroken.UnsupportedError("no", details="first")
    assert error.add_details("second") is error
    assert "first\n\nsecond" in str(error)
