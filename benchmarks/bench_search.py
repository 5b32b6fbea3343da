"""Search benchmark (run by hand): every strategy on 6 builtin tasks with builtin/tuner, 40 evaluations each.

    python benchmarks/bench_search.py [--budget 40] [--workers 2] [--tasks vector_add,softmax,...] [--cascade] [--scaling-only]

1. For each task and strategy, a search from the task's tunable starting kernel
   (the agent's demo kernel with tunables, ``nkiagent/agent/demo_kernels/``) with ``builtin/tuner``, seed 0,
   stopped at ``--budget`` evaluations (or when the space is exhausted): the best speedup over
   the task's baseline (verifier ``pass`` only, emulator-estimate on trn2, one seed, visible +
   hidden shapes) and the evaluations needed to reach 90% of it. Then: on how many tasks
   evolve or beam is at least as good as best-of-n (target ≥ 4 of 6).
2. The local pool: the same distinct candidates evaluated with 2 workers and with 1 in one run
   (target ≥ 1.7× faster), with the load average before and after (the machine may be shared).

The cascade's small-shape stage is off by default here (every tunable setting passes, so it
would only add time); ``--cascade`` turns it on.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from nkiagent.search import SearchConfig, run_search
from nkiagent.search.evaluate import EvalJob, LocalExecutor
from nkiagent.search.report import evals_to_fraction, load_trace

TASKS = ("vector_add", "softmax", "silu", "gelu", "rmsnorm", "layernorm")
STRATEGIES = ("best-of-n", "refine", "beam", "evolve")


def _strategies(
    tasks: list[str], budget: int, workers: int, cascade: bool, root: Path
) -> dict[tuple[str, str], tuple[float, int | None, int, float]]:
    out: dict[tuple[str, str], tuple[float, int | None, int, float]] = {}
    for task in tasks:
        for strategy in STRATEGIES:
            t0 = time.perf_counter()
            res = run_search(
                SearchConfig(task=task, strategy=strategy, max_candidates=budget, workers=workers, cascade=cascade), root / task
            )
            _, curve, _ = load_trace(res.session.dir).best_curve()
            best = curve[-1] if curve else 0.0
            out[(task, strategy)] = (best, evals_to_fraction(curve), res.candidates, time.perf_counter() - t0)
            print(
                f"  {task:<11} {strategy:<10} best {best:.4f}×  to 90%: {evals_to_fraction(curve)}  candidates {res.candidates:>3}  "
                f"{time.perf_counter() - t0:6.1f} s  ({res.stop_reason})",
                flush=True,
            )
    return out


def _pool_scaling(n: int) -> tuple[float, float, tuple[float, ...], tuple[float, ...]]:
    """Wall time of ``n`` distinct vector_add candidates with 1 and 2 workers (after one warm-up)."""
    src = (Path(__file__).resolve().parent.parent / "nkiagent" / "agent" / "demo_kernels" / "vector_add.py").read_text()
    jobs = [EvalJob(src + f"\n# candidate {i}\n", "vector_add", cascade=False) for i in range(n)]
    before = os.getloadavg()
    LocalExecutor(1).map(jobs[:1])  # input cache and baseline
    times = []
    for workers in (1, 2):
        ex = LocalExecutor(workers)
        t0 = time.perf_counter()
        ex.map(jobs)
        times.append(time.perf_counter() - t0)
        ex.close()
    return times[0], times[1], before, os.getloadavg()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--cascade", action="store_true")
    ap.add_argument("--scaling-candidates", type=int, default=16)
    ap.add_argument("--scaling-only", action="store_true", help="measure only the local pool's 2-worker speedup")
    args = ap.parse_args()
    tasks = args.tasks.split(",")
    print(f"load average at start: {os.getloadavg()}; {os.cpu_count()} cores")
    if args.scaling_only:
        _print_scaling(args.scaling_candidates)
        return
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        res = _strategies(tasks, args.budget, args.workers, args.cascade, Path(tmp))
    print(f"\nbest speedup over the baseline (emulator-estimate, trn2) after ≤ {args.budget} evaluations; (evaluations to reach 90% of it)")
    print(f"| task | {' | '.join(STRATEGIES)} | evolve or beam ≥ best-of-n |")
    print("|---|" + "---:|" * len(STRATEGIES) + "---|")
    wins = 0
    for task in tasks:
        cells = [f"{res[(task, s)][0]:.3f}× ({res[(task, s)][1]})" for s in STRATEGIES]
        ok = max(res[(task, "evolve")][0], res[(task, "beam")][0]) >= res[(task, "best-of-n")][0]
        wins += ok
        print(f"| {task} | {' | '.join(cells)} | {'yes' if ok else 'no'} |")
    print(f"\nevolve or beam ≥ best-of-n on {wins} of {len(tasks)} tasks (target ≥ 4 of 6)")
    _print_scaling(args.scaling_candidates)


def _print_scaling(n: int) -> None:
    one, two, before, after = _pool_scaling(n)
    print(
        f"\nlocal pool, {n} distinct vector_add candidates: 1 worker {one:.1f} s, 2 workers {two:.1f} s "
        f"→ {one / two:.2f}× (target ≥ 1.7×); load average before {before}, after {after}"
    )


if __name__ == "__main__":
    main()
