"""``unbroken fix TARGET...`` and ``unbroken check --fix``: verified patches for graph breaks.

For every case the targets declare (in this process), :func:`~unbroken.fix.fixer.fix_case`
finds the breaks, rewrites them and verifies the patch. The console shows each patch as a
unified diff: VERIFIED (the patched model exports and matches eager on every draw, every
decision driven both ways) or HINT, unverified, with the reason. ``--json`` writes every
case's record; ``--sarif`` a SARIF 2.1.0 log whose results carry the verified patches as
``fixes`` (``artifactChanges``), so code review offers them. ``--write`` applies the
verified patches in place through :func:`unbroken.check.source_files.write_source` (the one
writer of users' files, shared with ``suggest --write``: the file's encoding, BOM, line
endings and the bytes outside the patch kept; refused when the file changed since the fix
read it, or when it, or the target of its symbolic link, lies outside the working
directory); patches of several cases in one file are merged when they touch different lines
(identical hunks once).

Exit status: 0 every case exports or got a verified fix (and, with ``--write``, it was
written); 1 some case has no verified fix; 2 usage error; 3 an internal error in unbroken.
"""
from __future__ import annotations

import difflib
import json
import os

from ..cases import CaseCollectionError, load_target
from ..check.console import make_console
from ..check.execute import case_id, relative, use_root
from ..check.outcome import EXIT_INTERNAL, EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from ..check.reports import SARIF_SCHEMA, ReportError, write_text
from ..check.select import KeywordError, keyword_matcher
from ..check.source_files import SourceFileError, write_source
from ..symbolic.diagnostics import InternalError
from .fixer import CaseFix, fix_case
from .source import SourceFile

__all__ = ["fix_command", "fix_cases", "fixes_sarif", "merge_texts", "print_fix"]


def fix_command(options, version: str) -> int:
    """Run ``unbroken fix`` with parsed ``options``; return the exit status."""
    console = make_console(stderr=options.json == "-")
    root = os.getcwd()
    use_root(root)
    try:
        matches = keyword_matcher(options.keyword) if options.keyword else (lambda _: True)
        cases = [c for t in options.paths for c in load_target(t)
                 if matches(case_id(c, root))]
    except (CaseCollectionError, KeywordError) as err:
        console.print(f"unbroken fix: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    if not cases:
        console.print("unbroken fix: no export cases found; declare one per model with "
                      "unbroken.case(model, args)", markup=False, highlight=False)
        return EXIT_USAGE
    return fix_cases(cases, options, console, version, root)


def fix_cases(cases, options, console, version: str, root: str) -> int:
    """Fix ``cases``, print, write the reports and (``--write``) the files."""
    fixes, internal = [], False
    for case in cases:
        try:
            fixes.append(fix_case(case, root))
        except InternalError as err:  # unbroken's own bug: reported, the other cases go on
            console.print(f"INTERNAL ERROR     {case_id(case, root)}\n{err.render()}",
                          markup=False, highlight=False, soft_wrap=True)
            internal = True
            continue
        print_fix(console, fixes[-1])
    status = EXIT_OK if all(f.status in ("clean", "verified") for f in fixes) else EXIT_REFUSED
    if internal:
        status = EXIT_INTERNAL
    if getattr(options, "write", False):
        status = max(status, _write(console, fixes, root))
    counts = {s: sum(f.status == s for f in fixes) for s in
              ("verified", "unverified", "no-fix", "clean")}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) +
                  f" ({len(fixes)} case(s))", markup=False, highlight=False)
    try:
        if getattr(options, "sarif", None):
            write_text(options.sarif, json.dumps(fixes_sarif(fixes, version), indent=2) + "\n",
                       "SARIF report")
        if getattr(options, "json", None):
            data = {"tool": "unbroken fix", "version": version, "summary": counts,
                    "cases": [f.to_dict() for f in fixes]}
            write_text(options.json, json.dumps(data, indent=2) + "\n", "JSON report")
    except ReportError as err:
        console.print(f"unbroken fix: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    return status


_LABEL = {"verified": "VERIFIED FIX", "unverified": "HINT (unverified)",
          "no-fix": "NO FIX", "clean": "OK"}


def print_fix(console, fix: CaseFix) -> None:
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    first = [b for b in fix.breaks if b.round == 1]
    head = f"{_LABEL[fix.status]:<18} {fix.id}"
    if fix.status == "clean":
        say(head + "  (exports; nothing to fix)")
        return
    say(head + f"  ({len(first)} break(s) on the example's path"
        + (f", {len(fix.breaks) - len(first)} more found in the patched rounds"
           if len(fix.breaks) > len(first) else "") + ")")
    for rewrite in fix.rewrites:
        say(f"    rewrite  {relative(rewrite.path, fix.root)}:{rewrite.line}  {rewrite.summary}")
    for hint in fix.hints:
        say(f"    no rewrite  {relative(hint.path, fix.root)}:{hint.line}  {hint.reason}")
    v = fix.verification
    if fix.status == "verified":
        decisions = ", ".join(f"{k} took {val}" for k, val in v.decisions.items())
        say(f"    verified: exports, and matches the original model in eager on {v.draws} "
            f"draw(s) (outputs, dtypes, gradients, buffers)"
            + (f"; {v.excluded} draw(s) outside its assumptions" if v.excluded else "")
            + (f"; decisions: {decisions}" if decisions else ""))
        say(f"    exported after the fix: {v.program}")
    elif fix.texts:
        say(f"    not verified: {v.reason}")
    for diff in fix.diffs().values():
        say(diff)


# -- --write ------------------------------------------------------------------------------------

def merge_texts(original: str, patched: list[str]) -> tuple[str, list[int]]:
    """``original`` with the changes of every text in ``patched`` (each made from
    ``original``): ``(merged text, indices of patches left out because they touch lines
    another patch changed differently)``."""
    base = SourceFile("", original).lines
    hunks: list[tuple[int, int, tuple[str, ...]]] = []
    refused = []
    for index, text in enumerate(patched):
        new = SourceFile("", text).lines
        mine = [(i1, i2, tuple(new[j1:j2])) for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, base, new, autojunk=False).get_opcodes() if tag != "equal"]
        clash = any(h != m and h[0] < m[1] + (m[0] == m[1]) and m[0] < h[1] + (h[0] == h[1])
                    for m in mine for h in hunks)
        if clash:
            refused.append(index)
            continue
        hunks += [m for m in mine if m not in hunks]
    out, at = [], 0
    for i1, i2, lines in sorted(hunks, key=lambda h: (h[0], h[1])):
        out += base[at:i1] + list(lines)
        at = i2
    return "".join(out + base[at:]), refused


def _write(console, fixes, root: str) -> int:
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    by_path: dict[str, list[CaseFix]] = {}
    for fix in fixes:
        if fix.status == "verified":
            for path in fix.texts:
                by_path.setdefault(path, []).append(fix)
    status = EXIT_OK
    for path, owners in sorted(by_path.items()):
        original = owners[0].texts[path][0]
        if any(f.texts[path][0] != original for f in owners):
            say(f"not written: {relative(path, root)} changed while `unbroken fix` ran (its "
                "cases saw different texts); run it again")
            status = EXIT_REFUSED
            continue
        merged, refused = merge_texts(original, [f.texts[path][1] for f in owners])
        for index in refused:
            say(f"not written: the fix of {owners[index].id} changes lines of "
                f"{relative(path, root)} another fix changes; run `unbroken fix` again after "
                "this write")
            status = EXIT_REFUSED
        try:
            write_source(owners[0].sources[path], merged, within=[root])
        except SourceFileError as err:
            say(f"not written: {err}")
            status = EXIT_REFUSED
            continue
        say(f"written: {relative(path, root)}")
    return status


# -- SARIF --------------------------------------------------------------------------------------

def fixes_sarif(fixes, version: str) -> dict:
    """A SARIF 2.1.0 log: one result per case with a patch, at its first break; verified
    patches as ``fixes`` (the region each hunk replaces and the new text)."""
    results = []
    for fix in fixes:
        if not fix.texts:
            continue
        first = next((b for b in fix.breaks if b.file), None)
        text = (f"{len(fix.rewrites)} rewrite(s) for case {fix.id}: "
                + "; ".join(r.summary for r in fix.rewrites))
        text += " (verified: exports and matches eager)" if fix.status == "verified" else \
            f" (unverified hint: {fix.verification.reason})"
        result = {"ruleId": first.code if first else "UB100",
                  "level": "error", "message": {"text": text},
                  "locations": [_location(first.file if first else fix.file,
                                          first.line if first else fix.line)]}
        if fix.status == "verified":
            result["fixes"] = [{"description": {"text": text}, "artifactChanges": [
                _artifact_change(relative(p, fix.root), old, new)
                for p, (old, new) in sorted(fix.texts.items())]}]
        results.append(result)
    driver = {"name": "unbroken", "version": version, "semanticVersion": version,
              "informationUri": "https://pypi.org/project/unbroken/"}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "results": results,
                      "originalUriBaseIds": {"%SRCROOT%": {"description": {
                          "text": "The working directory of `unbroken fix`."}}},
                      "columnKind": "unicodeCodePoints"}]}


def _location(file: str, line: int) -> dict:
    artifact = {"uri": file}
    if not file.startswith("/"):
        artifact["uriBaseId"] = "%SRCROOT%"
    return {"physicalLocation": {"artifactLocation": artifact,
                                 "region": {"startLine": max(line, 1)}}}


def _artifact_change(uri: str, old: str, new: str) -> dict:
    base, lines = SourceFile("", old).lines, SourceFile("", new).lines
    replacements = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, base, lines,
                                                       autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        region = {"startLine": i1 + 1, "startColumn": 1}
        if i2 > i1:
            region.update(endLine=i2 + 1, endColumn=1)  # whole lines: up to the next line
        else:
            region.update(endLine=i1 + 1, endColumn=1)  # an insertion before line i1 + 1
        replacements.append({"deletedRegion": region,
                             "insertedContent": {"text": "".join(lines[j1:j2])}})
    artifact = {"uri": uri}
    if not uri.startswith("/"):
        artifact["uriBaseId"] = "%SRCROOT%"
    return {"artifactLocation": artifact, "replacements": replacements}


def fix_refused(report, options, console, version: str, root: str) -> int:
    """``unbroken check --fix``: :func:`fix_cases` on the cases the check refused."""
    refused = {o.id for o in report.outcomes if o.status == "refused"}
    if not refused:
        return EXIT_OK
    cases = []
    for target in dict.fromkeys(o.target for o in report.outcomes if o.id in refused):
        try:
            cases += [c for c in load_target(target) if case_id(c, root) in refused]
        except CaseCollectionError as err:
            console.print(f"unbroken check --fix: error: {err}", markup=False, highlight=False)
            return EXIT_USAGE
    console.print("", markup=False)
    return fix_cases(cases, _FixOptions(getattr(options, "write_fixes", False)), console,
                     version, root)


class _FixOptions:
    """The options ``check --fix`` passes on (its own --json/--sarif are the check's)."""

    def __init__(self, write: bool):
        self.write, self.json, self.sarif = write, None, None
