"""The cost model's published numbers: the DMA cost curve and the per-op engine cost table.

Each number is :func:`~nkiagent.perf.cost.instruction_cost` of an instruction the emulator
traced from a small kernel on the target, never a constant restated by hand, so the
cheat-sheet (:mod:`nkiagent.agent.cheatsheet`) and the ``nki_docs`` cost pages that print these
tables say exactly what the model charges (``tests/perf/test_tables.py`` checks them against
the formulas). The kernels run timing-only: no data, a few milliseconds per table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..emu import ShapeSpec, Trace, run_kernel
from ..emu import isa as nisa
from ..emu import language as nl
from .cost import instruction_cost
from .specs import get_spec

__all__ = ["DMA_CURVE_BYTES", "Priced", "dma_cases", "dma_curve", "engine_table"]

#: Contiguous bytes per partition of the curve's 128-partition HBM → SBUF loads.
DMA_CURVE_BYTES = (64, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536)
_COLS = 16384  #: fp32 columns of the HBM input the kernels read


@dataclass(frozen=True)
class Priced:
    """One traced instruction and what the cost model charges for it."""

    label: str
    op: str
    engine: str
    busy_ns: float  #: engine (or each DMA queue's) occupancy
    latency_ns: float  #: until its result is visible (a DMA's fixed cost included)
    nbytes: int  #: bytes moved (DMAs: the larger side)
    chunk: int | None  #: DMAs: contiguous bytes per partition of the shortest side
    queues: int

    @property
    def bytes_per_ns(self) -> float:
        """A DMA's effective rate over its whole latency (fixed cost included)."""
        return self.nbytes / self.latency_ns if self.latency_ns else 0.0


def _priced(target: str, body: Callable[[Any, Any], list[str]], dtype: str = "float32") -> list[Priced]:
    """Trace ``body(a, out)`` (``a``: an HBM input [128, 16384]; it returns one label per instruction it
    issues after its set-up ones, which it issues first) and price the labelled instructions."""
    labels: list[str] = []

    def kernel(a: Any) -> Any:
        out = nl.ndarray((128, _COLS), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0:1, _COLS - 1 : _COLS], src=a[0:1, 0:1])  # an output is written
        labels.extend(body(a, out))
        return out

    trace = Trace()
    run_kernel(kernel, (ShapeSpec((128, _COLS), dtype),), target=target, trace=trace, timing_only=True)
    spec = get_spec(target)
    rows = []
    for label, ins in zip(labels, trace.instructions[len(trace.instructions) - len(labels) :]):
        c = instruction_cost(ins, spec)
        nbytes = max((x.nbytes for x in ins.reads + ins.writes), default=0)
        rows.append(Priced(label, ins.op, c.engine, c.busy_ns, c.latency_ns, nbytes, c.chunk, c.queues))
    return rows


def dma_curve(target: str) -> list[Priced]:
    """A 128-partition fp32 HBM → SBUF load of each of :data:`DMA_CURVE_BYTES` contiguous bytes per partition."""

    def body(a: Any, out: Any) -> list[str]:
        for b in DMA_CURVE_BYTES:
            t = nl.ndarray((128, b // 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, 0 : b // 4])
        return [f"{b} B" for b in DMA_CURVE_BYTES]

    return _priced(target, body)


def dma_cases(target: str) -> list[Priced]:
    """The access patterns priced differently from a plain load, each moving 2 KiB per partition (or row)."""

    def body(a: Any, out: Any) -> list[str]:
        idx_f = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=idx_f, pattern=[[0, 1]], offset=0, channel_multiplier=1)
        idx = nl.ndarray((128, 1), nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=idx, src=idx_f)
        row = nl.ndarray((1, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=a[0:1, 0:512])
        # the priced instructions
        t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 0:512])
        nisa.dma_copy(dst=out[:, 0:512], src=t)
        nisa.dma_copy(dst=out[:, 512:1024], src=a[:, 512:1024])
        s = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[:, 0:1024:2])
        g = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=a.ap([[_COLS, 128], [1, 512]], offset=0, vector_offset=idx, indirect_dim=0))
        n = nl.ndarray((8, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n, src=a[0:8, 0:512])
        nl.broadcast_to(row, (128, 512))
        tt = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=tt, src=a[0:128, 0:128])
        return [
            "HBM → SBUF, 128 × 2 KiB",
            "SBUF → HBM, 128 × 2 KiB",
            "HBM → HBM, 128 × 2 KiB (read and write)",
            "strided: every other fp32 (4 B runs)",
            "gather: 128 indexed rows × 2 KiB",
            "8 partitions × 2 KiB (1 queue)",
            "nl.broadcast_to [1, 512] → [128, 512] (SBUF → SBUF)",
            "dma_transpose 128 × 128 fp32 from HBM",
        ]

    return _priced(target, body)


def engine_table(target: str, dtype: str = "float32") -> list[Priced]:
    """One instruction of each common kind on [128, 512] ``dtype`` SBUF tiles (PSUM where named)."""

    def body(a: Any, out: Any) -> list[str]:
        dt = a.dtype
        x = nl.ndarray((128, 512), dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[:, 0:512])
        y = nl.ndarray((128, 512), dt, buffer=nl.sbuf)
        col = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=col, value=1.0)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        w = nl.ndarray((128, 128), dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=w, src=a[:, 0:128])
        ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        pt = nl.ndarray((128, 128), dt if target != "trn1" else nl.float32, buffer=nl.psum)
        # the priced instructions
        nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.add)
        nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.maximum)
        nisa.tensor_tensor(dst=y, data1=x, data2=p, op=nl.add)
        nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.add, engine=nisa.engine.gpsimd)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=col)
        nisa.tensor_copy(dst=y, src=x)
        nisa.tensor_copy(dst=y, src=p)
        nisa.tensor_copy(dst=y, src=x, engine=nisa.engine.gpsimd)
        nisa.activation(dst=y, op=nl.exp, data=x)
        nisa.activation(dst=y, op=nl.exp, data=p)
        nisa.tensor_reduce(dst=col, op=nl.add, data=x, axis=1)
        nisa.memset(dst=y, value=0.0)
        nisa.iota(dst=col, pattern=[[0, 1]], offset=0, channel_multiplier=1)
        nisa.reciprocal(dst=y, data=x)
        nisa.nc_matmul(dst=ps, stationary=w, moving=x)
        nisa.nc_transpose(dst=pt, data=w)
        return [
            "tensor_tensor add (VectorE)",
            "tensor_tensor maximum (VectorE)",
            "tensor_tensor add, one operand in PSUM",
            "tensor_tensor add on GpSimd",
            "tensor_scalar multiply by a [P, 1] column",
            "tensor_copy SBUF → SBUF (VectorE)",
            "tensor_copy PSUM → SBUF",
            "tensor_copy on GpSimd",
            "activation exp (ScalarE)",
            "activation exp reading PSUM",
            "tensor_reduce add along the free dim",
            "memset 0",
            "iota [128, 1] (GpSimd)",
            "reciprocal (VectorE)",
            "nc_matmul 128 × 128 × 512",
            "nc_transpose 128 × 128 (TensorE)",
        ]

    return _priced(target, body, dtype)
