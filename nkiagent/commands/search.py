"""``nkiagent search``: run (or resume) a search session and print its progress and best kernel."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..verify.protocol import VISIBLE_SEEDS

__all__ = ["add_search_arguments", "run_search_command"]

#: budgets and knobs a resume may change (the rest is the stored configuration)
_OVERRIDABLE = (
    "max_candidates",
    "budget_usd",
    "max_seconds",
    "target_speedup",
    "target_sol",
    "patience",
    "workers",
    "executor",
    "ray_address",
    "model_concurrency",
)


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help="builtin task name or task file (required unless --resume)")
    p.add_argument("--strategy", choices=["best-of-n", "refine", "beam", "evolve"], default="evolve")
    p.add_argument("--model", default="builtin/tuner", help="builtin/tuner (offline), scripted:PATH or a litellm model string")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint for local servers")
    p.add_argument(
        "--n",
        dest="max_candidates",
        type=int,
        help="candidates to evaluate (best-of-n: samples), the starting kernel included (default 16)",
    )
    p.add_argument("--budget-usd", type=float, help="stop when the model cost reaches this")
    p.add_argument("--max-seconds", type=float, help="stop after this much wall time")
    p.add_argument("--target-speedup", type=float, help="stop when a passing kernel reaches this speedup over the baseline")
    p.add_argument("--target-sol", type=float, help="stop at this fraction (0-1) of the speed of light")
    p.add_argument("--patience", type=int, help="stop after this many candidates without a new best")
    p.add_argument("--beam-width", type=int, default=2)
    p.add_argument("--samples", type=int, default=2, help="beam: children per beam and step")
    p.add_argument("--islands", type=int, default=2)
    p.add_argument("--per-island", type=int, default=2, help="evolve: children per island and generation")
    p.add_argument("--migrate-every", type=int, default=3, help="evolve: generations between migrations")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, help="parallel evaluations (default: all cores)")
    p.add_argument("--executor", choices=["local", "ray"], help="local process pool (default) or a Ray cluster")
    p.add_argument("--ray-address", help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--model-concurrency", type=int, help="model calls in flight at once (default 4)")
    p.add_argument("--no-cascade", action="store_true", help="skip the small-shape stage (static gate → full verification)")
    p.add_argument(
        "--seeds", type=int, default=1, help=f"correctness seeds of the full verification (default 1; `eval` uses {VISIBLE_SEEDS})"
    )
    p.add_argument("--target", choices=["trn1", "trn2", "trn3"], default="trn2")
    p.add_argument("--kernel", help="starting kernel file (default: a kernel with tunables if nkiagent has one, else the baseline)")
    p.add_argument("--sessions-dir", default="sessions")
    p.add_argument("--resume", metavar="SESSION", help="continue a stored search (budgets given here replace the stored ones)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


def _progress(quiet: bool) -> Any:
    best: list[float] = [0.0]

    def show(c: Any) -> None:
        if quiet:
            return
        if c.passed and (c.speedup or 0.0) > best[0]:
            best[0] = c.speedup or 0.0
        sp = f"{c.speedup:.3f}×" if c.speedup is not None else "—"
        print(
            f"#{c.candidate_id:<4} isl {c.island} gen {c.generation:<3} {c.verdict:<8} {sp:>8} ({c.stage})  best {best[0]:.3f}×  "
            f"{c.mutation[:70]}",
            flush=True,
        )

    return show


def run_search_command(args: argparse.Namespace) -> int:
    from ..search.engine import SearchConfig, resume_search, run_search

    on_candidate = _progress(args.json)
    given = {k: getattr(args, k) for k in _OVERRIDABLE if getattr(args, k, None) is not None}
    if args.resume:
        outcome = resume_search(Path(args.sessions_dir) / args.resume, given, on_candidate)
    else:
        if not args.task:
            print("error: --task is required (or --resume SESSION)")
            return 2
        cfg = SearchConfig(
            task=args.task,
            strategy=args.strategy,
            model=args.model,
            target=args.target,
            seed=args.seed,
            temperature=args.temperature,
            api_base=args.api_base,
            kernel=args.kernel,
            beam_width=args.beam_width,
            samples=args.samples,
            islands=args.islands,
            per_island=args.per_island,
            migrate_every=args.migrate_every,
            cascade=not args.no_cascade,
            seeds=args.seeds,
            **given,
        )
        outcome = run_search(cfg, Path(args.sessions_dir), on_candidate)
    out = outcome.to_dict()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        best = out["best"]
        print(f"stopped: {out['stop_reason']}; {out['candidates']} candidates, ${out['cost_usd']:.4f}, {out['seconds']:.1f} s")
        if best:
            print(
                f"best: candidate #{best['candidate_id']} {best['speedup']}× ({best['latency_us']:.3f} µs, {best['timing_source']}) → {best['kernel']}"
            )
        else:
            print("no candidate passed the verifier")
        print(f"session: {out['session_dir']}  (report: nkiagent report {out['session_id']})")
    return 0 if out["best"] else 1
