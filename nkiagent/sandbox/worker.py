"""The evaluation worker: runs untrusted kernel code in its own process, fenced in.

Started by :mod:`nkiagent.sandbox.launch` as ``python -m nkiagent.sandbox.worker RESULT_FD STREAM_FD``
with a scrubbed environment, CPU/memory/file-size limits and its own process group. It
reads one JSON request on stdin, builds each case's inputs itself (from task, shape, seed
and distribution), runs the kernel on the embedded emulator with a fresh module per run,
saves outputs as ``.npy`` in its scratch directory and writes one JSON answer, tagged with
the request's nonce, to the result pipe. It compares nothing and decides nothing: the
parent does that. The runtime guard (:mod:`nkiagent.sandbox.guard`), installed before any
kernel code runs, refuses what kernel code may not do, whatever route it takes. Every run is traced, and each
trace record is streamed to the parent on a second pipe the moment it is made
(:class:`~nkiagent.emu.trace.TraceStreamWriter`): the copy the cost model prices never sits
where kernel code could edit it. The worker also reports, per run, whether its own copy of
the trace still matches what it streamed and whether the emulator's modules and classes
still hold what they held before the kernel ran; either change means the kernel tampered.
"""

from __future__ import annotations

import errno
import importlib
import json
import linecache
import os
import resource
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from .guard import Guard

__all__ = ["main"]

#: Modules kernels may use, imported before the guard goes in, so that no kernel ever makes the
#: worker load a module (the guard refuses kernel-initiated file reads, and importing reads files).
_PRELOAD = ("numpy", "math", "functools", "itertools", "typing", "dataclasses", "enum", "collections", "ml_dtypes", "json",
            "mmap")  # the last for the worker itself: inputs are read-only maps of the cached files
#: Modules the harness's own code loads lazily once kernels run, which the guard refuses to load then: imported
#: first (a fresh venv showed it: where no site-packages hook loads ``threading`` at start-up, the fresh worker and
#: AWS's simulator path failed). Kernels still may not import them or start threads.
_HARNESS = ("threading",)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _set_limits(limits: dict[str, int]) -> None:
    for name, key in (("RLIMIT_AS", "mem_bytes"), ("RLIMIT_CPU", "cpu_s"), ("RLIMIT_FSIZE", "fsize_bytes")):
        value = limits.get(key)
        if value:
            res = getattr(resource, name)
            _soft, hard = resource.getrlimit(res)
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
    elif isinstance(exc, PermissionError) and message.startswith("sandbox:"):
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


def _emulator_modules() -> list[types.ModuleType]:
    """The modules whose code makes and records instructions: the emulator, the shim above it and the faces kernels import."""
    names = ("nki", "neuronxcc")
    return [m for n, m in sorted(sys.modules.items())
            if isinstance(m, types.ModuleType) and (n.startswith(("nkiagent.emu", "nkiagent.shim")) or n.split(".")[0] in names)]


def _fingerprint(modules: list[types.ModuleType]) -> dict[str, int]:
    """Identity of every global of those modules and every attribute of the classes they define.

    Compared after each run: a kernel that patched the emulator (a function, a class's method)
    would change what gets recorded, so any difference is tampering.
    """
    out: dict[str, int] = {}
    for m in modules:
        for name, value in list(vars(m).items()):
            if isinstance(value, _CODE_TYPES):  # code, not the state the emulator keeps in module globals
                out[f"{m.__name__}.{name}"] = id(value)
            if isinstance(value, type) and value.__module__ == m.__name__:
                for attr, v in list(vars(value).items()):
                    if isinstance(v, (*_CODE_TYPES, staticmethod, classmethod, property)):
                        out[f"{m.__name__}.{name}.{attr}"] = id(v)
            elif type(value).__module__.startswith("nkiagent.emu") and hasattr(value, "__dict__") and not isinstance(value, type):
                # API objects kernels hold (nl.tile_size, buffers): an attribute a kernel adds could carry state between runs
                for attr, v in list(vars(value).items()):
                    out[f"{m.__name__}.{name}.{attr}"] = id(v)
    return out


def _library_modules() -> list[types.ModuleType]:
    """The modules kernels may use (NumPy and the standard library ones of ``_PRELOAD``, with their loaded submodules).

    Sealed too: a kernel that rebinds ``np.allclose`` or ``math.isclose`` changes nothing the parent
    judges (it compares in its own process), but it is an attempt on the checker and says so at once.
    """
    roots = tuple(n for n in _PRELOAD if n not in ("json", "mmap"))
    return [m for n, m in sorted(sys.modules.items())
            if isinstance(m, types.ModuleType) and (n in roots or n.startswith(tuple(r + "." for r in roots)))]


_CODE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)


def _seal(modules: list[types.ModuleType], guard: Guard) -> None:
    """Make the emulator's modules refuse attribute writes that kernel code starts (no audit event covers them)."""
    sealed: dict[type, type] = {}
    for m in modules:
        cls = type(m)
        if cls not in sealed:

            def setattr_(self: Any, name: str, value: Any, _base: Any = cls) -> None:
                guard.refuse_if_kernel(f"changing {self.__name__}.{name}")
                _base.__setattr__(self, name, value)

            def delattr_(self: Any, name: str, _base: Any = cls) -> None:
                guard.refuse_if_kernel(f"deleting {self.__name__}.{name}")
                _base.__delattr__(self, name)

            sealed[cls] = type(f"Sealed{cls.__name__}", (cls,), {"__setattr__": setattr_, "__delattr__": delattr_, "__slots__": ()})
        m.__class__ = sealed[cls]


_preloaded = False


def preload() -> None:
    """Everything an emulator run needs before the guard goes in: the ``nki`` faces, the modules kernels may use.

    Idempotent; the launcher (:mod:`nkiagent.sandbox.zygote`) calls it once before forking workers.
    """
    global _preloaded
    if _preloaded:
        return
    from nkiagent import shim
    from nkiagent.emu.frontend import keep_freed_blocks

    shim.install(force=True)  # the emulator's faces, with the legacy face's benchmark/profile on the cost model
    keep_freed_blocks()  # it needs ctypes, which the guard refuses once it is in
    for name in (*_PRELOAD, *_HARNESS, "nki", "nki.language", "nki.isa", "nki.typing", "neuronxcc.nki", "nkiagent.tasks",
                 "nkiagent.sandbox.arrays", "nkiagent.sandbox.policy", "nkiagent.emu.trace"):
        importlib.import_module(name)
    _preloaded = True


def _serve(req: dict[str, Any], stream_fd: int) -> dict[str, Any]:
    import numpy as np

    from nkiagent import emu
    from nkiagent.emu.trace import TraceStreamWriter
    from nkiagent.sandbox.arrays import make_inputs, save_array
    from nkiagent.sandbox.policy import import_refusal
    from nkiagent.tasks import load_task_file

    real_sim = None
    if req.get("backend") == "neuron-sim":  # AWS's simulator, imported before the guard goes in
        from nkiagent.sandbox.real import real_simulator

        real_sim = real_simulator(req.get("api", "0.3"), req.get("package_paths", []))
        for name in (*_PRELOAD, *_HARNESS):
            importlib.import_module(name)
    else:
        preload()
    # inputs normally arrive as files from the parent's cache; the task is only needed to draw them here
    need_task = any("input_paths" not in run for run in req["runs"])
    task = load_task_file(req["task_path"]) if need_task else None
    scratch = req["scratch"]
    kernel_file = req["kernel_path"]
    source = Path(kernel_file).read_text()
    # the guard forbids reading the file again; the emulator quotes kernel lines (0.1 loop and tensor names)
    linecache.cache[kernel_file] = (len(source), None, source.splitlines(True), kernel_file)
    runs_out: list[dict[str, Any]] = []
    try:
        # dont_inherit: the kernel is compiled as its own module, not under this file's __future__ flags
        code = compile(source, kernel_file, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return {"compiled": False, "error": {"kind": "syntax", "type": "SyntaxError", "message": str(exc.msg), "location": f"{kernel_file}:{exc.lineno}"}, "runs": []}
    _set_limits(req.get("limits", {}))
    inputs_files = [p for run in req["runs"] for p in run.get("input_paths", [])]
    # Python's own files (the standard library, installed packages, nkiagent's package), never the
    # checkout or working directory around them (sessions, other kernels, the user's repository)
    readable = [scratch, sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                *[p for p in sys.path if p and os.path.isdir(p) and os.path.basename(p) in ("site-packages", "dist-packages")]]
    readable += req.get("package_paths", [])
    guard = Guard(kernel_file, scratch, readable, inputs_files, import_refusal)
    guard.kernel_code = code
    modules = _emulator_modules()
    for m in modules:
        if m.__name__.split(".")[0] in ("nki", "neuronxcc"):
            for attr in dir(m):  # the API faces fill their caches on first use: fill them now, before the fingerprint
                getattr(m, attr, None)
    _seal(modules + _library_modules(), guard)
    before = _fingerprint(modules)
    writer = TraceStreamWriter(lambda data: _write_all(stream_fd, data), kernel_file)
    guard.install()
    for run in req["runs"]:
        rec: dict[str, Any] = {"id": run["id"]}
        runs_out.append(rec)
        if "input_paths" in run:  # read-only maps of the cached inputs: kernel writes land in the emulator's copies
            inputs = [np.load(p, mmap_mode="r", allow_pickle=False) for p in run["input_paths"]]
        else:
            assert task is not None  # need_task above
            inputs = make_inputs(task, run["dims"], run["seed"], run["dist"])
            for a in inputs:
                a.flags.writeable = False
        # AWS's simulator writes into its arguments in place: it gets copies, compared afterwards
        pristine = [np.array(a) for a in inputs] if real_sim is not None else None
        if pristine is not None:
            inputs = [np.array(a) for a in inputs]
        name = f"nki_candidate_{run['id']}"
        module = types.ModuleType(name)
        module.__file__ = kernel_file
        sys.modules[name] = module  # a real module: dataclasses and typing look their class's module up there
        trace = emu.Trace(sink=writer) if real_sim is None and run.get("trace", True) else None
        if trace is not None:
            writer.begin(run["id"])
        try:
            exec(code, module.__dict__)  # noqa: S102 — running the kernel is the point; a fresh module per run: no state survives between runs
            if real_sim is not None:
                from nkiagent.sandbox.real import pick_real_kernel

                result = real_sim(pick_real_kernel(module.__dict__, req.get("kernel_name")), tuple(inputs))
            else:
                kernel = _pick_kernel(module.__dict__, req.get("kernel_name"))
                result = emu.run_kernel(kernel, tuple(inputs), target=req["target"], trace=trace, api=req.get("api", "0.3"))
        except BaseException as exc:  # every kernel failure is reported, never raised
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec["error"] = _error(exc, kernel_file)
            result = None
        finally:
            sys.modules.pop(name, None)
        after = _fingerprint(modules)
        patched = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if patched:
            rec.setdefault("tampered", []).append("the emulator was changed: " + ", ".join(patched[:8]))
        if result is not None:
            outs = result.outputs if isinstance(result.outputs, (tuple, list)) else [result.outputs]
            rec["outputs"] = []
            for k, o in enumerate(outs):
                if not isinstance(o, np.ndarray):
                    rec["outputs"].append({"type": type(o).__name__})
                    continue
                path = os.path.join(scratch, f"out_{run['id']}_{k}.npy")
                guard.writing = True
                try:
                    save_array(path, o)
                finally:
                    guard.writing = False
                rec["outputs"].append({"path": path, "shape": list(o.shape), "dtype": str(o.dtype)})
            rec["inputs_unchanged"] = _unchanged(pristine, inputs) if pristine is not None else not result.inputs_written
            rec["warnings"] = result.warnings[:20]
        if trace is not None:
            # last: the run's end on the stream also tells the parent its outputs are on disk (it may compare them now)
            writer.end(run["id"], trace)
            rec["trace"] = {"records": writer.sent, "kept": len(trace.instructions)}
            if len(trace.instructions) != writer.sent:
                rec.setdefault("tampered", []).append("the trace lost or gained records after they were made")
    return {"compiled": True, "runs": runs_out}


def answer(req: dict[str, Any], fd: int, stream_fd: int) -> None:
    """Serve one request and write its answer, tagged with the request's nonce, to ``fd``; closes both pipes."""
    try:
        out = _serve(req, stream_fd)
    except BaseException as exc:  # noqa: BLE001 — the parent must always get an answer, whatever the kernel raised
        out = {"compiled": False, "error": {"kind": "worker", "type": type(exc).__name__, "message": str(exc)[:2000], "location": "<worker>:0"}, "runs": []}
    out["nonce"] = req["nonce"]
    os.close(stream_fd)
    _write_all(fd, json.dumps(out).encode())
    os.close(fd)


def main() -> None:
    answer(json.loads(sys.stdin.read()), int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
