"""``nkiagent profile``: estimate a kernel's latency on a target and explain where the time goes."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["run_profile"]


def run_profile(args: argparse.Namespace) -> int:
    import numpy as np

    from ..emu import NkiError, ShapeSpec
    from ..emu.dtypes import as_dtype
    from ..perf import profile_kernel
    from ..perf.report import plot_png, summary_text, write_chrome_trace
    from ..perf.specs import get_spec
    from .simulate import load_kernel, parse_inputs

    try:
        specs = parse_inputs(args.inputs)
        kernel = load_kernel(args.kernel, args.kernel_name)
    except (ValueError, FileNotFoundError, AttributeError, SyntaxError) as exc:
        print(f"nkiagent profile: {exc}", file=sys.stderr)
        return 2
    if args.timing_only:
        inputs = tuple(ShapeSpec(shape, d) for _, shape, d in specs)
    else:
        rng = np.random.default_rng(args.seed)
        inputs = tuple(rng.standard_normal(shape).astype(as_dtype(d)) for _, shape, d in specs)
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
