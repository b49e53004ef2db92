"""Helpers for tests/fix: a case file written to a temporary directory and collected."""
import textwrap

import pytest

from unbroken.cases import collect_cases


@pytest.fixture
def case_file(tmp_path):
    """``case_file(code, name="m.py")`` writes ``code`` and returns its collected cases."""
    def make(code: str, name: str = "m.py", newline: str = "\n"):
        path = tmp_path / name
        path.write_bytes(textwrap.dedent(code).replace("\n", newline).encode())
        return collect_cases(path)
    return make
