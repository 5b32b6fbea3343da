"""How a 0.1 (``neuronxcc.nki``) kernel runs on the emulator core.

The 0.3 core executes instructions eagerly; this module adds what the 0.1 compiler did around
them:

* **Launch rules** (:class:`Launch`): kernel parameters are immutable unless annotated
  ``nt.mutable_tensor``, and a mutable parameter must be returned.
* **Loop semantics** (:class:`LegacyRange`, :meth:`LegacyState.check_dependences`): iterations of
  an ``affine_range`` (and SPMD programs) must write disjoint memory, except for associative
  accumulation (``+=``, ``nl.loop_reduce``). Each checked allocation carries, per element, the
  id of the loop-iteration stack that last wrote it; a write from a different iteration of a
  loop both writes share is ``err_unexpected_output_dependencies``. Allocations made inside
  the current iteration cannot conflict and are not tracked.
* **Results written straight into their target** (:func:`retarget`): ``x[...] = nisa.exp(y)``
  computes into a fresh result tile, and the compiler would have let that instruction write
  ``x`` itself. The instruction record is rewritten to do so, so the trace and the cost model
  see one instruction, not an instruction plus a copy, and the temporary never occupies SBUF.
* **Assignments** (:func:`assign`): masked results only update the part they hold; a
  destination smaller than the value is an error; ``nl.loop_reduce`` results reduce into it.
* **Block tensors** (:class:`BlockTensor`): ``(B0, B1, nl.par_dim(P), F…)`` is a list of
  ``(P, F…)`` tiles, each its own allocation created on first use, so SBUF liveness is counted
  per tile as the compiler allocates them.
* **Host memory of block tiles** (:class:`HostPlan`): compiler-generated kernels (NKIBench)
  declare gigabytes of block tiles, each live for a few instructions. A computing launch whose
  block tensors outgrow :data:`PLAN_BYTES` restarts (:class:`NeedHostPlan`) after a timing-only
  run has recorded each block tile's last use, and then frees every tile's storage once its
  last instruction has run. The instruction trace is the same; only host memory shrinks.
"""

from __future__ import annotations

import heapq
import inspect
import linecache
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import isa as _isa
from .. import ops as _ops
from ..errors import NkiOutOfBoundsError, NkiRuntimeError, NkiTypeError, NkiUnsupportedError, NkiValidationError, kernel_frame, warn
from ..language import _Range
from ..memory import Buffer, KernelContext, current, running
from ..tensor import NkiTensor
from .grid import Box, TileMeta, is_empty, restrict, same_dims

__all__ = [
    "PLAN_BYTES",
    "BlockTensor",
    "DirectAlloc",
    "HostPlan",
    "Launch",
    "LegacyRange",
    "LegacyState",
    "LoopReduce",
    "MatmulTile",
    "NeedHostPlan",
    "assign",
    "assignment_target",
    "mark_result",
    "new_result",
    "on_write",
    "operand",
    "planning",
    "reduced_shape",
    "retarget",
    "state",
    "tile_arg",
    "trailing_axes",
]

_TARGET = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?P<sub>\[.*\])?\s*(?::[^=]*)?=(?!=)")
_FOR = re.compile(r"\bfor\s+(?P<var>[A-Za-z_]\w*)\s+in\b")


def assignment_target() -> tuple[str, bool] | None:
    """``(name, subscripted)`` of the assignment on the kernel line being executed (``x[...] = …`` → ``("x", True)``)."""
    f = kernel_frame(sys._getframe(1))
    if f is None:
        return None
    m = _TARGET.match(linecache.getline(f.f_code.co_filename, f.f_lineno))
    return (m.group("name"), m.group("sub") is not None) if m else None


# --------------------------------------------------------------------------------------------
# Per-launch state
# --------------------------------------------------------------------------------------------
class _Labels:
    """A small integer label per element of one allocation (0: none), for the write checks.

    While every write covered the whole allocation (a block tile loaded at once, an
    ``nl.zeros`` fill) one number stands for all elements; an array (uint16, widened if labels
    outgrow it) exists only once a write covers part of it.
    """

    __slots__ = ("array", "ids", "meanings", "whole")

    def __init__(self) -> None:
        self.whole = 0
        self.array: np.ndarray | None = None
        self.ids: dict[Any, int] = {}
        self.meanings: list[Any] = [None]  #: label → what it stands for

    def label(self, meaning: Any) -> int:
        """The label standing for ``meaning`` (1, 2, … in order of first use)."""
        k = self.ids.get(meaning)
        if k is None:
            k = self.ids[meaning] = len(self.meanings)
            self.meanings.append(meaning)
        return k

    def under(self, t: NkiTensor) -> np.ndarray | None:
        """The labels of the elements ``t`` covers (None: they all carry ``whole``)."""
        if self.array is None:
            return None
        return self.array[t._addr] if t._addr is not None else t._geom(self.array)

    def mark(self, t: NkiTensor, label: int) -> None:
        n = t._storage_elems()
        if t._addr is None and t.size == n and t._span() == (0, n - 1):  # the write covers every element
            self.whole, self.array = label, None
            return
        if self.array is None:
            self.array = np.full(n, self.whole, dtype=np.uint16)
        if label > np.iinfo(self.array.dtype).max:
            self.array = self.array.astype(np.int32)
        if t._addr is None:
            t._geom(self.array)[...] = label
        else:
            self.array[t._addr] = label


#: Bytes of block tensors a computing launch may declare before it plans its host memory (:class:`HostPlan`).
PLAN_BYTES = 1 << 30


class NeedHostPlan(BaseException):
    """A computing 0.1 launch outgrew :data:`PLAN_BYTES` of block tensors with no plan: the launcher re-runs it with one.

    A ``BaseException``, so that no ``except Exception`` in kernel code can swallow the restart.
    """


class HostPlan:
    """Last instruction (sequence number) and shape of every block tile, from a timing-only run of the same launch.

    0.1 kernels are traced without data, so their control flow and allocation order do not depend
    on values: the computing run allocates the same tiles under the same uids and can free each
    one after its last use. A tile whose shape differs from the plan's switches freeing off.
    """

    __slots__ = ("last", "recs", "shapes")

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self.shapes: dict[int, tuple[int, ...]] = {}
        self.recs: dict[int, Any] = {}  #: while collecting: uid → OnChipRecord (its ``last`` is final once the run ends)

    def seal(self) -> None:
        """Read the last uses off the collecting run's records (call after that run finished)."""
        self.last = {uid: rec.last for uid, rec in self.recs.items() if rec is not None and rec.last >= 0}
        self.recs = {}


_PLANS: list[Any] = []  #: innermost planning() scope: None (collect a plan), a HostPlan (use it) or False (may ask for one)


@contextmanager
def planning(plan: HostPlan | bool | None) -> Iterator[HostPlan | None]:
    """Scope of one launch by a launcher that handles :class:`NeedHostPlan`.

    ``False``: the launch may raise it; ``None``: collect a plan (yielded; fill it after a
    timing-only run); a :class:`HostPlan`: free block tiles after their last use.
    """
    collected = HostPlan() if plan is None else None
    _PLANS.append(collected if plan is None else plan)
    try:
        yield collected
    finally:
        _PLANS.pop()


class LegacyState:
    """What the 0.1 rules need to remember during one launch (``ctx.legacy``)."""

    def __init__(self, kernel_code: Any) -> None:
        self.kernel_code = kernel_code
        #: host-memory planning (see HostPlan): the scope's mode, bytes of block tensors declared, tiles to free
        self.plan: Any = _PLANS[-1] if _PLANS else None
        self.declared = 0
        self.spmd_warned: set[int] = set()  #: alloc uids already warned about writes from several SPMD instances
        self.direct_sites: dict[Any, Any] = {}  #: (kernel line, enclosing loops, program) → its direct allocation (ncc.*.mod_alloc)
        self.dead: list[tuple[int, int]] = []  #: (using a plan) heap of (last seq, uid) of live block tiles
        self.tiles: dict[int, Any] = {}  #: (using a plan) uid → Alloc of live block tiles
        self.iter_start: dict[int, int] = {}  #: loop frame uid → allocation counter when its current iteration began
        self.loop_lines: dict[int, tuple[str, int]] = {}  #: loop frame uid → file and line of its ``for``
        self.birth: dict[int, int] = {}  #: block-tile alloc uid → allocation counter when its block tensor was declared
        self.writers: dict[int, _Labels] = {}  #: alloc uid → per element, the loop-iteration stack that last wrote it
        self.last: tuple[int, str, str, tuple[int, ...]] | None = None  #: (seq, op, engine, written uids) of the latest instruction
        self.immutable: set[int] = set()
        self.mutable: dict[int, str] = {}  #: alloc uid → parameter name
        self.shared_lines: set[Any] = set()  #: (program id, file, line) that created a shared_hbm tensor
        self.psum_written: dict[int, _Labels] = {}  #: PSUM alloc uid → per element, 1 once any instruction wrote it
        self.results: set[int] = set()  #: alloc uids of op results (never ``+=`` targets: not tracked in psum_written)

    def written(self, t: NkiTensor) -> np.ndarray:
        """Per element of the PSUM view ``t``: has any instruction written it (``+=`` overwrites where not)."""
        w = self.psum_written.get(t._a.uid)
        if w is None:
            return np.zeros(t.shape, dtype=bool)
        under = w.under(t)
        return np.full(t.shape, w.whole != 0) if under is None else np.asarray(under != 0)

    def check_write(self, ctx: KernelContext, t: NkiTensor) -> None:
        """The 0.1 rules every write obeys: immutable parameters, independent loop iterations."""
        a = t._a
        if a.uid in self.immutable:
            raise NkiValidationError("err_cannot_update_immutable_parameter", "Cannot update immutable parameter")
        if t.size == 0 or dt.storage_dtype(t._dtype).itemsize != a.itemsize:
            return  # (a reinterpreting view: the element maps below are in the allocation's own dtype)
        if a.memory == "psum" and a.uid not in self.results:
            self.psum_written.setdefault(a.uid, _Labels()).mark(t, 1)
        if not ctx.accumulating and (ctx.loops or ctx.grid) and not (a.rec is not None and a.rec.manual):
            self.check_dependences(ctx, t)

    def check_dependences(self, ctx: KernelContext, t: NkiTensor) -> None:
        a = t._a
        birth = self.birth.get(a.uid, a.uid)
        stack = [(f[0], f[2]) for f in ctx.loops if f[1] == "affine" and birth < self.iter_start.get(f[0], 0)]
        if ctx.grid and (a.memory == "shared_hbm" or a.is_input):
            stack.insert(0, (0, ctx.program_id))  # SPMD programs run in parallel too: frame uid 0 stands for the grid
        if not stack:
            return
        key = tuple(stack)
        w = self.writers.setdefault(a.uid, _Labels())
        stacks = w.meanings
        under = w.under(t)
        if under is None:
            owners: Any = (w.whole,)
        else:
            lo, hi = int(under.min()), int(under.max())
            owners = (lo,) if lo == hi else np.unique(under)
        for owner in owners:
            if owner and stacks[int(owner)] != key:
                loop = _shared_loop(stacks[int(owner)], key)
                if loop == 0:  # SPMD instances: 0.1 compiles one instance and cannot see this; a race unless the values agree
                    if a.uid not in self.spmd_warned:
                        self.spmd_warned.add(a.uid)
                        err = self._dependence_error(t, loop, np.full(t.shape, True) if under is None else under == owner)
                        warn(f"{err.message.removeprefix('Unexpected output dependencies, ')}: a race on hardware unless they write the same values")
                elif loop is not None:
                    raise self._dependence_error(t, loop, np.full(t.shape, True) if under is None else under == owner)
        w.mark(t, w.label(key))

    def _dependence_error(self, t: NkiTensor, loop: int, hit: np.ndarray) -> NkiValidationError:
        a = t._a
        if a.name.endswith("]"):  # a block tile is named after its block: `a[0]`
            target = a.name
        else:
            first = int(np.flatnonzero(hit)[0])
            addr = int(t._geom(np.arange(t._storage_elems()))[np.unravel_index(first, hit.shape)]) if t._addr is None else int(t._addr.reshape(-1)[first])
            target = f"{a.name}[{', '.join(str(int(i)) for i in np.unravel_index(addr, a.shape))}]"
        if loop == 0:
            who = "different SPMD kernel instances"
        else:
            file, line = self.loop_lines.get(loop, ("", 0))
            m = _FOR.search(linecache.getline(file, line))
            who = f"different iterations of {m.group('var') if m else 'an affine_range'} loop"
        return NkiValidationError("err_unexpected_output_dependencies", f"Unexpected output dependencies, {who} write to `{target}`")


def state(ctx: KernelContext) -> LegacyState:
    """The launch's 0.1 state; 0.1 APIs inside a 0.3 launch are a clear error, not a crash."""
    st = ctx.legacy
    if st is None:
        raise NkiRuntimeError(
            "err_api_generation_mismatch",
            "neuronxcc.nki (NKI 0.1) APIs need a 0.1 launch: decorate the kernel with neuronxcc.nki.jit or run it with api='0.1'",
        )
    return st


def _shared_loop(prev: tuple[tuple[int, Any], ...], cur: tuple[tuple[int, Any], ...]) -> int | None:
    """A loop (frame uid) both iteration stacks run in, at different iterations; None if they never clash."""
    before = dict(prev)
    for uid, it in cur:
        if uid in before and before[uid] != it:
            return uid
    return None


def on_write(ctx: KernelContext, op: str, engine: str, writes: Any) -> None:
    """``ctx.write_hook`` of 0.1 launches: called by :func:`~nkiagent.emu.ops.record` before each instruction is recorded."""
    st: LegacyState = ctx.legacy
    st.last = (ctx.seq, op, engine, tuple(t._a.uid for _, t in writes))
    for _, t in writes:
        st.check_write(ctx, t)
    if st.dead and st.dead[0][0] < ctx.seq:
        _free_dead_tiles(st, ctx.seq)


def _free_dead_tiles(st: LegacyState, seq: int) -> None:
    """Drop the storage of block tiles whose last instruction (per the plan) ran before ``seq``."""
    waiting = []
    while st.dead and st.dead[0][0] < seq:
        entry = heapq.heappop(st.dead)
        a = st.tiles.get(entry[1])
        if a is None:
            continue
        if a.pending:  # a deferred matmul group still has to land in it
            waiting.append(entry)
            continue
        del st.tiles[entry[1]]
        a.data = np.empty(0, dtype=a.data.dtype) if a.has_data else None
        a.acc_open = a.f32c = None
        st.writers.pop(a.uid, None)
        st.psum_written.pop(a.uid, None)
    for entry in waiting:
        heapq.heappush(st.dead, (seq, entry[1]))


def _tensors(value: Any) -> Iterator[NkiTensor]:
    if isinstance(value, NkiTensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)


def _is_mutable(annotation: Any) -> bool:
    if isinstance(annotation, str):  # `from __future__ import annotations` in the kernel's module
        return "mutable_tensor" in annotation
    return bool(getattr(annotation, "mutable", False))


class Launch:
    """The 0.1 rules of one kernel launch; :func:`~nkiagent.emu.frontend.run_kernel` creates it for ``api="0.1"``."""

    def __init__(self, ctx: KernelContext, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> None:
        code = getattr(fn, "__code__", None)
        self.state = LegacyState(code)
        ctx.legacy = self.state
        ctx.write_hook = on_write
        from .dialect import legacy_dialect  # (it imports the 0.1 nl, which imports this module)

        ctx.dialect = legacy_dialect()
        self.where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<kernel>:0"
        names = code.co_varnames[: code.co_argcount] if code is not None else ()
        annotations = getattr(fn, "__annotations__", {}) or {}
        params = [(names[i] if i < len(names) else f"arg{i}", v) for i, v in enumerate(args)] + list(kwargs.items())
        for name, value in params:
            mutable = _is_mutable(annotations.get(name))
            for t in _tensors(value):
                if mutable:
                    self.state.mutable[t._a.uid] = name
                else:
                    self.state.immutable.add(t._a.uid)

    def returned(self, result: Any) -> None:
        """Check one SPMD program's return value: every mutable parameter must be in it."""
        out = {t._a.uid for t in _tensors(result)}
        for uid in self.state.mutable:
            if uid not in out:
                raise NkiRuntimeError(
                    "err_mutable_parameter_not_returned", "Mutable kernel parameter not returned by `return` statement", self.where
                )


# --------------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------------
class LegacyRange(_Range):
    """``nl.affine_range`` & co. in 0.1 kernels: also tells the dependence check when each iteration starts."""

    __slots__ = ()

    def __iter__(self) -> Iterator[int]:
        ctx = running()
        st: LegacyState | None = ctx.legacy if ctx is not None else None
        if st is None:
            yield from super().__iter__()
            return
        uid = None
        for i in super().__iter__():
            if uid is None:
                uid = ctx.loops[-1][0]
                f = kernel_frame(sys._getframe(1))
                if f is not None:
                    st.loop_lines[uid] = (f.f_code.co_filename, f.f_lineno)
            st.iter_start[uid] = ctx.next_uid
            yield i


# --------------------------------------------------------------------------------------------
# Results, retargeting and assignment
# --------------------------------------------------------------------------------------------
def new_result(shape: tuple[int, ...], dtype: Any, buffer: Any, box: Box | None = None, cls: type[NkiTensor] = NkiTensor) -> NkiTensor:
    """A fresh result tile of a 0.1 op (holding only ``box`` when computed under a mask)."""
    ctx = current()
    t = cls._whole(ctx.allocate(tuple(shape), dt.as_dtype(dtype), buffer))
    t._lg = TileMeta(box=box, temp=True)
    state(ctx).results.add(t._a.uid)
    return t


def mark_result(t: NkiTensor) -> NkiTensor:
    """Mark a tile a 0.3 ``nl`` function just returned as an instruction's fresh result."""
    t._lg = TileMeta(temp=True)
    state(current()).results.add(t._a.uid)
    return t


def operand(x: Any, box: Box | None, shape: tuple[int, ...]) -> Any:
    """An operand of an instruction over ``shape``, restricted to its ``box`` (tiles of that shape, or ``(P, 1)`` columns)."""
    if isinstance(x, BlockTensor):
        tile_arg("", "", x)
    if not isinstance(x, NkiTensor):
        return x
    return restrict(x, box, same_dims(x, shape))


def trailing_axes(t: NkiTensor, axes: tuple[int, ...]) -> tuple[NkiTensor, tuple[int, ...]]:
    """``t`` viewed with the reduced ``axes`` moved last (the order the engines reduce in), and their new positions.

    0.1 reductions take any free axes (``nl.sum(x, axis=[2, 4])``); a permuted view costs nothing.
    """
    kept = [d for d in range(t.ndim) if d not in axes]
    perm = tuple(kept) + tuple(sorted(axes))
    if perm == tuple(range(t.ndim)):
        return t, axes
    return t.permute(perm), tuple(range(len(kept), t.ndim))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    """Result shape of reducing ``axes`` of a tile and, per result dim, the iteration dim it runs along."""
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape)), tuple(None if d in axes else d for d in range(len(shape)))
    kept = [d for d in range(len(shape)) if d not in axes]
    if len(kept) >= 2:
        return tuple(shape[d] for d in kept), tuple(kept)
    return (shape[0], 1), (0, None)  # on-chip tiles stay 2-D: [P, 1]


def tile_arg(op: str, role: str, x: Any) -> NkiTensor:
    """An operand that must be a tile: a block tensor is not one (``err_failed_to_infer_tile_from_local_tensor``)."""
    if isinstance(x, BlockTensor):
        raise NkiValidationError("err_failed_to_infer_tile_from_local_tensor", f"Failed to infer tile from tensor '{x.name}',")
    return _ops.require_tensor(op, role, x)


def _engine_writes(engine: str, t: NkiTensor) -> bool:
    mem = t._a.memory
    if engine == "dma":
        return mem != "psum"
    if engine == "tensor":
        return mem == "psum"
    if engine == "gpsimd":
        return mem == "sbuf"
    return t._a.on_chip


def retarget(ctx: KernelContext, src: NkiTensor, dst: NkiTensor, accumulate: bool = False) -> bool:
    """Make the instruction that just wrote ``src`` write ``dst`` instead (adding onto it with ``accumulate``).

    Returns False, changing nothing, when that is not what the hardware could do: another
    instruction ran since, the engine cannot write ``dst``'s memory, or the shapes differ.
    """
    st = state(ctx)
    last = st.last
    a, da = src._a, dst._a
    if last is None or last[0] != ctx.seq - 1 or a.uid not in last[3] or src._addr is not None or dst._addr is not None:
        return False
    seq, op, engine, uids = last
    p = src.shape[0] if src.shape else 1
    if (dst.shape[0] if dst.shape else 1) != p or dst.size != src.size or not _engine_writes(engine, dst):
        return False
    if engine == "tensor" and dst.dtype != src.dtype:
        return False  # TensorE writes its own dtype (fp32 matmul, transpose as is); a cast needs another engine
    if engine != "dma":
        _ops.check_partitions(ctx, op, "dst", dst)
    st.check_write(ctx, dst)
    if ctx.compute:
        vals = src._np()
        if accumulate:
            vals = _ops.f32(dst).reshape(-1) + _ops.f32(src).reshape(-1)
        elif not (dt.is_int(src.dtype) and dt.is_int(dst.dtype)) and vals.dtype != np.float32:
            vals = vals.astype(np.float32)
        _ops.write(ctx, dst, np.reshape(vals, dst.shape))
        if op == "nc_matmul" and da.acc_open is not None:
            da.acc_open.set(dst, True)  # still a matmul result: later matmuls may accumulate onto it
    da.written = True
    if da.rec is not None:
        if da.rec.first < 0:
            da.rec.first = seq
        da.rec.last = max(da.rec.last, seq)
    dropped = a.rec is not None and a.rec.first == seq
    if dropped:
        a.rec.first = a.rec.last = -1  # the temporary never existed on the hardware
    if ctx.trace is not None:
        ins = ctx.trace.instructions[-1]
        ctx.trace.amend_last(writes=tuple(_ops._access(w.role, dst) if w.region.alloc == a.uid else w for w in ins.writes),
                             attrs={**ins.attrs, "accumulate": True} if accumulate else None)
        if dropped:
            allocs = ctx.trace.allocations
            for k in range(len(allocs) - 1, -1, -1):
                if allocs[k]["uid"] == a.uid:
                    del allocs[k]
                    break
    st.last = (seq, op, engine, tuple(da.uid if u == a.uid else u for u in uids))
    return True


class MatmulTile(NkiTensor):
    """A 0.1 matmul result (PSUM): ``psum += nisa.nc_matmul(...)`` accumulates it instead of adding tiles.

    ``_mm`` keeps the operands, to issue the matmul again into the target when other
    instructions ran in between (a list of them when several matmuls make the result).
    """

    __slots__ = ("_mm",)

    def _nki_pending_matmul(self, dst: NkiTensor) -> None:
        """``dst += self`` (called by ``ops.accumulate_into``, which marks the write an accumulation).

        PSUM elements no instruction has written yet start the accumulation group (the
        matmul overwrites them, as the compiler's first matmul of a group does); elsewhere the
        product adds onto what is there, e.g. the zeros of ``nl.zeros(..., buffer=nl.psum)``.
        """
        ctx = current()
        box = self._lg.box if self._lg is not None else None
        if is_empty(box):
            return
        d = restrict(dst, box, same_dims(dst, self.shape))
        src = restrict(self, box)
        if dst._a.memory != "psum":  # an SBUF target adds the PSUM result on VectorE
            _isa.tensor_tensor(dst=d, data1=d, data2=src, op="add")
            return
        written = state(ctx).written(d)
        accumulate = bool(written.any())
        if accumulate and not written.all() and ctx.compute:
            d._store(np.where(written, d._np(), np.float32(0)))  # unwritten elements: the product overwrites them
        if isinstance(self._mm, list):  # several matmuls accumulate into one result (double-row perf mode)
            for i, (stationary, moving, kwargs) in enumerate(self._mm):
                _isa.nc_matmul(dst=d, stationary=stationary, moving=moving, accumulate=accumulate or i > 0, **kwargs)
        elif not retarget(ctx, src, d, accumulate=accumulate):
            stationary, moving, kwargs = self._mm
            _isa.nc_matmul(dst=d, stationary=stationary, moving=moving, accumulate=accumulate, **kwargs)


class LoopReduce:
    """``dst[...] = nl.loop_reduce(x, op, loop_indices)``: ``dst = op(dst, x)``, applied by the assignment.

    A destination no instruction has written yet (a fresh ``nl.ndarray`` tile) takes ``x`` as
    it is: the first iteration of the reduction initializes it, as the compiled loop does.
    """

    __slots__ = ("box", "op", "x")

    def __init__(self, x: NkiTensor, op: Any, box: Box | None) -> None:
        self.x = x
        self.op = op
        self.box = box

    def into(self, dst: NkiTensor) -> NkiTensor:
        ctx = current()
        if is_empty(self.box):
            return dst
        d = restrict(dst, self.box, same_dims(dst, self.x.shape))
        x = restrict(self.x, self.box)
        ctx.accumulating = True
        try:
            if dst._a.written:
                _isa.tensor_tensor(dst=d, data1=d, data2=x, op=self.op)
            else:
                _isa.tensor_copy(dst=d, src=x)
        finally:
            ctx.accumulating = False
        return dst


def assign(dst: NkiTensor, value: Any) -> None:
    """``dst = value`` in a 0.1 kernel (the legacy dialect's ``assign``): ``dst`` is the already indexed target."""
    ctx = current()
    if isinstance(value, LoopReduce):
        value.into(dst)
        return
    if isinstance(value, BlockTensor):
        tile_arg("assign", "value", value)
    if not isinstance(value, NkiTensor):
        _ops.assign(restrict(dst, None), value)
        return
    p, q = (dst.shape[0] if dst.shape else 1), (value.shape[0] if value.shape else 1)
    if p < q or (p == q and dst.size < value.size):
        raise NkiValidationError(
            "err_store_dst_shape_smaller_than_other_shape",
            f"Illegal assignment destination shape in 'a = b': shape {list(dst.shape)} of parameter 'a' is smaller than other "
            f"parameter shapes b{list(value.shape)}.",
        )
    meta = value._lg
    box = meta.box if meta is not None else None
    if is_empty(box):
        return
    if box is not None and tuple(dst.shape) != tuple(value.shape):
        if any(r != (0, n) for r, n in zip(box[1:], value.shape[1:])):
            raise NkiUnsupportedError(
                "err_masked_assignment_shape",
                f"cannot assign a result computed under a mask on its free dims ({list(value.shape)}) to a target of another shape {list(dst.shape)}",
            )
        rows = box[0]  # only the partition range carries over to a target of another shape
        d = restrict(dst, (rows,) + tuple((0, n) for n in dst.shape[1:]))
        value = restrict(value, (rows,) + tuple((0, n) for n in value.shape[1:]))
    else:
        d, value = restrict(dst, box, same_dims(dst, value.shape)), restrict(value, box)
    if meta is not None and meta.temp and retarget(ctx, value, d):
        return
    _ops.assign(d, value)


# --------------------------------------------------------------------------------------------
# Block tensors and direct allocation
# --------------------------------------------------------------------------------------------
class DirectAlloc(Buffer):
    """``ncc.sbuf.mod_alloc(...)`` / ``ncc.psum.mod_alloc(...)`` / ``ncc.sbuf.alloc(func)``: tiles at chosen addresses.

    Logical block ``idx`` lives in physical tile ``tuple(i % n for i, n in zip(idx, tiles))``,
    so blocks that share a physical tile share storage (double buffering by modulo allocation).
    """

    __slots__ = ("bank", "base", "func", "tiles")

    def __init__(self, name: str, base: int = 0, tiles: tuple[int, ...] = (), func: Any = None, bank: bool = False) -> None:
        super().__init__(name)
        self.base = base
        self.tiles = tuple(int(n) for n in tiles)
        self.func = func
        self.bank = bank  # PSUM: each physical tile takes its own bank

    def physical(self, block: tuple[int, ...]) -> tuple[int, ...]:
        if self.func is not None:
            return block
        return tuple(b % n for b, n in zip(block, self.tiles)) if self.tiles else tuple(0 for _ in block)

    def address(self, phys: tuple[int, ...], partitions: int, bytes_pp: int) -> tuple[int, int]:
        """``(start_partition, byte address)`` of a physical tile."""
        if self.func is not None:
            try:  # 0.1 calls it by keyword, so functools.partial(f, bank_map=...) works
                by_name = {"idx", "pdim_size", "fdim_size"} <= set(inspect.signature(self.func).parameters)
            except (TypeError, ValueError):
                by_name = False
            got = self.func(idx=phys, pdim_size=partitions, fdim_size=bytes_pp) if by_name else self.func(phys, partitions, bytes_pp)
            if self.name == "psum" and len(got) == 3:  # (bank, start partition, byte address in the bank)
                return int(got[1]), int(got[0]) * 2048 + int(got[2])
            start, addr = got
            return int(start), int(addr)
        linear = 0
        for i, n in zip(phys, self.tiles or (1,) * len(phys)):
            linear = linear * n + i
        step = 2048 if self.bank else bytes_pp
        return 0, self.base + linear * step


class BlockTensor:
    """A 0.1 tensor with block dims, ``(B0, …, nl.par_dim(P), F…)``: a lazily allocated list of ``(P, F…)`` tiles.

    ``t[b0, b1]`` is one tile and ``t[b0, b1, i_p, i_f]`` indexes into it. A tile is allocated
    (and filled, for ``nl.zeros``/``nl.full``) when first used, so its SBUF/PSUM lifetime
    starts there, as the compiler allocates each tile separately.
    """

    __slots__ = ("_birth", "_buffer", "_dtype", "_fill", "_name", "_pdim", "_prefix", "_shape", "_tiles")

    def __init__(self, shape: tuple[int, ...], pdim: int, dtype: np.dtype, buffer: Buffer, name: str, fill: Any = None) -> None:
        ctx = current()
        state(ctx)
        self._shape = shape
        self._pdim = pdim
        self._dtype = dtype
        self._buffer = buffer
        self._name = name or f"t{ctx.next_uid}"
        self._tiles: dict[tuple[int, ...], NkiTensor] = {}
        self._prefix: tuple[int, ...] = ()  #: leading block indices fixed by a sub-block view (``t[i]`` of ``(B0, B1, P, F)``)
        self._fill = fill
        self._birth = ctx.next_uid
        ctx.next_uid += 1  # a uid of its own: tiles created later count as declared here by the dependence check
        st = state(ctx)
        st.declared += math.prod(shape) * dt.storage_dtype(dtype).itemsize
        if st.plan is False and ctx.compute and st.declared > PLAN_BYTES:
            raise NeedHostPlan()

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    buffer = property(lambda self: self._buffer)
    name = property(lambda self: self._name)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: math.prod(self._shape))

    def __repr__(self) -> str:
        return f"BlockTensor(name={self._name!r}, shape={self._shape}, block_dims={self._pdim}, dtype={dt.dtype_name(self._dtype)}, buffer={self._buffer.name})"

    def _sub(self, prefix: tuple[int, ...]) -> BlockTensor:
        """``t[i]`` of a tensor with more block dims than given: the remaining block tensor, sharing the tiles."""
        sub = object.__new__(BlockTensor)
        for name in ("_birth", "_buffer", "_dtype", "_fill", "_name", "_tiles"):
            setattr(sub, name, getattr(self, name))
        sub._prefix = self._prefix + prefix
        sub._shape = self._shape[len(prefix):]
        sub._pdim = self._pdim - len(prefix)
        return sub

    def _tile(self, block: tuple[int, ...]) -> NkiTensor:
        block = self._prefix + block
        buf = self._buffer
        key = buf.physical(block) if isinstance(buf, DirectAlloc) else block
        t = self._tiles.get(key)
        if t is not None:
            return t
        ctx = current()
        tile_shape = self._shape[self._pdim:]
        address = None
        if isinstance(buf, DirectAlloc):
            bytes_pp = math.prod(tile_shape[1:]) * dt.storage_dtype(self._dtype).itemsize
            address = buf.address(key, tile_shape[0], bytes_pp)
        alloc = ctx.allocate(tile_shape, self._dtype, buf, f"{self._name}[{', '.join(map(str, block))}]", address)
        st = state(ctx)
        st.birth[alloc.uid] = self._birth
        plan = st.plan
        if isinstance(plan, HostPlan) and address is None:
            if not ctx.compute:
                plan.shapes[alloc.uid] = alloc.shape
                plan.recs[alloc.uid] = alloc.rec
            elif plan.shapes.get(alloc.uid) == alloc.shape and alloc.uid in plan.last:
                st.tiles[alloc.uid] = alloc
                heapq.heappush(st.dead, (plan.last[alloc.uid], alloc.uid))
            else:  # the run departs from the plan: free nothing from here on
                st.plan, st.dead, st.tiles = None, [], {}
        t = NkiTensor._whole(alloc)
        self._tiles[key] = t
        if self._fill is not None:
            _isa.memset(dst=t, value=self._fill)
        return t

    def _split(self, index: Any) -> tuple[Any, tuple[Any, ...]]:
        items = index if isinstance(index, tuple) else (index,)
        nb = self._pdim
        ints = [isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items]
        if 0 < len(items) < nb and all(ints):
            nb = len(items)  # a sub-block view: t[i] of (B0, B1, P, F) is the (B1, P, F) block tensor
        if len(items) < nb or not all(ints[:nb]):
            raise NkiUnsupportedError(
                "err_block_index",
                f"index the {nb} block dims of `{self._name}` {list(self._shape)} with integers first (t[b0, …] or t[b0, …, i_p, i_f]), got {index!r}",
            )
        block = []
        for d, i in enumerate(items[:nb]):
            n = self._shape[d]
            k = int(i) + (n if int(i) < 0 else 0)
            if not 0 <= k < n:
                raise NkiOutOfBoundsError(
                    "err_tensor_access_out_of_bound", f"Out-of-bound access for tensor `{self._name}` on dimension {d}: index {int(i)} exceed dimension size of {n}"
                )
            block.append(k)
        if nb < self._pdim:
            return self._sub(tuple(block)), ()
        return self._tile(tuple(block)), tuple(items[nb:])

    def __getitem__(self, index: Any) -> Any:
        tile, rest = self._split(index)
        return tile[rest] if rest else tile

    def __setitem__(self, index: Any, value: Any) -> None:
        tile, rest = self._split(index)
        tile[rest if rest else ...] = value

    def __bool__(self) -> bool:
        raise NkiTypeError("err_ambiguous_tensor_truth_value", "ValueError: Cannot evaluate truth value of a multi-element tensor/array.")
