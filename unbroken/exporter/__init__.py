"""The exporter: ``export()`` and ``find_graph_breaks()``, the stages they run and what only
they use (binding the call, rendering fixes, eager checks of uncaught exceptions, the
process state a trace must leave as it found it).

Not ``unbroken/export/``: importing a subpackage binds its name on the parent package, and
``unbroken.export`` is the public function.
"""
