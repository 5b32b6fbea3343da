"""Emulator speed and memory against the targets of issue 2 (run by hand, never by the tests).

    python benchmarks/bench_emulator.py [--repeats 7] [--kernel fully_optimized] [--profile]

Three measurements, each reported as the median of ``--repeats`` runs:

(a) a bf16 ``[2048, 2048]ᵀ · [2048, 2048]`` matmul through a tutorial matmul kernel in the
    emulator vs NumPy's fp32 ``a.T @ b`` of the same size. Target: emulator / NumPy ≤ 2.0.
(b) dispatch overhead: a kernel looping 100 000 ``nisa.tensor_tensor`` ops on ``(128, 64)``
    fp32 tiles, in µs per instruction with a trace being recorded (target ≤ 20 µs) and,
    for information, without one.
(c) peak RSS of the 2048³ run (traced), measured in a fresh subprocess with ``ru_maxrss``,
    against 3 × the fp32 bytes of its inputs and output plus the interpreter's baseline,
    which the subprocess measures after importing NumPy and the emulator, before allocating.

``--profile`` adds a cProfile summary of one run of (a) and of a 20 000-op (b) loop, to see
where the time goes when a target is missed. Wall-clock numbers are only as good as the
machine is quiet (the load average is printed); on a busy machine, multithreaded BLAS makes
the emulator's many small GEMMs erratic, and ``OPENBLAS_NUM_THREADS=1`` shows the stable
single-threaded picture (it slows the NumPy reference too).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the matmul kernels live in tests/emu/kernels/

from nkiagent import emu, shim

shim.install(force=True)

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl

from tests.emu.kernels import matmul

MATMUL_SIZE = 2048
MATMUL_RATIO_TARGET = 2.0
DISPATCH_OPS = 100_000
DISPATCH_TARGET_US = 20.0
RSS_FACTOR = 3


@nki.jit
def tensor_tensor_loop(a, b, n_ops):
    """``n_ops`` back-to-back VectorE adds on one ``(128, 64)`` fp32 tile: pure dispatch cost."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    for _ in nl.sequential_range(n_ops):
        nisa.tensor_tensor(dst=acc, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def _median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _matmul_inputs(size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    bf16 = ml_dtypes.bfloat16
    return rng.standard_normal((size, size)).astype(bf16), rng.standard_normal((size, size)).astype(bf16)


def _matmul_kernel(name: str) -> Any:
    return getattr(matmul, f"matmul_{name}")


def bench_matmul(kernel_name: str, repeats: int) -> dict[str, float]:
    """(a): emulated bf16 matmul vs NumPy fp32 ``a.T @ b``, untraced and traced."""
    lhsT, rhs = _matmul_inputs(MATMUL_SIZE)
    kernel = _matmul_kernel(kernel_name)
    result = nki.simulate(kernel)(lhsT, rhs)  # also a warm-up
    a32, b32 = lhsT.astype(np.float32), rhs.astype(np.float32)
    reference = a32.T @ b32
    np.testing.assert_allclose(result, reference, rtol=1e-4, atol=1e-3)
    # emulator and NumPy runs alternate, so that drift of a shared machine hits both alike
    emu_runs, numpy_runs = [], []
    for _ in range(repeats):
        emu_runs.append(_median_seconds(lambda: nki.simulate(kernel)(lhsT, rhs), 1))
        numpy_runs.append(_median_seconds(lambda: a32.T @ b32, 1))
    traced_s = _median_seconds(lambda: emu.run_kernel(kernel, (lhsT, rhs), trace=emu.Trace()), repeats)
    trace = emu.Trace()
    emu.run_kernel(kernel, (lhsT, rhs), trace=trace)
    return {"emu_s": statistics.median(emu_runs), "traced_s": traced_s, "numpy_s": statistics.median(numpy_runs),
            "pair_ratio": statistics.median(e / n for e, n in zip(emu_runs, numpy_runs)), "instructions": len(trace)}


def bench_dispatch(repeats: int, n_ops: int = DISPATCH_OPS) -> dict[str, float]:
    """(b): µs per instruction for a long loop of small tensor_tensor ops, traced and untraced."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(tensor_tensor_loop)(a, b, 10), a + b)
    traced: list[float] = []
    for _ in range(repeats):
        trace = emu.Trace()
        t0 = time.perf_counter()
        emu.run_kernel(tensor_tensor_loop, (a, b, n_ops), trace=trace)
        traced.append(time.perf_counter() - t0)
        assert len(trace) == n_ops + 3
    untraced = _median_seconds(lambda: emu.run_kernel(tensor_tensor_loop, (a, b, n_ops)), repeats)
    per = n_ops + 3
    return {"traced_us": statistics.median(traced) / per * 1e6, "untraced_us": untraced / per * 1e6}


def _peak_rss_bytes() -> int:
    """This process's peak RSS.

    ``VmHWM`` from ``/proc/self/status`` where it exists, because Linux carries ``ru_maxrss`` over
    ``exec`` from the forked parent, which would charge the parent's arrays to the child's baseline.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _rss_child(kernel_name: str) -> None:
    """Subprocess body for (c): print baseline and peak RSS (bytes) of one traced 2048³ run as JSON."""
    baseline = _peak_rss_bytes()
    lhsT, rhs = _matmul_inputs(MATMUL_SIZE)
    trace = emu.Trace()
    emu.run_kernel(_matmul_kernel(kernel_name), (lhsT, rhs), trace=trace)
    print(json.dumps({"baseline": baseline, "peak": _peak_rss_bytes(), "instructions": len(trace)}))


def bench_rss(kernel_name: str) -> dict[str, float]:
    """(c): run the child in a fresh interpreter so earlier benchmarks do not inflate its peak."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--rss-child", "--kernel", kernel_name],
        check=True, capture_output=True, text=True,
    ).stdout
    child = json.loads(out.strip().splitlines()[-1])
    fp32_bytes = 3 * MATMUL_SIZE * MATMUL_SIZE * 4  # two inputs and the output
    child["budget"] = child["baseline"] + RSS_FACTOR * fp32_bytes
    child["fp32_bytes"] = fp32_bytes
    return child


def _profile(fn: Callable[[], Any], title: str, top: int = 25) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
        print(f"\n### cProfile: {title}, sorted by {key}\n")
        print(buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="runs per measurement; medians are reported")
    parser.add_argument("--kernel", default="fully_optimized", choices=["tiled", "hoisted", "block_free", "fully_optimized"],
                        help="which tutorial matmul kernel runs the 2048³ case")
    parser.add_argument("--profile", action="store_true", help="print cProfile summaries of (a) and (b)")
    parser.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        _rss_child(args.kernel)
        return

    load_before = os.getloadavg()[0]
    rss = bench_rss(args.kernel)
    mm = bench_matmul(args.kernel, args.repeats)
    dispatch = bench_dispatch(args.repeats)
    ratio = mm["emu_s"] / mm["numpy_s"]
    mib = 1 << 20

    print(f"matmul_{args.kernel} {MATMUL_SIZE}³ bf16: {mm['instructions']} instructions; "
          f"emulator {mm['emu_s'] * 1e3:.0f} ms (traced {mm['traced_s'] * 1e3:.0f} ms), NumPy fp32 a.T @ b {mm['numpy_s'] * 1e3:.0f} ms")
    print(f"peak RSS {rss['peak'] / mib:.0f} MiB = baseline {rss['baseline'] / mib:.0f} MiB + {(rss['peak'] - rss['baseline']) / mib:.0f} MiB "
          f"(inputs + output in fp32: {rss['fp32_bytes'] / mib:.0f} MiB)")
    print(f"load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(other processes inflate every wall-clock number here)")
    print()
    rows = [
        ("(a) 2048³ bf16 matmul, emulator / NumPy time (ratio of medians)", f"≤ {MATMUL_RATIO_TARGET:.1f}",
         f"{ratio:.2f} ({mm['emu_s'] * 1e3:.0f} / {mm['numpy_s'] * 1e3:.0f} ms)", ratio <= MATMUL_RATIO_TARGET),
        ("(a'') same, median of alternated pairs (info)", "—", f"{mm['pair_ratio']:.2f}", None),
        ("(a') same, traced / NumPy (info)", "—", f"{mm['traced_s'] / mm['numpy_s']:.2f} ({mm['traced_s'] * 1e3:.0f} ms)", None),
        ("(b) dispatch, µs / instruction, traced", f"≤ {DISPATCH_TARGET_US:.0f}", f"{dispatch['traced_us']:.1f}", dispatch["traced_us"] <= DISPATCH_TARGET_US),
        ("(b') dispatch, µs / instruction, untraced (info)", "—", f"{dispatch['untraced_us']:.1f}", None),
        ("(c) peak RSS of traced 2048³ run, MiB", f"≤ {rss['budget'] / mib:.0f}", f"{rss['peak'] / mib:.0f}", rss["peak"] <= rss["budget"]),
    ]
    print("| benchmark | target | measured | pass |")
    print("|---|---|---|---|")
    for name, target, measured, ok in rows:
        print(f"| {name} | {target} | {measured} | {'—' if ok is None else 'pass' if ok else 'FAIL'} |")

    if args.profile:
        lhsT, rhs = _matmul_inputs(MATMUL_SIZE)
        kernel = _matmul_kernel(args.kernel)
        _profile(lambda: nki.simulate(kernel)(lhsT, rhs), f"(a) matmul_{args.kernel} {MATMUL_SIZE}³")
        a = np.ones((128, 64), np.float32)
        _profile(lambda: emu.run_kernel(tensor_tensor_loop, (a, a, 20_000), trace=emu.Trace()), "(b) 20 000 tensor_tensor, traced")


if __name__ == "__main__":
    main()
