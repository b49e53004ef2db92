"""Writes through views, made visible to every alias in the recorded graph.

In eager PyTorch a view shares memory with its base: ``v = x[0]; v.add_(1)`` changes ``x``,
and every other view of ``x``. The recorder maps each tensor to the node holding its value, so
after such a write the base and the other views would still map to their old nodes. This
module keeps them consistent while recording:

- every output of a view op (an op whose schema returns an alias of its input, e.g.
  ``select``, ``slice``, ``view``, ``transpose``, ``unbind``) is registered with its parent and
  the op that made it;
- after an in-place op writes a tensor that is a view or has views, the new value is carried
  up to the storage owner (the *root*) with the inverse ``*_scatter`` op of each view on the
  way (``select_scatter``, ``slice_scatter``, a reverse ``view``/``permute``...), the root is
  rewritten with one ``copy_`` (so ``passes.functionalize`` sees an ordinary in-place write to
  it: a mutated input or buffer becomes a mutation output), and every other registered view of
  the root is re-derived from the root's new value by replaying its view op, when it is next
  read (``GraphBuilder.defer``: most never are);
- a write through a ``.detach()`` alias is invisible to eager's autograd: the root's update is
  recorded inside a ``no_grad`` region, so the root keeps its gradient history (see
  ``passes.functionalize``).

The scatter ops are layout-independent (they index logically, like the view ops), so the graph
stays correct when the program runs on inputs whose strides differ from the example's.
A write through a view whose op has no inverse here (``as_strided``, ``expand``, ``unfold``,
...) is refused with UB121.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.torch_compat import (
    CreationMeta,
    creation_meta,
    disable_current_modes,
    is_non_overlapping_and_dense,
    is_view,
    op_schema,
    version_counter,
)
from .layouts import example_layout, example_value, storage_extent
from .meta_keys import VIEW_WRITE
from .ops import is_inplace_op

__all__ = ["Aliases", "EagerRefusal", "inplace_refusal", "overlap_refusal"]

aten = torch.ops.aten


@dataclass(frozen=True, slots=True)
class ViewOf:
    """How a view was made. parent: the tensor it views; func/args/kwargs: the view op call
    (``args[0]`` is ``parent``); index: which output, for ops returning several views."""

    parent: torch.Tensor
    func: object
    args: tuple
    kwargs: dict
    index: int | None


@dataclass(frozen=True, slots=True)
class EagerRefusal:
    """An op eager's autograd refuses when grad mode is on and one of some arguments requires
    grad (a view returned by ``split`` written in place, or read after its base was written).

    message / hint: what eager raises and the fix, for the error at the user's line.
    arguments:      positions (in the op's arguments) of the tensors whose ``requires_grad``
                    decides it.
    creation:       how the view was made (``torch._C._autograd.CreationMeta``): by a
                    function returning several views, or under no_grad...
    """

    message: str
    hint: str
    arguments: tuple[int, ...]
    creation: object

    def error(self, frames) -> UnsupportedError:
        return UnsupportedError(self.message, code="UB120", frames=frames, hint=self.hint)


class Aliases:
    """The view registry of one recording (see the module docstring).

    recorder: the ``Recorder`` whose ``emit`` records the scatter / copy / replay nodes.
    """

    def __init__(self, recorder):
        self.recorder = recorder
        self._view_of: dict[int, ViewOf] = {}
        self._views_of_root: dict[int, list[torch.Tensor]] = {}
        self._created_version: dict[int, int] = {}  # id(view) -> its version when made

    def note_view(self, func, args, kwargs, out) -> None:
        """Register the output(s) of the view op ``func(*args, **kwargs)``."""
        parent = args[0]
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        multi = isinstance(out, (tuple, list))
        root = self.root(parent)
        for index, view in enumerate(outputs):
            if isinstance(view, torch.Tensor):
                self._view_of[id(view)] = ViewOf(parent, func, tuple(args), dict(kwargs),
                                                  index if multi else None)
                # its base's version now: a view shares its base's version counter, but the
                # op's output gets it only once autograd's view handling (above this level)
                # has run; its own counter here is a fresh one at 0, which a base written
                # before the view was made would make look stale
                self._created_version[id(view)] = version_counter(parent)
                self._views_of_root.setdefault(id(root), []).append(view)

    def forget_temporaries(self, made, kept) -> None:
        """Stop re-deriving, at later writes, the views among ``made`` (ids of the tensors one
        call of a C function of torch made) other than ``kept`` (what it returned) and the
        views those are made from. A C function keeps no reference to them once it returns
        (``x[i, :j] = v`` writes through a select and a slice of its own), so no code can
        read them again; re-deriving every view ever made at every write was quadratic in a
        loop writing a tensor piece by piece (a third of Qwen3-Next's export)."""
        temporaries = {key for key in made if key in self._view_of}
        for tensor in kept:
            while temporaries and id(tensor) in self._view_of:
                temporaries.discard(id(tensor))
                tensor = self._view_of[id(tensor)].parent
        if not temporaries:
            return
        for root in {id(self.root(self._view_of[key].parent)) for key in temporaries}:
            views = self._views_of_root[root]
            for view in views:
                if id(view) in temporaries:
                    self.recorder.builder.cancel(view)
            self._views_of_root[root] = [view for view in views if id(view) not in temporaries]

    def view_chain(self, tensor: torch.Tensor) -> list:
        """The ``ViewOf`` calls that made ``tensor`` from its root, root side first."""
        chain = []
        while id(tensor) in self._view_of:
            chain.append(self._view_of[id(tensor)])
            tensor = chain[-1].parent
        return chain[::-1]

    def root(self, tensor: torch.Tensor) -> torch.Tensor:
        while id(tensor) in self._view_of:
            tensor = self._view_of[id(tensor)].parent
        return tensor

    def family(self, tensor: torch.Tensor) -> list:
        """``tensor``'s root and every view of it still tracked: the tensors sharing its memory
        and its version counter (a write into one bumps all of them)."""
        root = self.root(tensor)
        return [root, *self._views_of_root.get(id(root), ())]

    def is_aliased(self, tensor: torch.Tensor) -> bool:
        return id(tensor) in self._view_of or bool(self._views_of_root.get(id(tensor)))

    def after_write(self, target: torch.Tensor, node) -> None:
        """``target`` was just written in place by ``node``: update its root and views."""
        root = self.root(target)
        if root is not target:
            node.meta[VIEW_WRITE] = True  # functionalize: the base is updated below
            with self._hidden_from_autograd(self._through_detach(target)):
                value, tensor = target, target
                while tensor is not root:
                    view = self._view_of[id(tensor)]
                    value = self._scatter(view, value)
                    tensor = view.parent
                self.recorder.emit(aten.copy_.default, (root, value))
        # every view of the root is re-derived from its new value, the written one too: its
        # in-place op's functional form lays its result out afresh (contiguous), where eager's
        # view keeps its strides, which a later reduction over it reads in their order; each
        # when it is next read (GraphBuilder.defer), in the grad mode this write asks for
        stale = [view for view in self._views_of_root.get(id(root), [])
                 if view is not target or root is not target]
        if not stale:
            return
        mode = True if self._may_carry_gradient(root) and any(
            _made_with_grad(view) for view in stale) else torch.is_grad_enabled()
        defer = self.recorder.builder.defer
        for view in stale:
            defer(view, functools.partial(self._replay_in_mode, view, mode))

    def _through_detach(self, tensor: torch.Tensor) -> bool:
        """True when ``tensor`` views its root through a ``detach``: autograd does not see a
        write through it (eager's root keeps its history; later gradients reach it as if
        unwritten)."""
        while id(tensor) in self._view_of:
            view = self._view_of[id(tensor)]
            if view.func is aten.detach.default:
                return True
            tensor = view.parent
        return False

    @contextlib.contextmanager
    def _hidden_from_autograd(self, hidden: bool):
        """Record what runs inside in a ``no_grad`` region when ``hidden`` and grad mode is on
        (or may be when the program runs: an export made under no_grad runs in its caller's
        mode): the base's new value then carries no gradient, and ``passes.functionalize``
        makes its later reads pass their gradient to the base's old value, as eager's
        autograd does."""
        if not (hidden and (torch.is_grad_enabled()
                            or not self.recorder.export_grad_enabled)):
            yield
            return
        with self.recorder.recorded_in_grad_mode(False):
            yield

    def stale_read_refusal(self, func, args, kwargs, out) -> EagerRefusal | None:
        """Why eager's autograd refuses to differentiate ``func`` (made ``out``), if it does
        for some inputs: it reads a view made by a function returning several views or in
        another grad mode (see :data:`_STALE_VIEWS`) whose base or another view of it was
        written in place since (its version changed). An in-place op's own target (written
        by this very op) is :func:`inplace_refusal`'s concern."""
        if not self._created_version:
            return None
        written = args[0] if is_inplace_op(func) else None
        stale = [(i, t) for i, t in enumerate(args) if isinstance(t, torch.Tensor)
                 and t is not written and is_view(t)
                 and self._created_version.get(id(t), version_counter(t)) != version_counter(t)]
        if not stale or not _differentiable_output(func, out):
            return None
        for index, tensor in stale:
            creation = creation_meta(tensor)
            if creation in _STALE_VIEWS:
                message, hint = _STALE_VIEWS[creation]
                return EagerRefusal(f"`{func}` {message}.", hint, (index,), creation)
        return None

    @staticmethod
    def _may_carry_gradient(root: torch.Tensor) -> bool:
        """Whether ``root`` may require grad in some call of the program (floating point or
        complex: which inputs require grad is the caller's choice)."""
        return root.dtype.is_floating_point or root.dtype.is_complex

    def _replay_in_mode(self, view: torch.Tensor, enabled: bool) -> None:
        """Re-derive ``view`` (made stale by a write) in a region of grad mode ``enabled``:
        the write's own mode, or grad enabled when a write under no_grad makes views made
        with grad enabled be re-derived: eager's view keeps differentiating its base (autograd
        regenerates its history at the next read), so the re-derived view must read the base
        with its gradient (``passes.functionalize`` reads a value written under no_grad with
        the gradient of the old one, outside no_grad regions)."""
        if enabled == torch.is_grad_enabled():
            self._replay(view)
            return
        with self.recorder.recorded_in_grad_mode(enabled):
            self._replay(view)

    # ----------------------------------------------------------------- inverse and replay
    def _replay(self, view: torch.Tensor) -> None:
        """Re-derive ``view`` from its parent's current value."""
        made = self._view_of[id(view)]
        out = self.recorder.emit(made.func, (made.parent, *made.args[1:]), made.kwargs)
        fresh = out[made.index] if made.index is not None else out
        self.recorder.bind(view, self.recorder.node_of(fresh))

    def _scatter(self, view: ViewOf, value: torch.Tensor) -> torch.Tensor:
        """The parent's new value when ``view`` (made by ``view.func``) now holds ``value``."""
        if view.func in (aten.alias.default, aten.detach.default):
            return value  # same elements, same shape: the parent's new value is the value
        builder = _INVERSES.get(view.func)
        if builder is None:
            raise UnsupportedError(
                f"an in-place write into a view made by `{view.func}` cannot be carried back "
                "to its base yet", code="UB121", frames=self.recorder.frames_provider(),
                hint="Write into a clone (`v = v.clone()`) or build the new value out of place "
                     "(torch.where, torch.cat, index_put).")
        func, args = builder(view, value)
        return self.recorder.emit(func, args)


def _argument(view: ViewOf, position: int, name: str, default):
    """An argument of the view op call, given positionally or by name."""
    if len(view.args) > position:
        return view.args[position]
    return view.kwargs.get(name, default)


def _select(view, value):
    return aten.select_scatter.default, (view.parent, value, view.args[1], view.args[2])


def _slice(view, value):
    return aten.slice_scatter.default, (
        view.parent, value, _argument(view, 1, "dim", 0), _argument(view, 2, "start", None),
        _argument(view, 3, "end", None), _argument(view, 4, "step", 1))


def _diagonal(view, value):
    return aten.diagonal_scatter.default, (
        view.parent, value, _argument(view, 1, "offset", 0), _argument(view, 2, "dim1", 0),
        _argument(view, 3, "dim2", 1))


def _reshape_back(view, value):
    return aten.reshape.default, (value, list(view.parent.shape))


def _transpose(view, value):
    return aten.transpose.int, (value, view.args[1], view.args[2])


def _t(view, value):
    return aten.t.default, (value,)


def _permute(view, value):
    dims = [d % view.parent.dim() for d in view.args[1]]
    return aten.permute.default, (value, sorted(range(len(dims)), key=dims.__getitem__))


def _unsqueeze(view, value):
    return aten.squeeze.dim, (value, view.args[1])


def _unbind(view, value):
    return aten.select_scatter.default, (view.parent, value, _argument(view, 1, "dim", 0),
                                         view.index)


def _split(view, value):
    dim = _argument(view, 2, "dim", 0)
    size = view.args[1]
    start = view.index * size
    return aten.slice_scatter.default, (view.parent, value, dim, start, start + value.shape[dim], 1)


def _split_with_sizes(view, value):
    dim = _argument(view, 2, "dim", 0)
    start = sum(view.args[1][:view.index])
    return aten.slice_scatter.default, (view.parent, value, dim, start, start + value.shape[dim], 1)


_INVERSES = {
    aten.select.int: _select,
    aten.slice.Tensor: _slice,
    aten.diagonal.default: _diagonal,
    aten.view.default: _reshape_back,
    aten._unsafe_view.default: _reshape_back,
    aten.squeeze.default: _reshape_back,
    aten.squeeze.dim: _reshape_back,
    aten.squeeze.dims: _reshape_back,
    aten.unsqueeze.default: _unsqueeze,
    aten.transpose.int: _transpose,
    aten.t.default: _t,
    aten.permute.default: _permute,
    aten.unbind.int: _unbind,
    aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split_with_sizes,
}


# -- views eager's autograd refuses to write or differentiate ---------------------------------
#: Why eager refuses an in-place write into a view, by how the view was made, and the fix.
_REFUSED_VIEWS = {
    CreationMeta.MULTI_OUTPUT_NODE: (
        "writes in place into a view returned by a function that returns several views "
        "(`split`, `chunk`, `unbind`...) while gradients are recorded: eager PyTorch raises "
        "here (\"... is a view and is being modified inplace. This view is the output of a "
        "function that returns multiple views. Such functions do not allow the output views to "
        "be modified inplace.\")",
        "replace the in-place op by an out-of-place one (`a = a + 1`), or write into a "
        "`.clone()` of the view, or build the whole tensor anew (`torch.cat`)."),
    CreationMeta.NO_GRAD_MODE: (
        "writes in place, with grad mode on, into a view created in a no_grad region: eager "
        "PyTorch raises here (\"A view was created in no_grad mode and is being modified "
        "inplace with grad mode enabled.\")",
        "make the view and the in-place write both inside the no_grad block, or both outside "
        "it."),
    CreationMeta.INFERENCE_MODE: (
        "writes in place, outside inference mode, into a view created in inference mode: eager "
        "PyTorch raises here (\"A view was created in inference mode and is being modified "
        "inplace in normal mode.\")",
        "make the view and the in-place write both inside the inference_mode block, or both "
        "outside it."),
    CreationMeta.IN_CUSTOM_FUNCTION: (
        "writes in place into a view created inside a custom autograd Function: eager "
        "PyTorch raises here (\"A view was created inside a custom Function ... and is being "
        "modified inplace.\")",
        "return a `.clone()` of the view from the Function, or write out of place."),
}


#: Why eager refuses to differentiate a read of a view whose base was written since.
_STALE_VIEWS = {
    CreationMeta.MULTI_OUTPUT_NODE: (
        "reads, while gradients are recorded, a view returned by a function that returns "
        "several views (`split`, `chunk`, `unbind`...) after its base or another view of its "
        "base was written in place: eager PyTorch raises here (\"... is a view and its base or "
        "another view of its base has been modified inplace. This view is the output of a "
        "function that returns multiple views.\")",
        "write the base before taking the views, clone the views first "
        "(`a, b = (t.clone() for t in y.split(2))`), or compute out of place."),
    CreationMeta.NO_GRAD_MODE: (
        "reads, with grad mode on, a view created in a no_grad region after its base or "
        "another view of its base was written in place: eager PyTorch raises here (\"A view "
        "was created in no_grad mode and its base or another view of its base has been "
        "modified inplace with grad mode enabled.\")",
        "make the view inside the grad mode it is used in, or clone it in the no_grad region."),
}
_NOT_DIFFERENTIABLE = frozenset({aten.detach.default})


def _made_with_grad(view: torch.Tensor) -> bool:
    """Whether autograd tracks ``view`` as a view made with grad mode on (a ``detach`` is no
    autograd view)."""
    return is_view(view) and creation_meta(view) in (
        CreationMeta.DEFAULT, CreationMeta.MULTI_OUTPUT_NODE)


def _differentiable_output(func, out) -> bool:
    """Whether autograd differentiates ``func`` (made ``out``): a floating-point or complex
    result of an op other than ``detach`` and the ``*_like`` factories."""
    if func in _NOT_DIFFERENTIABLE or op_schema(func).name.endswith("_like"):
        return False
    return any(isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex)
               for t in pytree.tree_leaves(out))


def inplace_refusal(func, args) -> EagerRefusal | None:
    """Why eager's autograd refuses the in-place op ``func`` (it writes ``args[0]``), if it
    does for some inputs: the written tensor is a view made by a function returning several
    views, in another grad mode, or in a custom Function (eager raises when grad mode is on
    and some tensor argument requires grad)."""
    target = args[0]
    if not (isinstance(target, torch.Tensor) and is_view(target)):
        return None
    creation = creation_meta(target)
    if creation not in _REFUSED_VIEWS:
        return None
    message, hint = _REFUSED_VIEWS[creation]
    tensors = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    return EagerRefusal(f"`{func}` {message}.", hint, tensors, creation)


# -- memory overlap ------------------------------------------------------------------------------
#: Elements of the largest storage :func:`overlap_refusal` re-creates on the CPU.
_OVERLAP_PROBE_LIMIT = 1 << 22


def overlap_refusal(func, args, kwargs) -> str | None:
    """Eager's error when the in-place op ``func`` writes ``args[0]`` while another of its
    tensor arguments partly overlaps it in memory (``y.add_(y[0])``, ``y[1:].copy_(y[:-1])``),
    or while the written tensor overlaps itself (an ``expand``): "unsupported operation: some
    elements of the input tensor and the written-to tensor refer to a single memory location".
    Meta kernels skip that check (their tensors have no addresses), so the op is run on CPU
    tensors laid out as the meta ones over one storage, at the example's sizes (a symbolic
    size at its hint): the answer is eager's own on the example. Asked only when such an
    overlap is possible and every size, stride and offset has a value there (an unbacked one
    has none: not asked); None when eager runs the op.

    Under dynamic shapes eager runs the op at the example, and another size may make the
    ranges of memory overlap partly (``y[1:].add_(y[:-1])`` does from 3 rows on): where the
    example's tensors are dense and apart (or the same range), that is kept as a guard
    (:func:`_keep_apart`), which narrows a ``Dim.AUTO`` range or, for a named Dim, is a
    constraint violation with its fix."""
    target = args[0]
    if not isinstance(target, torch.Tensor) or target.device.type != "meta":
        return None
    tensors = [t for t in pytree.tree_leaves((args[1:], kwargs)) if isinstance(t, torch.Tensor)]
    storage = _storage_key(target)
    aliased = [t for t in tensors if t is not target and _storage_key(t) == storage]
    if not aliased and not any(s == 0 and n > 1 for s, n in zip(target.stride(), target.shape)):
        return None
    if any(t.dtype != target.dtype for t in aliased):
        return None
    layouts = {id(t): example_layout(t) for t in tensors + [target]}
    if any(layout is None for layout in layouts.values()):
        return None
    laid_out = [target, *aliased]
    extent = max(storage_extent(*layouts[id(t)]) for t in laid_out)
    if extent > _OVERLAP_PROBE_LIMIT:
        return None
    with disable_current_modes(), torch.no_grad():
        memory = torch.zeros(extent, dtype=target.dtype)
        real = {id(t): memory.as_strided(*layouts[id(t)]) for t in laid_out}

        def stand_in(value):
            if not isinstance(value, torch.Tensor):
                return example_value(value)
            if id(value) in real:
                return real[id(value)]
            return torch.zeros(layouts[id(value)][0], dtype=value.dtype)

        call_args, call_kwargs = pytree.tree_map(stand_in, (args, kwargs))
        try:
            func(*call_args, **call_kwargs)
        except RuntimeError as error:
            text = str(error)
            if text.startswith("unsupported operation"):
                return text.split("\n")[0]
        except Exception:  # noqa: BLE001 - zeros an op rejects otherwise: not our question
            return None
    for other in aliased:
        _keep_apart(target, other, real[id(target)], real[id(other)])
    return None


def _keep_apart(target: torch.Tensor, other: torch.Tensor, at_example: torch.Tensor,
                other_at_example: torch.Tensor) -> None:
    """Guard that ``target`` and ``other`` (one storage) stay as the example lays them out
    (``at_example``: their CPU stand-ins): apart, or the same range of memory, when both are
    dense there (eager checks no other layout). Nothing to guard when every size is a number;
    when they overlap partly at the example, the op ran there, so it does not check."""
    if all(type(v) is int for t in (target, other)
           for v in (*t.shape, *t.stride(), t.storage_offset())):
        return
    if not (is_non_overlapping_and_dense(at_example)
            and is_non_overlapping_and_dense(other_at_example)):
        return
    (begin, end), (other_begin, other_end) = _range(at_example), _range(other_at_example)
    (symbolic_begin, symbolic_end), (other_symbolic_begin, other_symbolic_end) = \
        _range(target), _range(other)
    if end <= other_begin:
        bool(symbolic_end <= other_symbolic_begin)  # a guard: it holds at the example
    elif other_end <= begin:
        bool(other_symbolic_end <= symbolic_begin)
    elif (begin, end) == (other_begin, other_end):
        bool(symbolic_begin == other_symbolic_begin)
        bool(symbolic_end == other_symbolic_end)


def _range(tensor: torch.Tensor) -> tuple:
    """``[begin, end)``, in elements of its storage, of a dense tensor."""
    return tensor.storage_offset(), tensor.storage_offset() + tensor.numel()


def _storage_key(tensor: torch.Tensor):
    try:
        return tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a subclass)
        return None


