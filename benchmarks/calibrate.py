"""The cost model against published hardware measurements (issue 3), run by hand.

    python benchmarks/calibrate.py [--quick] [--only trn1|trn2|mamba|layernorm]

Prints one row per calibration point — the published value, our timing-only estimate, their
ratio (latencies) or difference (MFU), whether it is within tolerance, and whether the
estimates put the steps of each ladder in the published order — then one row per published
improvement (Mamba v1 → v2 → v3, LayerNorm v1 → v2) with its direction and size. Every point
is reported, hit or miss. The points, kernels and criteria live in
``tests/perf/calibration_points.py`` (shared with ``tests/perf/test_calibration.py``).

``--quick`` stands for the published shapes of the slowest runs through smaller ones along an
axis of independent tiles (scaling the estimate back; marked ``×k`` in the table): a few
seconds per point instead of up to ~30 s. Without it every published shape runs in full
(about 2 minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kernels live in tests/

from nkiagent import shim

shim.install(force=True)

from nkiagent.perf import MODEL_VERSION
from tests.perf import calibration_points as cp

GROUPS = ("trn1", "trn2", "mamba", "layernorm")


def _yn(ok: bool) -> str:
    return "yes" if ok else "NO"


def _fmt(value: float, unit: str) -> str:
    return f"{value:.1f}%" if unit == "MFU%" else f"{value:.4g} {unit}"


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


HEADER = ["point", "step", "shape", "tgt", "published", "estimate", "est/pub", "in tol", "order"]
WIDTHS = [23, 34, 33, 4, 10, 10, 9, 6, 5]


def _print_ladder(title: str, estimates: list[cp.Estimate], check, compare: str) -> tuple[int, int]:
    order = cp.same_order(estimates)
    print(f"\n{title}")
    print(_row(HEADER, WIDTHS))
    hits = 0
    for e in estimates:
        ok = check(e)
        hits += ok
        r = e.run
        rel = f"{e.value - r.published:+.1f} pts" if compare == "mfu" else f"{e.value / r.published:.2f}"
        scale = f" ×{r.scale:g}" if r.scale != 1 else ""
        print(
            _row(
                [r.key, r.label, r.shape + scale, r.target, _fmt(r.published, r.unit), _fmt(e.value, r.unit), rel, _yn(ok), _yn(order)],
                WIDTHS,
            )
        )
    print(f"  order of the steps: {'same as published' if order else 'DIFFERENT from published'}")
    return hits + order, len(estimates) + 1


def _print_steps(title: str, by_key: dict[str, cp.Estimate], steps: list[tuple[str, str]], size_factor: float | None) -> tuple[int, int]:
    print(f"\n{title}")
    print(_row(["step", "published", "estimate", "est/pub", "direction", "similar size"], [46, 25, 27, 8, 9, 12]))
    hits = total = 0
    for a, b in steps:
        ea, eb = by_key[a], by_key[b]
        pub = cp.change(ea.run.published, eb.run.published)
        ours = cp.change(ea.latency_us, eb.latency_us)
        direction, size = cp.step_ok(ea, eb, size_factor=size_factor)
        pub_s = f"{ea.run.published:g} → {eb.run.published:g} {ea.run.unit} ({pub:+.1%})"
        ours_s = f"{ea.value:.4g} → {eb.value:.4g} {ea.run.unit} ({ours:+.1%})"
        sized = _yn(size) if size_factor is not None else "(not judged)"
        print(_row([f"{ea.run.label} → {eb.run.label}", pub_s, ours_s, f"{ours / pub:.2f}", _yn(direction), sized], [46, 25, 27, 8, 9, 12]))
        hits += direction + (size if size_factor is not None else 0)
        total += 1 + (size_factor is not None)
    return hits, total


def _run_all(runs: list[cp.Run]) -> list[cp.Estimate]:
    out = []
    for r in runs:
        e = cp.estimate(r)
        print(f"  … {r.key}: {_fmt(e.value, r.unit)} ({e.seconds:.1f} s)", file=sys.stderr, flush=True)
        out.append(e)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced shapes (scaled back) for the slowest points")
    ap.add_argument("--only", choices=GROUPS, action="append", help="run only these groups")
    args = ap.parse_args()
    groups = args.only or list(GROUPS)
    t0 = time.perf_counter()
    print(
        f"cost model {MODEL_VERSION}; timing-only estimates; {'quick (reduced shapes, ×k scaled)' if args.quick else 'full published shapes'}"
    )
    hits = total = 0

    def add(ht: tuple[int, int]) -> None:
        nonlocal hits, total
        hits, total = hits + ht[0], total + ht[1]

    if "trn1" in groups:
        est = _run_all(cp.trn1_matmul_ladder(args.quick))
        add(_print_ladder("(a) trn1 matmul tutorial — latency within ±30% of measured (P99), same order", est, cp.latency_ok, "ratio"))
    if "trn2" in groups:
        est = _run_all(cp.trn2_matmul_ladder(args.quick))
        add(_print_ladder("(g) trn2 2048³ matmul MFU ladder — MFU within 15 points, same order", est, cp.mfu_ok, "mfu"))
    if "mamba" in groups:
        est = _run_all(cp.mamba_runs(args.quick))
        print("\n(b) fused Mamba (trn1, fp32) — absolute latencies, for information only")
        print(_row(HEADER[:7], WIDTHS[:7]))
        for e in est:
            r = e.run
            scale = f" ×{r.scale:g}" if r.scale != 1 else ""
            print(
                _row(
                    [
                        r.key,
                        r.label,
                        r.shape + scale,
                        r.target,
                        _fmt(r.published, r.unit),
                        _fmt(e.value, r.unit),
                        f"{e.value / r.published:.2f}",
                    ],
                    WIDTHS[:7],
                )
            )
        add(
            _print_steps(
                f"(b) fused Mamba improvements — same direction, similar size (within ×{cp.SIZE_FACTOR:g} of published)",
                {e.run.key: e for e in est},
                cp.MAMBA_STEPS,
                cp.SIZE_FACTOR,
            )
        )
    if "layernorm" in groups:
        est = _run_all(cp.layernorm_runs(args.quick))
        add(
            _print_steps(
                "(c) LayerNorm (trn1, (300,1000) fp32) — v2 faster than v1 (absolute µs not compared)",
                {e.run.key: e for e in est},
                cp.LAYERNORM_STEPS,
                None,
            )
        )
    print(f"\n{hits}/{total} checks pass ({time.perf_counter() - t0:.0f} s)")
    return 0 if hits == total else 1


if __name__ == "__main__":
    sys.exit(main())
