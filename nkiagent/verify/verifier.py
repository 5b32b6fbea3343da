"""The verifier: static gate → sandboxed runs → correctness and integrity → profile → verdict.

Everything that decides is here, in the parent: the worker only runs the kernel and
reports. A kernel ``pass``es only when it clears the static gate, runs without error on
every case of the protocol (5 seeds × 3 distributions × the visible and hidden shapes),
matches the reference within tolerance everywhere with exact shape and dtype, leaves its
inputs unchanged, is deterministic, and its latency estimate does not beat the task's
speed of light. Speedup is baseline latency / kernel latency on the same target.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..emu.trace import Trace
from ..tasks.spec import Task
from .compare import compare
from .inputs import DISTRIBUTIONS, Case, InputCache, cases
from .result import EvalResult
from .sandbox import Limits, WorkerOutcome, run_worker

__all__ = ["verify", "VerifyOptions", "baseline_latency"]


class VerifyOptions:
    """Protocol knobs (defaults are the documented protocol; tests may shrink them)."""

    def __init__(self, seeds: int = 5, distributions: tuple[str, ...] = DISTRIBUTIONS, hidden: bool = True,
                 limits: Limits = Limits(), with_baseline: bool = True) -> None:
        self.seeds = seeds
        self.distributions = distributions
        self.hidden = hidden
        self.limits = limits
        self.with_baseline = with_baseline


#: Emulator errors that only an attempt to get around the emulator can cause.
_INTEGRITY_CODES = frozenset({"err_tensor_constructor"})

_BASELINE_CACHE: dict[tuple[str, str, str], float | None] = {}


def _detect_api(source: str) -> str:
    return "0.1" if "neuronxcc" in source else "0.3"


def _location(path: str, err: dict[str, Any], original: str) -> str:
    loc = str(err.get("location", ""))
    return loc.replace(path, original) if path else loc


def _profile(trace_path: str, task: Task, target: str, dims: dict[str, int]) -> tuple[dict[str, Any], float, Any]:
    from ..perf import profile_trace, speed_of_light
    from ..perf.specs import get_spec

    trace = Trace.from_json(json.loads(Path(trace_path).read_text()))
    work = task.work(dims)
    sol = speed_of_light(get_spec(target), matmul_flops=work["matmul_flops"], vector_elems=work["vector_elems"],
                         scalar_elems=work["scalar_elems"], hbm_bytes=work["hbm_bytes"])
    prof, _ = profile_trace(trace, target, task_flops=work["matmul_flops"] or None, sol=sol)
    return prof.to_dict(), prof.latency_us, prof


def baseline_latency(task: Task, target: str, limits: Limits = Limits()) -> float | None:
    """Latency estimate of the task's baseline kernel on ``target`` (cached per process)."""
    path = task.baseline_path()
    if path is None or not path.is_file():
        return None
    key = (task.name, hashlib.sha256(path.read_bytes()).hexdigest(), target)
    if key not in _BASELINE_CACHE:
        first = cases(task, 1, DISTRIBUTIONS[:1])[:1]
        cache = InputCache().ensure(task, first)
        run = {"id": 0, "dims": dict(task.dims), "seed": 0, "dist": first[0].distribution, "trace": True,
               "input_paths": InputCache.input_paths(cache, 0, len(task.inputs))}
        out = run_worker(path, None, [run], target=target, api=_detect_api(path.read_text()), limits=limits)
        lat = None
        try:
            if out.answer and out.answer["runs"] and "trace_path" in out.answer["runs"][0]:
                _, lat, _ = _profile(out.answer["runs"][0]["trace_path"], task, target, dict(task.dims))
        finally:
            if out.scratch:
                shutil.rmtree(out.scratch, ignore_errors=True)
        _BASELINE_CACHE[key] = lat
    return _BASELINE_CACHE[key]


def _runs(task: Task, opts: VerifyOptions) -> tuple[list[dict[str, Any]], list[Case], str]:
    all_cases = [c for c in cases(task, opts.seeds, opts.distributions) if opts.hidden or not c.hidden]
    cache = InputCache().ensure(task, all_cases)
    n_in = len(task.inputs)
    runs = [
        {"id": i, "dims": c.dims_dict, "seed": c.seed, "dist": c.distribution, "trace": i == 0, "input_paths": InputCache.input_paths(cache, i, n_in)}
        for i, c in enumerate(all_cases)
    ]
    # the first case again: two runs on the same input must agree bit for bit
    runs.append(dict(runs[0], id=len(runs), trace=False))
    return runs, all_cases, cache


def _fail_from_worker(res: EvalResult, out: WorkerOutcome) -> EvalResult:
    res.verdict = "fail"
    reason = {"timeout": "timeout", "crashed": "crash", "bad-answer": "crash"}.get(out.status, out.status)
    res.reasons.append(f"{reason}: {out.detail}")
    res.add("sandbox", False, out.detail, status=out.status, returncode=out.returncode)
    return res


def verify(kernel_path: str | Path, task: Task, target: str = "trn2", options: VerifyOptions | None = None) -> EvalResult:
    """Verify one kernel file against ``task`` on ``target``; see the module docstring."""
    from ..emu.targets import get_target
    from .gate import check_source

    opts = options or VerifyOptions()
    target = get_target(target).name
    t0 = time.perf_counter()
    path = Path(kernel_path)
    source = path.read_text()
    res = EvalResult(verdict="fail", task=task.name, target=target, code_sha256=hashlib.sha256(source.encode()).hexdigest())

    violations = check_source(source, str(path))
    res.add("static_gate", not violations, "; ".join(f"{v.rule} at {v.where(str(path))}" for v in violations))
    if violations:
        # code that does not parse is a compile failure, not a cheat
        res.verdict = "fail" if all(v.rule == "syntax-error" for v in violations) else "rejected"
        res.reasons.extend(f"static gate [{v.rule}] {v.where(str(path))}: {v.message}" for v in violations)
        res.wall_s = time.perf_counter() - t0
        return res

    runs, all_cases, cache = _runs(task, opts)
    out = run_worker(path, None, runs, target=target, api=_detect_api(source), limits=opts.limits)
    try:
        if out.answer is None:
            return _fail_from_worker(res, out)
        ans = out.answer
        scratch_kernel = str(out.scratch / "kernel.py") if out.scratch else ""
        if not ans.get("compiled"):
            err = ans.get("error", {})
            res.reasons.append(f"compile error: {err.get('type', '')}: {err.get('message', '')} at {_location(scratch_kernel, err, str(path))}")
            res.add("compile", False, res.reasons[-1])
            return res
        res.compiled = True
        _judge_runs(res, task, ans["runs"], all_cases, cache, scratch_kernel, str(path))
        if res.verdict == "rejected" or res.reasons:
            return res
        res.correct = True
        prof_dict, latency, prof = _profile(ans["runs"][0]["trace_path"], task, target, all_cases[0].dims_dict)
        from ..perf.report import summary_text

        res.profile = {k: prof_dict[k] for k in ("engines", "bottleneck", "hbm_read_bytes", "hbm_write_bytes", "dma_count", "flops",
                                                  "mfu_pct", "advice", "hot_lines", "instructions")}
        res.profile["summary"] = summary_text(prof)
        res.latency_us = latency
        res.model_version = prof.model_version
        res.sol_latency_us = prof.sol_latency_us
        res.fraction_of_peak = prof.fraction_of_sol
        if prof.below_speed_of_light:
            res.verdict = "rejected"
            res.reasons.append(
                f"integrity: latency estimate {latency:.3f} µs is below the task's speed of light {prof.sol_latency_us:.3f} µs on {target}"
            )
            res.add("speed_of_light", False, res.reasons[-1])
            return res
        res.add("speed_of_light", True, f"estimate {latency:.3f} µs ≥ bound {prof.sol_latency_us} µs")
        if opts.with_baseline:
            res.baseline_latency_us = baseline_latency(task, target, opts.limits)
        res.verdict = "pass"
        if res.baseline_latency_us:
            res.speedup = round(res.baseline_latency_us / latency, 4)
        return res
    finally:
        res.wall_s = round(time.perf_counter() - t0, 3)
        if out.scratch:
            shutil.rmtree(out.scratch, ignore_errors=True)


def _judge_runs(
    res: EvalResult, task: Task, runs: list[dict[str, Any]], all_cases: list[Case], cache: str, scratch_kernel: str, original: str
) -> None:
    """Fill correctness and integrity checks; on the first problem set verdict and reason."""
    expect_dtype = np.dtype(task.output.dtype) if task.output.dtype != "bfloat16" else None
    first_outputs: list[np.ndarray] | None = None
    for rec in runs:
        idx = rec["id"]
        case = all_cases[idx] if idx < len(all_cases) else all_cases[0]
        if "error" in rec:
            err = rec["error"]
            where = _location(scratch_kernel, err, original)
            if err.get("kind") == "sandbox":
                res.verdict = "rejected"
                res.reasons.append(f"integrity [sandbox]: {err.get('message')} at {where}")
            elif err.get("kind") == "nki" and err.get("code") in _INTEGRITY_CODES:
                res.verdict = "rejected"
                res.reasons.append(f"integrity [{err.get('code')}] at {where}: {err.get('message')}")
            elif err.get("kind") == "nki":
                res.reasons.append(f"NKI error [{err.get('code')}] at {where}: {err.get('message')} ({case.label()})")
            elif err.get("kind") == "output":
                res.reasons.append(f"{err.get('message')} at {where} ({case.label()})")
            elif err.get("kind") == "memory":
                res.reasons.append(f"memory limit exceeded at {where} ({case.label()})")
            else:
                res.reasons.append(f"runtime error {err.get('type')}: {err.get('message')} at {where} ({case.label()})")
            res.add("run", False, res.reasons[-1], case=case.label())
            return
        if rec.get("inputs_unchanged") is not True:
            res.verdict = "rejected"
            res.reasons.append(f"integrity: the kernel modified its inputs ({case.label()})")
            res.add("inputs_unchanged", False, res.reasons[-1])
            return
        outs = rec.get("outputs", [])
        if len(outs) != 1 or "path" not in outs[0]:
            res.reasons.append(f"wrong output: expected one {task.output.dtype} array of shape {list(task.output_shape(case.dims_dict))}, got {outs}")
            res.add("output", False, res.reasons[-1])
            return
        got = np.load(outs[0]["path"], allow_pickle=False)
        shape = task.output_shape(case.dims_dict)
        if task.reshape_output and got.size == int(np.prod(shape)):
            got = got.reshape(shape)
        if tuple(got.shape) != shape or (expect_dtype is not None and got.dtype != expect_dtype) or (expect_dtype is None and str(got.dtype) != "bfloat16"):
            res.reasons.append(f"wrong output: shape {list(got.shape)} {got.dtype}, expected {list(shape)} {task.output.dtype} ({case.label()})")
            res.add("output", False, res.reasons[-1])
            return
        if idx == len(all_cases):  # determinism re-run of case 0
            if first_outputs is None or not np.array_equal(first_outputs[0], got, equal_nan=True):
                res.verdict = "rejected"
                res.reasons.append("integrity: two runs on the same input gave different outputs (non-deterministic or stateful kernel)")
                res.add("deterministic", False, res.reasons[-1])
                return
            res.add("deterministic", True)
            continue
        cmp = compare(got, InputCache.reference(cache, idx), task.tolerance)
        if idx == 0:
            first_outputs = [got]
        if not cmp.ok:
            where = f" first mismatch at index {list(cmp.first_mismatch)}: got {cmp.got:.6g}, expected {cmp.expected:.6g}" if cmp.first_mismatch else ""
            res.reasons.append(
                f"wrong answer ({case.label()}): {cmp.reason}; max abs err {cmp.max_abs_err:.3g}, max rel err {cmp.max_rel_err:.3g}.{where}"
            )
            res.add("correctness", False, res.reasons[-1], case=case.label(), max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err)
            return
    res.add("correctness", True, f"{len(all_cases)} cases within tolerance")
    res.add("inputs_unchanged", True)
