"""The repository's own text: no merge left half done.

A merge that stops at a conflict and is committed anyway leaves ``<<<<<<<``/``>>>>>>>`` lines
behind; in a Markdown file nothing else notices (it happened once in benchmarks/README.md).
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {".git", ".venv", "build", "dist", ".hypothesis", "__pycache__", "results"}
TEXT = {".py", ".md", ".toml", ".cfg", ".txt", ".yml", ".yaml", ".json", ""}
MARKERS = ("<<<<<<< ", ">>>>>>> ", "|||||||")


def _text_files():
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        # .venv-3.12-torch2.14.1 and the other cells' venvs (`make setup PYTHON=... TORCH=...`)
        if SKIPPED.intersection(parts) or parts[0].startswith(".venv") or not path.is_file():
            continue
        if path.suffix in TEXT and path.stat().st_size < 2_000_000:
            yield path


def test_no_merge_conflict_markers():
    found = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(MARKERS) or line == "=======":
                found.append(f"{path.relative_to(ROOT)}:{number}: {line[:40]}")
    assert not found, "conflict markers left by a merge:\n" + "\n".join(found)
