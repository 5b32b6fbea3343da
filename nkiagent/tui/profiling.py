"""The profile view's data: a full cost-model profile with its timeline, and text renderings of both.

An evaluation carries a profile *summary* (engines, bottleneck, HBM traffic, advice) but not
the timeline, so ``/profile`` runs the kernel once more — in the verifier's sandboxed worker,
never in the UI's process — keeps the instruction trace, and schedules it with the cost model
here (a trace is plain data). The renderings are rich :class:`~rich.text.Text` so the same
code draws the view and the deterministic SVG screenshots.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rich.text import Text

__all__ = ["profile_in_sandbox", "render_profile", "timeline_rows"]

_BAR = 12  # fits the side panel of a 120-column terminal
_COLS = 32


def profile_in_sandbox(kernel_path: str | Path, task: Any, target: str) -> dict[str, Any]:
    """Profile ``kernel_path`` on ``task``'s visible shape: the profile dict plus ``timeline`` rows per engine.

    Raises ``RuntimeError`` with the worker's reason when the kernel does not run.
    """
    from ..perf import profile_trace, speed_of_light
    from ..perf.specs import get_spec
    from ..sandbox.arrays import DISTRIBUTIONS
    from ..sandbox.launch import run_worker
    from ..verify.inputs import InputCache, cases

    path = Path(kernel_path)
    first = cases(task, 1, DISTRIBUTIONS[:1])[:1]
    cache = InputCache().ensure(task, first)
    run = {
        "id": 0,
        "dims": dict(task.dims),
        "seed": 0,
        "dist": first[0].distribution,
        "trace": True,
        "input_paths": InputCache.input_paths(cache, 0, len(task.inputs)),
    }
    out = run_worker(path, None, [run], target=target, api="0.1" if "neuronxcc" in path.read_text() else "0.3")
    try:
        runs = (out.answer or {}).get("runs") or []
        if not runs or "error" in runs[0] or 0 not in out.traces:
            err = (runs[0].get("error") if runs else None) or (out.answer or {}).get("error") or {}
            raise RuntimeError(f"the kernel did not run: {err.get('type', out.status)}: {err.get('message', out.detail)}")
        trace = out.priced_trace(0)
    finally:
        if out.scratch:
            shutil.rmtree(out.scratch, ignore_errors=True)
    work = task.work(dict(task.dims))
    spec = get_spec(target)
    sol = speed_of_light(spec, **work)
    prof, tl = profile_trace(trace, target, task_flops=work["matmul_flops"] or None, sol=sol, precision=task.precision_floor)
    data = prof.to_dict()
    data["timeline"] = timeline_rows(tl.events, tl.latency_ns)
    return data


def timeline_rows(events: list[Any], latency_ns: float, cols: int = _COLS) -> dict[str, str]:
    """One text row per engine: ``cols`` time buckets, each drawn by how busy the engine was in it (`` ░▒▓█``)."""
    if latency_ns <= 0:
        return {}
    width = latency_ns / cols
    busy: dict[str, list[float]] = {}
    for ev in events:
        lane = "dma" if ev.engine.startswith("dma") or ev.engine.startswith("q") else ev.engine
        row = busy.setdefault(lane, [0.0] * cols)
        start, end = ev.start_ns, ev.start_ns + ev.busy_ns
        k = max(0, min(cols - 1, int(start / width)))
        while k < cols and start < end:
            edge = (k + 1) * width
            row[k] += min(end, edge) - start
            start = edge
            k += 1
    from ..perf.profile import ENGINE_LABELS

    shades = " ░▒▓█"
    order = [e for e in ENGINE_LABELS if e in busy] + sorted(set(busy) - set(ENGINE_LABELS))
    return {ENGINE_LABELS.get(lane, lane): "".join(shades[min(4, round(4 * min(1.0, v / width)))] for v in busy[lane]) for lane in order}


def _bar(pct: float, width: int = _BAR) -> str:
    filled = round(width * max(0.0, min(pct, 100.0)) / 100.0)
    return "█" * filled + "·" * (width - filled)


def render_profile(
    prof: dict[str, Any] | None,
    *,
    target: str = "",
    latency_us: float | None = None,
    sol_latency_us: float | None = None,
    fraction_of_peak: float | None = None,
) -> Text:
    """The profile view: engine busy bars, timeline, bottleneck, HBM traffic, roofline position, advice."""
    out = Text()
    if not prof:
        out.append("No profile yet.\n", style="bold")
        out.append("A kernel that passes verification is profiled automatically; /profile profiles the current kernel now.", style="dim")
        return out
    target = prof.get("target") or target
    latency = prof.get("latency_us", latency_us)
    source = prof.get("timing_source", "emulator-estimate")
    if latency is not None:
        out.append(f"latency {latency:,.2f} µs", style="bold")
        out.append(f" on {target} ({source})\n", style="dim")
    out.append("bottleneck: ", style="bold")
    out.append(f"{prof.get('bottleneck', '?')}\n\n", style="yellow")
    out.append("engine busy\n", style="bold underline")
    engines: dict[str, Any] = prof.get("engines", {})
    for name, st in engines.items():
        pct = float(st.get("active_pct", 0.0))
        out.append(f"  {name:7s} ")
        out.append(_bar(pct), style="green" if pct >= 60 else "yellow" if pct >= 25 else "red")
        out.append(f" {pct:5.1f}% {st.get('busy_us', 0.0):,.1f} µs ×{st.get('instructions', 0)}\n")
    timeline: dict[str, str] = prof.get("timeline") or {}
    if timeline:
        out.append("\ntimeline", style="bold underline")
        out.append(f"  0 → {latency:,.2f} µs\n" if latency is not None else "\n", style="dim")
        for lane, row in timeline.items():
            out.append(f"  {lane:7s} ")
            out.append(row, style="cyan")
            out.append("\n")
    mib = 2**20
    out.append("\nHBM traffic ", style="bold underline")
    out.append(
        f"\n  read {prof.get('hbm_read_bytes', 0) / mib:,.2f} MiB, write {prof.get('hbm_write_bytes', 0) / mib:,.2f} MiB, "
        f"{prof.get('dma_count', 0)} DMAs\n"
    )
    out.append("\nroofline\n", style="bold underline")
    out.append(f"  {_roofline_line(prof, target)}\n")
    sol = prof.get("sol_latency_us", sol_latency_us)
    frac = prof.get("fraction_of_sol", fraction_of_peak)
    if sol is not None and frac is not None:
        out.append(f"  speed of light {sol:,.2f} µs → {100 * frac:.1f}% of peak\n")
    advice = prof.get("advice") or []
    if advice:
        out.append("\nadvice\n", style="bold underline")
        for a in advice:
            out.append(f"  • {a}\n")
    return out


def _roofline_line(prof: dict[str, Any], target: str) -> str:
    """Where the kernel sits on the target's roofline: its arithmetic intensity against the ridge point."""
    from ..perf.sol import dma_peak_bytes_per_ns
    from ..perf.specs import get_spec

    hbm = prof.get("hbm_read_bytes", 0) + prof.get("hbm_write_bytes", 0)
    flops = float(prof.get("flops") or 0.0)
    if not hbm:
        return "no HBM traffic"
    spec = get_spec(target or "trn2")
    bandwidth = dma_peak_bytes_per_ns(spec)  # bytes per ns
    ridge = spec.pe_flops_per_ns / bandwidth
    intensity = flops / hbm
    bound = "memory-bound" if intensity < ridge else "compute-bound"
    return f"{intensity:,.2f} FLOP/B vs ridge {ridge:,.1f} FLOP/B ({spec.name}): {bound}"
