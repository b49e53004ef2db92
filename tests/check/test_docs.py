"""The `unbroken ...` commands that docs/ci.md and the README's CI section tell users to paste
into their CI configuration are valid for the command as it is: every option exists and every
value parses (a renamed option would otherwise break users' pipelines silently)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from unbroken.check.select import parse_shard
from unbroken.cli import _parser

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"\bunbroken ((?:check|merge-reports|suggest|explain)\b[^\n`]*)")
CI_VALUES = {"${{ matrix.shard }}": "2", "$CI_NODE_INDEX": "2", "$CI_NODE_TOTAL": "4"}


def documented_commands() -> list[str]:
    commands = []
    for doc in (ROOT / "docs" / "ci.md", ROOT / "README.md"):
        blocks = re.findall(r"```(?:sh|yaml)\n(.*?)```", doc.read_text(), re.S)
        for block in blocks:
            for match in COMMAND.finditer(block):
                text = match.group(1).split("  #")[0].strip()
                for variable, value in CI_VALUES.items():
                    text = text.replace(variable, value)
                commands.append(text)
    return commands


def test_the_docs_show_every_command():
    kinds = {c.split()[0] for c in documented_commands()}
    assert kinds == {"check", "merge-reports", "suggest", "explain"}


@pytest.mark.parametrize("command", documented_commands())
def test_documented_command_parses(command):
    options = _parser().parse_args(shlex.split(command))  # argparse exits 2 on a bad option
    if getattr(options, "shard", None):
        assert parse_shard(options.shard) == (2, 4)
