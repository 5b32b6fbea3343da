"""Speed of light: the lowest latency any kernel could reach for given work on a target.

An estimate below it means the cost model was fooled (or a kernel skipped work), so the
profile flags it rather than reporting an impossible number.
"""

from __future__ import annotations

from dataclasses import dataclass

from .specs import HardwareSpec

__all__ = ["SpeedOfLight", "speed_of_light"]


@dataclass(frozen=True)
class SpeedOfLight:
    """Lower bounds (ns) from each resource; ``latency_ns`` is their maximum."""

    pe_ns: float
    vector_ns: float
    scalar_ns: float
    hbm_ns: float

    @property
    def latency_ns(self) -> float:
        return max(self.pe_ns, self.vector_ns, self.scalar_ns, self.hbm_ns)

    @property
    def bound(self) -> str:
        parts = {"compute (TensorE)": self.pe_ns, "VectorE": self.vector_ns, "ScalarE": self.scalar_ns, "memory (HBM/DMA)": self.hbm_ns}
        return max(parts, key=parts.__getitem__)


def speed_of_light(
    spec: HardwareSpec,
    *,
    matmul_flops: float = 0.0,
    vector_elems: float = 0.0,
    scalar_elems: float = 0.0,
    hbm_bytes: float = 0.0,
    fp32_matmul: bool = False,
) -> SpeedOfLight:
    """Bounds from TensorE peak, Vector/Scalar lane throughput, and the slower of HBM and DMA bandwidth.

    ``vector_elems``/``scalar_elems`` count elementwise work that cannot be avoided (e.g. one
    pass over the output); they are divided by 128 lanes × clock (× 4 for trn2/3 16-bit modes
    is not assumed: the bound stays safe for fp32).
    """
    peak = spec.pe_peak_fp32_tflops if fp32_matmul else spec.pe_peak_bf16_tflops
    pe = matmul_flops / (peak * 1e3) if matmul_flops else 0.0
    fast = 4.0 if spec.dve_fast_modes else 1.0
    vec = vector_elems / (spec.dve_elems_per_cycle * spec.dve_ghz * fast) if vector_elems else 0.0
    act = scalar_elems / (spec.act_elems_per_cycle * spec.act_ghz * 2.0) if scalar_elems else 0.0
    bw = min(spec.hbm_gbps, spec.dma_bytes_per_ns)  # GB/s == B/ns
    mem = hbm_bytes / bw if hbm_bytes else 0.0
    return SpeedOfLight(pe, vec, act, mem)
