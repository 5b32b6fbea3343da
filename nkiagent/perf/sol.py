"""Speed of light: the lowest latency any kernel could reach for given work on a target.

It is computed from the cost model's own constants at their most favourable — DMA at its
best efficiency (any transfer size, every queue, no fixed cost), TensorE at the peak rate of
the narrowest matmul type the task allows, element-wise work spread over every engine that
can do it at that engine's fastest mode for the task's precision — so no schedule the cost
model produces can be below it (``tests/perf/test_sol_bound.py`` checks this over random and
real kernels). An estimate below it means the model was fooled or a kernel skipped work, so
the verifier rejects it rather than reporting an impossible number.

The profile's ``roofline_us`` uses the same rates on the kernel's *own* traffic and FLOPs
(:func:`roofline_ns`): it says how far that kernel could go without changing what it moves and
computes, while the speed of light says how far any kernel for the task could go.
"""

from __future__ import annotations

from dataclasses import dataclass

from .specs import HardwareSpec

__all__ = ["SpeedOfLight", "dma_peak_bytes_per_ns", "elementwise_peak_per_ns", "matmul_peak_flops_per_ns", "roofline_ns", "speed_of_light"]

_SIXTEEN_BIT = ("bfloat16", "float16")


@dataclass(frozen=True)
class SpeedOfLight:
    """Lower bounds (ns) from each resource; ``latency_ns`` is their maximum."""

    pe_ns: float
    vector_ns: float  #: unavoidable element-wise work over VectorE, ScalarE and GpSimd together
    scalar_ns: float  #: work only ScalarE can do (transcendentals the task declares as ``scalar_elems``)
    hbm_ns: float

    @property
    def latency_ns(self) -> float:
        return max(self.pe_ns, self.vector_ns, self.scalar_ns, self.hbm_ns)

    @property
    def bound(self) -> str:
        parts = {
            "compute (TensorE)": self.pe_ns,
            "element-wise engines": self.vector_ns,
            "ScalarE": self.scalar_ns,
            "memory (HBM/DMA)": self.hbm_ns,
        }
        return max(parts, key=parts.__getitem__)


def dma_peak_bytes_per_ns(spec: HardwareSpec) -> float:
    """The fastest the cost model ever moves bytes: every queue at full efficiency (``dma_efficiency`` ≤ 1).

    Not capped by ``spec.hbm_gbps``: the cost model prices DMA by its queues, so a bound using a lower
    HBM figure would sit above what the model lets a kernel reach (trn2: 16 × 23 = 368 B/ns > 362 GB/s).
    """
    return spec.dma_queues * spec.dma_bytes_per_ns_per_queue


def matmul_peak_flops_per_ns(spec: HardwareSpec, precision: str = "bfloat16") -> float:
    """TensorE's peak for the narrowest type allowed: bf16 (one pass) or fp32 (four passes, §4.3)."""
    return (spec.pe_peak_fp32_tflops if precision == "float32" else spec.pe_peak_bf16_tflops) * 1e3


def elementwise_peak_per_ns(spec: HardwareSpec, precision: str = "bfloat16") -> float:
    """Elements per ns VectorE, ScalarE and GpSimd process together at the cost rules' fastest.

    VectorE: 128 lanes, × 4 in trn2/trn3's 16-bit perf mode (the fastest rule, ``tensor_scalar`` /
    ``tensor_copy``), not available when the task needs fp32; ScalarE and GpSimd: 128 lanes. ScalarE
    is counted at twice its rule's rate, a margin. TensorE is not counted: what it computes lands in
    PSUM and one of these engines still passes over it.
    """
    fast = 4.0 if spec.dve_fast_modes and precision in _SIXTEEN_BIT else 1.0
    return spec.dve_elems_per_cycle * spec.dve_ghz * fast + spec.act_elems_per_cycle * spec.act_ghz * 2.0 + 128 * spec.pool_ghz


def speed_of_light(
    spec: HardwareSpec,
    *,
    matmul_flops: float = 0.0,
    vector_elems: float = 0.0,
    scalar_elems: float = 0.0,
    hbm_bytes: float = 0.0,
    precision: str = "bfloat16",
) -> SpeedOfLight:
    """Bounds for a task's minimum work: FLOPs, element-wise passes, HBM bytes (see module docstring).

    ``precision`` is the narrowest floating-point type the task's arithmetic may use
    (:attr:`nkiagent.tasks.spec.Task.precision_floor`): a task that needs fp32 matmuls is bounded
    by TensorE's fp32 rate, not the bf16 rate no correct kernel can reach.
    """
    pe = matmul_flops / matmul_peak_flops_per_ns(spec, precision) if matmul_flops else 0.0
    vec = vector_elems / elementwise_peak_per_ns(spec, precision) if vector_elems else 0.0
    act = scalar_elems / (spec.act_elems_per_cycle * spec.act_ghz * 2.0) if scalar_elems else 0.0
    mem = hbm_bytes / dma_peak_bytes_per_ns(spec) if hbm_bytes else 0.0
    return SpeedOfLight(pe, vec, act, mem)


def roofline_ns(spec: HardwareSpec, *, bf16_flops: float, fp32_flops: float, hbm_bytes: float) -> tuple[float, float]:
    """``(compute, memory)`` ns of a kernel's own matmul FLOPs (each at its type's peak) and HBM bytes."""
    compute = bf16_flops / matmul_peak_flops_per_ns(spec) + fp32_flops / matmul_peak_flops_per_ns(spec, "float32")
    return compute, hbm_bytes / dma_peak_bytes_per_ns(spec)
