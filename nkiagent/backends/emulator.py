"""``EmulatorBackend``: the embedded emulator and cost model behind the backend interface (the default).

A run goes through the verifier's sandboxed worker (kernel code never runs in the caller's
process), with an instruction trace whose schedule on the target is the latency estimate,
labelled ``emulator-estimate``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .base import RunResult, detect_api

if TYPE_CHECKING:
    from ..emu.trace import Trace

__all__ = ["EmulatorBackend", "run_in_worker"]


class EmulatorBackend:
    """The embedded NKI emulator (see the module docstring)."""

    name = "emulator"

    def versions(self) -> dict[str, str]:
        from ..perf import MODEL_VERSION

        return {"emulator": MODEL_VERSION}

    def run(self, kernel_source: str, inputs: list[np.ndarray], target: str, *, kernel_name: str | None = None,
            timed: bool = True) -> RunResult:
        from ..perf import profile_trace

        res = RunResult(self.name, target, toolchain=self.versions())
        trace = run_in_worker(res, kernel_source, inputs, kernel_name, trace=timed)
        if trace is not None:
            res.profile, _ = profile_trace(trace, target)
            res.latency_us, res.timing_source = res.profile.latency_us, res.profile.timing_source
        return res


def run_in_worker(res: RunResult, source: str, inputs: list[np.ndarray], kernel_name: str | None, *, trace: bool = False,
                  backend: str = "emulator", package_paths: list[str] | None = None) -> Trace | None:
    """One sandboxed worker run of ``source`` on ``inputs``; fills ``res.outputs`` or ``res.error``.

    Returns the instruction trace when ``trace`` was asked for and the run succeeded; a trace the
    kernel tampered with is an error (``kind: integrity``), never returned.
    """
    from ..sandbox.arrays import save_array
    from ..sandbox.launch import TraceIntegrityError, run_worker

    with tempfile.TemporaryDirectory(prefix="nkiagent-run-") as tmp:
        kpath = Path(tmp) / "kernel.py"
        kpath.write_text(source)
        paths = []
        for i, a in enumerate(inputs):
            paths.append(str(Path(tmp) / f"in_{i}.npy"))
            save_array(paths[-1], a)
        out = run_worker(kpath, None, [{"id": 0, "trace": trace, "input_paths": paths}], target=res.target, api=detect_api(source),
                         kernel_name=kernel_name, backend=backend, package_paths=package_paths)
        try:
            if out.answer is None:
                res.error = {"kind": out.status, "message": out.detail, "location": "<worker>:0"}
                return None
            if not out.answer.get("compiled"):
                res.error = out.answer.get("error", {})
                return None
            rec = out.answer["runs"][0]
            if "error" in rec:
                res.error = rec["error"]
                return None
            res.outputs = [np.load(o["path"], allow_pickle=False) for o in rec.get("outputs", []) if "path" in o]
            if not trace or backend != "emulator":
                return None
            try:
                return out.priced_trace(0)
            except TraceIntegrityError as exc:
                res.error = {"kind": "integrity", "message": str(exc), "location": "<worker>:0"}
                return None
        finally:
            if out.scratch:
                shutil.rmtree(out.scratch, ignore_errors=True)
