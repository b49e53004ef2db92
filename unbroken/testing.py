"""Test helpers: assert that a model exports, with the diagnostic as the failure message.

::

    def test_classifier_exports():
        unbroken.testing.assert_exports(Classifier().eval(), (torch.randn(8, 3, 224, 224),))

A refusal fails the test with :class:`ExportFailed` (an ``AssertionError``) whose message is
the diagnostic itself — ``model.py:14: [UB101] ...``, the user's line and the fix — and whose
traceback stops at the test: pytest hides this module's frame (``__tracebackhide__``) and the
exception is raised without unbroken's internal frames, so ``--tb=line`` points at the test.
"""
from __future__ import annotations

from .exporter import pipeline
from .symbolic.diagnostics import InternalError, UnbrokenError

__all__ = ["ExportFailed", "assert_exports"]


class ExportFailed(AssertionError):
    """``unbroken.export`` refused a model in a test.

    error: the ``UnbrokenError`` (its ``code``, ``frames``, ``hint``, ``to_dict()``).
    """

    def __init__(self, error):
        self.error = error
        where = error.location
        prefix = f"{where.filename}:{where.lineno}: " if where is not None else ""
        super().__init__(prefix + error.render())


def assert_exports(model, args, kwargs=None, **export_kwargs):
    """Export ``model`` with :func:`unbroken.export` (same arguments) and return the
    ``ExportedProgram``; raise :class:`ExportFailed` with the diagnostic when it is refused.

    An internal error of unbroken is not caught: it is a bug in unbroken, not a failed
    expectation about the model.
    """
    __tracebackhide__ = True
    try:
        return pipeline.export(model, args, kwargs, **export_kwargs)
    except InternalError:
        raise
    except UnbrokenError as err:
        failure = ExportFailed(err)
    raise failure.with_traceback(None) from None
