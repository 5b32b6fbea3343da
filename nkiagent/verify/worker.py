"""The evaluation worker: runs untrusted kernel code in its own process, fenced in.

Started by :mod:`nkiagent.verify.sandbox` as ``python -m nkiagent.verify.worker RESULT_FD``
with a scrubbed environment, CPU/memory/file-size limits and its own process group. It
reads one JSON request on stdin, builds each case's inputs itself (from task, shape, seed
and distribution), runs the kernel on the embedded emulator with a fresh module per run,
saves outputs as ``.npy`` in its scratch directory and writes one JSON answer, tagged with
the request's nonce, to the result pipe. It compares nothing and decides nothing: the
parent does that. A Python audit hook, installed before any kernel code runs, refuses
network, subprocesses, ctypes, threads and file writes outside the scratch directory.
"""

from __future__ import annotations

import errno
import json
import linecache
import os
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]

_FORBIDDEN_EVENT_PREFIXES = (
    "socket.",
    "subprocess.",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.putenv",
    "os.unsetenv",
    "ctypes.",
    "_thread.start_new_thread",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.chmod",
    "os.chown",
    "os.symlink",
    "os.link",
    "shutil.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "webbrowser.",
    "sys.setprofile",
    "sys.settrace",
    "sys.addaudithook",
    "gc.get_referrers",
    "gc.get_referents",
    "gc.get_objects",
)
_FORBIDDEN_IMPORTS = {"socket", "subprocess", "ctypes", "_ctypes", "multiprocessing", "_posixsubprocess", "pty", "fcntl", "mmap", "signal", "pickle", "_pickle", "marshal"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


#: Set while the worker itself writes results: kernel code may write nothing at all, not even in
#: scratch (where it could otherwise rewrite an earlier run's outputs or trace).
_WORKER_WRITING = [False]


def _install_audit_hook(scratch: str, readable: list[str]) -> None:
    scratch = os.path.realpath(scratch) + os.sep
    roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in readable if r)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int) or path is None:
                return
            real = os.path.realpath(os.fsdecode(path))
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            if writing:
                if not (_WORKER_WRITING[0] and real.startswith(scratch)):
                    raise PermissionError(f"sandbox: writing {os.fsdecode(path)!r} is not allowed in kernel code")
            elif not (real + os.sep).startswith(roots):
                raise PermissionError(f"sandbox: reading {os.fsdecode(path)!r} is not allowed (only Python's own files, the inputs and scratch)")
            return
        if event == "import":
            root = str(args[0]).split(".")[0]
            if root in _FORBIDDEN_IMPORTS:
                raise PermissionError(f"sandbox: importing {args[0]!r} is not allowed in kernel code")
            return
        if event.startswith(_FORBIDDEN_EVENT_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed in kernel code")

    sys.addaudithook(hook)
    import _thread

    def no_threads(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError("sandbox: starting threads is not allowed in kernel code")

    # there is no audit event for thread creation: replace the primitive every thread goes through
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, no_threads)
    import threading

    threading._start_new_thread = no_threads  # type: ignore[attr-defined]
    if hasattr(threading, "_start_joinable_thread"):
        threading._start_joinable_thread = no_threads  # type: ignore[attr-defined]


def _set_limits(limits: dict[str, int]) -> None:
    for name, key in (("RLIMIT_AS", "mem_bytes"), ("RLIMIT_CPU", "cpu_s"), ("RLIMIT_FSIZE", "fsize_bytes")):
        value = limits.get(key)
        if value:
            res = getattr(resource, name)
            soft, hard = resource.getrlimit(res)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (cap, cap if name != "RLIMIT_CPU" else hard))


def _unchanged(pristine: list[Any], arrays: list[Any]) -> bool:
    """Exact comparison with copies taken before the run (the kernel cannot reach the copies)."""
    import numpy as np

    return all(p.shape == a.shape and p.dtype == a.dtype and np.array_equal(p.view(np.uint8), a.view(np.uint8)) for p, a in zip(pristine, arrays))


def _error(exc: BaseException, kernel_file: str) -> dict[str, Any]:
    from ..emu.errors import NkiError

    if isinstance(exc, NkiError):
        return {"kind": "nki", **exc.to_dict()}
    location = "<unknown>:0"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.realpath(frame.filename) == os.path.realpath(kernel_file):
            location = f"{frame.filename}:{frame.lineno}"
            break
    message = str(exc)[:2000]
    if isinstance(exc, MemoryError):
        kind = "memory"
    elif isinstance(exc, PermissionError) and "sandbox:" in message:
        kind = "sandbox"
    elif isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # RLIMIT_FSIZE (Python ignores SIGXFSZ)
        kind, message = "output", "output limit exceeded: the kernel wrote or printed more than the sandbox allows"
    else:
        kind = "python"
    return {"kind": kind, "type": type(exc).__name__, "message": message, "location": location}


def _pick_kernel(namespace: dict[str, Any], name: str | None) -> Any:
    from ..emu.frontend import Kernel

    if name:
        if name not in namespace:
            raise LookupError(f"kernel file defines no function {name!r}")
        return namespace[name]
    kernels = [v for k, v in namespace.items() if isinstance(v, Kernel) and not k.startswith("_")]
    if len(kernels) == 1:
        return kernels[0]
    if "kernel" in namespace:
        return namespace["kernel"]
    found = ", ".join(k.fn.__name__ for k in kernels) or "none"
    raise LookupError(f"expected exactly one @nki.jit kernel in the file (found: {found}); name it `kernel`")


def _serve(req: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    import nkiagent.emu as emu
    from nkiagent.tasks import load_task_file
    from nkiagent.verify.inputs import make_inputs, save_array

    real_sim = None
    if req.get("backend") == "neuron-sim":  # AWS's simulator, imported before the audit hook goes in
        from nkiagent.backends.neuron import real_simulator

        real_sim = real_simulator(req.get("api", "0.3"), req.get("package_paths", []))
    else:
        emu.install(force=True)
    # inputs normally arrive as files from the parent's cache; the task is only needed to draw them here
    need_task = any("input_paths" not in run for run in req["runs"])
    task = load_task_file(req["task_path"]) if need_task else None
    scratch = req["scratch"]
    kernel_file = req["kernel_path"]
    source = Path(kernel_file).read_text()
    # the sandbox forbids reading the file again; the emulator quotes kernel lines (0.1 loop and tensor names)
    linecache.cache[kernel_file] = (len(source), None, source.splitlines(True), kernel_file)
    runs_out: list[dict[str, Any]] = []
    try:
        code = compile(source, kernel_file, "exec")
    except SyntaxError as exc:
        return {"compiled": False, "error": {"kind": "syntax", "type": "SyntaxError", "message": str(exc.msg), "location": f"{kernel_file}:{exc.lineno}"}, "runs": []}
    _set_limits(req.get("limits", {}))
    readable = [scratch, sys.prefix, sys.base_prefix, *[p for p in sys.path if p and os.path.isdir(p)]]
    readable += sorted({os.path.dirname(p) for run in req["runs"] for p in run.get("input_paths", [])})
    readable += req.get("package_paths", [])
    _install_audit_hook(scratch, readable)
    for run in req["runs"]:
        rec: dict[str, Any] = {"id": run["id"]}
        runs_out.append(rec)
        if "input_paths" in run:
            inputs = [np.load(p, allow_pickle=False) for p in run["input_paths"]]
        else:
            inputs = make_inputs(task, run["dims"], run["seed"], run["dist"])
        pristine = [a.copy() for a in inputs]
        namespace: dict[str, Any] = {"__name__": f"nki_candidate_{run['id']}", "__file__": kernel_file}
        try:
            exec(code, namespace)  # a fresh module per run: no state survives between runs
            if real_sim is not None:
                from nkiagent.backends.neuron import pick_real_kernel

                trace, result = None, real_sim(pick_real_kernel(namespace, req.get("kernel_name")), tuple(inputs))
            else:
                kernel = _pick_kernel(namespace, req.get("kernel_name"))
                trace = emu.Trace() if run.get("trace") else None
                result = emu.run_kernel(kernel, tuple(inputs), target=req["target"], trace=trace, api=req.get("api", "0.3"))
        except BaseException as exc:  # noqa: BLE001 — every kernel failure is reported, never raised
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec["error"] = _error(exc, kernel_file)
            rec["inputs_unchanged"] = _unchanged(pristine, inputs)
            continue
        outs = result.outputs if isinstance(result.outputs, (tuple, list)) else [result.outputs]
        rec["outputs"] = []
        for k, o in enumerate(outs):
            if not isinstance(o, np.ndarray):
                rec["outputs"].append({"type": type(o).__name__})
                continue
            path = os.path.join(scratch, f"out_{run['id']}_{k}.npy")
            _WORKER_WRITING[0] = True
            try:
                save_array(path, o)
            finally:
                _WORKER_WRITING[0] = False
            rec["outputs"].append({"path": path, "shape": list(o.shape), "dtype": str(o.dtype)})
        rec["inputs_unchanged"] = _unchanged(pristine, inputs)
        rec["warnings"] = result.warnings[:20]
        if trace is not None:
            tpath = os.path.join(scratch, f"trace_{run['id']}.json")
            _WORKER_WRITING[0] = True
            try:
                with open(tpath, "w") as fh:
                    json.dump(trace.to_json(), fh)
            finally:
                _WORKER_WRITING[0] = False
            rec["trace_path"] = tpath
    return {"compiled": True, "runs": runs_out}


def main() -> None:
    fd = int(sys.argv[1])
    req = json.loads(sys.stdin.read())
    try:
        answer = _serve(req)
    except BaseException as exc:  # noqa: BLE001 — the parent must always get an answer
        answer = {"compiled": False, "error": {"kind": "worker", "type": type(exc).__name__, "message": str(exc)[:2000], "location": "<worker>:0"}, "runs": []}
    answer["nonce"] = req["nonce"]
    data = json.dumps(answer).encode()
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.close(fd)


if __name__ == "__main__":
    main()
