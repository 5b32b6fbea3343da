"""``nkiagent simulate`` and ``nkiagent ops``: run a kernel file on the emulator, list the API."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["kernel_and_inputs", "load_kernel", "parse_inputs", "random_inputs", "run_ops", "run_simulate"]


def parse_inputs(spec: str) -> list[tuple[str, tuple[int, ...], str]]:
    """Parse ``"a:256x512:float32,b:128:bfloat16"`` into (name, shape, dtype) triples."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        fields = part.split(":")
        if len(fields) != 3:
            raise ValueError(f"input {part!r} must be NAME:SHAPE:DTYPE, e.g. x:128x512:float32")
        name, shape_s, dtype = fields
        try:
            shape = tuple(int(s) for s in shape_s.lower().split("x"))
        except ValueError:
            raise ValueError(f"input {part!r}: shape {shape_s!r} must be integers joined by 'x', e.g. 128x512") from None
        out.append((name, shape, dtype))
    if not out:
        raise ValueError("--inputs is empty")
    return out


def load_kernel(path: str, name: str | None) -> Any:
    """Import a kernel file (with ``import nki`` resolving to the emulator) and pick its kernel."""
    from ..emu import Kernel, install

    install()
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"kernel file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"nkiagent_user_kernel_{abs(hash(file.resolve()))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if name:
        if not hasattr(module, name):
            raise AttributeError(f"{path} has no function {name!r}")
        return getattr(module, name)
    kernels = [v for v in vars(module).values() if isinstance(v, Kernel)]
    if len(kernels) != 1:
        found = ", ".join(k.fn.__name__ for k in kernels) or "none"
        raise ValueError(f"{path}: expected exactly one @nki.jit kernel (found: {found}); pass --kernel-name")
    return kernels[0]


def kernel_and_inputs(args: argparse.Namespace, command: str) -> tuple[Any, list[tuple[str, tuple[int, ...], str]]] | None:
    """Parse ``--inputs`` and load the kernel; print a usage error naming ``command`` and return None on failure."""
    try:
        specs = parse_inputs(args.inputs)
        kernel = load_kernel(args.kernel, args.kernel_name)
    except (ValueError, FileNotFoundError, AttributeError, SyntaxError) as exc:
        print(f"nkiagent {command}: {exc}", file=sys.stderr)
        return None
    return kernel, specs


def random_inputs(specs: list[tuple[str, tuple[int, ...], str]], seed: int) -> tuple[Any, ...]:
    """Standard-normal arrays of the given shapes and dtypes."""
    import numpy as np

    from ..emu.dtypes import as_dtype

    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(as_dtype(d)) for _, shape, d in specs)


def run_simulate(args: argparse.Namespace) -> int:
    import numpy as np

    from ..emu import NkiError, Trace, run_kernel

    loaded = kernel_and_inputs(args, "simulate")
    if loaded is None:
        return 2
    kernel, specs = loaded
    arrays = random_inputs(specs, args.seed)
    trace = Trace()
    try:
        result = run_kernel(kernel, tuple(arrays), target=args.target, trace=trace)
    except NkiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    outs = result.outputs if isinstance(result.outputs, (tuple, list)) else [result.outputs]
    summary: dict[str, Any] = {
        "target": result.target,
        "instructions": result.instructions,
        "by_op": trace.counts(),
        "sbuf_peak_bytes_per_partition": result.sbuf_peak_bytes,
        "outputs": [
            {
                "shape": list(o.shape),
                "dtype": str(o.dtype),
                "finite": bool(np.isfinite(o.astype(np.float32)).all()),
                "mean": float(np.nanmean(o.astype(np.float32))),
            }
            for o in outs
            if hasattr(o, "shape")
        ],
        "warnings": result.warnings,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"target {summary['target']}: {summary['instructions']} instructions, SBUF peak {result.sbuf_peak_bytes} B/partition")
        for op, n in sorted(summary["by_op"].items(), key=lambda kv: -kv[1]):
            print(f"  {op:28s} {n}")
        for i, o in enumerate(summary["outputs"]):
            print(f"output {i}: shape {o['shape']} {o['dtype']} finite={o['finite']} mean={o['mean']:.6g}")
        for w in summary["warnings"]:
            print(f"warning: {w}")
    return 0


def run_ops(args: argparse.Namespace) -> int:
    from ..emu import isa, language

    listing = {
        "nki.isa": sorted(n for n in isa._IMPLEMENTED if not n[0].isupper() and n not in ("annotations",)),
        "nki.language": sorted(n for n in language._IMPLEMENTED if n not in ("annotations",)),
    }
    if args.json:
        print(json.dumps(listing, indent=2))
    else:
        for mod, names in listing.items():
            print(f"{mod} ({len(names)}):")
            print("  " + ", ".join(names))
    return 0
