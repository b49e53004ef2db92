"""Shared pytest configuration.

Hypothesis: under CI (``CI`` set, as `.ci/run` has it) every run draws the same examples
(``derandomize``) and keeps no example database, so a red CI is reproducible and never
depends on luck; locally examples vary from run to run, which finds more bugs.
"""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
