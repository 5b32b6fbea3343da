"""Speed of light: the lowest latency any kernel could reach for given work on a target.

It is a bound *of the cost model*: every rate below is one of the model's own constants at its
most favourable, so no schedule the model produces for the work can be faster —

* DMA: every queue at full efficiency (:func:`~nkiagent.perf.cost.dma_efficiency` never exceeds
  its value at ``dma_full_chunk``), no fixed or issue cost. Not capped by the HBM figure of the
  spec: the model prices DMA by its queues, and on trn2 16 × 23 B/ns = 368 B/ns is above the
  362 GB/s HBM share, so an HBM-based bound sat above what a 16 KiB-per-partition stream reached.
* TensorE: one 128 × 128 × 512 bf16 matmul per 512 cycles (the ``nc_matmul`` rule's best,
  ``2·128·128`` FLOPs per cycle). FLOPs a task declares as needing fp32 accuracy
  (``fp32_matmul_flops``) count :data:`FP32_ACCURATE_PASSES` times: the cheapest scheme the
  model admits that keeps fp32-level scores is three bf16 passes (hi·hi + hi·lo + lo·hi),
  cheaper than the four of an fp32 matmul (``tests/tasks/test_precision.py`` shows two bf16
  passes fail such a task and three pass).
* Element-wise work: every output element passes through VectorE, ScalarE or GpSimd once
  (TensorE writes PSUM, which a DMA cannot read), so the bound spreads it over all three, each
  at the best per-lane rate of any rule (:func:`elementwise_per_ns`). Transcendentals are
  spread the same way at one element per lane and cycle (ScalarE's ``activation``, trn3's
  VectorE ``exponential``), so no engine assignment beats the bound.

An estimate below it means the model was fooled or a kernel skipped work, so the profile flags
it and the verifier rejects it. ``tests/perf/test_sol_bound.py`` checks the bound over random
legal kernels and the real ones (task baselines, the honest corpus, the calibration kernels).

The profile's *roofline* uses the same rates on a kernel's own FLOPs (each at its operands'
rate) and HBM bytes (:func:`roofline_ns`): how far that kernel could go without moving or
computing less, where the speed of light says how far any kernel for the task could go.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cost import dma_efficiency
from .specs import HardwareSpec

__all__ = [
    "FP32_ACCURATE_PASSES",
    "FP32_MATMUL_PASSES",
    "SpeedOfLight",
    "dma_peak_bytes_per_ns",
    "elementwise_per_ns",
    "matmul_passes",
    "roofline_ns",
    "speed_of_light",
    "transcendental_per_ns",
]

#: bf16 TensorE passes per matmul whose result must be fp32-accurate: hi·hi + hi·lo + lo·hi.
FP32_ACCURATE_PASSES = 3
#: Passes of an fp32 (or tf32) ``nc_matmul`` in the cost rule (2 with a checked 0/1 operand).
FP32_MATMUL_PASSES = 4

_LANES = 128


@dataclass(frozen=True)
class SpeedOfLight:
    """Lower bounds (ns) from each resource; ``latency_ns`` is their maximum."""

    pe_ns: float
    vector_ns: float  #: element-wise work over VectorE, ScalarE and GpSimd together
    scalar_ns: float  #: transcendental work over the same engines at one element per lane and cycle
    hbm_ns: float  #: the task's minimum HBM traffic over every DMA queue at full efficiency

    @property
    def latency_ns(self) -> float:
        return max(self.pe_ns, self.vector_ns, self.scalar_ns, self.hbm_ns)

    @property
    def bound(self) -> str:
        parts = {
            "compute (TensorE)": self.pe_ns,
            "element-wise engines": self.vector_ns,
            "transcendentals": self.scalar_ns,
            "memory (HBM/DMA)": self.hbm_ns,
        }
        return max(parts, key=parts.__getitem__)


def dma_peak_bytes_per_ns(spec: HardwareSpec) -> float:
    """The fastest the cost model moves bytes: all queues at the curve's best efficiency."""
    return spec.dma_queues * spec.dma_bytes_per_ns_per_queue * dma_efficiency(spec.dma_full_chunk, spec)


def elementwise_per_ns(spec: HardwareSpec) -> float:
    """Output elements per ns of VectorE, ScalarE and GpSimd together, each at the best per-lane rate any
    cost rule gives on the target: 4 per cycle with trn2/trn3's 16-bit modes (``tensor_copy``), else 2
    (a 16-bit ``tensor_tensor`` add or zero ``memset`` takes N/2 cycles)."""
    best = 4.0 if spec.dve_fast_modes else 2.0
    return best * (spec.dve_elems_per_cycle * spec.dve_ghz + spec.act_elems_per_cycle * spec.act_ghz + _LANES * spec.pool_ghz)


def transcendental_per_ns(spec: HardwareSpec) -> float:
    """Transcendental evaluations per ns over the same engines, one per lane and cycle each."""
    return spec.dve_elems_per_cycle * spec.dve_ghz + spec.act_elems_per_cycle * spec.act_ghz + _LANES * spec.pool_ghz


def speed_of_light(
    spec: HardwareSpec,
    *,
    matmul_flops: float = 0.0,
    fp32_matmul_flops: float = 0.0,
    vector_elems: float = 0.0,
    scalar_elems: float = 0.0,
    hbm_bytes: float = 0.0,
) -> SpeedOfLight:
    """Bounds for a task's minimum work (see the module docstring).

    ``fp32_matmul_flops`` is the part of ``matmul_flops`` whose operands must keep fp32 accuracy
    (:attr:`nkiagent.tasks.spec.Task.fp32_flops`); the rest may run on bf16 operands.
    """
    if not 0.0 <= fp32_matmul_flops <= matmul_flops:
        raise ValueError(f"fp32_matmul_flops {fp32_matmul_flops:g} must lie within matmul_flops {matmul_flops:g}")
    bf16_equivalent = matmul_flops + (FP32_ACCURATE_PASSES - 1) * fp32_matmul_flops
    pe = bf16_equivalent / spec.pe_flops_per_ns
    vec = vector_elems / elementwise_per_ns(spec)
    act = scalar_elems / transcendental_per_ns(spec)
    mem = hbm_bytes / dma_peak_bytes_per_ns(spec)
    return SpeedOfLight(pe, vec, act, mem)


def roofline_ns(spec: HardwareSpec, *, pass_flops: float, hbm_bytes: float) -> tuple[float, float]:
    """``(compute, memory)`` ns of a kernel's own work: ``pass_flops`` is its matmul FLOPs times the
    TensorE passes each takes (:func:`matmul_passes`), ``hbm_bytes`` the HBM traffic of its DMAs."""
    return pass_flops / spec.pe_flops_per_ns, hbm_bytes / dma_peak_bytes_per_ns(spec)


def matmul_passes(fp32: bool, onezero: bool) -> int:
    """TensorE passes of one ``nc_matmul`` in the cost rule: 1 for bf16/fp8, 4 for fp32/tf32, 2 with a checked 0/1 operand."""
    return (2 if onezero else FP32_MATMUL_PASSES) if fp32 else 1
