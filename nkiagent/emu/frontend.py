"""Kernel launch: ``nki.jit``, ``nki.simulate``, SPMD grids, and host↔emulator conversion.

A launch builds a fresh :class:`~nkiagent.emu.memory.KernelContext` (so no state leaks
between calls), wraps the NumPy (or torch CPU) arguments as HBM tensors, runs the kernel
function once per SPMD instance, checks that every output was written, and hands back
NumPy (or torch) copies of the outputs.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes as dt
from . import memory
from .errors import NkiRuntimeError, NkiTypeError, NkiValidationError
from .fast import enabled as fast_enabled
from .lnc import Scheduler
from .memory import KernelContext, hbm
from .ops import flush_matmul_group
from .targets import Target, get_target
from .tensor import NkiTensor
from .trace import Trace, collector_paused

__all__ = ["Kernel", "RunResult", "ShapeSpec", "jit", "numpy_to_torch", "run_kernel", "simulate", "torch_to_numpy"]


@dataclass(frozen=True)
class ShapeSpec:
    """A placeholder input (shape and dtype, no data) for timing-only runs."""

    shape: tuple[int, ...]
    dtype: Any = "float32"


@dataclass
class RunResult:
    """Outputs and bookkeeping of one kernel execution."""

    outputs: Any
    trace: Trace | None
    instructions: int
    sbuf_peak_bytes: int
    target: str
    warnings: list[str] = field(default_factory=list)
    #: A timing-only run that read tensor values (it read zeros) says where: its trace, and so any
    #: latency from it, may not be the kernel's. Empty for runs with data.
    unfaithful: list[str] = field(default_factory=list)
    #: An instruction wrote into the storage of an input argument (read-only inputs are copied in, so
    #: the caller's arrays stay as they were; this says the kernel tried).
    inputs_written: bool = False


class Kernel:
    """A kernel function decorated with ``@nki.jit``; ``kernel[grid]`` sets an SPMD launch grid."""

    #: The API generation the kernel is written in, when its decorator says so (``neuronxcc.nki.jit``: "0.1");
    #: it overrides the launcher's ``api`` argument, which only guesses from the source.
    api: str | None = None

    def __init__(self, fn: Callable[..., Any], grid: tuple[int, ...] = (), options: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.grid = grid
        self.options = dict(options or {})
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __getitem__(self, grid: Any) -> Kernel:
        g = grid if isinstance(grid, tuple) else (grid,)
        dims: list[int] = []
        for d in g:
            sub = getattr(d, "_nki_grid", None)  # a grid dim object (0.1 ``nl.nc(2) * 2``) or an int
            dims.extend(sub if sub is not None else (int(d),))
        if any(d < 1 for d in dims):
            raise NkiValidationError("err_invalid_grid", f"SPMD grid {list(dims)} must have positive sizes", "<launch>:0")
        return type(self)(self.fn, tuple(dims), self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx = memory.running()
        if ctx is not None:
            if self.grid:
                if ctx.host_launcher and not ctx.grid:
                    return _launch_inline(ctx, self, args, kwargs)
                raise NkiRuntimeError(
                    "err_nested_kernel_with_spmd_grid",
                    f"Calling kernel with spmd grid ({self.fn.__name__}{list(self.grid)}) inside another kernel is not supported",
                )
            return self.fn(*args, **kwargs)
        return run_kernel(self, args, kwargs).outputs

    def __repr__(self) -> str:
        return f"<nki kernel {self.fn.__name__}{list(self.grid) if self.grid else ''}>"


def _launch_inline(ctx: memory.KernelContext, kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A plain (undecorated) entry function launching ``kernel[grid](...)``: run the grid's programs here, in order.

    This is the host-side launcher pattern — the entry picks the grid from the shapes — and it is
    safe to run inside the launch: the entry sees its inputs as HBM tensors (opaque, no host data),
    so all it can do is choose the grid and the arguments. Each program gets its own SBUF/PSUM
    (tiles do not cross programs), and the programs of one launch share its ``shared_hbm`` outputs.
    """
    base = len(ctx.shared)
    ctx.grid = kernel.grid
    programs = list(itertools.product(*(range(g) for g in kernel.grid)))
    try:
        return _run_programs(ctx, programs, lambda pid: kernel.fn(*args, **kwargs), shared_base=base)
    finally:
        ctx.grid, ctx.program_id = (), ()


def _run_programs(
    ctx: memory.KernelContext, programs: list[tuple[int, ...]], body: Callable[[tuple[int, ...]], Any], shared_base: int = 0
) -> Any:
    """Run the launch's programs concurrently (:mod:`.lnc`: interleaved at ``sendrecv``/``core_barrier``); the first one's result."""
    sched = Scheduler(ctx, programs, body)
    for p in sched.programs:
        p.saved["shared_cursor"] = shared_base
    return sched.run()


def jit(fn: Callable[..., Any] | None = None, mode: Any = None, **kwargs: Any) -> Any:
    """Mark a kernel. ``platform_target=`` is an error in NKI 0.3+ (use the target option or env var)."""
    if "platform_target" in kwargs:
        raise NkiTypeError(
            "err_jit_platform_target", "nki.jit(platform_target=...) is not supported in NKI 0.3+; set NEURON_PLATFORM_TARGET_OVERRIDE"
        )
    if fn is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, options=kwargs)


def simulate(kernel: Any, *, target: str | Target | None = None, trace: Trace | None = None) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*arrays)``: run on the emulator and return NumPy (or torch) outputs."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return run_kernel(kernel, args, kwargs, target=target, trace=trace).outputs

    return call


def torch_to_numpy(x: Any) -> np.ndarray | None:
    """A NumPy view of a torch CPU tensor (bf16 kept bit-exact), or None when ``x`` is not a torch tensor."""
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return None
    import torch  # lazily: only when the caller passed a torch tensor

    t = x.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(dt.bfloat16)
    return t.numpy()


def numpy_to_torch(a: np.ndarray) -> Any:
    """A torch tensor with ``a``'s values (bf16 kept bit-exact)."""
    import torch

    if a.dtype == dt.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


class _Arg:
    """Bookkeeping for one array argument: its alloc and how to write back in-place updates."""

    __slots__ = ("alloc", "copied", "original")

    def __init__(self, alloc: memory.Alloc, original: np.ndarray | None, copied: bool) -> None:
        self.alloc = alloc
        self.original = original
        self.copied = copied


def _wrap(ctx: KernelContext, value: Any, name: str, args: list[_Arg], torch_in: list[bool]) -> Any:
    if isinstance(value, NkiTensor):
        raise NkiTypeError("err_kernel_arg", f"kernel argument `{name}` is an NKI tensor from another kernel run", "<launch>:0")
    if isinstance(value, ShapeSpec):
        alloc = ctx.allocate(tuple(value.shape), dt.as_dtype(value.dtype), hbm, name)
        _mark(ctx, alloc, "input")
        alloc.is_input = True
        alloc.written = True
        return NkiTensor._whole(alloc)
    arr = torch_to_numpy(value)
    if arr is not None:
        torch_in.append(True)
    elif isinstance(value, np.ndarray):
        arr = value
    if arr is None:
        if isinstance(value, (list, tuple)):
            return type(value)(_wrap(ctx, v, f"{name}[{i}]", args, torch_in) for i, v in enumerate(value))
        return value
    if arr.dtype == np.float64 and ctx.api != "0.1":
        raise NkiTypeError(
            "err_kernel_arg_dtype", f"kernel argument `{name}` is float64, which NKI does not support; pass float32", "<launch>:0"
        )
    # 0.1 kernels are fed float64 arrays (NKIBench passes a float64 epsilon); the legacy simulator computed in
    # fp32 anyway, so such arguments are stored as float32 (in-place updates are written back as float64).
    d = dt.float32 if arr.dtype == np.float64 else dt.as_dtype(arr.dtype)
    alloc = ctx.allocate(tuple(arr.shape), d, hbm, name)
    _mark(ctx, alloc, "input")
    alloc.is_input = True
    alloc.written = True
    copied = True
    if alloc.has_data:
        alloc.overwrite_all()
        if arr.flags.c_contiguous and arr.dtype == alloc.data.dtype and arr.flags.writeable:
            alloc.data = arr.reshape(-1)
            copied = False
        else:
            alloc.data[...] = arr.reshape(-1)
    args.append(_Arg(alloc, arr, copied))
    return NkiTensor._whole(alloc)


def _mark(ctx: KernelContext, alloc: memory.Alloc, role: str) -> None:
    """Tag an allocation record in the trace as a kernel ``input`` or ``output`` (for the cost model's advice)."""
    if ctx.trace is not None:
        for rec in reversed(ctx.trace.allocations):
            if rec["uid"] == alloc.uid:
                rec["role"] = role
                return


def _outputs(value: Any) -> list[memory.Alloc]:
    if isinstance(value, NkiTensor):
        return [value._a]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _outputs(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _outputs(v)]
    return []


def _unwrap(value: Any, to_torch: bool, compute: bool, where: str, handed: set[int] | None = None) -> Any:
    """Host arrays of the returned tensors; ``where`` (the kernel's ``file:line``) locates an unwritten output.

    An output allocation seen whole is handed over as it is (nothing else holds it once the run
    ends) instead of copied; inputs, views and a second mention of one output are copied.
    """
    handed = set() if handed is None else handed
    if isinstance(value, NkiTensor):
        a = value._a
        if not a.written:
            raise NkiRuntimeError(
                "err_tensor_output_not_written_to", f"output tensor `{a.name}` is returned but never written by the kernel", where
            )
        if not compute:
            return ShapeSpec(tuple(value.shape), dt.dtype_name(value.dtype))
        if value._dtype == a.dtype and value.covers_storage() and not a.is_input and a.uid not in handed:
            handed.add(a.uid)
            out = a.data.reshape(value._shape)
        else:
            out = np.array(value._np(), copy=True)
        if value.dtype == dt.tfloat32:
            out = out.astype(np.float32)
        return numpy_to_torch(out) if to_torch else out
    if isinstance(value, (tuple, list)):
        return type(value)(_unwrap(v, to_torch, compute, where, handed) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v, to_torch, compute, where, handed) for k, v in value.items()}
    return value


_HEAP_TUNED = False


def keep_freed_blocks() -> None:
    """Ask glibc to recycle freed blocks of up to 32 MiB instead of unmapping them (once per process).

    Emulation allocates and frees tile-sized arrays (MiBs each) thousands of times. By default
    glibc serves each from a fresh ``mmap``, and touching it costs a page fault per 4 KiB —
    more than the arithmetic on it. Kernels run in worker processes, so this tuning stays out
    of the agent's own process; elsewhere (macOS, musl) it is a no-op. The evaluation worker
    calls it before its runtime guard goes in (the guard refuses ctypes).
    """
    global _HEAP_TUNED
    if _HEAP_TUNED:
        return
    _HEAP_TUNED = True
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_mmap_threshold, 32 << 20)  # the largest value glibc accepts
    mallopt(m_trim_threshold, 256 << 20)


def run_kernel(
    kernel: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    target: str | Target | None = None,
    trace: Trace | None = None,
    timing_only: bool = False,
    api: str = "0.3",
    fast: bool | None = None,
) -> RunResult:
    """Execute ``kernel`` on the emulator. This is the one entry all front-ends share.

    Args:
        kernel: a :class:`Kernel` (possibly with an SPMD grid) or a plain function.
        args: NumPy arrays / torch CPU tensors / :class:`ShapeSpec` placeholders / Python values.
        target: ``trn1``, ``trn2``, ``trn3`` (default: env override, else trn2).
        trace: the caller's trace to append instruction records to (``None``: no tracing).
        timing_only: allocate no tensor data and compute nothing; only control flow and the trace.
        api: ``"0.3"`` for ``import nki`` kernels, ``"0.1"`` for ``neuronxcc.nki`` kernels.
        fast: run the fast paths (:mod:`nkiagent.emu.fast`); ``None`` reads ``NKIAGENT_EMU_FAST`` (default on).
    """
    if memory._CURRENT is not None:
        raise NkiRuntimeError("err_nested_launch", "a kernel launch from inside a running kernel is not supported", "<launch>:0")
    keep_freed_blocks()
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    api = k.api or api
    tgt = get_target(target if target is not None else k.options.get("platform_target"))  # 0.1's nki.jit(platform_target=)
    ctx = KernelContext(tgt, trace, compute=not timing_only, api=api)
    ctx.fast = fast_enabled(fast)
    ctx.host_launcher = not isinstance(kernel, Kernel) and api != "0.1"  # a plain entry function may launch a gridded kernel
    if trace is not None:
        trace.target = tgt.name
    grid = k.grid or ()
    ctx.grid = grid
    arg_records: list[_Arg] = []
    torch_in: list[bool] = []
    import warnings

    memory._CURRENT = ctx
    try:
        with collector_paused():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                targs = [_wrap(ctx, a, _param_name(k.fn, i), arg_records, torch_in) for i, a in enumerate(args)]
                tkw = {n: _wrap(ctx, v, n, arg_records, torch_in) for n, v in (kwargs or {}).items()}
                launch = None
                if api == "0.1":
                    from .legacy.runtime import Launch

                    launch = Launch(ctx, k.fn, targs, tkw)
                programs = list(itertools.product(*(range(g) for g in grid))) if grid else [()]

                def program(pid: tuple[int, ...]) -> Any:
                    r = k.fn(*targs, **tkw)  # each program has its own id, registers and loops (lnc.Scheduler)
                    if launch is not None:
                        launch.returned(r)
                    return r

                result = _run_programs(ctx, programs, program)
                flush_matmul_group(ctx)
                ctx.finish()
                for alloc in _outputs(result):
                    _mark(ctx, alloc, "output")
                code = getattr(k.fn, "__code__", None)
                where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<kernel>:0"
                outputs = _unwrap(result, bool(torch_in), ctx.compute, where)
            for a in arg_records:
                if a.copied and a.alloc.has_data and a.original is not None and a.original.flags.writeable:
                    a.original[...] = a.alloc.data.reshape(a.original.shape)
    finally:
        memory._CURRENT = None
    msgs = [str(w.message) for w in caught]
    if trace is not None:
        trace.warnings.extend(msgs)
        trace.unfaithful.extend(ctx.data_reads)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return RunResult(outputs, trace, ctx.seq, ctx.sbuf_peak, tgt.name, msgs, list(ctx.data_reads), ctx.input_writes > 0)


def _param_name(fn: Callable[..., Any], i: int) -> str:
    code = getattr(fn, "__code__", None)
    if code is not None and i < code.co_argcount:
        return code.co_varnames[i]
    return f"arg{i}"
