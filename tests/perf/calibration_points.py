"""The calibration set: published hardware measurements and the kernels that reproduce them.

Shared by ``tests/perf/test_calibration.py`` (which asserts the acceptance criteria of issue 3)
and ``benchmarks/calibrate.py`` (which prints every point, hit or miss). Sources are the
tags of ``nki-reference.md`` §4.5:

* (a) the trn1 matmul tutorial, ``[4096, 8192] · [8192, 8192]`` bf16: 51.80 / 42.96 / 22.07 /
  6.97 ms — each estimate within ±30%, in the same order;
* (g) the trn2 2048³ bf16 matmul MFU ladder: ~16 / 59 / 83.7 / 89.5 % — each within 15 MFU
  points, in the same order;
* (b) the fused Mamba tutorial (fp32, trn1-era): v1 → v2 at 4096 channels / seq_len 512
  (2.34 → 1.61 ms, −31%) and v2 → v3 at seq_len 8192 (53.33 → 27.8 ms, −48%) — the same
  direction and a similar size (our relative change within a factor of 2 of the published);
* (c) the LayerNorm tutorial on trn1, ``(300, 1000)`` fp32: v2 faster than v1 (−14.9%).

Everything runs in timing-only mode. A :class:`Run` may stand for its published shape through
a smaller one (``quick``): the kernels here are loops of independent tiles along the reduced
axis, so the estimate scales with it (``scale``); ``benchmarks/calibrate.py`` without
``--quick`` runs every published shape in full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nkiagent import emu
from nkiagent.perf import profile_kernel

MATMUL_LATENCY_TOLERANCE = 0.30  #: trn1 ladder: |estimate / measured − 1| ≤ 30%
MFU_TOLERANCE_POINTS = 15.0  #: trn2 ladder: |MFU estimate − MFU published| ≤ 15 points
SIZE_FACTOR = 2.0  #: an improvement is "of similar size" within this factor of the published one


@dataclass(frozen=True)
class Run:
    """One kernel at one shape on one target, with the published number it reproduces."""

    key: str
    label: str  #: the published step
    kernel: Callable[..., Any]
    shape: str  #: the published shape, for the table
    args: tuple[Any, ...]  #: ShapeSpecs actually run
    target: str
    published: float
    unit: str  #: ``ms``, ``us`` or ``MFU%``
    scale: float = 1.0  #: estimate at the published shape = ``scale`` × the estimate of ``args``


@dataclass
class Estimate:
    run: Run
    value: float  #: in ``run.unit``, at the published shape
    latency_us: float  #: at the published shape
    profile: Any
    seconds: float = 0.0


def estimate(run: Run) -> Estimate:
    """Profile ``run`` (timing-only) and express the estimate in the published unit."""
    import time

    t0 = time.perf_counter()
    prof = profile_kernel(run.kernel, run.args, target=run.target, timing_only=True).profile
    latency_us = prof.latency_us * run.scale
    value = {"ms": latency_us / 1e3, "us": latency_us, "MFU%": prof.mfu_pct}[run.unit]
    return Estimate(run, value, latency_us, prof, time.perf_counter() - t0)


def _specs(*shapes: tuple[tuple[int, ...], str]) -> tuple[Any, ...]:
    return tuple(emu.ShapeSpec(s, d) for s, d in shapes)


# --------------------------------------------------------------------------------------------
# (a) trn1 matmul tutorial
# --------------------------------------------------------------------------------------------
def trn1_matmul_ladder(quick: bool = False) -> list[Run]:
    """The four tutorial steps at lhsT [8192, 4096], rhs [8192, 8192].

    Quick mode runs the two slowest (~15–25 s each) at M = 1024 and scales by 4: they loop over
    independent 128-row M tiles, and the full and quarter estimates agree to 0.1%. Step 4's M
    block is all 4096 rows, so it always runs in full.
    """
    from tests.emu.kernels import matmul

    steps = [
        ("tiled", "original tiled", matmul.matmul_tiled, 51.80),
        ("hoisted", "opt 1: hoist loads", matmul.matmul_hoisted, 42.96),
        ("block_free", "opt 2: block free dims", matmul.matmul_block_free, 22.07),
        ("fully_optimized", "opt 3: block K + DMA", matmul.matmul_fully_optimized, 6.97),
    ]
    runs = []
    for key, label, kernel, ms in steps:
        m = 1024 if quick and key in ("tiled", "hoisted") else 4096
        args = _specs(((8192, m), "bfloat16"), ((8192, 8192), "bfloat16"))
        runs.append(Run(f"trn1-mm-{key}", label, kernel, "[4096,8192]x[8192,8192] bf16", args, "trn1", ms, "ms", 4096 / m))
    return runs


# --------------------------------------------------------------------------------------------
# (g) trn2 matmul MFU ladder
# --------------------------------------------------------------------------------------------
def trn2_matmul_ladder(quick: bool = False) -> list[Run]:
    """The four published steps at 2048³ bf16 on trn2 (always the full shape: each runs in about a second)."""
    from tests.perf.kernels import matmul_trn2 as m2

    steps = [
        ("sunk", "loads in inner K, single buffer", m2.matmul_sunk_single_buffer, 16.0),
        ("hoisted", "PSUM-tiled, hoisted loads", m2.matmul_psum_tiled_hoisted, 59.0),
        ("psum_x2", "PSUM accumulator double-buffered", m2.matmul_psum_double_buffered, 83.7),
        ("streaming", "streaming double-buffered loads", m2.matmul_streaming, 89.5),
    ]
    args = _specs(((2048, 2048), "bfloat16"), ((2048, 2048), "bfloat16"))
    return [Run(f"trn2-mm-{key}", label, kernel, "2048^3 bf16", args, "trn2", mfu, "MFU%") for key, label, kernel, mfu in steps]


# --------------------------------------------------------------------------------------------
# (b) fused Mamba
# --------------------------------------------------------------------------------------------
def _mamba_args(channels: int, seq_len: int, state: int = 16, batch: int = 1) -> tuple[Any, ...]:
    f = "float32"
    return _specs(
        ((batch, channels, seq_len), f),
        ((batch, channels, seq_len), f),
        ((channels, state), f),
        ((batch, state, seq_len), f),
        ((batch, state, seq_len), f),
    )


def mamba_runs(quick: bool = False) -> list[Run]:
    """v1 at 256 channels (absolute, for information), v1/v2 at 4096 × 512, v2/v3 at 4096 × 8192.

    Channel tiles are independent, so quick mode runs seq_len 8192 with 512 channels and scales
    by 8 (v2 42.36 vs 42.18 ms, v3 25.42 vs 25.34 ms in full: within 0.5%).
    """
    from tests.perf.kernels import mamba

    long_ch = 512 if quick else 4096
    out = [
        Run("mamba-v1-c256", "v1 (toy shape)", mamba.mamba_v1, "c256 L512", _mamba_args(256, 512), "trn1", 172.93, "us"),
        Run("mamba-v1-c4096", "v1", mamba.mamba_v1, "c4096 L512", _mamba_args(4096, 512), "trn1", 2.34, "ms"),
        Run("mamba-v2-c4096", "v2: loop reordering", mamba.mamba_v2, "c4096 L512", _mamba_args(4096, 512), "trn1", 1.61, "ms"),
        Run(
            "mamba-v2-L8192",
            "v2 (long seq)",
            mamba.mamba_v2,
            "c4096 L8192",
            _mamba_args(long_ch, 8192),
            "trn1",
            53.33,
            "ms",
            4096 / long_ch,
        ),
        Run(
            "mamba-v3-L8192",
            "v3: seq_len tiling",
            mamba.mamba_v3,
            "c4096 L8192",
            _mamba_args(long_ch, 8192),
            "trn1",
            27.8,
            "ms",
            4096 / long_ch,
        ),
    ]
    return out


#: (before, after) pairs whose published change the estimates must follow.
MAMBA_STEPS = [("mamba-v1-c4096", "mamba-v2-c4096"), ("mamba-v2-L8192", "mamba-v3-L8192")]


# --------------------------------------------------------------------------------------------
# (c) LayerNorm
# --------------------------------------------------------------------------------------------
def layernorm_runs(quick: bool = False) -> list[Run]:
    """v1 and v2 at (300, 1000) fp32 on trn1 (only their ratio is compared)."""
    from tests.perf.kernels import layernorm

    args = _specs(((300, 1000), "float32"), ((1000,), "float32"), ((1000,), "float32"))
    return [
        Run("ln-v1", "v1: plain reductions", layernorm.layernorm_v1, "(300,1000) fp32", args, "trn1", 2311.0, "us"),
        Run("ln-v2", "v2: bn_stats/bn_aggr", layernorm.layernorm_v2, "(300,1000) fp32", args, "trn1", 1969.0, "us"),
    ]


LAYERNORM_STEPS = [("ln-v1", "ln-v2")]


# --------------------------------------------------------------------------------------------
# Criteria
# --------------------------------------------------------------------------------------------
def latency_ok(e: Estimate) -> bool:
    return abs(e.value / e.run.published - 1.0) <= MATMUL_LATENCY_TOLERANCE


def mfu_ok(e: Estimate) -> bool:
    return abs(e.value - e.run.published) <= MFU_TOLERANCE_POINTS


def same_order(estimates: list[Estimate]) -> bool:
    """Do the estimates rank the steps as the published values do (strictly)?"""
    pub = [e.run.published for e in estimates]
    est = [e.value for e in estimates]
    return all((p2 > p1) == (e2 > e1) and e2 != e1 for p1, p2, e1, e2 in zip(pub, pub[1:], est, est[1:]))


def change(before: float, after: float) -> float:
    """Relative change ``after / before − 1`` (negative = faster)."""
    return after / before - 1.0


def step_ok(before: Estimate, after: Estimate, *, size_factor: float | None = SIZE_FACTOR) -> tuple[bool, bool]:
    """``(same direction, similar size)`` of the estimated change vs the published one."""
    pub = change(before.run.published, after.run.published)
    ours = change(before.latency_us, after.latency_us)
    direction = (pub < 0) == (ours < 0) and ours != 0
    size = direction and (size_factor is None or 1 / size_factor <= ours / pub <= size_factor)
    return direction, size
