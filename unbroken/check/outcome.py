"""What one ``unbroken check`` run found, as plain data: the JSON report is this data, and the
console, JUnit, SARIF, GitHub annotations, baselines and ``merge-reports`` all read it.

Every value here is built from JSON types only, so that a worker process can send it to the
command and a shard's report can be read back (:meth:`Report.from_dict`) exactly as written.
Paths are relative to the working directory of the run when they lie inside it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["CaseOutcome", "CollectionFailure", "Finding", "Report", "FAILING", "STATUSES",
           "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "EXIT_INTERNAL",
           "OK", "REFUSED", "INTERNAL", "TIMEOUT", "CRASHED"]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

OK, REFUSED, INTERNAL, TIMEOUT, CRASHED = "ok", "refused", "internal_error", "timeout", "crashed"
STATUSES = (OK, REFUSED, INTERNAL, TIMEOUT, CRASHED)
#: Statuses that are unbroken's fault: they make the run exit 3 whatever else happened.
BUGS = (INTERNAL, CRASHED)
FAILING = (REFUSED, INTERNAL, TIMEOUT, CRASHED)

REPORT_FORMAT = 3  # the "format" field of the JSON report; 2 added ids, findings and columns;
# 3 added each finding's "path" and each case's "paths" (every path of the program explored)


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a case was refused, at one place of the user's code: a graph break, or the
    error of a refusal that is not a graph break (a constraint violation, a usage error).

    code:    the diagnostic id (``UB101``).
    message: the one-line message (``Data-dependent control flow: ...``).
    file:    the user's file of the innermost frame ('' when the error has no user frame).
    line:    1-based line in ``file`` (0 when unknown).
    column:  1-based column where the statement on that line starts (0 when unknown).
    source:  the stripped text of that line; with ``code`` and the case, the baseline key.
    hint:    the fix.
    known:   True when a ``--baseline`` lists this finding (it does not fail the run).
    path:    the decisions on tensor data that lead to it (``find_graph_breaks`` explores
             every path): ``{"condition", "taken", "file", "line", "occurrence"}`` each,
             outermost first; empty when no such decision does (the baseline ignores it).
    """

    code: str
    message: str
    file: str
    line: int
    column: int
    source: str
    hint: str
    known: bool = False
    path: tuple[dict, ...] = ()

    def describe_path(self) -> str:
        """``on the path where `x.sum() > 0` is False (model.py:12)`` ('' for no path)."""
        if not self.path:
            return ""
        return "on the path where " + " and ".join(
            f"`{c['condition']}` is {c['taken']}"
            + (f" (evaluation {c['occurrence']})" if c.get("occurrence", 1) > 1 else "")
            + f" ({c['file'].rsplit('/', 1)[-1]}:{c['line']})" for c in self.path)

    def baseline_key(self, case_id: str) -> tuple[str, str, str]:
        """What a baseline matches: the case, the id and the line's text (not its number, so
        moving code around does not make a known break new)."""
        return case_id, self.code, self.source


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """The result of checking one case.

    id:         ``file::name``: the declaring file (relative) and the case's unique name.
    name:       the case's unique name in its file (``Head``, ``Head[1]``).
    file, line: where ``unbroken.case(...)`` was called.
    target:     the target that declared it (a path or ``module:callable``), to run it again.
    status:     one of :data:`STATUSES`.
    seconds:    wall time of the export (of the whole worker for timeouts and crashes).
    diagnostic: the text printed for a failure: the error rendered with the user's line and
                fix, every graph break, or for a bug the traceback and the bug note.
    error:      ``UnbrokenError.to_dict()`` with relative paths, or ``{"kind", "message"}``
                for an exception that is not ours; None when exported.
    findings:   each graph break (or the refusal's error) at its place; empty unless refused.
    output:     what the worker process printed (kept for crashes and timeouts).
    paths:      for a case refused for graph breaks, how many paths of the program were
                explored for them: ``{"explored", "forks", "raised", "complete", "cut"}``
                (``exporter.paths.PathExploration``); None otherwise.
    """

    id: str
    name: str
    file: str
    line: int
    target: str
    status: str
    seconds: float
    diagnostic: str = ""
    error: dict | None = None
    findings: tuple[Finding, ...] = ()
    output: str = ""
    paths: dict | None = None

    @property
    def failed(self) -> bool:
        """Whether this case fails the run: refused for a finding no baseline knows, or a
        timeout, an internal error or a crash."""
        if self.status == REFUSED:
            return not self.findings or not all(f.known for f in self.findings)
        return self.status in FAILING

    def error_id(self) -> str:
        """``UB101 model.py:14 (+2 more)`` for tables; the exception kind for other failures."""
        if self.findings:
            first = self.findings[0]
            text = f"{first.code} {first.file.rsplit('/', 1)[-1]}:{first.line}" if first.line \
                else first.code
            more = len(self.findings) - 1
            return text + (f" (+{more} more)" if more > 0 else "")
        if self.error:
            return self.error.get("code") or self.error.get("kind", "")
        return ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 6)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> CaseOutcome:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields["findings"] = tuple(Finding(**(f | {"path": tuple(f.get("path", ()))}))
                                   for f in data.get("findings", ()))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class CollectionFailure:
    """A target that could not be read for cases (a missing path, a file that fails to import
    or that hangs or crashes while importing). The other targets' cases still run.

    target:  the path or ``module:callable`` at fault.
    message: what went wrong; for an import failure, the traceback of the user's frames.
    """

    target: str
    message: str


@dataclass(slots=True)
class Report:
    """Everything one run (or several merged shards) found.

    outcomes:   one per case that ran, sorted by id.
    failures:   targets that could not be collected.
    fixed:      baseline entries (``{"case", "code", "source"}``) that no longer occur.
    seconds:    wall time of the run.
    targets:    the targets given on the command line.
    shard:      ``"I/N"`` when this run was one shard, else None.
    """

    outcomes: list[CaseOutcome] = field(default_factory=list)
    failures: list[CollectionFailure] = field(default_factory=list)
    fixed: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    targets: list[str] = field(default_factory=list)
    shard: str | None = None

    def counts(self) -> dict[str, int]:
        counts = {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}
        counts["total"] = len(self.outcomes)
        counts["known"] = sum(o.status == REFUSED and not o.failed for o in self.outcomes)
        return counts

    @property
    def exit_code(self) -> int:
        """3 when unbroken failed (internal error, crash), else 2 when a target could not be
        collected, else 1 when a case failed, else 0."""
        if any(o.status in BUGS for o in self.outcomes):
            return EXIT_INTERNAL
        if self.failures:
            return EXIT_USAGE
        return EXIT_REFUSED if any(o.failed for o in self.outcomes) else EXIT_OK

    def to_dict(self, version: str) -> dict:
        return {
            "tool": "unbroken check",
            "format": REPORT_FORMAT,
            "version": version,
            "paths": list(self.targets),
            "shard": self.shard,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 6),
            "summary": self.counts(),
            "cases": [o.to_dict() for o in self.outcomes],
            "usage_errors": [{"path": f.target, "message": f.message} for f in self.failures],
            "baseline_fixed": list(self.fixed),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        return cls(outcomes=[CaseOutcome.from_dict(c) for c in data.get("cases", ())],
                   failures=[CollectionFailure(e["path"], e["message"])
                             for e in data.get("usage_errors", ())],
                   fixed=list(data.get("baseline_fixed", ())),
                   seconds=float(data.get("seconds", 0.0)),
                   targets=list(data.get("paths", ())), shard=data.get("shard"))

    def merged(self, other: Report) -> Report:
        """This report and another shard's, as one: cases by id, failures and fixed entries
        without repeats (every shard collects every target, so each reports the same)."""
        outcomes = {o.id: o for o in self.outcomes + other.outcomes}
        failures = {f.target: f for f in self.failures + other.failures}
        fixed = {tuple(sorted(e.items())): e for e in self.fixed + other.fixed}
        targets = list(dict.fromkeys(self.targets + other.targets))
        return Report(sorted(outcomes.values(), key=lambda o: o.id), list(failures.values()),
                      list(fixed.values()), max(self.seconds, other.seconds), targets, None)


def with_findings(outcome: CaseOutcome, findings) -> CaseOutcome:
    """``outcome`` with its findings replaced (a baseline marks some of them known)."""
    return replace(outcome, findings=tuple(findings))
