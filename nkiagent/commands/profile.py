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
    if getattr(args, "backend", "emulator") != "emulator":
        from ..backends import BackendUnavailable, detect, select_backend

        try:
            name = select_backend(args.backend, detect())
        except BackendUnavailable as exc:
            print(f"nkiagent profile: {exc}", file=sys.stderr)
            return 2
        if name == "neuron-hw":
            return _profile_on_hardware(args, random_inputs(specs, args.seed))
        if name == "neuron-sim":
            print("note: AWS's simulator has no latency model; the profile below is the emulator's estimate", file=sys.stderr)
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


def _profile_on_hardware(args: argparse.Namespace, inputs: tuple[object, ...]) -> int:
    """Compile, run and time the kernel on a NeuronCore; the profile comes from ``neuron-profile``."""
    from pathlib import Path

    from ..backends import get_backend
    from ..perf.report import summary_text

    target = args.target or "trn2"
    res = get_backend("neuron-hw").run(Path(args.kernel).read_text(), list(inputs), target, kernel_name=args.kernel_name)
    if res.error is not None:
        print(f"error: {res.error.get('location', '')}: {res.error.get('message', res.error)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**res.profile.to_dict(), "measurement": res.measurement, "toolchain": res.toolchain}, indent=2))
    else:
        print(summary_text(res.profile))
        m = res.measurement
        if "median_us" in m:
            stable = "" if m.get("stable") else f" — UNSTABLE (above the {100 * m['spread_limit']:.0f}% gate)"
            print(
                f"measured on {target} with neuron-profile: median {m['median_us']:.3f} µs of {m['captures']} captures, "
                f"spread {100 * m['spread']:.2f}%{stable}"
            )
    return 0
