"""Meta outputs of ops the trace has already computed on the same metadata.

A model runs the same ops on tensors of the same sizes over and over: every block of a
24-block transformer runs ``layer_norm``, ``linear``, ``scaled_dot_product_attention``... on
inputs that differ only in identity. With symbolic sizes, computing one meta output is
expensive — a composite op kept whole (``ir.composites``) runs its Python decomposition on
SymInts, tens of milliseconds for ``linear`` — and nine in ten of those computations repeat one
already done. :class:`MetaCache` keeps, per trace, the metadata of each output of a
*functional* op (every output fresh memory: ``is_functional``) under a key that holds everything
the meta computation reads:

* the op, and which path computed it (a composite's decomposition or the op's meta kernel);
* each argument: a tensor by dtype, layout, device, sizes, strides and storage offset (sympy
  expressions for symbolic ones), conjugate/negative bits and ``requires_grad``; a SymInt,
  SymFloat or SymBool by its expression; a plain value by type and value (floats bit for bit);
* the process state decompositions read: grad mode, autocast, the default dtype,
  deterministic algorithms, the attention backends enabled;
* the shape environment's version (``ShapeEnvironment.version``), once it has a symbol: a
  range narrowed by ``torch._check`` or a new symbol changes what a kernel can decide
  statically;
* whether the op's first tensor stands for a CPU tensor (the output is then laid out as
  eager's CPU kernel lays it out, ``ir.layouts``).

A hit returns fresh meta tensors with the cached sizes, strides and dtype (as eager does: a
functional op's outputs are new memory, even where a meta decomposition returns a view of its
own temporary). Under symbolic sizes a *view* op (``view``, ``transpose``, ``split``...) is
cached too, its outputs stated by sizes, strides and storage offset and rebuilt with
``as_strided`` on the tensor it views (torch's Python reference for ``view`` on SymInts costs
~0.5 ms a call, and every block repeats its views); only outputs in that tensor's memory, of
its dtype, without conjugate or negative bits, are stored. It skips no
decision the trace would record: each question the kernel asked with these arguments was
answered (and, if it needed a guard, recorded) the first time, and the environment answers it
the same way again without recording anything (``ShapeEnvironment.decide_expr`` caches every
decision). Outputs at a storage offset, that require grad, carry conjugate bits, or come with
new symbols (``nonzero``-like sizes) are never cached; nor is a call whose arguments include a
value the key cannot state exactly (an object of another type, a tensor not on the meta device).

Static entries of torch's own ops (``aten``, ``prims``) are shared by every trace of the
process, as FakeTensorMode's dispatch cache is a class attribute: with no symbol, the key holds
all the output depends on, so a model exported again (or another with the same layers)
computes no meta output its shapes already had (BERT's static export: 65 -> 51 ms; a batch
norm's, whose meta kernel is a Python decomposition relaid out as eager's: ~3 ms each). An
output relaid out by the layout probe is not shared (``ir.layouts`` runs eager's kernel with
the trace's ``requires_grad`` of the inputs), nor one computed from an output laid out by
ATen's backend selection for its device (``ir.devices``: it reads the process's settings, MKLDNN
enabled or not), nor other namespaces' ops, whose kernels the user may register anew between
exports.

Symbolic entries of torch's own ops are shared too, with what their computation asked of the
shape environment: a key then also holds the state of the environment its answers read (each
symbol's range and example value, the ``torch._check`` facts:
``ShapeEnvironment.computation_state``), and a trace that finds the entry asks the logged
questions again, in order, of its own environment (``ShapeEnvironment.replay_calls``): it
records the guards, the size-1 audit's notes and the ranges' log a computation would record
there, and gets the logged answers (else it computes, as without the entry). A model exported
again under ``Dim.AUTO`` or named Dims skips the meta computations of its first export
(``scaled_dot_product_attention``'s decomposition on SymInts: ~15-30 ms; a ``view``'s Python
reference ~0.5 ms). Only a computation that asked nothing that failed, made no symbol and
changed no range but by a ``torch._check`` is shared; only when its symbols have example values
(no data-dependent size); and only outputs made again without a question the computation may
not have asked: a functional op's laid out contiguously (made with ``empty``, as the kernels
make theirs) and a view op's (``as_strided`` of its base, as this trace's own entries).
"""
from __future__ import annotations

import sympy
import torch
import torch.utils._pytree as pytree

from ..symbolic import expr as E
from ..symbolic.env import UNREPLAYABLE
from .flat import tree_flatten

__all__ = ["TORCH_NAMESPACES", "MetaCache", "SharedComputation", "clear_shared_entries",
           "metadata_key", "process_state"]

# Leaf types stated exactly by (type, value); bool before int: True is an int too.
_PLAIN = (bool, int, str, type(None), torch.dtype, torch.device, torch.layout,
          torch.memory_format)


class _Uncacheable(Exception):
    """An argument or output the cache cannot state exactly."""


# Entries with static sizes of torch's own ops, shared by every trace of the process (as
# FakeTensorMode's dispatch cache is a class attribute): a model exported again, or another
# model of the same layers, computes no meta output its shapes already had. Emptied when it
# reaches SHARED_ENTRIES_MAX.
SHARED_ENTRIES_MAX = 1 << 13
_SHARED: dict = {}
# Entries with symbolic sizes, by the environment state their computation read (with the
# questions it asked): see the module docstring. Emptied with the static ones' bound.
_SHARED_SYMBOLIC: dict = {}
# replays whose answers differed from the logged ones (then computed): a key missing what
# the answers read, i.e. a bug; the tests read it
replay_mismatches = 0
TORCH_NAMESPACES = ("aten", "prims")  # whose kernels are torch's own (not registered anew)


class MetaCache:
    """Per-trace cache of functional (and view) ops' meta outputs, its static entries of
    torch's own ops shared by the process's traces (see the module docstring).

    env: the trace's ``ShapeEnvironment`` (None for static traces): its ``symint`` rebuilds
    symbolic sizes, its ``version`` and symbol count guard what a hit may skip.
    """

    def __init__(self, env=None):
        self.env = env
        self._entries: dict = {}
        self.hits = 0

    def key(self, path: str, op, args, kwargs, on_cpu: bool = True):
        """The key of ``op(*args, **kwargs)`` computed by ``path``, or None when an argument
        cannot be stated exactly. ``on_cpu``: whether its first tensor stands for a CPU tensor
        (the meta output is then laid out as the CPU kernel lays it out: ``ir.layouts``)."""
        stated = metadata_key(args, kwargs)
        if stated is None:
            return None
        # with no symbol yet, the environment can decide nothing a kernel asks
        version = (self.env.version, len(self.env.symbols)) \
            if self.env is not None and self.env.symbols else None
        return (path, op, stated, version, process_state(), on_cpu)

    def get(self, key, base: torch.Tensor | None = None):
        """Fresh meta outputs for ``key``, or None when it was not stored; a view op's
        (``base``: the tensor it views) as views of ``base``."""
        entry = self._entries.get(key) if key is not None else None
        if entry is None and key is not None and _shareable(key):
            entry = _SHARED.get(key)
        if entry is None:
            return None
        self.hits += 1
        spec, leaves = entry
        return pytree.tree_unflatten([self._rebuild(leaf, base) for leaf in leaves], spec)

    def put(self, key, out, symbols_before: int | None,
            base: torch.Tensor | None = None, share: bool = True,
            computation: SharedComputation | None = None) -> None:
        """Remember ``out`` under ``key`` unless it cannot be rebuilt exactly, or the
        computation created symbols (``symbols_before``: the environment's count before).
        ``base``: for a view op, the tensor its outputs view (each is then stored as its
        sizes, strides and storage offset into ``base``'s memory). ``share``: the output is a
        function of the key alone (not relaid out as eager's kernel lays it out, which may read
        the trace's ``requires_grad`` of the inputs, nor computed from an output ATen's backend
        selection laid out, which reads the process's settings), so a static one may serve
        other traces; a symbolic one too, with the questions ``computation`` logged."""
        if key is None or (self.env is not None and len(self.env.symbols) != symbols_before):
            return
        leaves, spec = pytree.tree_flatten(out)
        try:
            described = [_describe(leaf) if base is None else _describe_view(leaf, base)
                         for leaf in leaves]
        except _Uncacheable:
            return
        if self.env is None and any(isinstance(leaf, _Meta) and not leaf.is_static()
                                    for leaf in described):
            return  # symbolic sizes without an environment to rebuild them: never expected
        self._entries[key] = (spec, described)
        if share and _shareable(key) and all(leaf.is_static() for leaf in described
                                   if isinstance(leaf, _Meta)):
            if len(_SHARED) >= SHARED_ENTRIES_MAX:
                _SHARED.clear()
            _SHARED[key] = (spec, described)
        elif share and computation is not None and computation.log is not None and \
                all(leaf.static or isinstance(leaf, _View) or _dense_order(leaf) is not None
                    for leaf in described if isinstance(leaf, _Meta)):
            if len(_SHARED_SYMBOLIC) >= SHARED_ENTRIES_MAX:
                _SHARED_SYMBOLIC.clear()
            _SHARED_SYMBOLIC[computation.key] = (spec, described, computation.log)

    def shared_computation(self, key, base: torch.Tensor | None = None
                           ) -> SharedComputation | None:
        """For the computation of a functional op of torch's own under symbolic sizes (``key``,
        with no entry in this trace; a view op's, ``base`` the tensor it views): the symbolic
        entry another trace left for it, to replay,
        or the means to leave one (:class:`SharedComputation`); None when it cannot be
        shared (an argument of unknown value, a dry run, another namespace's op)."""
        env = self.env
        if key is None or env is None or not env.symbols or len(key) != 6 or \
                getattr(key[1], "namespace", None) not in TORCH_NAMESPACES:
            return None
        state = env.computation_state(_free_symbols(key[2]))
        if state is None:
            return None
        shared = (key[0], key[1], key[2], key[4], key[5], state)
        return SharedComputation(self, shared, _SHARED_SYMBOLIC.get(shared), base)

    def symbol_count(self) -> int | None:
        """The environment's symbol count, to pass to :meth:`put` after computing."""
        return len(self.env.symbols) if self.env is not None else None

    def _rebuild(self, leaf, base):
        if not isinstance(leaf, _Meta):
            return leaf
        if leaf.static:  # (most entries: no size to make a SymInt of)
            if isinstance(leaf, _View):
                return base.as_strided(leaf.sizes, leaf.strides, leaf.offset)
            return torch.empty_strided(leaf.sizes, leaf.strides, dtype=leaf.dtype,
                                       device="meta")
        sizes = [self._size(s) for s in leaf.sizes]
        strides = [self._size(s) for s in leaf.strides]
        if isinstance(leaf, _View):
            return base.as_strided(sizes, strides, self._size(leaf.offset))
        return torch.empty_strided(sizes, strides, dtype=leaf.dtype, device="meta")

    def _size(self, value):
        return value if isinstance(value, int) else self.env.symint(value)


def clear_shared_entries() -> None:
    """Forget the entries shared between traces (a fresh process's state)."""
    _SHARED.clear()
    _SHARED_SYMBOLIC.clear()


class SharedComputation:
    """One meta computation whose symbolic output other traces may share
    (:meth:`MetaCache.shared_computation`). :meth:`wrap` gives the kernel to run in its
    place: its first call replays the entry found (the questions, then fresh outputs) or
    computes with the environment's questions logged (``log``, for :meth:`MetaCache.put`);
    later calls (the size-1 audit re-running the node's kernel at 1) compute.

    key: the shared key; entry: ``(spec, outputs, questions)`` found, or None; replayed:
    whether the entry served; log: the questions of a computation that may be shared."""

    __slots__ = ("cache", "key", "entry", "base", "log", "replayed", "_used")

    def __init__(self, cache: MetaCache, key, entry, base: torch.Tensor | None = None):
        self.cache, self.key, self.entry, self.base = cache, key, entry, base
        self.log: tuple | None = None
        self.replayed = False
        self._used = False

    def wrap(self, kernel):
        def shared(args, kwargs):
            if self._used:
                return kernel(args, kwargs)
            self._used = True
            env = self.cache.env
            if self.entry is not None:
                spec, leaves, questions = self.entry
                outputs = [_fresh(self.cache, leaf, self.base) for leaf in leaves]
                if all(out is not None for out in outputs):
                    if env.replay_calls(questions):
                        self.replayed = True
                        return pytree.tree_unflatten(outputs, spec)
                    global replay_mismatches
                    replay_mismatches += 1
                return kernel(args, kwargs)  # computed: what it asks again is answered alike
            with env.calls_logged() as log:
                out = kernel(args, kwargs)
            if log is not None and UNREPLAYABLE not in log:
                self.log = tuple(log)
            return out

        return shared


def _shareable(key) -> bool:
    """Whether ``key``'s entry may serve other traces: stated with no symbol in the trace (so
    no argument is symbolic), for an op of torch's own (``aten``, ``prims``: the kernels of
    other namespaces are the user's, who may register them anew between exports)."""
    return len(key) == 6 and key[3] is None and \
        getattr(key[1], "namespace", None) in TORCH_NAMESPACES


def metadata_key(*trees):
    """``trees`` (arguments, outputs) stated exactly as one hashable value (tensors by their
    metadata, as :meth:`MetaCache.key` states them), or None when something in them cannot
    be stated exactly."""
    try:
        leaves, spec = tree_flatten(trees)
        return spec, tuple(_state(leaf) for leaf in leaves)
    except _Uncacheable:
        return None


class _Meta:
    """A cached output tensor: sizes and strides (ints or sympy expressions), dtype."""

    __slots__ = ("sizes", "strides", "dtype", "static")

    def __init__(self, sizes, strides, dtype):
        self.sizes, self.strides, self.dtype = sizes, strides, dtype
        self.static = all(isinstance(s, int) for s in (*sizes, *strides))

    def is_static(self) -> bool:
        return self.static


class _View(_Meta):
    """A cached output of a view op: sizes, strides and storage offset into its base's
    memory."""

    __slots__ = ("offset",)

    def __init__(self, sizes, strides, dtype, offset):
        super().__init__(sizes, strides, dtype)
        self.offset = offset
        self.static = self.static and isinstance(offset, int)


def _state(leaf):
    """An argument as an exactly comparable, hashable value."""
    if isinstance(leaf, torch.Tensor):
        if leaf.device.type != "meta" or leaf.layout != torch.strided:
            raise _Uncacheable
        return ("T", leaf.dtype, tuple(map(_expr, leaf.shape)), tuple(map(_expr, leaf.stride())),
                _expr(leaf.storage_offset()), leaf.requires_grad, leaf.is_conj(), leaf.is_neg())
    if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(leaf), _symbolic(leaf))
    if isinstance(leaf, float):
        return (float, leaf.hex())  # -0.0 and 0.0 apart; nan equal to itself
    if isinstance(leaf, _PLAIN):
        return (type(leaf), leaf)
    raise _Uncacheable


def _fresh(cache: MetaCache, leaf, base: torch.Tensor | None = None):
    """A replayed entry's output made again, or None. A view op's is a view of ``base``; a
    functional op's symbolic one is dense (the entries shared are: contiguous, or a
    permutation of its dims laid out contiguously, as ``stack``/``cat`` of transposed
    tensors and the recurrent kernels give) and made as the kernels make theirs, with
    ``empty`` over the sizes in memory order (the strides ``size * max(size, 1)``, the
    storage its element count), then ``permute``: ``empty_strided`` would ask of each size
    whether it is 0 (the storage's extent), questions the computation may not have asked,
    which the replay would record. A permuted one is not a view of anything else: its
    memory-order tensor is a temporary nobody else holds (``_base`` cut by ``detach``)."""
    if not isinstance(leaf, _Meta) or leaf.static or isinstance(leaf, _View):
        return cache._rebuild(leaf, base)
    order = _dense_order(leaf)
    if order is None:
        return None
    sizes = [cache._size(s) for s in leaf.sizes]
    out = torch.empty([sizes[d] for d in order], dtype=leaf.dtype, device="meta")
    if order != tuple(range(len(order))):
        out = out.permute([order.index(d) for d in range(len(order))]).detach()
    return out if tuple(map(_expr, out.stride())) == leaf.strides else None


def _dense_order(leaf: _Meta) -> tuple[int, ...] | None:
    """The dims of ``leaf`` from outermost to innermost in memory when its strides are the
    contiguous ones of its sizes taken in that order (as torch writes them: ``stride =
    stride_inner * max(size_inner, 1)``, sympy simplifying where it can), else None; the
    identity for a contiguous one. Kept per layout (building ``Max`` costs ~0.1 ms, and
    layouts repeat)."""
    layout = (leaf.sizes, leaf.strides)
    known = _DENSE.get(layout, False)
    if known is False:
        if len(_DENSE) >= SHARED_ENTRIES_MAX:
            _DENSE.clear()
        known = _DENSE[layout] = _dense_strides_order(leaf.sizes, leaf.strides)
    return known


_DENSE: dict = {}


def _dense_strides_order(sizes, strides) -> tuple[int, ...] | None:
    """See :func:`_dense_order`. Innermost first, the dim whose stride is the running
    product; of several (a size-1 dim shares its neighbour's stride) the last, so that a
    contiguous layout gives the identity."""
    expected = sympy.Integer(1)
    remaining = list(range(len(sizes)))
    inner_first = []
    while remaining:
        dim = next((d for d in reversed(remaining) if strides[d] == expected), None)
        if dim is None:
            return None
        remaining.remove(dim)
        inner_first.append(dim)
        size = sizes[dim]
        expected = expected * (size if isinstance(size, int) and size >= 1 else E.Max(size, 1))
    return tuple(reversed(inner_first))


def _free_symbols(stated) -> set:
    """The symbols of a :func:`metadata_key`'s arguments."""
    found: set = set()
    for state in stated[1]:
        if state[0] == "T":
            for part in (*state[2], *state[3], state[4]):
                if isinstance(part, sympy.Basic):
                    found |= part.free_symbols
        elif isinstance(state[1], sympy.Basic):
            found |= state[1].free_symbols
    return found


def _expr(size):
    if isinstance(size, torch.SymInt):
        return _symbolic(size)
    return int(size)


def _symbolic(value):
    expr = getattr(value.node, "expr", None)  # unbroken's SymNode (symbolic.node)
    if expr is None:
        raise _Uncacheable
    return expr


def _describe(leaf):
    """An output as something :meth:`MetaCache._rebuild` makes again exactly."""
    if isinstance(leaf, torch.Tensor):
        # A view is fine: a functional op's output never aliases its inputs (its schema
        # says so; ``ir.composites`` keeps only such composites whole), so what it views is
        # a temporary of the computation (``linear`` as ``view(addmm(...))``), which the
        # program cannot reach; eager returns fresh memory (``_unsafe_view``).
        if (leaf.device.type != "meta" or leaf.layout != torch.strided or leaf.requires_grad
                or leaf.is_conj() or leaf.is_neg()
                or type(leaf) is not torch.Tensor or _expr(leaf.storage_offset()) != 0):
            raise _Uncacheable
        return _Meta(tuple(map(_expr, leaf.shape)), tuple(map(_expr, leaf.stride())), leaf.dtype)
    if isinstance(leaf, float) or (isinstance(leaf, _PLAIN) and not isinstance(
            leaf, (torch.device,))):
        return leaf
    raise _Uncacheable


def _describe_view(leaf, base: torch.Tensor):
    """A view op's output as a :class:`_View` of ``base``: only a plain tensor of ``base``'s
    dtype in ``base``'s memory, neither of them carrying conjugate or negative bits (what
    ``as_strided`` of ``base`` makes again exactly: the autograd view relation is set above
    the dispatch level, by the op that was called)."""
    if not isinstance(leaf, torch.Tensor):
        return _describe(leaf)
    if (type(leaf) is not torch.Tensor or leaf.device.type != "meta"
            or leaf.layout != torch.strided or leaf.dtype != base.dtype or leaf.requires_grad
            or leaf.is_conj() or leaf.is_neg() or base.is_conj() or base.is_neg()
            or leaf.untyped_storage()._cdata != base.untyped_storage()._cdata):
        raise _Uncacheable
    return _View(tuple(map(_expr, leaf.shape)), tuple(map(_expr, leaf.stride())), leaf.dtype,
                 _expr(leaf.storage_offset()))


def process_state() -> tuple:
    """What decompositions and meta kernels read from the process: grad mode, autocast, the
    default dtype, deterministic algorithms (``index_put`` with ``accumulate``), and the
    attention backends ``scaled_dot_product_attention`` may choose from."""
    backends = torch.backends.cuda
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
            torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
            backends.flash_sdp_enabled(), backends.mem_efficient_sdp_enabled(),
            backends.math_sdp_enabled(), backends.cudnn_sdp_enabled())
