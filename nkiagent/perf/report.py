"""Renderings of a profile: compact text for models and people, Perfetto JSON, a PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..emu.trace import Trace
from .profile import ENGINE_LABELS, Profile
from .sol import dma_peak_bytes_per_ns
from .specs import HardwareSpec
from .timeline import Timeline

__all__ = ["chrome_trace", "plot_png", "summary_text", "write_chrome_trace"]


def _bar(pct: float, width: int = 20) -> str:
    filled = round(width * max(0.0, min(pct, 100.0)) / 100.0)
    return "█" * filled + "·" * (width - filled)


def _path_lines(p: Profile, room: int) -> list[str]:
    """The critical path in at most ``room`` lines: its head and its tail when it is longer."""
    steps = p.critical_path

    def fmt(st: dict[str, Any]) -> str:
        count = f" ×{st['count']}" if st["count"] > 1 else ""
        wait = {"operands": "after its operands", "engine": "after its engine", "start": "first"}[st["waits_for"]]
        return f"  {st['start_us']:8.2f}–{st['end_us']:.2f} µs  {st['engine']:7s} {st['op']}{count} at {st['location']} ({wait})"
    if len(steps) <= room:
        return [fmt(st) for st in steps]
    head = room // 2
    tail = max(0, room - head - 1)
    return [fmt(st) for st in steps[:head]] + [f"  … {len(steps) - head - tail} more steps"] + [fmt(st) for st in steps[len(steps) - tail:]]


def summary_text(p: Profile, max_lines: int = 40) -> str:
    """A compact summary (≤ ``max_lines`` lines) to show a person or feed back to a model.

    It says what limits the kernel in the kernel's own lines: the critical path, what each idle
    engine waited for, how much DMA overlaps compute, the advice, then the hottest lines. When
    lines are short the advice is kept whole first, then three steps of the path, the waits, the
    hottest lines.
    """
    lines = [
        f"latency {p.latency_us:,.2f} µs on {p.target} ({p.timing_source}, {p.model_version}), {p.instructions} instructions",
        f"bottleneck: {p.bottleneck}",
    ]
    if not p.faithful:
        lines.insert(0, "NOT FAITHFUL: this timing-only run has no data, and the kernel read tensor values into its control flow or "
                        f"addresses (they read 0), so the estimate below may not be the kernel's; profile with data instead. "
                        f"First: {p.unfaithful[0]}")
    if p.sol_latency_us is not None:
        lines.append(f"speed of light {p.sol_latency_us:,.2f} µs (any kernel's floor: the task's minimum work at the cost model's peak rates) → "
                     f"{100 * (p.fraction_of_sol or 0):.1f}% of it; roofline {p.roofline_us:,.2f} µs (this kernel's own bytes and FLOPs at the "
                     f"same rates, {p.roofline_bound})")
    else:
        lines.append(f"roofline bound {p.roofline_us:,.2f} µs ({p.roofline_bound}: this kernel's own bytes and FLOPs at peak rates)")
    for name, st in p.engines.items():
        lines.append(f"  {name:8s} {_bar(st.active_pct)} {st.active_pct:5.1f}%  {st.busy_us:,.2f} µs  ({st.instructions} instr)")
    mib = 2**20
    overlap = f"; {p.dma_overlap_pct:.0f}% of DMA time overlaps compute" if p.dma_overlap_pct is not None else ""
    lines.append(
        f"HBM read {p.hbm_read_bytes / mib:,.2f} MiB, write {p.hbm_write_bytes / mib:,.2f} MiB; {p.dma_count} DMAs by contiguous chunk: "
        + ", ".join(f"{k} {v}" for k, v in p.dma_histogram.items()) + overlap
    )
    if p.flops:
        lines.append(f"matmul {p.flops / 1e9:,.3f} GFLOP: HFU {p.hfu_pct:.1f}%, MFU {p.mfu_pct:.1f}%, arithmetic intensity {p.arithmetic_intensity:,.1f} FLOP/B")
    # what a model needs most comes first when lines are short: the advice, three steps of the
    # critical path, what idle engines waited for, then the hottest lines
    room = max_lines - len(lines)
    advice = ["advice:", *(f"  - {a}" for a in p.advice)][: max(0, room)] if p.advice else []
    room -= len(advice)
    path_n = min(len(p.critical_path), 10, max(0, room - 1))
    gaps_n = min(len(p.idle_gaps), max(0, room - (path_n + 1 if path_n else 0) - 1))
    hot_n = min(len(p.hot_lines), max(0, room - (path_n + 1 if path_n else 0) - (gaps_n + 1 if gaps_n else 0) - 1))
    spare = room - (path_n + 1 if path_n else 0) - (gaps_n + 1 if gaps_n else 0) - (hot_n + 1 if hot_n else 0)
    path_n = min(len(p.critical_path), 16, path_n + max(0, spare))  # a long path takes what the others leave
    if path_n:
        lines.append(f"critical path ({len(p.critical_path)} steps, first to last; each starts after its operands or its engine):")
        lines.extend(_path_lines(p, path_n))
    if gaps_n:
        lines.append("idle engines (longest waits; what they waited for):")
        for g in p.idle_gaps[:gaps_n]:
            times = f"{g['start_us']:.2f}–{g['end_us']:.2f} µs" if g["count"] == 1 else f"{g['idle_us']:.2f} µs in {g['count']} gaps within {g['start_us']:.2f}–{g['end_us']:.2f} µs"
            lines.append(f"  {g['engine']} idle {times} waiting for {g['waiting_for']}")
    lines.extend(advice)
    if hot_n:
        lines.append("hottest lines:")
        lines.extend(f"  {h['location']}  {h['engine']} {h['busy_us']:,.2f} µs × {h['count']}" for h in p.hot_lines[:hot_n])
    return "\n".join(lines)


def chrome_trace(trace: Trace, timeline: Timeline, spec: HardwareSpec) -> dict[str, Any]:
    """Chrome-trace / Perfetto JSON: one track per engine and one per DMA queue (times in µs)."""
    tracks = [*ENGINE_LABELS.keys()]
    tids = {e: k for k, e in enumerate(tracks) if e != "dma"}
    events: list[dict[str, Any]] = []
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": f"NeuronCore {spec.name} (emulator-estimate)"}}]
    for e, tid in tids.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": ENGINE_LABELS[e]}})
    for q in range(spec.dma_queues):
        meta.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 100 + q, "args": {"name": f"DMA queue {q}"}})
    for ev in timeline.events:
        args = {"seq": ev.seq, "line": ev.location, "end_us": round(ev.end_ns / 1e3, 4)}
        if ev.engine == "dma":
            for q in ev.queues:
                events.append({"name": ev.op, "ph": "X", "pid": 1, "tid": 100 + q, "ts": ev.start_ns / 1e3, "dur": ev.busy_ns / 1e3, "args": args})
        else:
            events.append({"name": ev.op, "ph": "X", "pid": 1, "tid": tids.get(ev.engine, 0), "ts": ev.start_ns / 1e3, "dur": ev.busy_ns / 1e3, "args": args})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns", "otherData": {"timing_source": "emulator-estimate", "target": spec.name}}


def write_chrome_trace(path: str | Path, trace: Trace, timeline: Timeline, spec: HardwareSpec) -> None:
    Path(path).write_text(json.dumps(chrome_trace(trace, timeline, spec)))


def plot_png(path: str | Path, p: Profile, timeline: Timeline, spec: HardwareSpec) -> None:
    """Timeline (one row per engine, DMA as one row) and the roofline point, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [3, 1.2]})
    rows = ["tensor", "vector", "scalar", "gpsimd", "dma"]
    colors = {"tensor": "#4c72b0", "vector": "#55a868", "scalar": "#c44e52", "gpsimd": "#8172b2", "dma": "#ccb974"}
    for k, eng in enumerate(rows):
        spans = [(ev.start_ns / 1e3, ev.busy_ns / 1e3) for ev in timeline.events if ev.engine == eng]
        if spans:
            ax_t.broken_barh(spans, (k - 0.4, 0.8), facecolors=colors[eng])
    ax_t.set_yticks(range(len(rows)), [ENGINE_LABELS[r] for r in rows])
    ax_t.set_xlabel("time (µs, emulator-estimate)")
    ax_t.set_title(f"{spec.name}: {p.latency_us:,.1f} µs — {p.bottleneck}")
    peak = spec.pe_flops_per_ns  # FLOP/ns == GFLOP/s
    bw = dma_peak_bytes_per_ns(spec)
    xs = [0.1, 1, 10, 100, 1000, 10000]
    ax_r.loglog(xs, [min(peak, bw * x) for x in xs], "k-", lw=1)
    if p.flops and p.arithmetic_intensity:
        ax_r.loglog([p.arithmetic_intensity], [p.flops / (p.latency_us * 1e3)], "o", color="#c44e52")
    ax_r.set_xlabel("FLOP / byte")
    ax_r.set_ylabel("GFLOP/s")
    ax_r.set_title("roofline")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
