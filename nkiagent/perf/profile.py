"""Profiles: where a kernel's time goes on a target, why, and what to change.

A :class:`Profile` is built from an instruction trace and its timeline. It is plain data
(JSON-able) so it can be fed back to a model, stored in a session, or rendered by the UI.
Every latency carries ``timing_source`` (``emulator-estimate``) and the cost model's version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..emu.trace import Access, Instruction, Trace, is_data
from .sol import SpeedOfLight, speed_of_light
from .specs import MODEL_VERSION, HardwareSpec, get_spec
from .timeline import Timeline, schedule

__all__ = ["EngineStat", "Profile", "build_profile", "profile_trace"]

ENGINE_LABELS = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimd", "sync": "Sync", "dma": "DMA"}
DMA_BINS = (("<256B", 256), ("256B-2KiB", 2048), ("2-4KiB", 4096), (">=4KiB", float("inf")))


@dataclass
class EngineStat:
    busy_us: float
    active_pct: float
    instructions: int


@dataclass
class Profile:
    """Where the time goes. All times are ``timing_source`` estimates in microseconds."""

    target: str
    latency_us: float
    timing_source: str
    model_version: str
    instructions: int
    engines: dict[str, EngineStat]
    bottleneck: str
    hbm_read_bytes: int
    hbm_write_bytes: int
    dma_count: int
    dma_histogram: dict[str, int]
    flops: float
    hfu_pct: float
    mfu_pct: float
    arithmetic_intensity: float
    roofline_us: float
    roofline_bound: str
    sol_latency_us: float | None = None
    fraction_of_sol: float | None = None
    below_speed_of_light: bool = False
    advice: list[str] = field(default_factory=list)
    hot_lines: list[dict[str, Any]] = field(default_factory=list)
    #: False when the trace came from a timing-only run that read tensor values into control flow or
    #: addresses (it read zeros): the estimate may then not be the kernel's, and ``unfaithful`` says where.
    faithful: bool = True
    unfaithful: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hist(chunks: list[int]) -> dict[str, int]:
    out = {name: 0 for name, _ in DMA_BINS}
    for c in chunks:
        for name, hi in DMA_BINS:
            if c < hi:
                out[name] += 1
                break
    return out


def build_profile(
    trace: Trace,
    timeline: Timeline,
    spec: HardwareSpec,
    *,
    task_flops: float | None = None,
    sol: SpeedOfLight | None = None,
) -> Profile:
    """Summarize ``timeline`` of ``trace`` on ``spec`` into a :class:`Profile` with advice."""
    lat_ns = max(timeline.latency_ns, 1e-9)
    counts: dict[str, int] = defaultdict(int)
    every = timeline.all_costs  # with the DMAs spill code adds, which move real bytes
    for c in every:
        counts[c.engine] += 1
    engines = {}
    for eng, busy in timeline.busy_ns.items():
        if eng == "sync" and not counts.get(eng):
            continue
        if eng == "dma":  # queue-time spread over all queues: the time a full-width DMA engine would be busy
            busy = sum(c.busy_ns * c.queues for c in every if c.engine == "dma") / spec.dma_queues
        engines[ENGINE_LABELS[eng]] = EngineStat(round(busy / 1e3, 3), round(min(100.0 * busy / lat_ns, 100.0), 2), counts.get(eng, 0))
    flops = sum(c.flops for c in every)
    hbm_r = sum(c.hbm_read for c in every)
    hbm_w = sum(c.hbm_write for c in every)
    chunks = [c.chunk for c in every if c.engine == "dma" and c.chunk is not None]
    peak = spec.pe_flops_per_ns
    hfu = 100.0 * flops / (lat_ns * peak) if flops else 0.0
    mfu = 100.0 * (task_flops if task_flops is not None else flops) / (lat_ns * peak) if (task_flops or flops) else 0.0
    hbm = hbm_r + hbm_w
    bw = min(spec.hbm_gbps, spec.dma_bytes_per_ns)
    roof_compute, roof_mem = flops / peak, hbm / bw
    prof = Profile(
        target=spec.name,
        latency_us=round(lat_ns / 1e3, 3),
        timing_source="emulator-estimate",
        model_version=MODEL_VERSION,
        instructions=len(trace.instructions),
        engines=engines,
        bottleneck="",
        hbm_read_bytes=hbm_r,
        hbm_write_bytes=hbm_w,
        dma_count=counts.get("dma", 0),
        dma_histogram=_hist(chunks),
        flops=flops,
        hfu_pct=round(hfu, 2),
        mfu_pct=round(mfu, 2),
        arithmetic_intensity=round(flops / hbm, 2) if hbm else 0.0,
        roofline_us=round(max(roof_compute, roof_mem) / 1e3, 3),
        roofline_bound="compute" if roof_compute >= roof_mem else "memory",
        hot_lines=_hot_lines(trace, timeline),
        faithful=not trace.unfaithful,
        unfaithful=list(trace.unfaithful),
    )
    if sol is not None and sol.latency_ns > 0:
        prof.sol_latency_us = round(sol.latency_ns / 1e3, 3)
        prof.fraction_of_sol = round(sol.latency_ns / lat_ns, 4)
        prof.below_speed_of_light = lat_ns < sol.latency_ns * 0.999
    prof.bottleneck = _bottleneck(prof)
    prof.advice = _advice(trace, timeline, spec, prof)
    return prof


def _hot_lines(trace: Trace, timeline: Timeline, top: int = 5) -> list[dict[str, Any]]:
    per: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for ins, c in zip(trace.instructions, timeline.costs):
        rec = per[(ins.location, c.engine)]
        rec[0] += c.busy_ns
        rec[1] += 1
    ranked = sorted(per.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"location": loc, "engine": ENGINE_LABELS[eng], "busy_us": round(v[0] / 1e3, 3), "count": int(v[1])} for (loc, eng), v in ranked]


def _bottleneck(p: Profile) -> str:
    if not p.engines:
        return "none"
    name, stat = max(p.engines.items(), key=lambda kv: kv[1].active_pct)
    if stat.active_pct < 50.0:
        return f"latency (dependencies): busiest engine {name} is only {stat.active_pct:.0f}% active"
    if name == "DMA":
        return "memory-bound (DMA)"
    return f"compute-bound ({name})"


def _operands(ins: Instruction) -> list[Access]:
    """The data ``ins`` moves or computes on: advice is about those, not the registers and index tiles that order it."""
    return [a for a in ins.reads + ins.writes if is_data(a)]


def _advice(trace: Trace, timeline: Timeline, spec: HardwareSpec, p: Profile) -> list[str]:
    """Rules from the NKI performance guide (§4.4), each with the numbers that triggered it."""
    out: list[str] = []
    pairs = list(zip(trace.instructions, timeline.costs))
    dma = [(i, c) for i, c in pairs if c.engine == "dma"]
    dma_time = sum(c.busy_ns for _, c in dma) or 1.0
    small = [(i, c) for i, c in dma if c.chunk is not None and c.chunk < 2048]
    small_time = sum(c.busy_ns for _, c in small)
    pe = p.engines.get("TensorE")
    dma_stat = p.engines.get("DMA")
    if p.bottleneck.startswith("memory") and pe is not None and pe.instructions:
        out.append(
            f"memory-bound: DMA queues are {dma_stat.active_pct:.0f}% busy while TensorE is {pe.active_pct:.0f}% active; "
            "raise arithmetic intensity by reusing loaded tiles (block the free dimensions, hoist loads out of inner loops) "
            "and overlap loads with compute"
        )
    elif p.bottleneck.startswith("memory"):
        out.append(f"memory-bound: DMA queues are {dma_stat.active_pct:.0f}% busy; move fewer bytes or move them in larger transfers")
    if small and small_time / dma_time > 0.25:
        out.append(
            f"small DMAs: {len(small)} of {len(dma)} DMAs move contiguous chunks < 2 KiB per partition ({100 * small_time / dma_time:.0f}% of DMA time); "
            "use ≥ 2 KiB per partition per transfer (512 fp32 / 1024 bf16 elements) — perf guide Opt #9"
        )
    allocs = {a["uid"]: a for a in trace.allocations}
    read_bytes: dict[int, int] = defaultdict(int)
    for i, c in dma:
        for a in filter(is_data, i.reads):
            if a.memory not in ("sbuf", "psum"):
                read_bytes[a.region.alloc] += a.nbytes
    for uid, nbytes in read_bytes.items():
        rec = allocs.get(uid, {})
        size = 1
        for d in rec.get("shape", [1]):
            size *= d
        from .cost import itemsize

        total = size * itemsize(rec.get("dtype", "float32"))
        if rec.get("role") == "input" and total and nbytes / total > 1.5:
            out.append(
                f"reloaded input: `{rec.get('name')}` is read {nbytes / total:.1f}× from HBM ({nbytes / 2**20:.1f} MiB for a "
                f"{total / 2**20:.1f} MiB tensor); keep tiles in SBUF and reuse them — perf guide Opt #1"
            )
    fp32_mm = sum(1 for i, _ in pairs if i.op == "nc_matmul" and i.attrs.get("fp32"))
    if fp32_mm:
        out.append(f"fp32 matmul: {fp32_mm} nc_matmul instructions use fp32 operands (1/4 of bf16 rate on TensorE); cast operands to bfloat16 — PSUM still accumulates in fp32")
    thin = [(i, c) for i, c in pairs if i.op == "nc_matmul" and (i.attrs.get("K", 128) < 128 or i.attrs.get("M", 128) < 128)]
    if thin and len(thin) * 2 > sum(1 for i, _ in pairs if i.op == "nc_matmul"):
        i0 = thin[0][0]
        out.append(f"TensorE underused: most matmuls use K={i0.attrs.get('K')} rows and M={i0.attrs.get('M')} columns of the 128×128 array; tile K and M to 128")
    transposes = sum(1 for i, _ in pairs if i.op == "dma_transpose")
    if transposes:
        out.append(f"DMA transposes: {transposes} dma_transpose/load_transpose2d instructions are slow on DMA; load normally and transpose on TensorE (nc_transpose) — Opt #10")
    compute = [(i, c) for i, c in pairs if c.engine in ("vector", "scalar", "gpsimd")]
    comp_time = sum(c.busy_ns for _, c in compute) or 1.0
    narrow = sum(c.busy_ns for i, c in compute if max((a.partitions for a in _operands(i)), default=128) < 128)
    if compute and narrow / comp_time > 0.25:
        out.append(f"partitions: {100 * narrow / comp_time:.0f}% of Vector/Scalar/GpSimd time runs on fewer than 128 partitions; their cost does not shrink with fewer partitions — use all 128 (Opt #5b)")
    tiny = sum(c.busy_ns for i, c in compute if max((a.elems_per_partition for a in _operands(i)), default=0) < 128)
    if compute and tiny / comp_time > 0.25:
        out.append(f"tiny instructions: {100 * tiny / comp_time:.0f}% of Vector/Scalar/GpSimd time is in instructions with < 128 elements per partition, where fixed overhead dominates; fuse or batch them (Opt #5a, #6)")
    psum_adds = sum(1 for i, _ in pairs if i.op == "tensor_tensor" and any(a.memory == "psum" for a in i.reads))
    matmuls = sum(1 for i, _ in pairs if i.op == "nc_matmul")
    if matmuls and psum_adds * 2 >= matmuls:
        out.append(f"PSUM evacuation: {psum_adds} VectorE tensor_tensor ops read PSUM for {matmuls} matmuls; accumulate several K tiles in PSUM before each evacuation (K blocking)")
    spill_uids = {uid for uid, rec in allocs.items() if rec.get("memory") in ("hbm", "private_hbm") and rec.get("role") not in ("input", "output")}
    if spill_uids:
        spilled = sum(c.hbm_write for i, c in dma if any(a.region.alloc in spill_uids for a in i.writes))
        if spilled:
            out.append(f"spills: {spilled / 2**20:.2f} MiB written to scratch HBM tensors and read back; fuse ops to keep intermediates in SBUF (Opt #2)")
    spill_traffic = sum(c.hbm_read + c.hbm_write for c in timeline.spill_costs)
    if spill_traffic:
        tiles = sum(1 for rec in allocs.values() if rec.get("spilled"))
        spill_time = sum(c.busy_ns for c in timeline.spill_costs)
        out.append(
            f"spills: {tiles} tile(s) exceed SBUF/PSUM and live in HBM; spill code moves {spill_traffic / 2**20:.2f} MiB in "
            f"{len(timeline.spill_costs)} DMAs ({spill_time / 1e3:.1f} µs of queue time); free or shrink tiles so they fit on chip (Opt #2)"
        )
    if p.bottleneck.startswith("latency"):
        out.append("latency-bound: no engine is busy more than half the time; double-buffer (allocate tiles inside loops) so iterations overlap, and avoid chains of tiny dependent ops")
    if p.below_speed_of_light:
        out.append(f"BELOW SPEED OF LIGHT: estimate {p.latency_us} µs < bound {p.sol_latency_us} µs — the kernel skips required work or the model was fooled; this number is not trustworthy")
    return out


def profile_trace(trace: Trace, target: str | None = None, *, task_flops: float | None = None, sol: SpeedOfLight | None = None) -> tuple[Profile, Timeline]:
    """Schedule ``trace`` on its target (or ``target``) and build the profile."""
    spec = get_spec(target or trace.target or "trn2")
    tl = schedule(trace, spec)
    return build_profile(trace, tl, spec, task_flops=task_flops, sol=sol), tl


