"""Hardware specifications per Trainium generation, each number with its source.

Sources are the tags of ``nki-reference.md`` (§4.1 engines, §4.2 memory/DMA, §4.3
instruction formulas). Numbers marked ``calibrated`` were fitted once against the
published trn1 matmul-tutorial latencies (§4.5a) and are reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MODEL_VERSION", "SPECS", "HardwareSpec", "get_spec"]

#: Bumped whenever a formula or constant changes, so stored estimates say which model made them.
MODEL_VERSION = "nkiagent-cost-0.3"  # 0.3: DMA descriptors per index, HBM→HBM both ways, no sync compute lane (issue 18)


@dataclass(frozen=True)
class HardwareSpec:
    """One NeuronCore of a target: engine clocks and widths, DMA and HBM, and cost constants."""

    name: str
    pe_ghz: float
    dve_ghz: float
    act_ghz: float
    pool_ghz: float
    pe_peak_bf16_tflops: float
    pe_peak_fp32_tflops: float
    dma_queues: int
    dma_bytes_per_ns_per_queue: float
    hbm_gbps: float  #: per NeuronCore
    dve_fast_modes: bool  #: trn2/trn3 VectorE 2×/4× modes for 16-bit data
    dve_elems_per_cycle: int = 128
    act_elems_per_cycle: int = 128
    min_ii: int = 64  #: engine cycles, MIN_II of §4.3
    access_overhead_cycles: int = 60  #: per SBUF/PSUM-accessing instruction (§4.3, NC-v2)
    #: Semaphore wait paid by an instruction whose start is set by a dependence (264-cycle dependent
    #: ACT II = 64 MIN_II + 60 access + 140, §4.3). Not paid between TensorE instructions: back-to-back
    #: matmuls accumulating into one PSUM bank are pipelined by the engine (§3.4 near-memory
    #: accumulation; §4.3 gives the back-to-back matmul II as max(N, 64) with no extra term).
    dependency_overhead_cycles: int = 140
    gpsimd_start_cycles: int = 150
    dma_fixed_ns: float = 1300.0  #: descriptor/semaphore-to-start latency of a DMA (§4.2)
    dma_hwdge_fixed_ns: float = 600.0
    dma_issue_ns: float = 64.0  #: per-DMA-instruction occupancy of its queues (descriptor issue)
    dma_small_chunk: int = 256  #: below this many contiguous bytes a DMA is overhead-bound (§4.2)
    dma_mid_chunk: int = 1024  #: up to here: calibrated mid efficiency
    dma_full_chunk: int = 4096  #: from here: full bandwidth (§4.2 "≥ 4 KiB saturates")
    dma_mid_efficiency: float = 0.40  #: calibrated: trn1 matmul tutorial moves 0.25–1 KiB chunks at ~100 B/ns
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def pe_flops_per_ns(self) -> float:
        """TensorE's bf16 peak as the cost rule prices it (2·128·128 FLOPs per cycle); ``pe_peak_bf16_tflops`` is the published figure."""
        return 2.0 * 128 * 128 * self.pe_ghz

    @property
    def dma_bytes_per_ns(self) -> float:
        return self.dma_queues * self.dma_bytes_per_ns_per_queue

    def engine_ghz(self, engine: str) -> float:
        return {"tensor": self.pe_ghz, "vector": self.dve_ghz, "scalar": self.act_ghz, "gpsimd": self.pool_ghz, "sync": self.act_ghz}.get(engine, 1.0)


_COMMON_SOURCES = {
    "clocks": "nki-reference §4.1 (SDK nki/guides/architecture/*.rst, neuron-core-v{2,3}.rst)",
    "pe_peak": "nki-reference §4.1 TensorE peak (128·128·2·f_PE)",
    "dma": "nki-reference §4.2 (nki-dma-bandwidth-guide.rst): 16 queues per NC; 17/23/33 B/ns per queue; ~1.3 µs fixed per DMA",
    "hbm": "nki-reference §4.2: device HBM bandwidth / NeuronCores (derived)",
    "formulas": "nki-reference §4.3 (SDK@v2.26.1 isa 'Estimated instruction cost')",
    "dma_mid_efficiency": "calibrated against the trn1 matmul tutorial ladder (§4.5a): 5.0 / 4.1 / 2.1 GiB moved in 51.8 / 43.0 / 22.1 ms",
    "dependency_overhead_cycles": "nki-reference §4.3 (dependent 1-element ScalarE ops at an II of 264 cycles); exempt for "
    "TensorE → TensorE (PSUM accumulation chains, §3.4/§4.3) — checked by benchmarks/calibrate.py: trn1 fully-optimized matmul "
    "8.55 → 7.56 ms (measured 6.97), trn2 double-buffered-PSUM ladder step 71.5 → 85.9% MFU (published 83.7%)",
}

SPECS: dict[str, HardwareSpec] = {
    "trn1": HardwareSpec("trn1", 2.8, 1.12, 1.4, 1.4, 91.75, 22.9, 16, 17.0, 410.0, False, sources=_COMMON_SOURCES),
    "trn2": HardwareSpec("trn2", 2.4, 0.96, 1.2, 1.2, 78.6, 19.7, 16, 23.0, 362.0, True, sources=_COMMON_SOURCES),
    "trn3": HardwareSpec("trn3", 2.4, 1.2, 1.2, 1.2, 78.6, 19.7, 16, 33.0, 590.0, True, act_elems_per_cycle=128, sources=_COMMON_SOURCES),
}


def get_spec(target: str) -> HardwareSpec:
    """The spec of ``trn1``/``trn2``/``trn3`` (aliases resolved by the emulator's target table)."""
    from ..emu.targets import get_target

    return SPECS[get_target(target).name]
