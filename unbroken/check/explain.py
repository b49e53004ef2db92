"""``unbroken explain UB101``: one entry of the graph-break catalogue on the terminal — what
it is, why unbroken refuses it, the fix, and an example before and after."""
from __future__ import annotations

from rich.markdown import Markdown
from rich.syntax import Syntax

from ..symbolic.diagnostics.catalogue import CATALOGUE
from .console import make_console
from .outcome import EXIT_OK, EXIT_USAGE
from .reports import CATALOGUE_DOC, ERROR_RULES

__all__ = ["explain_command"]


def explain_command(options, version: str) -> int:
    console = make_console()
    code = options.code.strip().upper()
    if code == "ALL":
        for kind in CATALOGUE.values():
            console.print(f"{kind.id}  {kind.title}", markup=False, highlight=False)
        for rule, (title, _) in sorted(ERROR_RULES.items()):
            console.print(f"{rule}  {title}", markup=False, highlight=False)
        return EXIT_OK
    kind = CATALOGUE.get(code)
    if kind is not None:
        console.print(Markdown(f"# {kind.id}: {kind.title}\n\n{kind.explain}\n\n"
                               f"**Fix:** {kind.hint}"))
        console.print("\nRefused:")
        console.print(Syntax(kind.example, "python", theme="ansi_dark", background_color="default"))
        console.print("Exports:")
        console.print(Syntax(kind.fix, "python", theme="ansi_dark", background_color="default"))
        console.print(f"\nSee {CATALOGUE_DOC} for every entry.", markup=False, highlight=False)
        return EXIT_OK
    if code in ERROR_RULES:
        title, text = ERROR_RULES[code]
        console.print(Markdown(f"# {code}: {title}\n\n{text}"))
        return EXIT_OK
    known = ", ".join([*CATALOGUE, *sorted(ERROR_RULES)])
    console.print(f"unbroken explain: error: unknown id {options.code!r}; known ids: {known}",
                  markup=False, highlight=False, soft_wrap=True)
    return EXIT_USAGE
