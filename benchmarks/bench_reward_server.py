"""Reward-server throughput (run by hand): distinct level-1 kernels scored over HTTP, and Ray scaling.

    python benchmarks/bench_reward_server.py [--kernels 24] [--batch 8] [--workers 2] [--ray]

1. A :class:`~nkiagent.training.serve.RewardServer` on this machine (``--workers`` sandboxes,
   one seed, hidden shapes on: the server's defaults) is sent ``--kernels`` distinct kernels
   of the level-1 tasks (each task's baseline with a comment that makes its hash differ, so no
   cache or in-flight sharing helps) in ``--batch``-item requests from ``--batch`` concurrent
   clients. Target on 2 cores: ≥ 1 reward/s.
2. With ``--ray`` (the ``ray`` extra) the same kernels through ``--executor ray`` with 1 worker
   and with ``--workers`` workers: rewards/s each and the ratio (linear scaling: the ratio
   ≈ the worker count, bounded by the cores this machine has).

All numbers are wall clock; the table says the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nkiagent.tasks.loader import builtin_tasks
from nkiagent.training.env import Scorer
from nkiagent.training.serve import RewardServer


def kernels(n: int, tag: str) -> list[tuple[str, str]]:
    """``n`` distinct (task, fenced kernel) pairs, cycling over the level-1 tasks' baselines."""
    level1 = [t for t in builtin_tasks().values() if t.level == 1 and t.baseline_path() is not None]
    out = []
    for i in range(n):
        t = level1[i % len(level1)]
        code = t.baseline_path().read_text() + f"\n# {tag} {i}\n"
        out.append((t.name, f"```python\n{code}```"))
    return out


def _post(url: str, items: list[dict[str, Any]]) -> list[float]:
    req = urllib.request.Request(url + "/score", data=json.dumps({"items": items}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return list(json.loads(resp.read())["rewards"])


def run(scorer: Scorer, work: list[tuple[str, str]], batch: int) -> tuple[float, list[float]]:
    """(rewards per second, rewards) of scoring ``work`` through a server around ``scorer``."""
    chunks = [work[i : i + batch] for i in range(0, len(work), batch)]
    with RewardServer(scorer) as srv:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=batch) as pool:
            got = list(pool.map(lambda c: _post(srv.url, [{"task": t, "completion": k} for t, k in c]), chunks))
        wall = time.perf_counter() - t0
    rewards = [r for g in got for r in g]
    return len(rewards) / wall, rewards


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=24)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray", action="store_true", help="also measure --executor ray with 1 and --workers workers")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    warm = Scorer(workers=args.workers)
    run(warm, kernels(len({t for t, _ in kernels(args.kernels, "w")}), "warm-up"), args.batch)  # baselines and inputs on disk
    rate, rewards = run(Scorer(workers=args.workers), kernels(args.kernels, "local"), args.batch)
    passed = sum(r > 0 for r in rewards)
    print(
        f"local pool, {args.workers} workers: {rate:.2f} rewards/s over {len(rewards)} distinct level-1 kernels ({passed} passed); target ≥ 1"
    )
    if args.ray:
        import ray

        from nkiagent.commands.export import search_evaluator

        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        try:
            rates = {}
            for w in sorted({1, args.workers}):
                s = Scorer(workers=w)
                s.evaluate_many = search_evaluator("ray", s.seeds, s.hidden, w)
                rates[w], _ = run(s, kernels(args.kernels, f"ray{w}"), args.batch)
                print(f"ray, {w} worker(s): {rates[w]:.2f} rewards/s")
            if len(rates) > 1:
                print(f"ray scaling 1 → {args.workers} workers: {rates[args.workers] / rates[1]:.2f}× (linear: {args.workers}×)")
        finally:
            ray.shutdown()


if __name__ == "__main__":
    main()
