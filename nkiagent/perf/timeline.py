"""The timeline model: the compiler's list scheduler, over the instruction trace.

This docstring is the one place the scheduling semantics are written down (the cheat-sheet's
performance rules summarise them for the model).

* **Dependences.** An instruction depends on every earlier one (in program order) that touches
  overlapping memory: read-after-write, write-after-read, write-after-write. On-chip memory is
  tracked by physical address (allocation base + offset), so a buffer the allocator reuses
  carries its dependences — the same reason real kernels double-buffer. Registers and the
  Vector Engine accumulators are pseudo-memories (``trace.PSEUDO_MEMORIES``) with address spaces
  of their own: whatever passes state through them is ordered by the same rules. HBM that no
  instruction writes (the inputs) orders nothing.
* **Issue order is not source order.** The Neuron compiler's scheduler "is free to reorder
  independent operations for better hardware utilization" (``nki.language.no_reorder``); NKI's
  own scheduler picks, among the instructions whose dependences are met, the one that can start
  first (``nki.compiler.SchedulingHeuristic.ASAP``, its default). The model does the same within
  a window of :data:`LOOKAHEAD` instructions: instructions enter the window in program order;
  one whose predecessors have all issued is ready when the last of them ends; whenever the
  window is full, the ready instruction with the earliest ready time issues (ties: program
  order). So kernels that differ only in the source order of independent instructions get the
  same schedule, as far as the window reaches. Greedy like the compiler's, it is not optimal:
  work that is ready early (a load for a later tile) can take a DMA slot that work ready later
  but more urgent (the store the next stripe waits for) would have used.
* **Engines and queues.** Each compute engine, and the Sync engine for register operations, runs
  one instruction at a time; a DMA runs on ``cost.queues`` of the target's ``dma_queues`` queues,
  its descriptors interleaving into their idle gaps. An instruction issues at the earliest idle
  time of its engine (or queues) after it is ready, and may fill a gap left earlier (only the
  last ``_Lane.WINDOW`` gaps are remembered). A consumer woken by a semaphore pays the
  dependency overhead; TensorE pipelines its own accumulation chain without one.
* **``with nl.no_reorder():``** Its instructions (marked in the trace, ``trace.NO_REORDER``) issue
  in program order, each on its engine and queues after everything placed there before (no gap
  filling), and the block is a fence: everything before it issues before it, everything after it
  after it. Instructions on different engines still overlap: the order is one of issue, as with
  ``depends_on(kind=dependency.schedule)``, not a serialisation of the engines.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Any, cast

from ..emu.trace import NO_REORDER, PSEUDO_MEMORIES, Access, Instruction, Trace, collector_paused
from .cost import COMPUTE_ENGINES, Cost, instruction_cost
from .specs import HardwareSpec

__all__ = ["LOOKAHEAD", "Event", "Timeline", "schedule"]

#: One lane per instruction stream: the compute engines, and the Sync engine for register operations.
LANES = COMPUTE_ENGINES + ("sync",)

#: The scheduler's window: how many instructions, in program order, it considers at once. An
#: instruction can issue ahead of up to this many earlier ones that do not feed it.
LOOKAHEAD = 256


@dataclass(slots=True)
class Event:
    """One scheduled instruction."""

    seq: int
    op: str
    engine: str
    start_ns: float
    busy_ns: float
    end_ns: float  #: when its result is visible
    queues: tuple[int, ...] = ()
    location: str = ""
    ready_ns: float = 0.0  #: when its operands were ready (its dependences had ended)
    free_ns: float = 0.0  #: when its engine (or its DMA queues) were free again
    after: int = -1  #: the event (index in ``Timeline.events``) whose end made it ready; -1: none


@dataclass
class Timeline:
    """Schedule of a whole trace: events, per-engine busy time and the critical-path latency."""

    events: list[Event]
    latency_ns: float
    busy_ns: dict[str, float]
    costs: list[Cost] = field(repr=False, default_factory=list)  #: one per trace instruction, in order
    spill_costs: list[Cost] = field(repr=False, default_factory=list)  #: the DMAs spill code adds (0.1 kernels past capacity)

    @property
    def all_costs(self) -> list[Cost]:
        """Every scheduled cost: the trace's instructions and the spill DMAs (for totals)."""
        return self.costs + self.spill_costs if self.spill_costs else self.costs


class _Space:
    """Dependence tracking for one address space: entries bucketed by coarse granules.

    An entry stands for one region accessed (a box, see :func:`_physical`) and is
    ``[last write end, last read end, engine of that write, engine of that read, event of that
    write, event of that read, pending writer, pending readers]``: the times (and events, for the
    critical path) are recorded as instructions issue, the pending writer (index, -1: none) and
    readers as they enter the scheduler's window in program order — what a later instruction
    must wait for before it may issue at all. A write drops the entries it fully covers: whatever
    touches them later depends on that write, which depends on everything before it there.
    """

    __slots__ = ("entries", "gcache", "grid", "pbyte", "prow")

    def __init__(self, prow: int, pbyte: int) -> None:
        self.entries: dict[tuple[int, int, int, int], list[Any]] = {}
        self.grid: dict[tuple[int, int], set[tuple[int, int, int, int]]] = {}
        self.prow = prow
        self.pbyte = pbyte
        self.gcache: dict[tuple[int, int, int, int], list[tuple[int, int]]] = {}

    def _granules(self, key: tuple[int, int, int, int]) -> list[tuple[int, int]]:
        g = self.gcache.get(key)
        if g is None:
            p_lo, p_hi, b_lo, b_hi = key
            g = [
                (p, b)
                for p in range(p_lo // self.prow, p_hi // self.prow + 1)
                for b in range(b_lo // self.pbyte, max(b_lo, b_hi - 1) // self.pbyte + 1)
            ]
            self.gcache[key] = g
        return g

    def scan(self, key: tuple[int, int, int, int], granules: list[tuple[int, int]], write: bool, pending: dict[int, Any],
             into: list[list[Any]], preds: set[int]) -> None:
        """Append the entries whose regions overlap ``key`` to ``into``, and to ``preds`` the pending
        instructions an access to it must follow: their writers, and for a write their readers too."""
        p_lo, p_hi, b_lo, b_hi = key
        grid = self.grid
        if len(granules) == 1:  # the common case: no entry can be met twice
            candidates: Any = grid.get(granules[0]) or ()
        else:
            candidates = set()
            for g in granules:
                bucket = grid.get(g)
                if bucket:
                    candidates |= bucket
        entries = self.entries
        for k in candidates:
            if k[0] <= p_hi and p_lo <= k[1] and k[2] < b_hi and b_lo < k[3]:
                e = entries[k]
                into.append(e)
                if e[6] in pending:
                    preds.add(e[6])
                if write and e[7]:
                    preds.update([r for r in e[7] if r in pending])

    def claim(self, key: tuple[int, int, int, int], granules: list[tuple[int, int]], who: int, write: bool, window: int,
              pending: dict[int, Any]) -> list[Any]:
        """Record that instruction ``who`` (entering the window) accesses ``key``; returns its entry."""
        e = self.entries.get(key)
        if e is None:
            e = [0.0, 0.0, "", "", -1, -1, -1, []]
            self.entries[key] = e
            for g in granules:
                self.grid.setdefault(g, set()).add(key)
        if write:
            e[6] = who
            e[7].clear()
            self._prune(key, granules)
        else:
            readers = e[7]
            if len(readers) >= 2 * window:  # keep only the pending ones (amortized: at most ``window`` are)
                readers[:] = [r for r in readers if r in pending]
            readers.append(who)
        return e

    def _prune(self, key: tuple[int, int, int, int], granules: list[tuple[int, int]]) -> None:
        """Drop entries a newer write fully covers (they are ordered before it already)."""
        p_lo, p_hi, b_lo, b_hi = key
        entries = self.entries
        for g in granules:
            bucket = self.grid.get(g)
            if not bucket or len(bucket) == 1:  # (the entry just written is in it)
                continue
            covered = [k for k in bucket if k != key and p_lo <= k[0] and k[1] <= p_hi and b_lo <= k[2] and k[3] <= b_hi]
            for k in covered:
                if entries.pop(k, None) is not None:
                    for g2 in self._granules(k):
                        self.grid[g2].discard(k)


def _readiness(rentries: list[list[Any]], wentries: list[list[Any]], tensor: bool) -> tuple[float, float, int]:
    """When an instruction with these entries may start: ``(ready, ready_signalled, event)``.

    ``ready`` is after the overlapping writes (and, for a write, reads) have ended; ``event`` is
    the one that ends last (-1: none); ``ready_signalled`` counts only producers that signal the
    consumer through a semaphore, i.e. all but TensorE → TensorE (back-to-back matmuls
    accumulating into one PSUM bank are pipelined by the engine itself, §3.4 / §4.3); ``tensor``
    says the instruction is TensorE's.
    """
    ready = signalled = 0.0
    after = -1
    for e in rentries:
        t = e[0]
        if t > ready:
            ready, after = t, e[4]
        if t > signalled and not (tensor and e[2] == "tensor"):
            signalled = t
    for e in wentries:
        t = e[0]
        if t > ready:
            ready, after = t, e[4]
        if t > signalled and not (tensor and e[2] == "tensor"):
            signalled = t
        t = e[1]
        if t > ready:
            ready, after = t, e[5]
        if t > signalled and not (tensor and e[3] == "tensor"):
            signalled = t
    return ready, signalled, after


class _Lane:
    """One engine or DMA queue: recent busy intervals, so later work can fill earlier idle gaps.

    The compiler schedules each engine's instruction stream (it is not bound to source order),
    so an instruction whose inputs are ready may run in a gap left while an earlier one waited
    on its dependences. Only the last ``WINDOW`` intervals are kept; older gaps count as busy.
    """

    WINDOW = 48
    __slots__ = ("ends", "floor", "iv")

    def __init__(self) -> None:
        self.iv: list[tuple[float, float]] = []  #: disjoint busy intervals, sorted (so their ends are sorted too)
        self.ends: list[float] = []
        self.floor = 0.0

    def seal(self) -> None:
        """Count every idle gap so far as busy: nothing placed from now on starts before the
        latest end placed until now (in-order issue, and the fence of a ``no_reorder`` block)."""
        if self.iv:
            self.floor = max(self.floor, self.ends[-1])
            self.iv.clear()
            self.ends.clear()

    def copy(self) -> _Lane:
        lane = _Lane()
        lane.iv, lane.ends, lane.floor = list(self.iv), list(self.ends), self.floor
        return lane

    def earliest(self, ready: float, dur: float) -> float:
        t = max(ready, self.floor)
        iv = self.iv
        for i in range(bisect_right(self.ends, t), len(iv)):
            s, e = iv[i]
            if s >= t + dur:
                return t
            t = e
        return t

    def fill(self, ready: float, work: float, min_gap: float = 50.0) -> list[tuple[float, float]]:
        """Pieces of idle time from ``ready`` on that add up to ``work`` (a DMA queue can interleave descriptors)."""
        t = max(ready, self.floor)
        remaining = work
        pieces: list[tuple[float, float]] = []
        iv = self.iv
        for i in range(bisect_right(self.ends, t), len(iv)):
            s, e = iv[i]
            gap = s - t
            if gap >= min_gap:
                if gap >= remaining:
                    pieces.append((t, t + remaining))
                    return pieces
                pieces.append((t, s))
                remaining -= gap
            t = e  # intervals are disjoint and sorted: e > t here
        pieces.append((t, t + remaining))
        return pieces

    def reserve(self, start: float, dur: float) -> None:
        """Mark ``[start, start + dur)`` busy; an interval that touches a neighbour merges with it,
        so a lane kept busy back to back stays one interval, quick to search."""
        iv = self.iv
        ends = self.ends
        end = start + dur
        k = len(iv)
        while k and iv[k - 1][0] > start:
            k -= 1
        if k < len(iv) and iv[k][0] == end:  # the next interval starts where this one ends
            end = ends[k]
            del iv[k]
            del ends[k]
        if k and ends[k - 1] == start:  # the previous one ends where this one starts
            iv[k - 1] = (iv[k - 1][0], end)
            ends[k - 1] = end
            return
        iv.insert(k, (start, end))
        ends.insert(k, end)
        if len(iv) > self.WINDOW:
            drop = len(iv) - self.WINDOW
            self.floor = max(self.floor, max(self.ends[:drop]))
            del iv[:drop]
            del self.ends[:drop]


def _spill_dma(ins: Instruction, a: Access, load: bool) -> Instruction:
    """The DMA that spill code adds around ``ins`` for its access ``a`` to a spilled tile: a reload
    from the tile's HBM home before a read, a store back after a write."""
    chip = a._replace(role="dst" if load else "src")
    home = a._replace(role="src" if load else "dst", memory="hbm", partitions=1)
    reads, writes = ((home,), (chip,)) if load else ((chip,), (home,))
    return Instruction(ins.seq, "spill_load" if load else "spill_store", "dma", reads, writes, ins.location, ins.program_id, ins.loops, {})


def _physical(a: Access, allocs: dict[int, dict[str, Any]]) -> tuple[Any, tuple[int, int, int, int]]:
    """The address space of an access and its box there: on chip by physical address, elsewhere by allocation."""
    r = a.region
    if a.memory in ("sbuf", "psum"):
        base = allocs.get(r.alloc, {}).get("address", 0)
        return a.memory, (r.p_lo, r.p_hi, base + r.b_lo, base + r.b_hi)
    return (a.memory if a.memory in PSEUDO_MEMORIES else "hbm", r.alloc), (r.p_lo, r.p_hi, r.b_lo, r.b_hi)


def schedule(trace: Trace, spec: HardwareSpec, lookahead: int = LOOKAHEAD) -> Timeline:
    """Schedule every instruction of ``trace`` on ``spec`` and return the timeline.

    ``lookahead`` is the scheduler's window (the module docstring says how it is used); 1 issues
    in program order, each instruction still free to fill an idle gap left before it.
    """
    with collector_paused():  # one event and a few tuples per instruction, none in a cycle
        return _schedule(trace, spec, max(1, lookahead))


def _schedule(trace: Trace, spec: HardwareSpec, lookahead: int) -> Timeline:
    allocs = {a["uid"]: a for a in trace.allocations}
    spaces: dict[Any, _Space] = {}
    lanes = {e: _Lane() for e in LANES}
    queues = [_Lane() for _ in range(spec.dma_queues)]
    busy: dict[str, float] = {e: 0.0 for e in LANES + ("dma",)}
    dep_ns = {e: spec.dependency_overhead_cycles / spec.engine_ghz(e) for e in LANES}
    latency = 0.0

    def space(key: Any) -> _Space:
        sp = spaces.get(key)
        if sp is None:
            sp = _Space(128, 2048) if key in ("sbuf", "psum") else _Space(128, 8192)
            spaces[key] = sp
        return sp

    # While every DMA uses all queues they hold identical intervals: one lane stands for all of
    # them (planned and reserved once), split into independent copies at the first narrower DMA.
    lockstep = True
    queues = [queues[0]] * len(queues)
    every_queue = tuple(range(len(queues)))
    known: dict[tuple[Any, ...], Cost] = {}
    # Access records are shared between instructions that touch the same view: derive their
    # cost signature (everything but the region, numbered: cheap to hash) and physical place
    # once per record
    seen: dict[int, tuple[int, _Space | None, tuple[int, int, int, int], list[tuple[int, int]]]] = {}
    signatures: dict[tuple[Any, ...], int] = {}

    # 0.1 kernels' tiles past SBUF/PSUM capacity live in HBM (emu.memory finish): each compute
    # instruction touching one pays a DMA reload before and a DMA store after, as spill code would
    spilled = {uid for uid, rec in allocs.items() if rec.get("spilled")}
    # HBM that no instruction writes (the kernel's inputs) never delays a read, and a read of it
    # never delays a write: reads of it need no dependence tracking at all.
    written_hbm = {a.region.alloc for ins in trace.instructions for a in ins.writes if a.memory not in ("sbuf", "psum")} | spilled

    def fact(a: Access) -> tuple[int, _Space | None, tuple[int, int, int, int], list[tuple[int, int]]]:
        signature = signatures.setdefault(a[:9] + a[10:], len(signatures))
        sk, key = _physical(a, allocs)
        if sk[0] == "hbm" and sk[1] not in written_hbm:
            f = seen[id(a)] = (signature, None, key, [])
            return f
        sp = space(sk)
        f = seen[id(a)] = (signature, sp, key, sp._granules(key))
        return f

    # The instruction stream in program order: the trace's instructions, and around each compute
    # instruction that touches a spilled tile the spill code's DMAs. Events are kept in this order.
    stream: list[Instruction] = []
    is_spill: list[bool] = []
    for ins in trace.instructions:
        if spilled and ins.engine != "dma" and any(a.region.alloc in spilled for a in ins.reads + ins.writes):
            loads = [_spill_dma(ins, a, load=True) for a in ins.reads if a.region.alloc in spilled]
            stores = [_spill_dma(ins, a, load=False) for a in ins.writes if a.region.alloc in spilled]
            stream += [*loads, ins, *stores]
            is_spill += [True] * len(loads) + [False] + [True] * len(stores)
        else:
            stream.append(ins)
            is_spill.append(False)
    events: list[Event | None] = [None] * len(stream)
    costs: list[Cost | None] = [None] * len(stream)
    #: the window: admitted, not yet issued, by index: [entries its reads overlap, entries its writes
    #: overlap, entries of its own reads, of its own writes, predecessors not yet issued, successors,
    #: cost, readiness (once they have all issued)]
    pending: dict[int, list[Any]] = {}
    heap: list[tuple[float, int]] = []  #: (ready, index) of the pending instructions all of whose predecessors issued

    def admit(j: int) -> tuple[float, int] | None:
        """Enter instruction ``j`` into the window: find the pending instructions it depends on
        (read-after-write, write-after-read, write-after-write on overlapping memory) and claim
        its regions, so that later instructions find it. Returns its heap key if it is ready."""
        ins = stream[j]
        rf = [seen.get(id(a)) or fact(a) for a in ins.reads]
        wf = [seen.get(id(a)) or fact(a) for a in ins.writes]
        # loops repeat an instruction on other addresses: its cost depends on everything but the regions
        ck = (ins.op, ins.engine, tuple([f[0] for f in rf]), tuple([f[0] for f in wf]), tuple(ins.attrs.items()))
        try:
            cost = known.get(ck)
        except TypeError:  # an attribute value that cannot be hashed: no sharing for this one
            cost = ck = None
        if cost is None:
            cost = instruction_cost(ins, spec)
            if ck is not None:
                known[ck] = cost
        rentries: list[list[Any]] = []
        wentries: list[list[Any]] = []
        preds: set[int] = set()
        rown = []
        for _, sp, key, granules in rf:
            if sp is not None:
                sp.scan(key, granules, False, pending, rentries, preds)
                # (claimed at once: ``j`` is not pending yet, so its own accesses never count as what it waits for)
                rown.append(sp.claim(key, granules, j, False, lookahead, pending))
        for _, sp, key, granules in wf:
            sp.scan(key, granules, True, pending, wentries, preds)  # type: ignore[union-attr]  # (writes are always tracked)
        # writes are claimed after every scan: a write drops the entries it covers, which the scans still need
        wown = [sp.claim(key, granules, j, True, lookahead, pending) for _, sp, key, granules in wf]  # type: ignore[union-attr]
        rec = pending[j] = [rentries, wentries, rown, wown, len(preds), [], cost, None]
        if preds:
            for p in preds:
                pending[p][5].append(j)
            return None
        rec[7] = readiness = _readiness(rentries, wentries, cost.engine == "tensor")
        return readiness[0], j

    def issue(j: int, in_order: bool) -> None:
        """Place instruction ``j``, whose predecessors have all been placed, at the earliest idle
        time of its engine (or enough DMA queues) after its operands are ready; ``in_order``: not
        before anything already placed there (no filling of earlier idle gaps)."""
        nonlocal latency, lockstep, queues
        _, _, rown, wown, _, succ, cost, (ready, signalled, after) = pending.pop(j)
        engine = cost.engine
        dur = cost.busy_ns
        if engine == "dma":
            if lockstep and cost.queues == len(queues):
                if in_order:
                    queues[0].seal()
                pieces = queues[0].fill(ready, dur)
                start, finish = pieces[0][0], pieces[-1][1]
                for s0, s1 in pieces:
                    queues[0].reserve(s0, s1 - s0)
                used: tuple[int, ...] = every_queue
            else:
                if lockstep:
                    lockstep = False
                    queues = [queues[0].copy() for _ in queues]
                if in_order:
                    for q in queues:
                        q.seal()
                plans = sorted(((q.fill(ready, dur), i) for i, q in enumerate(queues)), key=lambda pi: pi[0][-1][1])[: cost.queues]
                start = min(pieces[0][0] for pieces, _ in plans)
                finish = max(pieces[-1][1] for pieces, _ in plans)
                for pieces, i in plans:
                    for s0, s1 in pieces:
                        queues[i].reserve(s0, s1 - s0)
                used = tuple(sorted(i for _, i in plans))
        else:
            lane = lanes[engine]
            if in_order:
                lane.seal()
            start = lane.earliest(ready, dur)
            if signalled > 0.0 and start == signalled:  # woken by a semaphore: pay its latency
                start = lane.earliest(ready + dep_ns[engine], dur)
            lane.reserve(start, dur)
            used = ()
        end = finish + cost.latency_ns - dur if engine == "dma" else start + cost.latency_ns
        busy[engine] += dur
        for e in rown:
            if end >= e[1]:
                e[1], e[3], e[5] = end, engine, j
        for e in wown:
            if end >= e[0]:
                e[0], e[2], e[4] = end, engine, j
        latency = max(latency, end)
        ins = stream[j]
        events[j] = Event(ins.seq, ins.op, engine, start, dur, end, used, ins.location, ready, finish if engine == "dma" else start + dur, after)
        costs[j] = cost
        for s in succ:
            rec = pending[s]
            rec[4] -= 1
            if not rec[4]:
                rec[7] = readiness = _readiness(rec[0], rec[1], rec[6].engine == "tensor")
                heappush(heap, (readiness[0], s))

    def drain(in_order: bool) -> None:
        while heap:
            issue(heappop(heap)[1], in_order)

    fenced = False  # inside a no_reorder block
    for j, ins in enumerate(stream):
        block = NO_REORDER in ins.loops
        if block != fenced:  # a no_reorder block begins or ends: a fence on every engine and queue
            drain(fenced)
            for lane in [*lanes.values(), *queues]:
                lane.seal()
            fenced = block
        key = admit(j)
        if block or len(pending) >= lookahead:  # issue the pending instruction that is ready first
            if key is not None and (not heap or key < heap[0]):  # (it is this one: no need for the heap)
                issue(j, block)
                continue
            if key is not None:
                heappush(heap, key)
            issue(heappop(heap)[1], block)
        elif key is not None:
            heappush(heap, key)
    drain(fenced)
    done = cast("list[Event]", events)
    trace_costs = [c for c, spill in zip(costs, is_spill, strict=True) if not spill]
    spill_costs = [c for c, spill in zip(costs, is_spill, strict=True) if spill]
    return Timeline(done, latency, busy, cast("list[Cost]", trace_costs), cast("list[Cost]", spill_costs))
