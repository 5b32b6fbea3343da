"""Verifier benchmarks (run by hand): one full verification, and parallel scaling.

    python benchmarks/bench_verify.py [--task vector_add] [--candidates 20]

1. Full verification (static gate, 5 seeds × 3 distributions × visible + hidden shapes,
   profile) of a level-1 task's candidate: median wall time over repetitions, after one
   warm-up that fills the input cache (target ≤ 3 s median).
2. ``--candidates`` distinct candidates verified with 2 workers vs 1, in one run
   (target ≥ 1.7× faster).
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
from nkiagent.verify.verifier import verify


def _candidates(src: Path, n: int, into: Path) -> list[Path]:
    """``n`` distinct files (a comment makes each hash differ) with the same honest kernel."""
    out = []
    for i in range(n):
        p = into / f"candidate_{i}.py"
        p.write_text(src.read_text() + f"\n# candidate {i}\n")
        out.append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="vector_add")
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    task = get_task(args.task)
    src = task.baseline_path()
    tmp = Path(tempfile.mkdtemp())
    try:
        verify(src, task, "trn2")  # warm-up: input cache, baseline latency
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            res = verify(src, task, "trn2")
            times.append(time.perf_counter() - t)
            assert res.verdict == "pass", res.reasons
        cands = _candidates(src, args.candidates, tmp)
        items = [(p, task, "trn2") for p in cands]
        t = time.perf_counter()
        r1 = verify_many(items, workers=1)
        one = time.perf_counter() - t
        t = time.perf_counter()
        r2 = verify_many(items, workers=2)
        two = time.perf_counter() - t
        assert all(r.verdict == "pass" for r in r1 + r2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median(times)
    load = os.getloadavg()[0]
    print(f"task {task.name} (level {task.level}); load average {load:.2f} on {os.cpu_count()} CPUs\n")
    print("| measurement | value | target | ok |\n|---|---|---|---|")
    print(f"| full verification, median of {args.repeats} | {med:.2f} s (min {min(times):.2f}, max {max(times):.2f}) | ≤ 3 s | {'yes' if med <= 3 else 'NO'} |")
    print(f"| {args.candidates} candidates, 1 worker | {one:.2f} s | | |")
    print(f"| {args.candidates} candidates, 2 workers | {two:.2f} s ({one / two:.2f}× faster) | ≥ 1.7× | {'yes' if one / two >= 1.7 else 'NO'} |")


if __name__ == "__main__":
    main()
