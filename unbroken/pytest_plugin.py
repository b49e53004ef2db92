"""The pytest plugin (entry point ``pytest11: unbroken``): ``unbroken.case`` declarations as
test items.

Opt-in, so that it never changes a project's own test collection::

    pytest --unbroken models/            # or, in pytest.ini / pyproject: unbroken_paths = models

collects every case declared in the ``*.py`` files under the given paths (the rules of
``unbroken check``: files and directories starting with ``_`` or ``.`` are skipped) as one test
item per case, named ``file.py::CaseName``. A refused case fails with the diagnostic itself as
the report (the user's line, every graph break, the fix), not a traceback of unbroken. Items
run in the pytest process: use ``pytest-timeout``/``pytest-xdist`` for timeouts and isolation,
or ``unbroken check`` which has both.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .frontend.opcodes.versions import python_support_error

__all__ = ["CaseFile", "CaseItem", "CaseRefused"]


def pytest_addoption(parser):
    group = parser.getgroup("unbroken", "unbroken export cases")
    group.addoption("--unbroken", action="append", default=[], metavar="PATH",
                    help="collect the unbroken.case(...) declarations under PATH as tests")
    parser.addini("unbroken_paths", type="paths", default=[],
                  help="paths whose unbroken.case(...) declarations are collected as tests")


def pytest_configure(config):
    paths = [Path(p).resolve() for p in config.getoption("unbroken")]
    paths += [Path(p).resolve() for p in config.getini("unbroken_paths")]
    config._unbroken_paths = paths
    problem = python_support_error() if paths else None
    if problem is not None:  # one usage error for the session, not a failure per case
        raise pytest.UsageError(f"unbroken: [UB119] {problem}")
    given = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    for path in paths:  # make pytest walk the case paths even when they are not test paths
        if not any(path == g or path.is_relative_to(g) for g in given):
            config.args.append(str(path))


def pytest_collect_file(file_path: Path, parent):
    paths = getattr(parent.config, "_unbroken_paths", ())
    if file_path.suffix != ".py" or not paths:
        return None
    resolved = file_path.resolve()
    if not any(resolved == p or resolved.is_relative_to(p) for p in paths):
        return None
    relative = resolved.relative_to(next(p for p in paths if resolved == p
                                         or resolved.is_relative_to(p)))
    if any(part.startswith(("_", ".")) for part in relative.parts):
        return None
    return CaseFile.from_parent(parent, path=file_path)


class CaseRefused(Exception):
    """A collected case was not exported; carries the ``CaseOutcome``."""

    def __init__(self, outcome):
        self.outcome = outcome
        super().__init__(outcome.diagnostic)


class CaseFile(pytest.File):
    """A file of ``unbroken.case`` declarations."""

    def collect(self):
        # unbroken (and so torch) is imported only when a case file is collected: pytest
        # sessions that do not use --unbroken pay nothing for the plugin.
        from .cases import CaseCollectionError, load_target
        from .check.execute import use_root

        use_root(str(self.config.rootpath))
        try:
            cases = load_target(str(self.path))
        except CaseCollectionError as err:
            raise self.CollectError(err.summary) from None
        for case in cases:
            yield CaseItem.from_parent(self, name=case.name, case=case)


class CaseItem(pytest.Item):
    """One case: exported when the item runs; a refusal fails it with the diagnostic."""

    def __init__(self, *, case, **kwargs):
        super().__init__(**kwargs)
        self.case = case

    def runtest(self):
        from .check.execute import run_case

        outcome = run_case(self.case, str(self.path), str(self.config.rootpath))
        if outcome.failed:
            raise CaseRefused(outcome)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseRefused):
            outcome = excinfo.value.outcome
            return f"{outcome.id}: {outcome.status}\n\n{outcome.diagnostic}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.case.filename, self.case.lineno - 1, f"unbroken case {self.name}"
