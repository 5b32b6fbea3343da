"""What limits a schedule, in the kernel's own lines: the critical path, engines' idle gaps, DMA overlap.

A model improves a kernel by shortening its critical path, so the profile names it: the chain
of instructions, each waiting on the one before it for its operands (a data dependence the
schedule recorded, :attr:`~nkiagent.perf.timeline.Event.after`) or for its engine (the previous
instruction on the same engine or DMA queues), from the first instruction to the one that ends
last. Idle gaps say what an engine waited for while it stood still.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TypedDict

from .timeline import Event, Timeline

__all__ = ["IdleGap", "PathStep", "critical_path", "dma_overlap_pct", "idle_gaps"]

#: How late after its operands were ready an instruction may start and still count as waiting for
#: them (a semaphore's wake-up, the engine's fixed issue cost), in ns.
_SLACK_NS = 200.0

LABELS = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimd", "sync": "Sync", "dma": "DMA"}


class PathStep(TypedDict):
    """Consecutive critical-path instructions on one engine (a loop's iterations, a chain of DMAs)."""

    location: str  #: the kernel lines, up to three
    op: str  #: the ops, up to three
    engine: str
    count: int
    start_us: float
    end_us: float
    waits_for: str  #: what the first of them waited for: "operands", "engine" or "start"


class IdleGap(TypedDict):
    """Stretches one engine stood idle for the same reason (one per loop iteration, merged)."""

    engine: str
    start_us: float  #: the first one's start
    end_us: float  #: the last one's end
    idle_us: float  #: their total
    count: int
    waiting_for: str  #: "dma_copy at kernels/k.py:23 (DMA), whose memory …", or why nothing did


def _occupancy(events: list[Event]) -> dict[str, tuple[list[float], list[int]]]:
    """Per lane (engine, or all DMA queues together): busy ends sorted, with their events."""
    lanes: dict[str, list[tuple[float, int]]] = {}
    for i, e in enumerate(events):
        lanes.setdefault(e.engine, []).append((e.free_ns, i))
    out = {}
    for lane, items in lanes.items():
        items.sort()
        out[lane] = ([t for t, _ in items], [i for _, i in items])
    return out


def _waited_on_data(e: Event, events: list[Event]) -> bool:
    return e.after >= 0 and e.start_ns - e.ready_ns <= _SLACK_NS and events[e.after].end_ns >= e.ready_ns - 1e-6


def critical_path(tl: Timeline) -> list[int]:
    """Indices of ``tl.events`` on the critical path, first to last."""
    events = tl.events
    if not events:
        return []
    occ = _occupancy(events)
    i = max(range(len(events)), key=lambda k: events[k].end_ns)
    path, seen = [i], {i}
    while True:
        e = events[i]
        nxt = -1
        if _waited_on_data(e, events):
            nxt = e.after
        elif e.start_ns > _SLACK_NS:
            ends, idx = occ[e.engine]
            k = bisect_right(ends, e.start_ns + 1e-6) - 1
            while k >= 0 and idx[k] == i:
                k -= 1
            if k >= 0 and ends[k] >= e.start_ns - _SLACK_NS:
                nxt = idx[k]  # the engine was busy with it until this one started
            elif e.after >= 0:
                nxt = e.after
        if nxt < 0 or nxt in seen:
            break
        path.append(nxt)
        seen.add(nxt)
        i = nxt
    path.reverse()
    return path


def _joined(current: str, value: str) -> str:
    """``current, value`` unless ``value`` is already named or three are."""
    parts = current.split(", ")
    return current if value in parts or len(parts) >= 3 else f"{current}, {value}"


def path_steps(tl: Timeline, path: list[int]) -> list[PathStep]:
    """The path with runs on one engine merged (a loop's iterations, a chain of DMAs become one step)."""
    events = tl.events
    steps: list[PathStep] = []
    prev = -1

    for i in path:
        e = events[i]
        engine = LABELS.get(e.engine, e.engine)
        if steps and steps[-1]["engine"] == engine:
            steps[-1]["count"] += 1
            steps[-1]["end_us"] = round(e.end_ns / 1e3, 3)
            steps[-1]["location"] = _joined(steps[-1]["location"], e.location)
            steps[-1]["op"] = _joined(steps[-1]["op"], e.op)
        else:
            waits = "start" if prev < 0 else ("operands" if _waited_on_data(e, events) and e.after == prev else "engine")
            steps.append(
                PathStep(
                    location=e.location,
                    op=e.op,
                    engine=engine,
                    count=1,
                    start_us=round(e.start_ns / 1e3, 3),
                    end_us=round(e.end_ns / 1e3, 3),
                    waits_for=waits,
                )
            )
        prev = i
    return steps


def idle_gaps(tl: Timeline, top: int = 5) -> list[IdleGap]:
    """The longest idle stretches of each engine with work, merged by what it waited for, in time order."""
    events = tl.events
    if not events:
        return []
    threshold = max(0.02 * tl.latency_ns, 200.0)
    by_engine: dict[str, list[Event]] = {}
    for e in events:
        by_engine.setdefault(e.engine, []).append(e)
    merged: dict[tuple[str, str], IdleGap] = {}
    for engine, evs in by_engine.items():
        evs.sort(key=lambda e: e.start_ns)
        cursor = 0.0
        for e in evs:
            if e.start_ns - cursor >= threshold:
                if e.after >= 0 and e.ready_ns > cursor + _SLACK_NS:
                    p = events[e.after]
                    why = f"{p.op} at {p.location} ({LABELS.get(p.engine, p.engine)}), whose memory {e.op} at {e.location} uses"
                else:
                    why = f"nothing it needed: {e.op} at {e.location} was ready at {e.ready_ns / 1e3:.2f} µs (issue order)"
                label = LABELS.get(engine, engine)
                g = merged.get((label, why))
                if g is None:
                    merged[(label, why)] = IdleGap(engine=label, start_us=round(cursor / 1e3, 3), end_us=round(e.start_ns / 1e3, 3),
                                                   idle_us=round((e.start_ns - cursor) / 1e3, 3), count=1, waiting_for=why)
                else:
                    g["end_us"] = round(e.start_ns / 1e3, 3)
                    g["idle_us"] = round(g["idle_us"] + (e.start_ns - cursor) / 1e3, 3)
                    g["count"] += 1
            cursor = max(cursor, e.start_ns + e.busy_ns)
    longest = sorted(merged.values(), key=lambda g: -g["idle_us"])[:top]
    return sorted(longest, key=lambda g: (g["start_us"], g["engine"]))


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def dma_overlap_pct(tl: Timeline) -> float | None:
    """Share of the time DMA is busy during which some compute engine is busy too (``None`` without DMA or compute)."""
    dma = _union([(e.start_ns, e.start_ns + e.busy_ns) for e in tl.events if e.engine == "dma" and e.busy_ns > 0])
    comp = _union([(e.start_ns, e.start_ns + e.busy_ns) for e in tl.events if e.engine not in ("dma", "sync") and e.busy_ns > 0])
    total = sum(e - s for s, e in dma)
    if not total or not comp:
        return None
    both, j = 0.0, 0
    for s, e in dma:
        while j < len(comp) and comp[j][1] <= s:
            j += 1
        k = j
        while k < len(comp) and comp[k][0] < e:
            both += min(e, comp[k][1]) - max(s, comp[k][0])
            k += 1
    return round(100.0 * both / total, 1)
