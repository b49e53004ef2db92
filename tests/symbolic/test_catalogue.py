"""The graph-break catalogue: ids are stable and unique, the docs are generated from it."""
from pathlib import Path

import pytest

from unbroken.symbolic.diagnostics.catalogue import CATALOGUE, GraphBreakError, render_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph-breaks.md"


def test_docs_are_generated_from_the_catalogue():
    assert DOC.read_text() == render_markdown(), \
        "run `make docs` to regenerate docs/graph-breaks.md"


@pytest.mark.parametrize("kind_id", sorted(CATALOGUE))
def test_every_kind_is_complete(kind_id):
    kind = CATALOGUE[kind_id]
    assert kind.id == kind_id and kind_id.startswith("UB1") and len(kind_id) == 5
    assert kind.title and kind.explain.endswith(".") and kind.hint and kind.example and kind.fix


def test_error_message_has_id_reason_and_fix():
    error = GraphBreakError("UB101", "the truth value of the tensor `x` decides which code runs")
    text = str(error)
    assert text.startswith("[UB101] Data-dependent control flow: the truth value")
    assert "Fix: " in text and "torch.cond" in text
    assert error.to_dict()["code"] == "UB101"


def test_messages_never_name_internal_classes():
    for kind in CATALOGUE.values():
        for text in (kind.title, kind.explain, kind.hint):
            assert "Variable" not in text and "SymNode" not in text
