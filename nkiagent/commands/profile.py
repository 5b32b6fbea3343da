"""``nkiagent profile``: estimate a kernel's latency on a target and explain where the time goes."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["run_profile"]


def run_profile(args: argparse.Namespace) -> int:
    from ..emu import NkiError, ShapeSpec
    from ..perf import profile_kernel
    from ..perf.report import plot_png, summary_text, write_chrome_trace
    from ..perf.specs import get_spec
    from .simulate import kernel_and_inputs, random_inputs

    loaded = kernel_and_inputs(args, "profile")
    if loaded is None:
        return 2
    kernel, specs = loaded
    inputs = tuple(ShapeSpec(shape, d) for _, shape, d in specs) if args.timing_only else random_inputs(specs, args.seed)
    try:
        run = profile_kernel(kernel, inputs, target=args.target, timing_only=args.timing_only)
    except NkiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    spec = get_spec(run.profile.target)
    if args.trace:
        write_chrome_trace(args.trace, run.trace, run.timeline, spec)
    if args.plot:
        plot_png(args.plot, run.profile, run.timeline, spec)
    if args.json:
        print(json.dumps(run.profile.to_dict(), indent=2))
    else:
        print(summary_text(run.profile))
        if args.trace:
            print(f"timeline written to {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)")
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
