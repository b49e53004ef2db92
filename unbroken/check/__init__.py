"""``unbroken check`` as a CI gate: isolated workers, selection, shards, baselines, and the
report formats CI systems read.

Modules, in the order a run uses them: :mod:`.select` (``-k``, ``--shard``), :mod:`.runner`
(collect and run a plan), :mod:`.pool` (worker processes with deadlines), :mod:`.jobs` and
:mod:`.execute` (what a worker does), :mod:`.outcome` (the report as data), :mod:`.baseline`,
:mod:`.reports` (JSON, JUnit, SARIF, GitHub annotations), :mod:`.console`, :mod:`.command`
(the two commands); :mod:`.suggest` and :mod:`.explain` are the other subcommands.
"""
