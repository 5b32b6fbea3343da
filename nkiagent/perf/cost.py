"""Cost of one instruction on its engine, from the documented per-instruction formulas.

Compute-engine costs are engine cycles from the op's rule in :mod:`.rules` (keyed by the names
the emulator's registry declares; no op is priced without one), converted to ns with the
engine's clock; DMA costs come from bytes, bytes per contiguous chunk, queues used, per-queue
bandwidth and a fixed latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..emu.dtypes import as_dtype
from ..emu.instructions.movement import DmaAttrs
from ..emu.registry import REGISTRY, CostAttrs, NoAttrs
from ..emu.trace import Access, Instruction, is_data
from .rules import flops, rule_for
from .specs import HardwareSpec

__all__ = [
    "COMPUTE_ENGINES",
    "SYNC_OPS",
    "Cost",
    "UnpricedInstruction",
    "contiguous_run_bytes",
    "dma_efficiency",
    "instruction_cost",
    "itemsize",
]


@dataclass(slots=True)
class Cost:
    """Engine occupancy and result latency of one instruction."""

    engine: str  #: ``tensor``, ``vector``, ``scalar``, ``gpsimd``, ``dma``, ``sync``
    busy_ns: float  #: time the engine (or each of the DMA queues) is occupied
    latency_ns: float  #: time from start until the result is visible (≥ busy for DMA)
    cycles: float = 0.0
    queues: int = 0  #: DMA queues used
    flops: float = 0.0
    hbm_read: int = 0
    hbm_write: int = 0
    chunk: int | None = None  #: DMA: bytes of the shortest contiguous run over its accesses (what the profile's histogram and advice count)


_ITEMSIZE: dict[str, int] = {}


def itemsize(dtype_name: str) -> int:
    size = _ITEMSIZE.get(dtype_name)
    if size is None:
        size = 4 if dtype_name == "tfloat32" else as_dtype(dtype_name).itemsize
        _ITEMSIZE[dtype_name] = size
    return size


def contiguous_run_bytes(a: Access) -> int:
    """Bytes of the longest row-major contiguous run at the end of an access (a DMA chunk).

    An indirect access moves its bytes in ``a.chunks`` descriptors (the runs of consecutive
    addresses within its indexed rows, as the emulator counted them): their mean is its chunk.
    """
    isz = itemsize(a.dtype)
    if a.indirect:
        return max(isz, a.nbytes // a.chunks) if a.chunks else isz
    if not a.strides:
        return isz * (a.shape[-1] if a.shape else 1)
    run, expect = isz, 1
    dims = list(zip(a.shape, a.strides))
    if a.memory in ("sbuf", "psum") and dims:
        dims = dims[1:]  # a chunk never crosses a partition
    for n, s in reversed(dims):
        if n == 1:
            continue
        if s != expect:
            break
        run *= n
        expect *= n
    return run


def _strided_penalty(accesses: tuple[Access, ...]) -> float:
    """Minor-dim stride above 16 bytes halves SBUF/PSUM bandwidth (§4.3)."""
    for a in accesses:
        if a.memory in ("sbuf", "psum") and a.strides and a.shape and a.shape[-1] > 1 and abs(a.strides[-1]) * itemsize(a.dtype) > 16:
            return 2.0
    return 1.0


def dma_efficiency(chunk: int, spec: HardwareSpec) -> float:
    """Fraction of peak DMA bandwidth reached with ``chunk`` contiguous bytes per descriptor.

    Calibrated: up to ``dma_mid_chunk`` bytes the trn1 matmul tutorial moves data at ~40% of
    peak (0.25–1 KiB chunks, §4.5a); efficiency then rises linearly in log2(chunk) to 100% at
    ``dma_full_chunk`` (the DMA guide: ≥ 4 KiB saturates) and falls in proportion below
    ``dma_small_chunk`` (overhead-bound, §4.2).
    """
    lo = spec.dma_mid_efficiency
    if chunk < spec.dma_small_chunk:
        return max(lo * chunk / spec.dma_small_chunk, 1e-3)
    if chunk <= spec.dma_mid_chunk:
        return lo
    if chunk >= spec.dma_full_chunk:
        return 1.0
    frac = math.log2(chunk / spec.dma_mid_chunk) / math.log2(spec.dma_full_chunk / spec.dma_mid_chunk)
    return lo + (1.0 - lo) * frac


#: Bytes one DMA queue takes of a transfer (§4.2: the guide's 128 × 1024 fp32 load is 16 transfers of 8 partitions × 4 KiB)
_QUEUE_TRANSFER_BYTES = 32 * 1024


def _queue_share(sides: list[Access], nbytes: int) -> int:
    """Queues a DMA spreads over: one per 8 partitions of its on-chip side (§4.2's example), else one
    per 32 KiB it moves. Not one per run of an HBM side: that would give a copy more queues for being
    cut into more pieces (an HBM → HBM gather of consecutive rows more than the same copy made directly)."""
    on_chip = [a.partitions for a in sides if a.memory in ("sbuf", "psum")]
    return math.ceil(max(on_chip) / 8) if on_chip else math.ceil(nbytes / _QUEUE_TRANSFER_BYTES)


def _dma_cost(ins: Instruction, attrs: CostAttrs, spec: HardwareSpec) -> Cost:
    """Queues, chunk efficiency, bytes and time of one DMA.

    Its bytes cross the queues once per side that lies in HBM (and at least once): an HBM → HBM
    copy reads and writes HBM, as much traffic as the HBM → SBUF → HBM pair it replaces, and HBM
    bandwidth per NeuronCore is about that of its 16 queues (§4.2), while an on-chip side is
    SBUF's own port.
    """
    src = ins.reads[0] if ins.reads else None
    dst = ins.writes[0] if ins.writes else None
    sides = [a for a in (src, dst) if a is not None]
    nbytes = max((a.nbytes for a in sides), default=0)
    chunk = min((contiguous_run_bytes(a) for a in sides), default=nbytes) or 1
    queues = max(1, min(spec.dma_queues, _queue_share(sides, nbytes)))
    eff = dma_efficiency(chunk, spec)
    if ins.op == "dma_transpose":
        from_hbm = src is not None and src.memory not in ("sbuf", "psum")
        if spec.name == "trn1":
            eff = dma_efficiency(itemsize(src.dtype if src else "float32"), spec)
        else:
            eff *= 0.9 if from_hbm else 0.5
    hbm_read = src.nbytes if src is not None and src.memory not in ("sbuf", "psum") else 0
    hbm_write = dst.nbytes if dst is not None and dst.memory not in ("sbuf", "psum") else 0
    moved = max(nbytes, hbm_read + hbm_write)
    transfer = moved / (queues * spec.dma_bytes_per_ns_per_queue * eff)
    fixed = spec.dma_hwdge_fixed_ns if isinstance(attrs, DmaAttrs) and attrs.dge_mode == 2 else spec.dma_fixed_ns
    accesses = ins.reads + ins.writes
    shortest = min(contiguous_run_bytes(a) for a in accesses) if accesses else None
    return Cost(
        "dma", spec.dma_issue_ns + transfer, fixed + transfer, queues=queues, hbm_read=hbm_read, hbm_write=hbm_write, chunk=shortest
    )


def _data_only(ins: Instruction) -> Instruction:
    """``ins`` without its register and addressing accesses (:func:`~nkiagent.emu.trace.is_data`):
    they order instructions, but what an instruction costs depends on the data it touches alone."""
    if all(map(is_data, ins.reads)) and all(map(is_data, ins.writes)):
        return ins
    return replace(ins, reads=tuple(filter(is_data, ins.reads)), writes=tuple(filter(is_data, ins.writes)))


#: The engines with an instruction stream of compute work.
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
#: Instructions the Sync engine's sequencer runs: register bookkeeping, no data-parallel compute.
SYNC_OPS = frozenset({"register_alloc", "register_move", "register_load", "register_store"})


class UnpricedInstruction(ValueError):
    """An instruction on an engine the model has no lane for (or compute work on the Sync engine).

    Raised instead of guessing: pricing it on a made-up lane would add parallelism the
    hardware does not have, and whatever a reward is computed from will find that.
    """


def instruction_cost(ins: Instruction, spec: HardwareSpec) -> Cost:
    """Occupancy and latency of ``ins`` on ``spec`` (see module docstring)."""
    ins = _data_only(ins)
    engine = ins.engine
    if engine != "dma" and engine not in COMPUTE_ENGINES and not (engine == "sync" and ins.op in SYNC_OPS):
        raise UnpricedInstruction(
            f"{ins.location}: cannot price {ins.op} on engine {engine!r}: the model prices compute on "
            f"{', '.join(COMPUTE_ENGINES)}, data movement on dma and only register operations on sync"
        )
    rule = rule_for(ins.op)
    if rule is None:
        raise UnpricedInstruction(f"{ins.location}: no cost rule for {ins.op}: every instruction needs one in nkiagent/perf/rules.py")
    declared = REGISTRY.get(ins.op)
    if declared is not None and engine not in declared.engines:
        raise UnpricedInstruction(
            f"{ins.location}: cannot price {ins.op} on engine {engine!r}: the ISA runs it on {'|'.join(declared.engines)} only"
        )
    attrs = (declared.attrs if declared is not None else NoAttrs).of(ins.op, ins.attrs)
    if rule.cycles is None:
        if engine != "dma":
            raise UnpricedInstruction(f"{ins.location}: cannot price the DMA {ins.op} on engine {engine!r}: DMAs run on the dma queues")
        return _dma_cost(ins, attrs, spec)
    if engine == "dma":
        raise UnpricedInstruction(f"{ins.location}: cannot price the compute instruction {ins.op} on the dma queues")
    cycles = rule.cycles(ins, attrs, spec)
    if engine != "tensor":
        cycles = cycles * _strided_penalty(ins.reads + ins.writes) + spec.access_overhead_cycles
    ns = cycles / spec.engine_ghz(engine)
    return Cost(engine, ns, ns, cycles=cycles, flops=flops(ins, attrs))
