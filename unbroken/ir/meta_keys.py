"""The ``meta`` keys unbroken writes: one table, so that a reader finds every key in one place.

torch.fx keeps per-node data in ``node.meta`` and per-module data in ``graph_module.meta``.
unbroken writes torch's own keys (their meaning is torch's) and a few of its own (prefixed
``unbroken_`` where they reach a program torch's tools see).

``node.meta``, torch's keys:
    ``val``              the meta tensor / symbolic value (every node has one: ``ir.verifier``);
    ``stack_trace``      the user location, as torch formats it;
    ``nn_module_stack``  the module path (:mod:`unbroken.ir.parts` converts it to torch's form);
    ``source_fn_stack``, ``torch_fn``, ``from_node``  read by torch's passes (``ir.parts``);
    ``tensor_meta``      shape and dtype, as torch's passes expect it;
    ``custom``           the user's ``torch.fx.traceback.annotate`` annotations in force.

``node.meta``, unbroken's keys: :data:`USER_FRAMES`, :data:`VIEW_WRITE`, :data:`EAGER_REFUSES`,
:data:`SAVED_THEN_WRITTEN`, :data:`NEW_VALUE_OF_FIRST`.
``graph_module.meta``, unbroken's keys: :data:`LAYOUT_READ`, :data:`SIZE_ONE_REFUSED`,
:data:`GRAD_MODE_DECISIONS`.
"""
from __future__ import annotations

__all__ = ["EAGER_REFUSES", "GRAD_MODE_DECISIONS", "LAYOUT_READ", "NEW_VALUE_OF_FIRST",
           "SAVED_THEN_WRITTEN", "SIZE_ONE_REFUSED", "USER_FRAMES", "VIEW_WRITE"]

#: ``node.meta`` key: the user's frames (``UserFrame``s, outermost first) that made the node;
#: every error about the node names them. Set by the graph builder, kept by every pass.
USER_FRAMES = "user_frames"

#: ``node.meta`` key: True on an in-place write through a view (``ir.aliasing``); functionalize
#: then updates the view's base after it.
VIEW_WRITE = "view_write"

#: ``node.meta`` key: True on a functional node that stands for an in-place write of its first
#: argument (its value is that tensor's new value): set by ``passes.functionalize`` on each
#: rewritten in-place node, read by ``passes.preserved_writes`` (writes a preserved module call
#: makes to tensors its caller sees). Not kept by ``run_decompositions`` or a save/load.
NEW_VALUE_OF_FIRST = "unbroken_new_value_of_first"

#: ``node.meta`` key: ``(message, hint, argument positions)`` of an op eager's autograd refuses
#: when grad mode is on and one of those arguments requires grad
#: (:class:`unbroken.ir.aliasing.EagerRefusal`); ``ExportedProgram.module()`` checks it when the
#: program runs; ``unbroken.save`` keeps it.
EAGER_REFUSES = "unbroken_eager_refuses"

#: ``node.meta`` key: ``(message, positions, patterns)`` when autograd may save one of the
#: node's inputs (or its result) for backward and a later in-place write changes it
#: (``ir.saved_tensors``): eager's error message, the flat argument positions of the node's
#: floating arguments, and the sets of them (positions in that tuple) whose ``requires_grad``
#: makes autograd save it; ``ExportedProgram.module()`` raises the message when backward
#: reaches the node in such a call, as eager does; ``unbroken.save`` keeps it.
SAVED_THEN_WRITTEN = "unbroken_saved_then_written"

#: ``graph_module.meta`` key: the program holds for the example's strides only (the trace read
#: a layout fact, or it writes an input and called an op that aliases or copies by layout).
LAYOUT_READ = "unbroken_layout_read"

#: ``graph_module.meta`` key: ``{symbol name: why the program refuses size 1 for it}`` (see
#: :mod:`unbroken.size_one`); absent after a save/load round trip (the generic hint is given then).
SIZE_ONE_REFUSED = "unbroken_size_one_refused"

#: ``graph_module.meta`` key: the torch.nn fast-path choices the trace made by the grad mode
#: (``ir.input_checks.GradModeDecision``): ``module()`` refuses a call in which eager would
#: choose the other path. Absent after a save/load round trip and ``run_decompositions()``.
GRAD_MODE_DECISIONS = "unbroken_grad_mode_decisions"
