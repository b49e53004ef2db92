"""The exporter: ``export()`` and ``find_graph_breaks()``, the stages they run, and what only
they use.

Modules, in the order an export uses them: :mod:`.pipeline` (``export``, ``run_stages``, the
``Dim.AUTO`` rounds, the fix verification), :mod:`.options` (``ExportCall``, the immutable
``ExportOptions``), :mod:`.input_trees` (binding the call, pytrees of inputs), the stages
:mod:`.trace`, :mod:`.shapes` and :mod:`.build`, :mod:`.preserved_calls`
(``preserve_module_call_signature``), :mod:`.fix_rendering` (a fix as ``dynamic_shapes``),
:mod:`.uncaught` (an uncaught exception checked against eager), :mod:`.process_state` (what a
trace must leave as it found it).

Not ``unbroken/export/``: importing a subpackage binds its name on the parent package, and
``unbroken.export`` is the public function.
"""
