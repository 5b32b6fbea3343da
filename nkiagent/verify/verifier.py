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
import threading
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

__all__ = ["BACKEND_ENV", "VerifyOptions", "baseline_latency", "verify"]


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
_BASELINE_LOCK = threading.Lock()


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
    """Latency estimate of the task's baseline kernel on ``target`` (cached per process).

    Thread-safe: pools verify many candidates of one task at once, and the baseline must be
    run once, not once per slot.
    """
    path = task.baseline_path()
    if path is None or not path.is_file():
        return None
    key = (task.name, hashlib.sha256(path.read_bytes()).hexdigest(), target)
    with _BASELINE_LOCK:
        if key not in _BASELINE_CACHE:
            _BASELINE_CACHE[key] = _run_baseline(task, path, target, limits)
        return _BASELINE_CACHE[key]


def _run_baseline(task: Task, path: Path, target: str, limits: Limits) -> float | None:
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
    return lat


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


def verify(kernel_path: str | Path, task: Task, target: str = "trn2", options: VerifyOptions | None = None,
           backend: Any = None) -> EvalResult:
    """Verify one kernel file against ``task`` on ``target``; see the module docstring.

    ``backend`` is a backend name (``emulator``, ``neuron-sim``, ``neuron-hw``, ``auto``; default
    ``$NKIAGENT_BACKEND`` or ``emulator``) or a :class:`nkiagent.backends.NeuronBackend`; see
    :func:`_neuron_timing` for what the real toolchain changes.
    """
    from ..emu.targets import get_target
    from .gate import check_source

    opts = options or VerifyOptions()
    target = get_target(target).name
    t0 = time.perf_counter()
    path = Path(kernel_path)
    source = path.read_text()
    res = EvalResult(verdict="fail", task=task.name, target=target, code_sha256=hashlib.sha256(source.encode()).hexdigest())
    be = _resolve_backend(backend)
    if be is not None:
        res.backend, res.toolchain = be.name, be.versions()

    violations = check_source(source, str(path))
    res.add("static_gate", not violations, "; ".join(f"{v.rule} at {v.where(str(path))}" for v in violations))
    if violations:
        # code that does not parse is a compile failure, not a cheat
        res.verdict = "fail" if all(v.rule == "syntax-error" for v in violations) else "rejected"
        res.reasons.extend(f"static gate [{v.rule}] {v.where(str(path))}: {v.message}" for v in violations)
        res.wall_s = time.perf_counter() - t0
        return res

    runs, all_cases, cache = _runs(task, opts)
    real = {} if be is None else {"backend": "neuron-sim", "package_paths": be.toolchain.package_paths()}
    out = run_worker(path, None, runs, target=target, api=_detect_api(source), limits=opts.limits, **real)
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
        if be is not None and _neuron_timing(res, be, path, source, task, target, ans, out, runs, cache, all_cases, opts):
            return res
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


#: Default backend of :func:`verify` (``nkiagent run --backend`` sets it for the agent's evaluations).
BACKEND_ENV = "NKIAGENT_BACKEND"


def _resolve_backend(backend: Any) -> Any:
    """``None`` for the emulator (the unchanged default path), else a ``NeuronBackend``."""
    import os

    if backend is None:
        backend = os.environ.get(BACKEND_ENV) or "emulator"
    if not isinstance(backend, str):
        return backend
    if backend == "emulator":
        return None
    from ..backends import get_backend

    be = get_backend(backend)
    return None if be.name == "emulator" else be


def _compile_failure(res: EvalResult, err: dict[str, Any], path: Path) -> None:
    """The real compiler rejected the kernel: its NCC code, the kernel's file:line, the message and what the code means."""
    where = str(err.get("location", "")).replace("kernel.py", str(path), 1)
    hint = f" ({err['hint']})" if err.get("hint") else ""
    res.verdict, res.compiled, res.correct = "fail", False, False
    res.reasons.append(f"compile error [{err.get('code')}] at {where}: {err.get('message')}{hint}")
    res.add("neuron_compile", False, res.reasons[-1], code=err.get("code"))


def _neuron_timing(res: EvalResult, be: Any, path: Path, source: str, task: Task, target: str, ans: dict[str, Any],
                   out: WorkerOutcome, runs: list[dict[str, Any]], cache: str, all_cases: list[Case], opts: VerifyOptions) -> bool:
    """Latency for a kernel the real simulator found correct. True when ``res`` is final.

    ``neuron-sim``: with ``neuronx-cc`` installed the kernel must also compile for the target (compile
    only, no device). AWS's simulator has no latency model, so the emulator's cost model estimates
    the latency from one traced run (labelled ``emulator-estimate``; when the emulator cannot run
    the kernel there is no latency, and the verdict is still ``pass``). ``neuron-hw``: the kernel
    is compiled and run on a NeuronCore for the first case — its outputs must match the reference
    too — and timed with the profiler (``neuron-profile``, spread gate); the baseline is measured
    the same way, and no speedup is claimed from an unstable measurement.
    """
    inputs = [np.load(p, allow_pickle=False) for p in InputCache.input_paths(cache, 0, len(task.inputs))]
    if be.name == "neuron-sim":
        err = be.check_compile(source, inputs, target) if be.toolchain.neuronx_cc else None
        if err:
            _compile_failure(res, err, path)
            return True
        est = run_worker(path, None, [dict(runs[0], trace=True)], target=target, api=_detect_api(source), limits=opts.limits)
        try:
            rec = est.answer["runs"][0] if est.answer and est.answer.get("runs") else {}
            if "trace_path" not in rec:
                res.verdict = "pass"
                res.add("estimate", False, "the embedded emulator could not run this kernel, so there is no latency estimate")
                return True
            assert out.scratch is not None  # the worker answered, so its scratch is kept
            ans["runs"][0]["trace_path"] = shutil.copy(rec["trace_path"], out.scratch / "emulator_trace.json")
        finally:
            if est.scratch:
                shutil.rmtree(est.scratch, ignore_errors=True)
        return False
    from ..perf import speed_of_light
    from ..perf.report import summary_text
    from ..perf.specs import get_spec

    run = be.run(source, inputs, target)
    if run.error:
        _compile_failure(res, run.error, path)
        return True
    cmp = compare(run.outputs[0].reshape(task.output_shape(all_cases[0].dims_dict)) if run.outputs else np.zeros(0),
                  InputCache.reference(cache, 0), task.tolerance)
    if not cmp.ok:
        res.verdict, res.correct = "fail", False
        res.reasons.append(f"wrong answer on hardware ({all_cases[0].label()}): {cmp.reason}; max abs err {cmp.max_abs_err:.3g}")
        res.add("hardware_correctness", False, res.reasons[-1])
        return True
    res.add("hardware_correctness", True, f"{all_cases[0].label()} within tolerance on {be.name}")
    prof, meas = run.profile, run.measurement
    work = task.work(all_cases[0].dims_dict)
    sol = speed_of_light(get_spec(target), matmul_flops=work["matmul_flops"], vector_elems=work["vector_elems"],
                         scalar_elems=work["scalar_elems"], hbm_bytes=work["hbm_bytes"])
    if sol.latency_ns > 0 and prof.latency_us:
        prof.sol_latency_us = round(sol.latency_ns / 1e3, 3)
        prof.fraction_of_sol = round(sol.latency_ns / 1e3 / prof.latency_us, 4)
    res.latency_us, res.timing_source, res.model_version = prof.latency_us, "neuron-profile", prof.model_version
    res.sol_latency_us, res.fraction_of_peak = prof.sol_latency_us, prof.fraction_of_sol
    pd = prof.to_dict()
    res.profile = {k: pd[k] for k in ("engines", "bottleneck", "hbm_read_bytes", "hbm_write_bytes", "dma_count", "flops", "mfu_pct", "advice",
                                      "hot_lines", "instructions")}
    res.profile["summary"] = summary_text(prof)
    res.profile["measurement"] = meas
    res.add("timing_spread", bool(meas.get("stable")),
            f"median {meas.get('median_us')} µs over {meas.get('captures')} captures, spread {100 * meas.get('spread', 0):.2f}% "
            f"(limit {100 * meas.get('spread_limit', 0):.0f}%)")
    baseline = task.baseline_path()
    if opts.with_baseline and baseline is not None and baseline.is_file():
        base = be.run(baseline.read_text(), inputs, target)
        if base.ok and base.measurement.get("stable"):
            res.baseline_latency_us = base.latency_us
    res.verdict = "pass"
    if res.baseline_latency_us and meas.get("stable"):
        res.speedup = round(res.baseline_latency_us / prof.latency_us, 4)
    return True


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
