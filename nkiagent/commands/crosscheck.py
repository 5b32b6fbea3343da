"""``nkiagent crosscheck KERNEL.py --task T``: the emulator against AWS's real toolchain, side by side.

Both sides verify the kernel with the same protocol and run it on the same inputs; the report
lists where they differ — accepted or rejected, why, the numbers each produced, and the
emulator's latency estimate against the simulator's (none) or the hardware's measurement. It is
what keeps the emulator honest wherever a user has the real thing; ``--report OUT.md`` writes a
Markdown file to attach to an issue. Without AWS's software only the emulator column is filled.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["crosscheck", "render_report", "run_crosscheck"]


def _numerics(a: Any, b: Any) -> dict[str, Any]:
    """Differences between the two sides' outputs on the same inputs."""
    if not a.ok or not b.ok:
        return {"comparable": False, "emulator_error": a.error, "real_error": b.error}
    if len(a.outputs) != len(b.outputs) or any(x.shape != y.shape for x, y in zip(a.outputs, b.outputs)):
        return {"comparable": False, "shapes": [[list(x.shape) for x in a.outputs], [list(y.shape) for y in b.outputs]]}
    x = np.concatenate([o.astype(np.float64).ravel() for o in a.outputs])
    y = np.concatenate([o.astype(np.float64).ravel() for o in b.outputs])
    diff = np.abs(x - y)
    scale = float(np.max(np.abs(y))) or 1.0
    return {
        "comparable": True,
        "identical": bool(np.array_equal(x, y, equal_nan=True)),
        "max_abs_diff": float(np.nanmax(diff)) if diff.size else 0.0,
        "max_rel_diff": float(np.nanmax(diff) / scale) if diff.size else 0.0,
        "nan_mismatch": int(np.sum(np.isnan(x) != np.isnan(y))),
    }


def crosscheck(kernel_path: str | Path, task: Any, target: str, real: Any, options: Any = None) -> dict[str, Any]:
    """Verify (with ``options``, a ``VerifyOptions``) and run ``kernel_path`` on the emulator and on ``real``
    (a NeuronBackend, or None when this machine has no real toolchain); a JSON-able report."""
    import hashlib

    from .. import __version__
    from ..backends import EmulatorBackend
    from ..sandbox.arrays import DISTRIBUTIONS
    from ..verify.inputs import InputCache, cases
    from ..verify.verifier import VerifyOptions, verify

    path = Path(kernel_path)
    source = path.read_text()
    opts = options or VerifyOptions()
    first = cases(task, 1, DISTRIBUTIONS[:1])[:1]
    cache = InputCache().ensure(task, first)
    inputs = [np.load(p, allow_pickle=False) for p in InputCache.input_paths(cache, 0, len(task.inputs))]
    sides: dict[str, Any] = {}
    runs = {}
    for name, runner in (("emulator", EmulatorBackend()), ("real", real)):
        if runner is None:
            continue
        res = verify(path, task, target, opts, backend="emulator" if name == "emulator" else runner)
        runs[name] = runner.run(source, inputs, target)
        sides[name] = {
            "backend": res.backend,
            "verdict": res.verdict,
            "reasons": res.reasons,
            "latency_us": res.latency_us,
            "timing_source": res.timing_source,
            "toolchain": res.toolchain or runner.versions(),
            "measurement": res.profile.get("measurement", {}),
            "speedup": res.speedup,
        }
    report: dict[str, Any] = {
        "kernel": str(path),
        "code_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "task": task.name,
        "target": target,
        "nkiagent": __version__,
        "python": platform.python_version(),
        "sides": sides,
        "differences": [],
    }
    diffs = report["differences"]
    if "real" not in sides:
        diffs.append("no real Neuron toolchain on this machine: only the emulator was run (see `nkiagent doctor`)")
        return report
    emu_side, real_side = sides["emulator"], sides["real"]
    if emu_side["verdict"] != real_side["verdict"]:
        diffs.append(f"verdicts differ: emulator {emu_side['verdict']}, {real_side['backend']} {real_side['verdict']}")
    report["numerics"] = num = _numerics(runs["emulator"], runs["real"])
    if not num.get("comparable"):
        diffs.append(
            f"outputs not comparable on the first case: {json.dumps({k: v for k, v in num.items() if k != 'comparable'}, default=str)[:500]}"
        )
    elif not num["identical"]:
        diffs.append(
            f"outputs differ on the first case: max abs diff {num['max_abs_diff']:.3g}, max rel diff {num['max_rel_diff']:.3g}"
            + (f", {num['nan_mismatch']} NaN positions differ" if num["nan_mismatch"] else "")
        )
    if real_side["timing_source"] == "neuron-profile" and emu_side["latency_us"] and real_side["latency_us"]:
        ratio = emu_side["latency_us"] / real_side["latency_us"]
        report["latency_ratio_estimate_over_measured"] = round(ratio, 4)
        diffs.append(
            f"latency: emulator estimate {emu_side['latency_us']:.3f} µs vs measured {real_side['latency_us']:.3f} µs "
            f"(estimate / measured = {ratio:.3f})"
        )
    if not diffs:
        diffs.append("no differences: same verdict, identical outputs on the first case")
    return report


def render_report(report: dict[str, Any]) -> str:
    """The Markdown report (``--report``)."""
    sides = report["sides"]
    cols = [k for k in ("emulator", "real") if k in sides]
    head = " | ".join(sides[c]["backend"] for c in cols)
    lines = [
        f"# nkiagent crosscheck: `{Path(report['kernel']).name}` on task `{report['task']}` ({report['target']})",
        "",
        f"- kernel sha256: `{report['code_sha256']}`",
        f"- nkiagent {report['nkiagent']}, Python {report['python']}",
        "",
        f"| | {head} |",
        "|---|" + "---|" * len(cols),
    ]

    def row(label: str, fn: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(fn(sides[c]) for c in cols) + " |")

    row("verdict", lambda s: s["verdict"])
    row("reasons", lambda s: "<br>".join(r.replace("|", "\\|") for r in s["reasons"]) or "—")
    row("latency", lambda s: f"{s['latency_us']:.3f} µs ({s['timing_source']})" if s["latency_us"] is not None else "—")
    row(
        "measurement spread",
        lambda s: f"{100 * s['measurement']['spread']:.2f}% over {s['measurement']['captures']} captures" if s.get("measurement") else "—",
    )
    row("toolchain", lambda s: ", ".join(f"{k} {v}" for k, v in s["toolchain"].items()) or "—")
    lines += ["", "## Differences", ""] + [f"- {d}" for d in report["differences"]] + [""]
    return "\n".join(lines)


def run_crosscheck(args: argparse.Namespace) -> int:
    from ..backends import BackendUnavailable, detect, get_backend
    from ..tasks import get_task

    if not Path(args.kernel).is_file():
        print(f"nkiagent crosscheck: kernel file not found: {args.kernel}", file=sys.stderr)
        return 2
    try:
        task = get_task(args.task)
        real = get_backend(args.backend, detect())
    except (KeyError, FileNotFoundError, ValueError, BackendUnavailable) as exc:
        print(f"nkiagent crosscheck: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    from ..verify.verifier import VerifyOptions

    report = crosscheck(
        args.kernel, task, args.target or "trn2", None if real.name == "emulator" else real, VerifyOptions(seeds=args.seeds)
    )
    text = render_report(report)
    if args.report:
        Path(args.report).write_text(text)
    print(json.dumps(report, indent=2, default=str) if args.json else text)
    if args.report:
        print(f"report written to {args.report}", file=sys.stderr)
    return 0
