"""The verifier: static gate → sandboxed runs → correctness and integrity → profile → verdict.

Everything that decides is here, in the parent: the workers only run the kernel and report. A
kernel ``pass``es only when it clears the static gate, runs without error on every case of the
protocol (seeds × the task's value distributions × the visible and hidden shapes), matches
the reference within tolerance everywhere with exact shape and dtype, leaves its inputs
unchanged, is deterministic, leaves its trace and the emulator untouched, issues the same
instructions for every input of one shape, and its latency estimate does not beat the task's
speed of light. Speedup is baseline latency / kernel latency on the same target.

Every run is traced (the trace streams to the parent as it is made), because the instruction
stream is the invariant that makes one timed run enough: NKI instructions are a function of
the shapes (and of registers a kernel reads on purpose), so all runs of one shape must stream
the same instructions. A kernel that recognises an input and skips work there changes its
stream and is rejected; the latency is the worst over the visible shape's distinct streams,
which for every honest kernel of a task without data-dependent control is exactly one.

Failure messages say what is wrong — which shape class, which distribution, how many
elements, how large the error — and never a reference value, a hidden size, a seed or the
run order, which would make a deliberately wrong kernel an oracle for the hidden cases.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..emu.trace import Trace
from ..sandbox.launch import Limits, WorkerOutcome, run_worker, warm_launcher
from ..tasks.spec import Task
from .compare import compare
from .inputs import Case, InputCache, cases, describe_distribution
from .protocol import VISIBLE_SEEDS
from .result import EvalResult

__all__ = ["BACKEND_ENV", "VerifyOptions", "baseline_latency", "prepare", "verify"]


@dataclass(frozen=True)
class VerifyOptions:
    """Protocol knobs (defaults are the documented protocol; tests may shrink them).

    ``distributions``: ``None`` means the task's own. ``parallel``: worker processes one
    verification spreads its cases over (default: all cores; :func:`~nkiagent.verify.pool.verify_many`
    divides the cores between the candidates it runs at once). ``input_cache``: the directory of
    the cached inputs and references (default ``$NKIAGENT_INPUT_CACHE`` or tmpfs).
    """

    seeds: int = VISIBLE_SEEDS
    distributions: tuple[str, ...] | None = None
    hidden: bool = True
    limits: Limits = field(default_factory=Limits)
    with_baseline: bool = True
    parallel: int | None = None
    input_cache: str | None = None


#: Emulator errors that only an attempt to get around the emulator can cause.
_INTEGRITY_CODES = frozenset({"err_tensor_constructor"})

_BASELINE_CACHE: dict[tuple[str, ...], float | None] = {}
_BASELINE_LOCK = threading.Lock()


def _detect_api(source: str) -> str:
    return "0.1" if "neuronxcc" in source else "0.3"


def _unscratch(text: str, scratch_kernels: list[str], original: str) -> str:
    """Text naming the author's file, not the worker's scratch copy of it."""
    for scratch in scratch_kernels:
        text = text.replace(scratch, original)
    return text


def _location(err: dict[str, Any], scratch_kernels: list[str], original: str) -> str:
    """An error's ``file:line`` in the author's file."""
    return _unscratch(str(err.get("location", "")), scratch_kernels, original)


def _task_sol(task: Task, target: str, dims: dict[str, int]) -> Any:
    """The task's speed of light on ``target`` at ``dims``: its whole declared work, fp32-required FLOPs included."""
    from ..perf import speed_of_light
    from ..perf.specs import get_spec

    return speed_of_light(get_spec(target), **task.work(dims))


def _profile(trace: Trace, task: Task, target: str, dims: dict[str, int]) -> Any:
    from ..perf import profile_trace

    prof, _ = profile_trace(
        trace, target, task_flops=task.work(dims)["matmul_flops"] or None, sol=_task_sol(task, target, dims), precision=task.precision_floor
    )
    return prof


# ------------------------------------------------------------------------------------ baseline


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nkiagent" / "baselines"


_CODE_VERSION: list[str] = []


def _code_version() -> str:
    """A hash of the emulator's and cost model's sources: a stored baseline latency is only reused while both are unchanged."""
    if not _CODE_VERSION:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for path in sorted([*root.glob("emu/**/*.py"), *root.glob("perf/**/*.py")]):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
        _CODE_VERSION.append(h.hexdigest()[:16])
    return _CODE_VERSION[0]


def baseline_latency(task: Task, target: str, limits: Limits | None = None, inputs: str | None = None) -> float | None:
    """Latency estimate of the task's baseline kernel on ``target``, kept per process and on disk.

    Thread-safe: pools verify many candidates of one task at once, and the baseline must be run
    once, not once per slot. The disk copy (``~/.cache/nkiagent/baselines``) is keyed by the task
    file, the baseline file, the target and the emulator's and cost model's sources, so a new
    session does not pay for it again and a changed cost model never reuses an old number.
    ``inputs``: an input cache directory whose case 0 is :func:`baseline_case` (the protocol's own,
    so the first evaluation of a task draws those inputs once).
    """
    path = task.baseline_path()
    if path is None or not path.is_file():
        return None
    task_src = task.source_path.read_bytes() if task.source_path and task.source_path.is_file() else task.name.encode()
    key = (task.name, hashlib.sha256(task_src + b"\0" + path.read_bytes()).hexdigest()[:16], target, _code_version())
    with _BASELINE_LOCK:
        if key in _BASELINE_CACHE:
            return _BASELINE_CACHE[key]
        stored = _cache_dir() / f"{'-'.join(key)}.json"
        try:
            value = json.loads(stored.read_text())["latency_us"]
            _BASELINE_CACHE[key] = float(value) if value is not None else None
            return _BASELINE_CACHE[key]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        lat = _run_baseline(task, path, target, limits or Limits(), inputs)
        _BASELINE_CACHE[key] = lat
        if lat is not None:
            try:
                stored.parent.mkdir(parents=True, exist_ok=True)
                tmp = stored.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"task": task.name, "target": target, "latency_us": lat}))
                os.replace(tmp, stored)
            except OSError:
                pass  # a read-only home: the process cache still holds it
        return lat


def baseline_case(task: Task) -> Case:
    """The one case a baseline's latency is measured on: the visible shape, seed 0, the task's first distribution."""
    return cases(task, 1, task.distributions[:1])[0]


def _baseline_inputs(task: Task, all_cases: list[Case], cache: str) -> str | None:
    """The protocol's input cache when its first case is the baseline's (so the baseline draws no inputs of its own)."""
    return cache if all_cases and all_cases[0] == baseline_case(task) else None


def _run_baseline(task: Task, path: Path, target: str, limits: Limits, inputs: str | None) -> float | None:
    first = baseline_case(task)
    cache = inputs or InputCache().ensure(task, [first])
    run = {"id": 0, "dims": dict(task.dims), "seed": 0, "dist": first.distribution,
           "input_paths": InputCache.input_paths(cache, 0, len(task.inputs))}
    out = run_worker(path, None, [run], target=target, api=_detect_api(path.read_text()), limits=limits)
    try:
        return _profile(out.priced_trace(0), task, target, dict(task.dims)).latency_us if out.answer and 0 in out.traces else None
    finally:
        if out.scratch:
            shutil.rmtree(out.scratch, ignore_errors=True)


def prepare(task: Task, target: str = "trn2", options: VerifyOptions | None = None) -> None:
    """Make what the first verification of ``task`` needs ahead of it: the worker launcher, the protocol's inputs and
    references, and the baseline's latency.

    Why: on a task's first evaluation those cost more than the verification itself (most of a
    second for the inputs of a level-1 task). A session starts this in the background as it
    opens, while the model writes its first answer; a verification that comes first waits for the
    same work (per cache directory, and the baseline's lock) instead of doing it twice.
    """
    opts = options or VerifyOptions()
    warm_launcher()
    _, all_cases, cache = _runs(task, opts)
    if opts.with_baseline:
        baseline_latency(task, target, opts.limits, _baseline_inputs(task, all_cases, cache))


# ------------------------------------------------------------------------------------ runs


def _runs(task: Task, opts: VerifyOptions) -> tuple[list[dict[str, Any]], list[Case], str]:
    all_cases = [c for c in cases(task, opts.seeds, opts.distributions) if opts.hidden or not c.hidden]
    cache = InputCache(opts.input_cache).ensure(task, all_cases)
    n_in = len(task.inputs)
    runs = [
        {"id": i, "dims": c.dims_dict, "seed": c.seed, "dist": c.distribution, "input_paths": InputCache.input_paths(cache, i, n_in)}
        for i, c in enumerate(all_cases)
    ]
    # the first case again: two runs on the same input must agree bit for bit (in another process when there are two)
    runs.append(dict(runs[0], id=len(runs)))
    return runs, all_cases, cache


@dataclass
class _Batch:
    """The merged outcome of the worker processes one verification ran its cases in."""

    outcomes: list[WorkerOutcome]
    digests: dict[int, str] = field(default_factory=dict)
    formatted: dict[Any, bytes] = field(default_factory=dict)  #: operand texts, shared by the runs' digests

    @property
    def failed(self) -> WorkerOutcome | None:
        return next((o for o in self.outcomes if o.answer is None), None)

    @property
    def uncompiled(self) -> dict[str, Any] | None:
        return next((o.answer for o in self.outcomes if o.answer is not None and not o.answer.get("compiled")), None)

    def runs(self) -> list[dict[str, Any]]:
        recs = [r for o in self.outcomes if o.answer for r in o.answer.get("runs", [])]
        return sorted(recs, key=lambda r: r["id"])

    def trace(self, run_id: int) -> Trace | None:
        return next((o.traces[run_id] for o in self.outcomes if run_id in o.traces), None)

    def digest(self, run_id: int) -> str:
        """The run's :meth:`Trace.digest`, computed once."""
        if run_id not in self.digests:
            trace = self.trace(run_id)
            self.digests[run_id] = trace.digest(self.formatted) if trace is not None else ""
        return self.digests[run_id]

    def cleanup(self) -> None:
        for o in self.outcomes:
            if o.scratch:
                shutil.rmtree(o.scratch, ignore_errors=True)


def _parallel(opts: VerifyOptions) -> int:
    return max(1, opts.parallel if opts.parallel is not None else (os.cpu_count() or 1))


def _run_cases(path: Path, runs: list[dict[str, Any]], target: str, api: str, opts: VerifyOptions, real: dict[str, Any],
               on_run: Any = None) -> _Batch:
    """Run the cases in ``parallel`` worker processes, interleaved so each gets a share of every shape.

    The determinism re-run of case 0 is the last run; interleaving puts it in another process
    than case 0 whenever there are two, so "same input, same output" holds across processes.
    ``on_run(scratch, run_id)`` hears of each run as it ends (see :func:`run_worker`).
    """
    n = min(_parallel(opts), max(1, len(runs) // 4))  # a worker's start-up is worth a few runs at least
    chunks = [runs[k::n] for k in range(n)]
    if n == 1:
        return _Batch([run_worker(path, None, chunks[0], target=target, api=api, limits=opts.limits, on_run=on_run, **real)])
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="nkiagent-cases") as pool:
        futures = [pool.submit(run_worker, path, None, c, target=target, api=api, limits=opts.limits, on_run=on_run, **real)
                   for c in chunks]
        return _Batch([f.result() for f in futures])


def _output_dtype_ok(task: Task, got: np.ndarray) -> bool:
    return str(got.dtype) == "bfloat16" if task.output.dtype == "bfloat16" else got.dtype == np.dtype(task.output.dtype)


class _EarlyChecks:
    """Comparisons started as runs end, while the workers go on with the others (one thread: NumPy keeps the core busy)."""

    def __init__(self, task: Task, all_cases: list[Case], cache: str) -> None:
        self.task, self.all_cases, self.cache = task, all_cases, cache
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nkiagent-compare")
        self.futures: dict[int, Future[tuple[np.ndarray, Any] | None]] = {}

    def submit(self, scratch: Path, run_id: int) -> None:
        if run_id < len(self.all_cases):
            self.futures[run_id] = self.pool.submit(self._check, scratch / f"out_{run_id}_0.npy", run_id)

    def _check(self, out: Path, idx: int) -> tuple[np.ndarray, Any] | None:
        """(output, comparison) when the output has the task's shape and dtype; ``None`` leaves the judging to later."""
        if not out.is_file():
            return None
        got = np.load(out, mmap_mode="r", allow_pickle=False)  # a read-only map of the worker's file: no copy
        shape = self.task.output_shape(self.all_cases[idx].dims_dict)
        if self.task.reshape_output and got.size == int(np.prod(shape)):
            got = got.reshape(shape)
        if tuple(got.shape) != shape or not _output_dtype_ok(self.task, got):
            return None
        return got, compare(got, InputCache.reference(self.cache, idx), self.task.tolerance)

    def result(self, idx: int) -> tuple[np.ndarray, Any] | None:
        future = self.futures.get(idx)
        return future.result() if future is not None else None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _fail_from_worker(res: EvalResult, out: WorkerOutcome, all_cases: list[Case], visible: dict[str, int]) -> EvalResult:
    res.verdict = "fail"
    reason = {"timeout": "timeout", "crashed": "crash", "bad-answer": "crash"}.get(out.status, out.status)
    detail = out.detail + (_timeout_detail(out.extra["progress"], all_cases, visible) if "progress" in out.extra else "")
    res.reasons.append(f"{reason}: {detail}")
    res.add("sandbox", False, detail, status=out.status, returncode=out.returncode)
    return res


def _timeout_detail(progress: dict[str, Any], all_cases: list[Case], visible: dict[str, int]) -> str:
    """Where a timed-out worker was: which case (by its public label), how many of its runs had finished.

    The instruction count is given for a visible-shape run only: for a hidden one it would measure the hidden size.
    """
    if not all_cases:
        return ""
    runs, finished, running = progress["runs"], progress["finished"], progress["running"]
    text = f" after {len(finished)} of this worker's {len(runs)} runs had finished"
    if running is None:
        return text
    case = all_cases[running % len(all_cases)]
    text += f"; it was running {case.public_label(visible)}"
    if not case.hidden:
        text += f" and had recorded {progress['records']:,} instructions"
    return text + (
        ". The emulator executes every instruction, so its time grows with their number: fewer, larger instructions "
        "(bigger tiles, fewer loop iterations) run faster here and on the hardware"
    )


# ------------------------------------------------------------------------------------ verify


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
    else:
        warm_launcher()  # its imports overlap the gate and a first evaluation's inputs

    violations = check_source(source, str(path))
    res.add("static_gate", not violations, "; ".join(f"{v.rule} at {v.where(str(path))}" for v in violations))
    if violations:
        # code that does not parse is a compile failure, not a cheat
        res.verdict = "fail" if all(v.rule in ("syntax-error", "too-large") for v in violations) else "rejected"
        res.reasons.extend(f"static gate [{v.rule}] {v.where(str(path))}: {v.message}" for v in violations)
        res.wall_s = time.perf_counter() - t0
        return res

    runs, all_cases, cache = _runs(task, opts)
    # the baseline runs beside the cases, on the protocol's own inputs when its first case is the
    # baseline's (after the first evaluation of a task it is a number on disk)
    baseline = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nkiagent-baseline") if opts.with_baseline and be is None else None
    shared = _baseline_inputs(task, all_cases, cache)
    base_future = baseline.submit(baseline_latency, task, target, opts.limits, shared) if baseline is not None else None
    real = {} if be is None else {"backend": "neuron-sim", "package_paths": be.toolchain.package_paths()}
    early = _EarlyChecks(task, all_cases, cache)
    batch = _run_cases(path, runs, target, _detect_api(source), opts, real, on_run=early.submit if be is None else None)
    try:
        failed = batch.failed
        if failed is not None:
            return _fail_from_worker(res, failed, all_cases, dict(task.dims))
        scratch_kernels = [str(o.scratch / "kernel.py") for o in batch.outcomes if o.scratch]
        uncompiled = batch.uncompiled
        if uncompiled is not None:
            err = uncompiled.get("error", {})
            res.reasons.append(f"compile error: {err.get('type', '')}: {err.get('message', '')} at {_location(err, scratch_kernels, str(path))}")
            res.add("compile", False, res.reasons[-1])
            return res
        res.compiled = True
        # integrity first: a kernel that chose its instructions from the data, or tampered with its
        # trace, learns nothing from how wrong its outputs were (failure text is an oracle otherwise)
        if be is None and not _judge_integrity(res, task, batch, runs, all_cases):
            return res
        _judge_runs(res, task, batch.runs(), all_cases, cache, scratch_kernels, str(path), early)
        if res.verdict == "rejected" or res.reasons:
            return res
        res.correct = True
        if be is not None and _neuron_timing(res, be, path, source, task, target, runs, cache, all_cases, opts):
            return res
        visible = _distinct_visible(batch, all_cases) if be is None else {}
        if not visible:
            res.verdict = "rejected"
            res.reasons.append("integrity [trace]: no instruction trace of the visible shape reached the verifier")
            return res
        profiles = [_profile(trace, task, target, all_cases[0].dims_dict) for trace in visible.values()]
        prof = max(profiles, key=lambda p: p.latency_us)  # the worst over the distinct streams of the visible shape
        _fill_profile(res, prof)
        res.latency_us = prof.latency_us
        if len(profiles) > 1:
            res.add("timed_runs", True, f"{len(profiles)} distinct instruction streams on the visible shape; the slowest is reported")
        if prof.below_speed_of_light:
            res.verdict = "rejected"
            res.reasons.append(
                f"integrity: latency estimate {prof.latency_us:.3f} µs is below the task's speed of light {prof.sol_latency_us:.3f} µs on {target}"
            )
            res.add("speed_of_light", False, res.reasons[-1])
            return res
        res.add("speed_of_light", True, f"estimate {prof.latency_us:.3f} µs ≥ bound {prof.sol_latency_us} µs")
        if base_future is not None:
            res.baseline_latency_us = base_future.result()
        res.verdict = "pass"
        if res.baseline_latency_us:
            res.speedup = round(res.baseline_latency_us / prof.latency_us, 4)
        return res
    finally:
        if baseline is not None:
            baseline.shutdown(wait=False, cancel_futures=False)
        early.close()
        batch.cleanup()
        res.wall_s = round(time.perf_counter() - t0, 3)


def _fill_profile(res: EvalResult, prof: Any) -> None:
    from ..perf.report import summary_text

    pd = prof.to_dict()
    res.profile = {k: pd[k] for k in ("engines", "bottleneck", "hbm_read_bytes", "hbm_write_bytes", "dma_count", "flops", "mfu_pct", "advice",
                                      "hot_lines", "instructions", "critical_path", "idle_gaps", "dma_overlap_pct")}
    res.profile["summary"] = summary_text(prof)
    res.model_version = prof.model_version
    res.sol_latency_us = prof.sol_latency_us
    res.fraction_of_peak = prof.fraction_of_sol


def _judge_integrity(res: EvalResult, task: Task, batch: _Batch, runs: list[dict[str, Any]], all_cases: list[Case]) -> bool:
    """Trace integrity of every run, then the invariant: one instruction stream per shape. False when rejected."""
    problem = next((p for o in batch.outcomes for r in (o.answer or {}).get("runs", []) if (p := o.trace_problem(r["id"]))), "")
    if problem:
        res.verdict = "rejected"
        res.reasons.append(f"integrity [trace]: {problem} — the kernel changed its own trace or the emulator, so it is not priced")
        res.add("trace_integrity", False, res.reasons[-1])
        return False
    res.add("trace_integrity", True, f"{len(runs)} runs streamed their traces untouched")
    if task.data_dependent:
        return True
    seen: dict[tuple[tuple[str, int], ...], tuple[str, int]] = {}
    failed = {r["id"] for r in batch.runs() if "error" in r}
    for run in runs:
        idx = run["id"]
        if idx in failed:
            continue  # a run that raised streamed only part of its instructions; its error is reported below
        case = all_cases[idx] if idx < len(all_cases) else all_cases[0]
        digest = batch.digest(idx)
        first = seen.setdefault(case.dims, (digest, idx))
        if first[0] != digest:
            other = all_cases[first[1]]
            res.verdict = "rejected"
            res.reasons.append(
                f"integrity [data-dependent instructions]: on {case.public_label(task.dims).split(' with ')[0]} the kernel issued different "
                f"instructions for {describe_distribution(other.distribution)} and for {describe_distribution(case.distribution)}. "
                "An NKI kernel's instruction stream is fixed by its shapes; this task does not allow choosing instructions from the data "
                "(registers loaded from tensors, dynamic loops), so every input of one shape must get the same instructions"
            )
            res.add("same_instructions_per_shape", False, res.reasons[-1])
            return False
    res.add("same_instructions_per_shape", True, f"{len(seen)} shapes, one instruction stream each")
    return True


def _distinct_visible(batch: _Batch, all_cases: list[Case]) -> dict[str, Trace]:
    """The visible shape's traces, one per distinct instruction stream (exactly one unless the task allows data-dependent control)."""
    out: dict[str, Trace] = {}
    for idx, case in enumerate(all_cases):
        trace = batch.trace(idx)
        if case.hidden or trace is None:
            continue
        out.setdefault(batch.digest(idx), trace)
    return out


#: Default backend of :func:`verify` (``nkiagent run --backend`` sets it for the agent's evaluations).
BACKEND_ENV = "NKIAGENT_BACKEND"


def _resolve_backend(backend: Any) -> Any:
    """``None`` for the emulator (the unchanged default path), else a ``NeuronBackend``."""
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


def _neuron_timing(res: EvalResult, be: Any, path: Path, source: str, task: Task, target: str, runs: list[dict[str, Any]], cache: str,
                   all_cases: list[Case], opts: VerifyOptions) -> bool:
    """Latency for a kernel the real simulator found correct. True when ``res`` is final.

    ``neuron-sim``: with ``neuronx-cc`` installed the kernel must also compile for the target
    (compile only, no device). AWS's simulator has no latency model, so the emulator's cost
    model estimates the latency from the visible shape's runs on the emulator, with the same
    integrity checks as an emulator verification (labelled ``emulator-estimate``; when the
    emulator cannot run the kernel there is no latency, and the verdict is still ``pass``).
    ``neuron-hw``: the kernel is compiled and run on a NeuronCore for the first case — its
    outputs must match the reference too — and timed with the profiler (``neuron-profile``,
    spread gate); the baseline is measured the same way, and no speedup is claimed from an
    unstable measurement.
    """
    inputs = [np.load(p, allow_pickle=False) for p in InputCache.input_paths(cache, 0, len(task.inputs))]
    if be.name == "neuron-sim":
        err = be.check_compile(source, inputs, target) if be.toolchain.neuronx_cc else None
        if err:
            _compile_failure(res, err, path)
            return True
        visible = [r for r in runs if r["id"] < len(all_cases) and not all_cases[r["id"]].hidden]
        est = _run_cases(path, visible, target, _detect_api(source), opts, {})
        try:
            if est.failed is not None or est.uncompiled is not None or any("error" in r for r in est.runs()):
                res.verdict = "pass"
                res.add("estimate", False, "the embedded emulator could not run this kernel, so there is no latency estimate")
                return True
            if not _judge_integrity(res, task, est, visible, all_cases):
                return True
            prof = max((_profile(t, task, target, all_cases[0].dims_dict) for t in _distinct_visible(est, all_cases).values()),
                       key=lambda p: p.latency_us)
        finally:
            est.cleanup()
        _fill_profile(res, prof)
        res.latency_us = prof.latency_us
        if opts.with_baseline:
            res.baseline_latency_us = baseline_latency(task, target, opts.limits)
        res.verdict = "pass"
        if res.baseline_latency_us and not prof.below_speed_of_light:
            res.speedup = round(res.baseline_latency_us / prof.latency_us, 4)
        return True

    run = be.run(source, inputs, target)
    if run.error:
        _compile_failure(res, run.error, path)
        return True
    cmp = compare(run.outputs[0].reshape(task.output_shape(all_cases[0].dims_dict)) if run.outputs else np.zeros(0),
                  InputCache.reference(cache, 0), task.tolerance)
    if not cmp.ok:
        res.verdict, res.correct = "fail", False
        res.reasons.append(f"wrong answer on hardware ({all_cases[0].public_label(task.dims)}): {_error_size(cmp)}")
        res.add("hardware_correctness", False, res.reasons[-1])
        return True
    res.add("hardware_correctness", True, f"{all_cases[0].public_label(task.dims)} within tolerance on {be.name}")
    prof, meas = run.profile, run.measurement
    sol = _task_sol(task, target, all_cases[0].dims_dict)
    if sol.latency_ns > 0 and prof.latency_us:
        prof.sol_latency_us = round(sol.latency_ns / 1e3, 3)
        prof.fraction_of_sol = round(sol.latency_ns / 1e3 / prof.latency_us, 4)
    _fill_profile(res, prof)
    res.latency_us, res.timing_source = prof.latency_us, "neuron-profile"
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


# ------------------------------------------------------------------------------------ correctness


def _error_size(cmp: Any) -> str:
    """How wrong, in numbers a kernel cannot use as an oracle: a count and an error size to two digits, no values."""
    return f"{cmp.reason}; max abs err {cmp.max_abs_err:.2g}, relative L2 error {cmp.rel_l2:.2g}"


# a number on its own (a size, an offset, a line), not the digits of a name such as ``bfloat16`` or ``trn2``
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")


def _run_error(err: dict[str, Any], case: Case, scratch_kernels: list[str], original: str) -> str:
    """An error message as the author may see it: in the author's file, and on a hidden shape with its
    numbers (sizes, offsets, byte counts) masked, so a failing kernel cannot read the hidden shape."""
    if not case.hidden:
        return _unscratch(str(err.get("message", "")), scratch_kernels, original)
    marker = "\x00kernel\x00"  # the file's name is the author's own: it keeps its digits
    return _NUMBER.sub("#", _unscratch(str(err.get("message", "")), scratch_kernels, marker)).replace(marker, original)


def _judge_runs(
    res: EvalResult, task: Task, runs: list[dict[str, Any]], all_cases: list[Case], cache: str, scratch_kernels: list[str], original: str,
    early: _EarlyChecks | None = None,
) -> None:
    """Fill correctness and integrity checks; on the first problem set verdict and reason."""
    first_outputs: list[np.ndarray] | None = None
    visible = dict(task.dims)

    def where(err: dict[str, Any]) -> str:
        return _location(err, scratch_kernels, original)

    for rec in sorted(runs, key=lambda r: r["id"]):
        idx = rec["id"]
        case = all_cases[idx] if idx < len(all_cases) else all_cases[0]
        label = case.public_label(visible)
        if "error" in rec:
            err = rec["error"]
            if err.get("kind") == "sandbox":
                res.verdict = "rejected"
                res.reasons.append(f"integrity [sandbox]: {err.get('message')} at {where(err)}")
            elif err.get("kind") == "nki" and err.get("code") in _INTEGRITY_CODES:
                res.verdict = "rejected"
                res.reasons.append(f"integrity [{err.get('code')}] at {where(err)}: {err.get('message')}")
            elif err.get("kind") == "nki":
                res.reasons.append(f"NKI error [{err.get('code')}] at {where(err)}: {_run_error(err, case, scratch_kernels, original)} ({label})")
            elif err.get("kind") == "output":
                res.reasons.append(f"{err.get('message')} at {where(err)} ({label})")
            elif err.get("kind") == "memory":
                res.reasons.append(f"memory limit exceeded at {where(err)} ({label})")
            else:
                res.reasons.append(f"runtime error {err.get('type')}: {_run_error(err, case, scratch_kernels, original)} at {where(err)} ({label})")
            res.add("run", False, res.reasons[-1], case=label)
            return
        if rec.get("inputs_unchanged") is not True:
            res.verdict = "rejected"
            res.reasons.append(f"integrity: the kernel modified its inputs ({label})")
            res.add("inputs_unchanged", False, res.reasons[-1])
            return
        outs = rec.get("outputs", [])
        shape = task.output_shape(case.dims_dict)
        shown = list(shape) if not case.hidden else "the task's output shape"
        if len(outs) != 1 or "path" not in outs[0]:
            kinds = [o.get("type", "array") for o in outs]
            res.reasons.append(f"wrong output: expected one {task.output.dtype} array of shape {shown}, got {kinds or 'nothing'} ({label})")
            res.add("output", False, res.reasons[-1])
            return
        checked = early.result(idx) if early is not None and idx < len(all_cases) else None
        got = checked[0] if checked is not None else np.load(outs[0]["path"], mmap_mode="r", allow_pickle=False)
        if task.reshape_output and got.size == int(np.prod(shape)):
            got = got.reshape(shape)
        if tuple(got.shape) != shape or not _output_dtype_ok(task, got):
            what = f"shape {list(got.shape)} {got.dtype}, expected {shown} {task.output.dtype}" if not case.hidden else (
                f"{'the wrong shape' if tuple(got.shape) != shape else 'the right shape'} and dtype {got.dtype}, expected {task.output.dtype}")
            res.reasons.append(f"wrong output: {what} ({label})")
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
        cmp = checked[1] if checked is not None else compare(got, InputCache.reference(cache, idx), task.tolerance)
        if idx == 0:
            first_outputs = [got]
        if not cmp.ok:
            at = f" First mismatch at index {list(cmp.first_mismatch)}." if cmp.first_mismatch and not case.hidden else ""
            res.reasons.append(f"wrong answer on {label}: {_error_size(cmp)}.{at}")
            res.add("correctness", False, res.reasons[-1], max_abs_err=float(f"{cmp.max_abs_err:.2g}"))
            return
    res.add("correctness", True, f"{len(all_cases)} cases within tolerance")
    res.add("inputs_unchanged", True)
