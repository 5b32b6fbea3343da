"""Verifier benchmarks (run by hand): full verifications, first evaluations, and parallel scaling.

    python benchmarks/bench_verify.py [--tasks vector_add,softmax,rmsnorm,matmul] [--repeats 5] [--candidates 20]

1. Per task, the first evaluation of a candidate with cold caches (input cache and the stored
   baseline latency both empty: inputs, references and the baseline are made then), the first
   with the protocol's inputs already drawn (they are kept on tmpfs per task, and a session
   draws them as it opens: only the baseline is measured then), then
   ``--repeats`` full verifications (static gate, every case of the protocol, trace integrity,
   the one-stream-per-shape invariant, profile): the median and every run. Targets: level 1
   ≤ 3 s median, level 2 ≤ 8 s, the first evaluation ≤ 2× the median.
2. ``--candidates`` distinct candidates of a level-1 task verified with 2 workers and with 1,
   alternated in one run: 2 workers ≥ 1.7× faster.

All times are wall clock on this machine; the table says the load average at the start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from nkiagent.tasks import get_task
from nkiagent.verify.pool import verify_many
from nkiagent.verify.verifier import _BASELINE_CACHE, verify

TARGETS = {1: 3.0, 2: 8.0, 3: 8.0}


def _candidates(src: Path, n: int, into: Path) -> list[Path]:
    """``n`` distinct files (a comment makes each hash differ) with the same honest kernel."""
    out = []
    for i in range(n):
        p = into / f"candidate_{i}.py"
        p.write_text(src.read_text() + f"\n# candidate {i}\n")
        out.append(p)
    return out


def _cold(tmp: Path, inputs: bool = True) -> None:
    """Empty baseline store (and input cache, unless ``inputs`` is false), for a first evaluation."""
    if inputs:
        os.environ["NKIAGENT_INPUT_CACHE"] = str(tmp / f"inputs-{time.monotonic_ns()}")
    os.environ["XDG_CACHE_HOME"] = str(tmp / f"cache-{time.monotonic_ns()}")
    _BASELINE_CACHE.clear()


def _timed(cand: Path, task: object) -> float:
    t = time.perf_counter()
    res = verify(cand, task, "trn2")  # type: ignore[arg-type]
    assert res.verdict == "pass", res.reasons
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="vector_add,softmax,rmsnorm,matmul")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="alternated 1-worker / 2-worker rounds for the scaling test")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nkiagent-bench-verify-"))
    load = os.getloadavg()[0]
    rows = []
    try:
        for name in args.tasks.split(","):
            task = get_task(name)
            src = task.baseline_path()
            (tmp / name).mkdir()
            cand = _candidates(src, 1, tmp / name)[0]
            _cold(tmp)
            first_s = _timed(cand, task)
            _cold(tmp, inputs=False)  # the protocol's inputs already drawn (a session prepares them as it opens): the baseline is measured
            drawn_s = _timed(cand, task)
            times = [_timed(cand, task) for _ in range(args.repeats)]
            rows.append((task, first_s, drawn_s, times))
        task = get_task("vector_add")
        cands = _candidates(task.baseline_path(), args.candidates, tmp)
        items = [(p, task, "trn2") for p in cands]
        verify_many(items[:2], workers=2)  # warm caches
        one, two = [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            r1 = verify_many(items, workers=1)
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            r2 = verify_many(items, workers=2)
            two.append(time.perf_counter() - t)
            assert all(r.verdict == "pass" for r in r1 + r2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average {load:.2f} on {os.cpu_count()} CPUs at the start\n")
    print(
        "| task (level) | full verification: median (all runs) | target | first evaluation, cold | first, inputs drawn | ≤ 2× median | ok |"
    )
    print("|---|---|---|---|---|---|---|")
    for task, first_s, drawn_s, times in rows:
        med = statistics.median(times)
        target = TARGETS[task.level]
        ok = med <= target and first_s <= 2 * med
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(
            f"| {task.name} ({task.level}) | {med:.2f} s ({runs}) | ≤ {target:.0f} s | {first_s:.2f} s ({first_s / med:.2f}×) | "
            f"{drawn_s:.2f} s ({drawn_s / med:.2f}×) | {'yes' if first_s <= 2 * med else 'NO'} ({'yes' if drawn_s <= 2 * med else 'NO'}) | "
            f"{'yes' if ok else 'NO'} |"
        )
    ratios = [a / b for a, b in zip(one, two)]
    print(f"\n| {args.candidates} vector_add candidates | 1 worker | 2 workers | ratio (≥ 1.7×) |\n|---|---|---|---|")
    for k, (a, b) in enumerate(zip(one, two)):
        print(f"| round {k + 1} | {a:.2f} s | {b:.2f} s | {a / b:.2f}× |")
    print(
        f"| median | {statistics.median(one):.2f} s | {statistics.median(two):.2f} s | {statistics.median(ratios):.2f}× "
        f"{'yes' if statistics.median(ratios) >= 1.7 else 'NO'} |"
    )


if __name__ == "__main__":
    main()
