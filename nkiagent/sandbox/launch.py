"""Launching the evaluation worker: scrubbed environment, limits, timeout, process-group kill.

One call of :func:`run_worker` is one isolated process. The kernel file is copied into a
fresh scratch directory, the request carries a random nonce, and the answer is only
accepted if it echoes that nonce. Whatever the kernel does — hang, allocate without bound,
crash the interpreter, print without end — the parent gets a :class:`WorkerOutcome`
saying so, and stays healthy.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..emu.trace import Trace, TraceStreamError, TraceStreamReader
from . import zygote

__all__ = ["Limits", "TraceIntegrityError", "WorkerOutcome", "neuron_env", "run_worker", "scrubbed_env", "warm_launcher"]

_PASS_ENV = ("LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "NEURON_PLATFORM_TARGET_OVERRIDE")


@dataclass(frozen=True)
class Limits:
    """Per-evaluation limits: wall clock, CPU seconds, address space, bytes written."""

    wall_s: float = 120.0
    cpu_s: int = 150
    mem_bytes: int = 8 * 2**30
    fsize_bytes: int = 512 * 2**20
    stream_bytes: int = 512 * 2**20  #: trace stream kept in the parent's memory


@dataclass
class WorkerOutcome:
    """What the worker answered, or how it died, and the traces it streamed (run id → trace)."""

    answer: dict[str, Any] | None
    status: str  #: ``ok``, ``timeout``, ``crashed``, ``bad-answer``
    detail: str = ""
    returncode: int | None = None
    wall_s: float = 0.0
    scratch: Path | None = None
    stdout_tail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    traces: dict[int, Trace] = field(default_factory=dict)
    stream_error: str = ""  #: why the trace stream did not decode (cut short, or bytes the worker's writer never wrote)

    def trace_problem(self, run_id: int) -> str:
        """Why run ``run_id``'s trace may not be priced ('' when it may): a broken stream, tampering, records lost."""
        if self.stream_error:
            return self.stream_error
        rec: dict[str, Any] = next((r for r in (self.answer or {}).get("runs", []) if r.get("id") == run_id), {})
        if rec.get("tampered"):
            return "; ".join(str(t) for t in rec["tampered"])
        trace = self.traces.get(run_id)
        if trace is None or rec.get("trace", {}).get("records") != len(trace):
            return "a run's trace did not arrive whole"
        return ""

    def priced_trace(self, run_id: int) -> Trace:
        """Run ``run_id``'s trace, checked; raises :class:`TraceIntegrityError` when it may not be priced."""
        problem = self.trace_problem(run_id)
        if problem:
            raise TraceIntegrityError(f"integrity [trace]: {problem} — the kernel changed its own trace or the emulator, so it is not priced")
        return self.traces[run_id]


class TraceIntegrityError(RuntimeError):
    """A trace that must not be priced: the kernel tampered with it or with the emulator, or it did not arrive whole."""


def scrubbed_env(scratch: Path) -> dict[str, str]:
    """A minimal environment: no API keys, tokens or user configuration reach kernel code."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "PYTHONPATH": package_root,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for key in _PASS_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def warm_launcher() -> None:
    """Start the emulator workers' launcher now, so its imports overlap what the caller does before its first run.

    A verification calls it as it begins, a session as it opens (:func:`zygote.warm`); nothing
    happens when the launcher is off (``NKIAGENT_ZYGOTE=0``) or already running.
    """
    if zygote.enabled():
        zygote.warm(scrubbed_env(Path(tempfile.gettempdir())))


def neuron_env() -> dict[str, str]:
    """AWS's own configuration variables (``NEURON_*``, ``NKI_*``, e.g. ``NKI_PRECISE_FP``), passed to runs on its toolchain."""
    return {k: v for k, v in os.environ.items() if k.startswith(("NEURON_", "NKI_"))}


def _tail(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def run_worker(kernel_path: str | Path, task_path: str | Path | None, runs: list[dict[str, Any]], *, target: str, api: str = "0.3",
               kernel_name: str | None = None, limits: Limits = Limits(), keep_scratch: bool = False,
               backend: str = "emulator", package_paths: list[str] | None = None,
               on_run: Callable[[Path, int], None] | None = None) -> WorkerOutcome:
    """Run ``runs`` of the kernel in a fresh sandboxed worker and collect its answer.

    ``on_run(scratch, run_id)`` is called as each traced run ends on the stream, with its outputs
    already in ``scratch`` (the worker writes them first): the caller may start comparing them
    while the worker goes on.

    ``backend="neuron-sim"`` runs the kernel on AWS's simulator instead of the emulator, importing
    AWS's packages from ``package_paths`` (where :func:`nkiagent.backends.detect` found them).
    """
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # tmpfs: outputs never touch a disk
    scratch = Path(tempfile.mkdtemp(prefix="nkiagent-eval-", dir=shm))
    kernel_copy = scratch / "kernel.py"
    shutil.copyfile(kernel_path, kernel_copy)
    nonce = secrets.token_hex(16)
    request: dict[str, Any] = {
        "nonce": nonce,
        "kernel_path": str(kernel_copy),
        "kernel_name": kernel_name,
        "task_path": str(Path(task_path).resolve()) if task_path else None,
        "scratch": str(scratch),
        "runs": runs,
        "target": target,
        "api": api,
        "limits": {"cpu_s": limits.cpu_s, "mem_bytes": limits.mem_bytes, "fsize_bytes": limits.fsize_bytes},
    }
    if backend != "emulator":
        request.update(backend=backend, package_paths=list(package_paths or []))
    read_fd, write_fd = os.pipe()
    stream_read, stream_write = os.pipe()
    _widen(stream_write)
    stdout_path = scratch / "stdout.txt"
    t0 = time.perf_counter()
    env = scrubbed_env(scratch) if backend == "emulator" else {**scrubbed_env(scratch), **neuron_env()}
    proc: subprocess.Popen[bytes] | zygote.ForkedWorker | None = None
    with open(stdout_path, "wb") as out:
        if backend == "emulator" and zygote.enabled():
            try:
                proc = zygote.spawn(request, env, scratch, write_fd, stream_write, out.fileno())
            except OSError:
                proc = None  # the launcher is unavailable: a fresh interpreter does the same job, only slower
        if proc is None:
            proc = _start_fresh(request, env, scratch, write_fd, stream_write, out)
    os.close(write_fd)
    os.close(stream_write)
    done = (lambda run_id: on_run(scratch, run_id)) if on_run is not None else None
    chunks, status, detail, reader, stream_error = _collect(proc, read_fd, stream_read, t0 + limits.wall_s, limits, str(kernel_path), done)
    if status == "ok":
        try:
            proc.wait(timeout=5)  # the answer is in; give the worker a moment to exit on its own
        except subprocess.TimeoutExpired:
            pass
    if status == "timeout" or proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    wall = time.perf_counter() - t0
    answer = None
    if status == "ok":
        try:
            answer = json.loads(b"".join(chunks).decode())
        except (ValueError, UnicodeDecodeError):
            answer = None
        if answer is None or answer.get("nonce") != nonce:
            status = "crashed" if rc not in (0, None) else "bad-answer"
            detail = _death(rc, stdout_path, limits) if status == "crashed" else "the worker's answer was missing or did not carry this evaluation's nonce"
            answer = None
    traces: dict[int, Trace] = {}
    if answer is not None and not stream_error:
        try:
            traces = reader.finish()
        except TraceStreamError as exc:
            stream_error = str(exc)
    tail = _tail(stdout_path)
    outcome = WorkerOutcome(answer, status, detail, rc, wall, scratch if keep_scratch or answer else None, tail,
                            traces=traces, stream_error=stream_error)
    if status == "timeout":  # what it was doing when time ran out (see verifier._timeout_detail)
        running, records = reader.progress()
        finished = sorted(reader.traces)
        outcome.extra["progress"] = {"runs": [r["id"] for r in runs], "finished": finished, "running": running, "records": records}
    if answer is None and not keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


def _widen(fd: int) -> None:
    """Give the trace stream a 1 MiB pipe (Linux), so a worker seldom waits for a busy parent to read its records.

    Why: the default 64 KiB holds about two runs of a level-1 kernel's records; with several
    verifications in one parent, the thread reading one worker's stream may be waiting for the
    GIL, and a worker blocked on a full pipe leaves its core idle.
    """
    import fcntl

    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except OSError:
        pass  # over /proc/sys/fs/pipe-max-size, or not Linux: the default size still works, only with more waiting


def _start_fresh(request: dict[str, Any], env: dict[str, str], scratch: Path, write_fd: int, stream_write: int,
                 out: Any) -> subprocess.Popen[bytes]:
    """A worker in a freshly started interpreter, handed its request on stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-s", "-m", "nkiagent.sandbox.worker", str(write_fd), str(stream_write)],
        stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=scratch,
        pass_fds=(write_fd, stream_write), start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    return proc


def _collect(proc: subprocess.Popen[bytes] | zygote.ForkedWorker, read_fd: int, stream_fd: int, deadline: float, limits: Limits,
             kernel_path: str, done: Callable[[int], None] | None) -> tuple[list[bytes], str, str, TraceStreamReader, str]:
    """Read the answer pipe and the trace stream together until the worker closes both or time runs out.

    Both pipes are drained as data arrives: a worker blocked on a full stream pipe would never
    get to its answer. The stream is decoded as it comes, so a forged or oversized stream is
    known at once.
    """
    import select

    chunks: list[bytes] = []
    reader = TraceStreamReader(kernel_path)
    state: dict[str, Any] = {"status": "ok", "detail": "", "error": "", "streamed": 0}

    def take(fd: int, data: bytes) -> None:
        if fd == read_fd:
            chunks.append(data)
            return
        if state["error"]:
            return
        state["streamed"] += len(data)
        try:
            if state["streamed"] > limits.stream_bytes:
                raise TraceStreamError(f"the trace stream passed {limits.stream_bytes // 2**20} MiB")
            before = len(reader.traces)
            reader.feed(data)
        except TraceStreamError as exc:
            state["error"] = str(exc)
            return
        if done is not None and len(reader.traces) > before:
            for run_id in list(reader.traces)[before:]:
                done(run_id)

    open_fds = [read_fd, stream_fd]
    while open_fds:
        left = deadline - time.perf_counter()
        if left <= 0:
            state["status"], state["detail"] = "timeout", f"wall-clock limit of {limits.wall_s:.0f} s exceeded"
            break
        ready, _, _ = select.select(open_fds, [], [], min(left, 0.5))
        for fd in ready:
            data = os.read(fd, 1 << 20)
            if data:
                take(fd, data)
            else:
                open_fds.remove(fd)
        if open_fds and not ready and proc.poll() is not None:
            # the worker is gone but a pipe is still open (a descendant holds it): take what is there, then stop
            for fd in open_fds:
                while select.select([fd], [], [], 0)[0] and (data := os.read(fd, 1 << 20)):
                    take(fd, data)
            break
    os.close(read_fd)
    os.close(stream_fd)
    return chunks, str(state["status"]), str(state["detail"]), reader, str(state["error"])


def _death(rc: int | None, stdout_path: Path, limits: Limits) -> str:
    if rc is None:
        return "worker did not exit"
    if rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXFSZ:
            return f"output limit exceeded: the kernel wrote more than {limits.fsize_bytes // 2**20} MiB (killed by {name})"
        if sig == signal.SIGXCPU:
            return f"CPU limit of {limits.cpu_s} s exceeded (killed by {name})"
        return f"worker crashed (killed by {name})"
    size = stdout_path.stat().st_size if stdout_path.exists() else 0
    if size >= limits.fsize_bytes:
        return f"output limit exceeded: the kernel printed more than {limits.fsize_bytes // 2**20} MiB"
    return f"worker exited with status {rc} without an answer"
