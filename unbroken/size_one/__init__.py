"""Size 1 for dims whose spec admits it: admitted when the program computes what eager
computes for 1.

Tracing gives every dynamic dim the range ``[2, ...]``: kernels ask "is this dim 1?"
(broadcasting, contiguity, squeeze) and one graph cannot in general serve both answers. The
dims whose spec admits 1 (``Dim("batch", min=1)``, a named ``Dim``'s default ``min=0``,
``Dim.AUTO``, ``Dim.DYNAMIC``) are the audit's ``admits_one``; two checks decide which of them
get ``[1, ...]``:

1. the decision audit (:mod:`.audit`, ``SizeOneAudit``: the shape environment reports every
   answer to it through its one hook, ``env.size_one``): every question the trace
   answered is re-asked with each set of its candidate symbols at 1. A symbol no answer
   depends on is admitted without more work: at 1 the trace takes every decision it took, so
   it records this very program. Answers given inside one node's meta computation only shape
   that node's output metadata: they count only when that metadata differs at 1, under a set
   of dims at 1 that the program's input assertions let through (:mod:`.settle`;
   a set that differs while others containing its dims do not is refused by a run-time
   assertion of that pattern instead of a range); answers torch's own code gives during a
   leaf call (``reshape`` choosing a view or a copy) count only when the call, re-run at 1,
   dispatches other ops (:mod:`.unit_meta`) -- or, for a layout-dependent call that copies on
   one side and views on the other, when the program writes that memory, returns the result
   or reads a layout fact (``SizeOneAudit.note_layout_at_one``; the recorder reports
   through its one hook, ``recorder.size_one``); the recorder's own questions about the
   program (does an op save for backward a tensor the program then writes?) count only when
   their answer differs at 1 (``SizeOneAudit.same_answer_at_one``);
2. the admission (:mod:`.admission`): the others ("sensitive": some answer would change, e.g.
   ``s0 == 1`` while broadcasting), up to ``MAX_SYMBOLS`` (those declared ``min=1`` first;
   ``Dim.AUTO`` and ``Dim.DYNAMIC`` dims too, whose size 1 torch's programs admit unchecked),
   are traced again with the dims fixed at 1 (the example inputs cut down to size 1), with
   the dims an input fact forces to 1 with them (a mask's batch ``b`` with ``n == b or
   b == 1``), and the two programs compared: when the first one, with the dims set to 1, runs
   exactly the ops of the second (same ops, same arguments, same constants; a copy that only
   pointwise ops read and nothing else observes compared as its input), it computes what
   eager computes for 1 too, bit for bit. Every set of them at 1 that an input reaches is
   traced: a set that gives another program is refused by a run-time assertion of its
   pattern, and a dim every such set fails for keeps ``[2, ...]``; each of those traces must
   also leave the symbols admitted by step 1 free of sensitive answers. A pattern step 1
   refused by an assertion is traced at that pattern too, and its assertion dropped when the
   program is the same. A trace costs about one export.

A size 1 refused for a dim is refused at run time with the decision that differs at 1 (file,
line, source) and what to do; a dim declared ``min=1`` that keeps ``[2, ...]`` also gets a
``SizeOneWarning`` at export.

The audit half (``audit``, ``at_one``, ``settle``, ``unit_meta``) runs during and right after
the trace; the admission half (``admission``) after the program is built. The lower layers
(``symbolic.env``, ``ir.recorder``, the frontend's trace context) never import this package:
they call the interface ``symbolic.size_one_hook.SizeOneHook``, which ``SizeOneAudit``
implements.
"""
from .admission import Retrace, SizeOneWarning, admit_size_one, same_program
from .audit import SizeOneAudit

__all__ = ["Retrace", "SizeOneAudit", "SizeOneWarning", "admit_size_one", "same_program"]
