"""``unbroken fix``: mechanical rewrites of graph breaks, verified against eager.

- :mod:`~unbroken.fix.source`: a file's text and syntax tree, minimal text edits, diffs.
- :mod:`~unbroken.fix.rewrites`: from a break's place to candidate rewrites (or why none).
- :mod:`~unbroken.fix.scratch`: patched copies imported beside the originals; the patched
  model; the recorder of the decisions a patch wrote.
- :mod:`~unbroken.fix.verify`: drawing inputs that drive every decision both ways, comparing
  with the original model in eager, exporting the patched one.
- :mod:`~unbroken.fix.fixer`: one case, round by round (:func:`fix_case`).
- :mod:`~unbroken.fix.writer`: ``--write``: :func:`write_source`, the only function that
  touches a user's file.
- :mod:`~unbroken.fix.command`: the ``unbroken fix`` command and ``check --fix``.
"""
from .fixer import CaseFix, fix_case
from .writer import SourceWriteError, write_source

__all__ = ["CaseFix", "SourceWriteError", "fix_case", "write_source"]
