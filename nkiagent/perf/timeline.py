"""The timeline model: engines run in program order each, synchronized by data dependences.

Each instruction starts when its engine (or enough DMA queues) is free and every earlier
instruction it depends on has finished: read-after-write, write-after-read and
write-after-write on overlapping memory. On-chip memory is tracked by physical address
(allocation base + offset), so a buffer the allocator reuses carries its dependences —
the same reason real kernels double-buffer. Independent loop iterations therefore overlap
exactly as far as engines, queues and buffers allow. Registers and the Vector Engine
accumulators are pseudo-memories (``trace.PSEUDO_MEMORIES``) with address spaces of their own:
whatever passes state through them is ordered by the same rules.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from ..emu.trace import PSEUDO_MEMORIES, Access, Instruction, Trace, collector_paused
from .cost import COMPUTE_ENGINES, Cost, instruction_cost
from .specs import HardwareSpec

__all__ = ["Event", "Timeline", "schedule"]

#: One lane per instruction stream: the compute engines, and the Sync engine for register operations.
LANES = COMPUTE_ENGINES + ("sync",)


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

    An entry is ``[last write end, last read end, engine of that write, engine of that read,
    event of that write, event of that read]`` (events by index, for the critical path).
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

    def ready(self, key: tuple[int, int, int, int], write: bool, same: bool = False,
              granules: list[tuple[int, int]] | None = None) -> tuple[float, float, int]:
        """When an access to ``key`` may start: after overlapping writes (and, for a write, reads).

        Returns ``(ready, ready_signalled, event)``: ``event`` is the one that ends last (-1: none);
        ``ready_signalled`` counts only producers that signal the
        consumer through a semaphore, i.e. all but TensorE → TensorE (back-to-back matmuls
        accumulating into one PSUM bank are pipelined by the engine itself, §3.4 / §4.3); ``same``
        says the access is TensorE's.
        """
        p_lo, p_hi, b_lo, b_hi = key
        t = 0.0
        ts = 0.0
        who = -1
        entries = self.entries
        grid = self.grid
        if granules is None:
            granules = self._granules(key)
        if len(granules) == 1:  # the common case: no entry can be met twice
            candidates: Any = grid.get(granules[0]) or ()
        else:
            candidates = set()
            for g in granules:
                bucket = grid.get(g)
                if bucket:
                    candidates |= bucket
        for k in candidates:
            if k[0] <= p_hi and p_lo <= k[1] and k[2] < b_hi and b_lo < k[3]:
                e = entries[k]
                if e[0] > t:
                    t, who = e[0], e[4]
                if e[0] > ts and not (same and e[2] == "tensor"):
                    ts = e[0]
                if write:
                    if e[1] > t:
                        t, who = e[1], e[5]
                    if e[1] > ts and not (same and e[3] == "tensor"):
                        ts = e[1]
        return t, ts, who

    def update(self, key: tuple[int, int, int, int], end: float, write: bool, engine: str = "",
               granules: list[tuple[int, int]] | None = None, event: int = -1) -> None:
        e = self.entries.get(key)
        if e is None:
            e = [0.0, 0.0, "", "", -1, -1]
            self.entries[key] = e
            for g in granules if granules is not None else self._granules(key):
                self.grid.setdefault(g, set()).add(key)
        if write:
            if end >= e[0]:
                e[0], e[2], e[4] = end, engine, event
            self._prune(key, end, granules)
        elif end >= e[1]:
            e[1], e[3], e[5] = end, engine, event

    def _prune(self, key: tuple[int, int, int, int], end: float, granules: list[tuple[int, int]] | None = None) -> None:
        """Drop entries a newer write fully covers (they are ordered before it already)."""
        p_lo, p_hi, b_lo, b_hi = key
        entries = self.entries
        for g in granules if granules is not None else self._granules(key):
            bucket = self.grid.get(g)
            if not bucket or len(bucket) == 1:  # (the entry just written is in it)
                continue
            covered = [k for k in bucket if k != key and p_lo <= k[0] and k[1] <= p_hi and b_lo <= k[2] and k[3] <= b_hi]
            for k in covered:
                e = entries.get(k)
                if e is not None and e[0] <= end and e[1] <= end:
                    del entries[k]
                    for g2 in self._granules(k):
                        self.grid[g2].discard(k)


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


def schedule(trace: Trace, spec: HardwareSpec) -> Timeline:
    """Schedule every instruction of ``trace`` on ``spec`` and return the timeline."""
    with collector_paused():  # one event and a few tuples per instruction, none in a cycle
        return _schedule(trace, spec)


def _schedule(trace: Trace, spec: HardwareSpec) -> Timeline:
    allocs = {a["uid"]: a for a in trace.allocations}
    spaces: dict[Any, _Space] = {}
    lanes = {e: _Lane() for e in LANES}
    queues = [_Lane() for _ in range(spec.dma_queues)]
    busy: dict[str, float] = {e: 0.0 for e in LANES + ("dma",)}
    events: list[Event] = []
    costs: list[Cost] = []
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

    def place(ins: Instruction) -> Cost:
        """Schedule one instruction after its dependences; returns its cost."""
        nonlocal latency, lockstep, queues
        rf = [seen.get(id(a)) or fact(a) for a in ins.reads]
        wf = [seen.get(id(a)) or fact(a) for a in ins.writes]
        # loops repeat an instruction on other addresses: its cost depends on everything but the regions
        key = (ins.op, ins.engine, tuple([f[0] for f in rf]), tuple([f[0] for f in wf]), tuple(ins.attrs.items()))
        try:
            cost = known.get(key)
        except TypeError:  # an attribute value that cannot be hashed: no sharing for this one
            cost = key = None
        if cost is None:
            cost = instruction_cost(ins, spec)
            if key is not None:
                known[key] = cost
        ready = signalled = 0.0
        after = -1
        engine = cost.engine
        tensor = engine == "tensor"
        for _, sp, key, granules in rf:
            if sp is not None:
                t, ts, who = sp.ready(key, False, tensor, granules)
                if t > ready:
                    ready, after = t, who
                signalled = max(signalled, ts)
        for _, sp, key, granules in wf:
            t, ts, who = sp.ready(key, True, tensor, granules)
            if t > ready:
                ready, after = t, who
            signalled = max(signalled, ts)
        dur = cost.busy_ns
        if engine == "dma":
            if lockstep and cost.queues == len(queues):
                pieces = queues[0].fill(ready, dur)
                start, finish = pieces[0][0], pieces[-1][1]
                for s0, s1 in pieces:
                    queues[0].reserve(s0, s1 - s0)
                used: tuple[int, ...] = every_queue
            else:
                if lockstep:
                    lockstep = False
                    queues = [queues[0].copy() for _ in queues]
                plans = sorted(((q.fill(ready, dur), i) for i, q in enumerate(queues)), key=lambda pi: pi[0][-1][1])[: cost.queues]
                start = min(pieces[0][0] for pieces, _ in plans)
                finish = max(pieces[-1][1] for pieces, _ in plans)
                for pieces, i in plans:
                    for s0, s1 in pieces:
                        queues[i].reserve(s0, s1 - s0)
                used = tuple(sorted(i for _, i in plans))
        else:
            lane = lanes[engine]
            start = lane.earliest(ready, dur)
            if signalled > 0.0 and start == signalled:  # woken by a semaphore: pay its latency
                start = lane.earliest(ready + dep_ns[engine], dur)
            lane.reserve(start, dur)
            used = ()
        end = finish + cost.latency_ns - dur if engine == "dma" else start + cost.latency_ns
        busy[engine] += dur
        me = len(events)
        for _, sp, key, granules in rf:
            if sp is not None:
                sp.update(key, end, False, engine, granules, me)
        for _, sp, key, granules in wf:
            sp.update(key, end, True, engine, granules, me)
        latency = max(latency, end)
        events.append(Event(ins.seq, ins.op, engine, start, dur, end, used, ins.location, ready, finish if engine == "dma" else start + dur, after))
        return cost

    spills: list[Cost] = []
    added: list[Instruction] = []  # kept alive: fact() knows records by id()
    for ins in trace.instructions:
        if spilled and ins.engine != "dma" and any(a.region.alloc in spilled for a in ins.reads + ins.writes):
            added.extend(_spill_dma(ins, a, load=True) for a in ins.reads if a.region.alloc in spilled)
            spills.extend(place(dma) for dma in added[len(spills):])
            costs.append(place(ins))
            added.extend(_spill_dma(ins, a, load=False) for a in ins.writes if a.region.alloc in spilled)
            spills.extend(place(dma) for dma in added[len(spills):])
        else:
            costs.append(place(ins))
    return Timeline(events, latency, busy, costs, spills)
