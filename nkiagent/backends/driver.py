"""The hardware driver: compile a kernel with AWS's toolchain and run it once on the pinned NeuronCore.

Started by :class:`nkiagent.backends.neuron.NeuronBackend` as ``python -m nkiagent.backends.driver``
in a scratch directory with ``NEURON_RT_VISIBLE_CORES``, ``NEURON_PLATFORM_TARGET_OVERRIDE`` and
``NEURON_CC_FLAGS`` set, so kernel code and the compiler never run in the agent's process. It
reads one JSON request on stdin, calls ``baremetal(kernel, save_neff_name=…, save_trace_name=…,
additional_compile_opt="--target T --lnc N")(*arrays)`` from ``neuronxcc.nki`` (0.1 kernels) or
``nki``, saves the outputs as ``.npy`` and prints one JSON line: ``{"neff", "outputs"}`` or
``{"error": <compiler output and traceback>}`` for the parent to map to NCC codes and lines.
With ``compile_only`` (a machine with the compiler but no device), a NEFF written before the
run failed counts as a successful compile.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _build(req: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from nkiagent.sandbox.arrays import save_array
    from nkiagent.sandbox.real import pick_real_kernel

    for p in reversed(req.get("package_paths", [])):
        sys.path.insert(0, p)
    module = importlib.import_module("neuronxcc.nki" if req["api"] == "0.1" else "nki")
    baremetal = getattr(module, "baremetal", None)
    if baremetal is None:
        raise RuntimeError(f"{module.__name__} {getattr(module, '__version__', '')} has no baremetal(): cannot compile standalone kernels")
    kernel_path = req["kernel_path"]
    namespace: dict[str, Any] = {"__name__": "nki_candidate", "__file__": kernel_path}
    exec(compile(Path(kernel_path).read_text(), kernel_path, "exec"), namespace)  # noqa: S102 — running the kernel is the point, in this throwaway process
    kernel = pick_real_kernel(namespace, req.get("kernel_name"))
    arrays = [np.load(p, allow_pickle=False) for p in req["input_paths"]]
    out_dir = Path(req["out_dir"])
    neff, ntff = out_dir / "kernel.neff", out_dir / "kernel.ntff"
    opts = f"--target {req['target']} --lnc {req['lnc']}"
    try:
        result = baremetal(kernel, save_neff_name=str(neff), save_trace_name=str(ntff), additional_compile_opt=opts)(*arrays)
    except Exception as exc:
        if req.get("compile_only") and neff.is_file():  # compiled; only running it failed (no NeuronCore here)
            return {"neff": str(neff), "outputs": [], "run_error": f"{type(exc).__name__}: {exc}"[:2000]}
        raise
    outs = result if isinstance(result, (tuple, list)) else [result]
    paths = []
    for k, o in enumerate(outs):
        paths.append(str(out_dir / f"out_{k}.npy"))
        save_array(paths[-1], np.asarray(o))
    if not neff.is_file():
        raise RuntimeError(f"the compiler reported success but wrote no NEFF at {neff}")
    return {"neff": str(neff), "outputs": paths}


def main() -> None:
    req = json.loads(sys.stdin.read())
    try:
        answer = _build(req)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        answer = {"error": traceback.format_exc()[-8000:]}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
