"""``unbroken fix``: mechanical rewrites of graph breaks, verified against eager.

- :mod:`~unbroken.fix.source`: a file's text and syntax tree, minimal text edits, diffs.
- :mod:`~unbroken.fix.rewrites`: from a break's place to candidate rewrites (or why none).
- :mod:`~unbroken.fix.scratch`: patched copies imported beside the originals; the patched
  model; the recorder of the decisions a patch wrote.
- :mod:`~unbroken.fix.verify`: drawing inputs that drive every decision both ways, comparing
  with the original model in eager, exporting the patched one.
- :mod:`~unbroken.fix.fixer`: one case, round by round (:func:`fix_case`).
- ``--write`` writes through :func:`unbroken.check.source_files.write_source`, the one
  function that changes a user's file (``suggest --write`` uses it too).
- :mod:`~unbroken.fix.command`: the ``unbroken fix`` command and ``check --fix``.
"""
from .fixer import CaseFix, fix_case

__all__ = ["CaseFix", "fix_case"]
