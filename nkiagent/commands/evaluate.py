"""``nkiagent eval`` and ``nkiagent tasks``: verify a kernel against a task; list the suite."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["run_eval", "run_tasks"]


def run_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..tasks import get_task
    from ..verify.verifier import VerifyOptions, verify

    if not Path(args.kernel).is_file():
        print(f"nkiagent eval: kernel file not found: {args.kernel}", file=sys.stderr)
        return 2
    try:
        task = _suite(args)[args.task] if args.suite == "nkibench" else get_task(args.task)
    except (KeyError, FileNotFoundError, ValueError, ImportError) as exc:
        print(f"nkiagent eval: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    res = verify(args.kernel, task, args.target or "trn2", VerifyOptions(seeds=args.seeds))
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(f"{res.verdict.upper()}  {task.name} on {res.target}  ({res.wall_s:.1f} s)")
        for reason in res.reasons:
            print(f"  - {reason}")
        if res.latency_us is not None:
            print(f"  latency {res.latency_us:,.2f} µs ({res.timing_source}, {res.model_version})")
        if res.verdict == "pass" and res.speedup is not None:
            print(f"  baseline {res.baseline_latency_us:,.2f} µs → speedup {res.speedup:.3f}×")
        if res.fraction_of_peak is not None:
            print(f"  speed of light {res.sol_latency_us:,.2f} µs → {100 * res.fraction_of_peak:.1f}% of peak")
    return 0 if res.verdict == "pass" else 1


def _suite(args: argparse.Namespace) -> dict[str, Any]:
    """The tasks of ``--suite``; NKIBench needs ``--nkibench-dir``."""
    if args.suite == "nkibench":
        if not args.nkibench_dir:
            raise ValueError("--suite nkibench needs --nkibench-dir (a checkout of zhang677/AccelOpt)")
        from ..tasks.nkibench import load_nkibench

        names = [args.task] if getattr(args, "task", None) else None
        return load_nkibench(args.nkibench_dir, names)
    from ..tasks import builtin_tasks

    return builtin_tasks()


def run_tasks(args: argparse.Namespace) -> int:
    try:
        tasks = _suite(args)
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"nkiagent tasks: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([t.describe() for t in tasks.values()], indent=2))
        return 0
    print(f"{'task':22s} {'level':5s} inputs → output")
    for t in tasks.values():
        ins = ", ".join(f"{s.name}{list(s.resolve(t.dims))} {s.dtype}" for s in t.inputs)
        print(f"{t.name:22s} {t.level:<5d} {ins} → {list(t.output_shape())} {t.output.dtype}")
    return 0
