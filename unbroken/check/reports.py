"""Report formats CI systems read, all written from one :class:`Report`.

- JSON (``--json FILE|-``): :meth:`Report.to_dict`; ``merge-reports`` reads it back.
- JUnit XML (``--junit FILE``): one ``testcase`` per case; a refusal or a timeout is a
  ``failure``, an internal error or a crash an ``error``, each carrying the diagnostic; a
  target that could not be collected is a ``testcase`` with an ``error``.
- SARIF 2.1.0 (``--sarif FILE``), for code scanning: one rule per diagnostic id, with its
  explanation, fix, example and a link into ``docs/graph-breaks.md``; one result per finding
  at its file, line and column; with a baseline, ``baselineState`` says new or unchanged; a
  break behind decisions on tensor data has them in its ``path`` property (and its message).
- GitHub Actions workflow commands (printed when ``GITHUB_ACTIONS=true``): one ``::error``
  per new finding, so the diff view shows the break at its line.
"""
from __future__ import annotations

import hashlib
import json
import sys
import xml.etree.ElementTree as ET

from ..symbolic import diagnostics
from ..symbolic.diagnostics.catalogue import CATALOGUE
from .outcome import CRASHED, INTERNAL, OK, REFUSED, TIMEOUT, Report

__all__ = ["ReportError", "github_annotations", "junit_xml", "sarif", "write_text"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
CATALOGUE_DOC = "docs/graph-breaks.md"

#: Ids of refusals that are not graph breaks: (title, explanation) from the error classes.
ERROR_RULES = {
    cls.default_code: (cls.__name__, " ".join((cls.__doc__ or "").split()))
    for cls in (diagnostics.ExportUsageError, diagnostics.InputMismatchError,
                diagnostics.ConstraintViolationError, diagnostics.DataDependentError,
                diagnostics.UnsupportedError, diagnostics.SerializationError,
                diagnostics.InternalError)
}


class ReportError(Exception):
    """A report file could not be written or read (a usage error: exit 2)."""


def write_text(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path``, or to stdout when ``path`` is ``-``."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise ReportError(f"cannot write the {what} {path}: {err.strerror}") from err


def json_text(report: Report, version: str) -> str:
    return json.dumps(report.to_dict(version), indent=2) + "\n"


# -- JUnit -------------------------------------------------------------------------------------

def junit_xml(report: Report) -> str:
    """The report as JUnit XML (one suite; ``classname`` is the declaring file as a dotted
    path, ``name`` the case's name, ``file``/``line`` the declaration)."""
    counts = report.counts()
    failures = sum(o.failed and o.status in (REFUSED, TIMEOUT) for o in report.outcomes)
    errors = counts[INTERNAL] + counts[CRASHED] + len(report.failures)
    suite = ET.Element("testsuite", name="unbroken check", tests=str(counts["total"] + len(
        report.failures)), failures=str(failures), errors=str(errors), skipped="0",
        time=f"{report.seconds:.3f}")
    for o in report.outcomes:
        case = ET.SubElement(suite, "testcase", classname=_classname(o.file), name=o.name,
                             file=o.file, line=str(o.line), time=f"{o.seconds:.3f}")
        if o.failed:
            tag = "failure" if o.status in (REFUSED, TIMEOUT) else "error"
            first = o.diagnostic.splitlines()[0] if o.diagnostic else o.status
            element = ET.SubElement(case, tag, message=first, type=_junit_type(o))
            element.text = o.diagnostic
        elif o.status != OK:
            ET.SubElement(case, "system-out").text = (
                "Refused for known graph breaks only (baseline):\n" + o.diagnostic)
        if o.output:
            ET.SubElement(case, "system-err").text = o.output
    for f in report.failures:
        case = ET.SubElement(suite, "testcase", classname="unbroken.collection", name=f.target)
        ET.SubElement(case, "error", message=f"cannot collect {f.target}",
                      type="CollectionError").text = f.message
    root = ET.Element("testsuites", name="unbroken", tests=suite.get("tests"),
                      failures=suite.get("failures"), errors=suite.get("errors"),
                      time=suite.get("time"))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _classname(file: str) -> str:
    return file.removesuffix(".py").replace("/", ".").lstrip(".") or "unbroken"


def _junit_type(outcome) -> str:
    if outcome.findings:
        return outcome.findings[0].code
    return outcome.status


# -- SARIF -------------------------------------------------------------------------------------

def sarif(report: Report, version: str) -> dict:
    """The report as a SARIF 2.1.0 log with one run."""
    findings = [(o, f) for o in report.outcomes if o.status == REFUSED for f in o.findings]
    rule_ids = sorted({f.code for _, f in findings})
    index = {rule: i for i, rule in enumerate(rule_ids)}
    results = [_sarif_result(o, f, index, bool(report.fixed) or any(
        x.known for _, x in findings)) for o, f in findings]
    results += [_sarif_failure(o) for o in report.outcomes
                if o.status in (INTERNAL, CRASHED, TIMEOUT)]
    driver = {"name": "unbroken", "version": version, "semanticVersion": version,
              "informationUri": "https://pypi.org/project/unbroken/",
              "rules": [_rule(r) for r in rule_ids]}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "results": results,
                      "originalUriBaseIds": {"%SRCROOT%": {"description": {
                          "text": "The working directory of `unbroken check`."}}},
                      "columnKind": "unicodeCodePoints"}]}


def _rule(rule_id: str) -> dict:
    anchor = f"{CATALOGUE_DOC}#{rule_id.lower()}"
    kind = CATALOGUE.get(rule_id)
    if kind is not None:
        anchor = f"{CATALOGUE_DOC}#" + _anchor(f"{kind.id}: {kind.title}")
        markdown = (f"{kind.explain}\n\n**Fix:** {kind.hint}\n\nRefused:\n\n```python\n"
                    f"{kind.example}\n```\n\nExports:\n\n```python\n{kind.fix}\n```\n\n"
                    f"See [{kind.id} in the catalogue]({anchor}).")
        return {"id": rule_id, "name": _camel(kind.title),
                "shortDescription": {"text": kind.title},
                "fullDescription": {"text": kind.explain},
                "help": {"text": f"{kind.explain}\n\nFix: {kind.hint}\n\nSee {anchor}",
                         "markdown": markdown},
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["graph-break"]}}
    title, explain = ERROR_RULES.get(rule_id, ("UnbrokenError", "unbroken refused the export."))
    return {"id": rule_id, "name": title, "shortDescription": {"text": title},
            "fullDescription": {"text": explain},
            "help": {"text": f"{explain}\n\nSee {CATALOGUE_DOC}",
                     "markdown": f"{explain}\n\nSee [{CATALOGUE_DOC}]({CATALOGUE_DOC})."},
            "defaultConfiguration": {"level": "error"}}


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _camel(title: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in title.replace("-", " ").split() if w.isalnum())


def _sarif_result(outcome, finding, index: dict, with_baseline: bool) -> dict:
    text = f"{finding.message} (case {outcome.id}{_on_path(finding)})\nFix: {finding.hint}"
    result = {"ruleId": finding.code, "ruleIndex": index[finding.code],
              "level": "note" if finding.known else "error", "message": {"text": text},
              "locations": [_location(finding.file or outcome.file, finding.line or outcome.line,
                                      finding.column, finding.source)],
              "partialFingerprints": {"unbroken/v1": _fingerprint(outcome.id, finding)}}
    if with_baseline:
        result["baselineState"] = "unchanged" if finding.known else "new"
    if finding.path:  # the decisions on tensor data that lead to it (a property bag)
        result["properties"] = {"path": [dict(c) for c in finding.path]}
    return result


def _on_path(finding) -> str:
    """``, on the path where ...`` for a finding behind decisions on tensor data."""
    return f", {finding.describe_path()}" if finding.path else ""


def _sarif_failure(outcome) -> dict:
    text = outcome.diagnostic.splitlines()[0] if outcome.diagnostic else outcome.status
    return {"ruleId": outcome.status, "level": "error",
            "message": {"text": f"{text} (case {outcome.id})"},
            "locations": [_location(outcome.file, outcome.line, 0, "")],
            "kind": "fail"}


def _location(file: str, line: int, column: int, snippet: str) -> dict:
    region = {"startLine": max(line, 1)}
    if column:
        region["startColumn"] = column
    if snippet:
        region["snippet"] = {"text": snippet}
    artifact = {"uri": file}
    if not file.startswith("/"):
        artifact["uriBaseId"] = "%SRCROOT%"
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def _fingerprint(case_id: str, finding) -> str:
    key = "\0".join(finding.baseline_key(case_id))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


# -- GitHub Actions ----------------------------------------------------------------------------

def github_annotations(report: Report) -> list[str]:
    """``::error file=...,line=...,col=...,title=...::message`` for every failing finding
    (and every other failure at its declaration)."""
    lines = []
    for o in report.outcomes:
        if not o.failed:
            continue
        if o.status == REFUSED:
            for f in o.findings:
                if not f.known:
                    where = f"\n{f.describe_path()[:1].upper()}{f.describe_path()[1:]}." \
                        if f.path else ""
                    lines.append(_command(f.file or o.file, f.line or o.line, f.column,
                                          f"{f.code} {o.name}",
                                          f"{f.message}{where}\nFix: {f.hint}"))
        else:
            lines.append(_command(o.file, o.line, 0, f"{o.status} {o.name}", o.diagnostic))
    for failure in report.failures:
        lines.append(f"::error title={_property('cannot collect ' + failure.target)}::"
                     f"{_data(failure.message)}")
    return lines


def _command(file: str, line: int, column: int, title: str, message: str) -> str:
    props = [f"file={_property(file)}", f"line={line}"]
    if column:
        props.append(f"col={column}")
    props.append(f"title={_property(title)}")
    return f"::error {','.join(props)}::{_data(message)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
