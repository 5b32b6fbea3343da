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
from .cost import dma_efficiency
from .critical import IdleGap, PathStep, critical_path, dma_overlap_pct, idle_gaps, path_steps
from .sol import SpeedOfLight, dma_peak_bytes_per_ns, matmul_passes, roofline_ns
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
    #: the chain of instructions that sets the latency, merged by kernel line (see :mod:`.critical`)
    critical_path: list[PathStep] = field(default_factory=list)
    idle_gaps: list[IdleGap] = field(default_factory=list)
    dma_overlap_pct: float | None = None  #: share of DMA time during which some compute engine works too

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
    precision: str = "bfloat16",
) -> Profile:
    """Summarize ``timeline`` of ``trace`` on ``spec`` into a :class:`Profile` with advice.

    ``precision``: the narrowest type the task allows (:attr:`nkiagent.tasks.spec.Task.precision`);
    advice never suggests a narrower one.
    """
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
    pass_flops = sum(c.flops * matmul_passes(bool(i.attrs.get("fp32")), bool(i.attrs.get("onezero")))
                     for i, c in zip(trace.instructions, timeline.costs) if c.flops)  # fmt: skip
    roof_compute, roof_mem = roofline_ns(spec, pass_flops=pass_flops, hbm_bytes=hbm)
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
        idle_gaps=idle_gaps(timeline),
        dma_overlap_pct=dma_overlap_pct(timeline),
    )
    path = critical_path(timeline)
    prof.critical_path = path_steps(timeline, path)
    if sol is not None and sol.latency_ns > 0:
        prof.sol_latency_us = round(sol.latency_ns / 1e3, 3)
        prof.fraction_of_sol = round(sol.latency_ns / lat_ns, 4)
        prof.below_speed_of_light = lat_ns < sol.latency_ns * 0.999
    prof.bottleneck = _bottleneck(prof)
    prof.advice = _advice(trace, timeline, spec, prof, path, precision, sol)
    return prof


def _hot_lines(trace: Trace, timeline: Timeline, top: int = 5) -> list[dict[str, Any]]:
    per: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for ins, c in zip(trace.instructions, timeline.costs):
        rec = per[(ins.location, c.engine)]
        rec[0] += c.busy_ns
        rec[1] += 1
    ranked = sorted(per.items(), key=lambda kv: -kv[1][0])[:top]
    return [
        {"location": loc, "engine": ENGINE_LABELS[eng], "busy_us": round(v[0] / 1e3, 3), "count": int(v[1])} for (loc, eng), v in ranked
    ]


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


def _advice(
    trace: Trace, timeline: Timeline, spec: HardwareSpec, p: Profile, path: list[int], precision: str, sol: SpeedOfLight | None
) -> list[str]:
    """Rules from the NKI performance guide (§4.4), each with the numbers that triggered it.

    Only rules about the critical path fire (shortening anything else cannot lower the latency),
    never one the task forbids (``precision``), each once; when none does, one line says why.
    """
    out: list[str] = []
    pairs = list(zip(trace.instructions, timeline.costs))
    events = timeline.events
    on_path = {events[i].seq for i in path}
    path_ns: dict[str, float] = defaultdict(float)
    for i in path:
        path_ns[events[i].engine] += events[i].busy_ns
    path_total = sum(path_ns.values()) or 1.0

    def leads(engine: str, share: float = 0.2) -> bool:
        """The engine does a real share of the critical path's work."""
        return path_ns.get(engine, 0.0) / path_total >= share

    dma = [(i, c) for i, c in pairs if c.engine == "dma"]
    dma_time = sum(c.busy_ns for _, c in dma) or 1.0
    small = [(i, c) for i, c in dma if c.chunk is not None and c.chunk < spec.dma_full_chunk]  # below the curve's full rate
    small_time = sum(c.busy_ns for _, c in small)
    pe = p.engines.get("TensorE")
    dma_stat = p.engines.get("DMA")
    hbm = p.hbm_read_bytes + p.hbm_write_bytes
    min_bytes = sol.hbm_ns * dma_peak_bytes_per_ns(spec) if sol is not None and sol.hbm_ns else 0.0
    if p.bottleneck.startswith("memory") and leads("dma", 0.5) and dma_stat is not None:
        if not min_bytes or hbm > 1.2 * min_bytes:
            extra = (
                f", and the kernel moves {hbm / min_bytes:.1f}× the task's minimum HBM traffic ({min_bytes / 2**20:.2f} MiB)"
                if min_bytes
                else ""
            )
            if pe is not None and pe.instructions:
                out.append(
                    f"memory-bound: DMA queues are {dma_stat.active_pct:.0f}% busy while TensorE is {pe.active_pct:.0f}% active{extra}; "
                    "raise arithmetic intensity by reusing loaded tiles (block the free dimensions, hoist loads out of inner loops) "
                    "and overlap loads with compute"
                )
            else:
                out.append(
                    f"memory-bound: DMA queues are {dma_stat.active_pct:.0f}% busy{extra}; move fewer bytes or move them in larger transfers"
                )
        elif dma_stat.active_pct < 95.0:  # the queues idle a real share of the time at the start and end; else queued stores fill the tail
            first = next((events[i] for i in path if events[i].engine != "dma"), None)
            last = next((events[i] for i in reversed(path) if events[i].engine != "dma"), None)
            if first is not None and last is not None:
                out.append(
                    f"DMA-bound at the task's minimum traffic: compute on the critical path starts at {first.start_ns / 1e3:.2f} µs "
                    f"({first.op} at {first.location}) and the last DMA ends {(p.latency_us * 1e3 - last.end_ns) / 1e3:.2f} µs after the last "
                    "compute; start on a smaller first tile and split the last store so loads, compute and stores overlap from the start"
                )
    path_small = [(i, c) for i, c in small if i.seq in on_path]
    if path_small and small_time / dma_time > 0.1:
        lines = sorted({i.location for i, _ in path_small})[:3]
        out.append(
            f"small DMAs: {len(small)} of {len(dma)} DMAs move contiguous chunks < {spec.dma_full_chunk // 1024} KiB per partition "
            f"({100 * small_time / dma_time:.0f}% of DMA time, below full rate), on the critical path at {', '.join(lines)}; use ≥ "
            f"{spec.dma_full_chunk // 1024} KiB per partition per transfer ({spec.dma_full_chunk // 4} fp32 / {spec.dma_full_chunk // 2} bf16 "
            f"elements) — the model moves 1 KiB runs at {100 * dma_efficiency(1024, spec):.0f}%, 2 KiB at {100 * dma_efficiency(2048, spec):.0f}% "
            "of full rate — perf guide Opt #9"
        )
    allocs = {a["uid"]: a for a in trace.allocations}
    read_bytes: dict[int, int] = defaultdict(int)
    for i, c in dma:
        for a in filter(is_data, i.reads):
            if a.memory not in ("sbuf", "psum"):
                read_bytes[a.region.alloc] += a.nbytes
    if leads("dma"):
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
    matmuls = [(i, c) for i, c in pairs if i.op == "nc_matmul"]
    fp32_mm = sum(1 for i, _ in matmuls if i.attrs.get("fp32"))
    if fp32_mm and leads("tensor") and precision != "float32":
        allowed = " (this task's tolerance allows bf16 operands)" if precision == "bfloat16" else ""
        out.append(
            f"fp32 matmul: {fp32_mm} nc_matmul instructions use fp32 operands (1/4 of bf16 rate on TensorE); cast operands to bfloat16"
            f"{allowed} — PSUM still accumulates in fp32"
        )
    thin = [(i, c) for i, c in matmuls if i.attrs.get("K", 128) < 128 or i.attrs.get("M", 128) < 128]
    if thin and len(thin) * 2 > len(matmuls) and leads("tensor"):
        i0 = thin[0][0]
        out.append(
            f"TensorE underused: most matmuls use K={i0.attrs.get('K')} rows and M={i0.attrs.get('M')} columns of the 128×128 array; tile K and M to 128"
        )
    # slow only where the cost model makes them slow: trn1 (element-sized runs) and on-chip sources (half a copy's
    # rate); from HBM on trn2/trn3 a transpose runs at 90% of a copy's rate, and TensorE's route adds a PSUM copy
    slow = [
        i
        for i, _ in pairs
        if i.op == "dma_transpose" and i.seq in on_path and (spec.name == "trn1" or (i.reads and i.reads[0].memory in ("sbuf", "psum")))
    ]
    if slow:
        why = (
            "run at the element size's DMA efficiency on trn1"
            if spec.name == "trn1"
            else "from on-chip memory run at half a copy's DMA rate"
        )
        out.append(
            f"DMA transposes: {len(slow)} dma_transpose/load_transpose2d instructions on the critical path {why}; load normally and "
            "transpose on TensorE (nc_transpose) — Opt #10"
        )
    compute = [(i, c) for i, c in pairs if c.engine in ("vector", "scalar", "gpsimd")]
    comp_time = sum(c.busy_ns for _, c in compute) or 1.0
    compute_leads = leads("vector") or leads("scalar") or leads("gpsimd")
    narrow = sum(c.busy_ns for i, c in compute if max((a.partitions for a in _operands(i)), default=128) < 128)
    if compute and compute_leads and narrow / comp_time > 0.25:
        out.append(
            f"partitions: {100 * narrow / comp_time:.0f}% of Vector/Scalar/GpSimd time runs on fewer than 128 partitions; their cost does "
            "not shrink with fewer partitions — use all 128 (Opt #5b)"
        )
    tiny = sum(c.busy_ns for i, c in compute if max((a.elems_per_partition for a in _operands(i)), default=0) < 128)
    if compute and compute_leads and tiny / comp_time > 0.25:
        out.append(
            f"tiny instructions: {100 * tiny / comp_time:.0f}% of Vector/Scalar/GpSimd time is in instructions with < 128 elements per "
            "partition, where fixed overhead dominates; fuse or batch them (Opt #5a, #6)"
        )
    busiest = max(("vector", "scalar", "gpsimd"), key=lambda e: path_ns.get(e, 0.0))
    stat = p.engines.get(ENGINE_LABELS[busiest])
    # only where that engine, not DMA, is the more loaded resource: with the queues busier, the latency cannot fall below
    # their busy time, and moving element-wise work between engines only sends a model on a pointless rewrite
    if stat is not None and stat.active_pct > 50.0 and leads(busiest, 0.4) and (dma_stat is None or stat.active_pct >= dma_stat.active_pct):
        idle = [
            (n, st)
            for n, st in p.engines.items()
            if n in ("VectorE", "ScalarE", "GpSimd") and n != ENGINE_LABELS[busiest] and st.active_pct < 40.0
        ]
        if idle:
            hot = max((h for h in p.hot_lines if h["engine"] == ENGINE_LABELS[busiest]), key=lambda h: h["busy_us"], default=None)
            where = f" (the most at {hot['location']}, {hot['busy_us']:.2f} µs)" if hot else ""
            others = ", ".join(f"{n} {st.active_pct:.0f}%" for n, st in idle)
            out.append(
                f"engine balance: {ENGINE_LABELS[busiest]} is {stat.active_pct:.0f}% busy and does most of the critical path's work{where} "
                f"while {others} busy; move part of its element-wise work to them (ScalarE `activation` applies scale and bias too; "
                "GpSimd runs the same ALU ops more slowly) so the engines share the time"
            )
    # VectorE summing matmul results itself: adds a matmul's PSUM tile into an SBUF tile it also reads (acc += psum);
    # a PSUM-parked operand (a broadcast weight multiplied in) is not an evacuation to block
    matmul_psum = {a.region.alloc for i, _ in matmuls for a in i.writes}
    psum_adds = sum(
        1 for i, _ in pairs
        if i.op == "tensor_tensor" and i.attrs.get("alu") == "add"
        and any(a.memory == "psum" and a.region.alloc in matmul_psum for a in i.reads)
        and any(w.memory != "psum" and any(r.region.alloc == w.region.alloc for r in i.reads) for w in i.writes)
    )  # fmt: skip
    if matmuls and psum_adds * 2 >= len(matmuls) and leads("vector", 0.1):
        out.append(
            f"PSUM evacuation: {psum_adds} VectorE tensor_tensor ops read PSUM for {len(matmuls)} matmuls; accumulate several K tiles in "
            "PSUM before each evacuation (K blocking)"
        )
    spill_uids = {
        uid for uid, rec in allocs.items() if rec.get("memory") in ("hbm", "private_hbm") and rec.get("role") not in ("input", "output")
    }
    if spill_uids:
        spilled = sum(c.hbm_write for i, c in dma if any(a.region.alloc in spill_uids for a in i.writes))
        if spilled:
            out.append(
                f"spills: {spilled / 2**20:.2f} MiB written to scratch HBM tensors and read back; fuse ops to keep intermediates in SBUF (Opt #2)"
            )
    spill_traffic = sum(c.hbm_read + c.hbm_write for c in timeline.spill_costs)
    if spill_traffic:
        tiles = sum(1 for rec in allocs.values() if rec.get("spilled"))
        spill_time = sum(c.busy_ns for c in timeline.spill_costs)
        out.append(
            f"spills: {tiles} tile(s) exceed SBUF/PSUM and live in HBM; spill code moves {spill_traffic / 2**20:.2f} MiB in "
            f"{len(timeline.spill_costs)} DMAs ({spill_time / 1e3:.1f} µs of queue time); free or shrink tiles so they fit on chip (Opt #2)"
        )
    busiest_engine = max(p.engines.items(), key=lambda kv: kv[1].active_pct, default=None)
    if busiest_engine is not None and busiest_engine[1].active_pct >= 50.0:
        waits = [g for g in p.idle_gaps if g["engine"] == busiest_engine[0] and not g["waiting_for"].startswith("nothing")]
        idle = sum(g["idle_us"] for g in waits)
        if waits and idle >= 0.02 * p.latency_us:
            g = max(waits, key=lambda g: g["idle_us"])
            out.append(
                f"{busiest_engine[0]} limits the kernel but stands idle {idle:.2f} µs (the longest wait: {g['idle_us']:.2f} µs for "
                f"{g['waiting_for']}); make that work ready earlier (shorten the chain that feeds it, or split it so its first part lands first)"
            )
    if p.bottleneck.startswith("latency"):
        gap = max(p.idle_gaps, key=lambda g: g["idle_us"], default=None)
        where = f" (the longest wait: {gap['engine']} for {gap['waiting_for']})" if gap else ""
        out.append(
            "latency-bound: no engine is busy more than half the time; double-buffer (allocate tiles inside loops) so iterations overlap, "
            f"and avoid chains of tiny dependent ops{where}"
        )
    if p.below_speed_of_light:
        out.append(
            f"BELOW SPEED OF LIGHT: estimate {p.latency_us} µs < bound {p.sol_latency_us} µs — the kernel skips required work or the model "
            "was fooled; this number is not trustworthy"
        )
    out = list(dict.fromkeys(out))
    if not out:
        if p.fraction_of_sol is not None:
            out.append(f"no advice: the kernel is at {100 * p.fraction_of_sol:.1f}% of its speed of light, limited by {p.bottleneck}")
        else:
            out.append(
                f"no advice: the kernel is at {100 * p.roofline_us / max(p.latency_us, 1e-9):.1f}% of its roofline bound, limited by {p.bottleneck}"
            )
    return out


def profile_trace(
    trace: Trace,
    target: str | None = None,
    *,
    task_flops: float | None = None,
    sol: SpeedOfLight | None = None,
    precision: str = "bfloat16",
) -> tuple[Profile, Timeline]:
    """Schedule ``trace`` on its target (or ``target``) and build the profile."""
    spec = get_spec(target or trace.target or "trn2")
    tl = schedule(trace, spec)
    return build_profile(trace, tl, spec, task_flops=task_flops, sol=sol, precision=precision), tl
