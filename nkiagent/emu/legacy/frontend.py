"""``neuronxcc.nki`` entry points: ``jit``, ``trace``, ``simulate_kernel``, ``baremetal``, ``benchmark``, ``profile``.

All of them run the kernel on the emulator with ``api="0.1"``; there is no hardware here, so
``baremetal`` simulates too, and ``benchmark`` / ``profile`` report the cost model's
estimate (labelled ``emulator-estimate``) instead of a measurement. Arguments may be NumPy
arrays, torch CPU tensors, or shape placeholders ``nt.tensor[[8192, 4096], nl.bfloat16]``;
with placeholders the kernel runs timing-only (control flow and the trace, no data).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..frontend import Kernel, RunResult, ShapeSpec, run_kernel
from ..memory import running
from ..nki.typing import _Annotation
from ..trace import Trace
from .runtime import NeedHostPlan, planning

__all__ = [
    "BenchmarkKernel",
    "BenchmarkResult",
    "LatencyEstimate",
    "LegacyKernel",
    "ProfileKernel",
    "baremetal",
    "benchmark",
    "jit",
    "profile",
    "simulate_kernel",
    "trace",
]

TIMING_SOURCE = "emulator-estimate"


def _placeholder(value: Any) -> Any:
    """``nt.tensor[[8192, 4096], nl.bfloat16]`` (or ``nt.tensor[128, 512]``) as a :class:`ShapeSpec`; anything else unchanged."""
    if not isinstance(value, _Annotation) or value.args is None:
        return value
    args = value.args if isinstance(value.args, tuple) else (value.args,)
    if args and isinstance(args[0], (list, tuple)):
        return ShapeSpec(tuple(int(s) for s in args[0]), args[1] if len(args) > 1 else "float32")
    return ShapeSpec(tuple(int(s) for s in args))


class LegacyKernel(Kernel):
    """A ``neuronxcc.nki.jit`` kernel: always runs with the 0.1 semantics; ``platform_target=`` picks the target."""

    api = "0.1"

    def launch(self, args: tuple[Any, ...], kwargs: dict[str, Any], trace: Trace | None = None) -> RunResult:
        """Run once; a run whose block tensors outgrow host-memory limits is re-run with a :class:`~.runtime.HostPlan`."""
        args = tuple(_placeholder(a) for a in args)
        kwargs = {k: _placeholder(v) for k, v in kwargs.items()}
        timing_only = any(isinstance(v, ShapeSpec) for v in (*args, *kwargs.values()))
        try:
            with planning(False):
                return run_kernel(self, args, kwargs, trace=trace, timing_only=timing_only, api="0.1")  # (platform_target= is in options)
        except NeedHostPlan:
            pass
        if trace is not None:  # drop the aborted attempt's records
            trace.reset()
        with planning(None) as plan:
            assert plan is not None
            run_kernel(self, args, kwargs, timing_only=True, api="0.1")
        plan.seal()
        with planning(plan):
            return run_kernel(self, args, kwargs, trace=trace, api="0.1")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if running() is not None:
            return super().__call__(*args, **kwargs)  # a sub-kernel called from a kernel
        return self.launch(args, kwargs).outputs


def _kernel(func: Any, cls: type[LegacyKernel] = LegacyKernel, options: dict[str, Any] | None = None) -> LegacyKernel:
    """``func`` (a function or any decorated kernel) as a kernel of class ``cls``, keeping its grid and options."""
    if isinstance(func, Kernel):
        return cls(func.fn, func.grid, {**func.options, **(options or {})})
    return cls(func, options=options)


class LatencyEstimate:
    """``benchmark_result.nc_latency``: the cost model's latency, answered for every percentile (it is deterministic)."""

    timing_source = TIMING_SOURCE

    def __init__(self, latency_us: float) -> None:
        self.latency_us = latency_us

    def get_latency_percentile(self, percentile: float) -> float:
        """Latency in µs at ``percentile`` (0–100); an estimate, not a measurement."""
        if not 0 <= float(percentile) <= 100:
            raise ValueError(f"percentile must be between 0 and 100, got {percentile}")
        return self.latency_us

    def __repr__(self) -> str:
        return f"<nc_latency {self.latency_us:,.2f} µs ({TIMING_SOURCE}: nkiagent cost model, not a hardware measurement)>"

    __str__ = __repr__


class BenchmarkResult:
    """What ``nki.benchmark`` leaves on the kernel: ``nc_latency`` plus the full cost-model profile."""

    timing_source = TIMING_SOURCE

    def __init__(self, profile: Any, warmup: int, iters: int) -> None:
        self.profile = profile
        self.nc_latency = LatencyEstimate(profile.latency_us)
        self.warmup = warmup
        self.iters = iters

    def __repr__(self) -> str:
        return f"<BenchmarkResult {self.nc_latency!r} on {self.profile.target}>"


class BenchmarkKernel(LegacyKernel):
    """``@nki.benchmark(warmup=, iters=)``: each call runs the kernel and sets ``benchmark_result`` from the cost model."""

    benchmark_result: BenchmarkResult | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if running() is not None:
            return super().__call__(*args, **kwargs)
        from ...perf import profile_trace

        trace = Trace()
        result = self.launch(args, kwargs, trace)
        prof, _ = profile_trace(trace, result.target)
        self.benchmark_result = BenchmarkResult(prof, int(self.options.get("warmup", 10)), int(self.options.get("iters", 100)))
        return result.outputs


class ProfileKernel(LegacyKernel):
    """``@nki.profile(working_directory=...)``: each call writes the cost model's report there.

    ``<stem>.summary.txt`` is the text summary and ``<stem>.perfetto.json`` the timeline
    (Chrome trace / Perfetto), where ``stem`` comes from ``save_trace_name`` (default
    ``profile``). They replace the NEFF/NTFF files of the real tool.
    """

    report_paths: tuple[Path, Path] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if running() is not None:
            return super().__call__(*args, **kwargs)
        from ...perf import profile_trace
        from ...perf.report import summary_text, write_chrome_trace
        from ...perf.specs import get_spec

        trace = Trace()
        result = self.launch(args, kwargs, trace)
        prof, timeline = profile_trace(trace, result.target)
        directory = Path(self.options.get("working_directory") or ".")
        stem = Path(str(self.options.get("save_trace_name") or "profile")).stem
        text, perfetto = directory / f"{stem}.summary.txt", directory / f"{stem}.perfetto.json"
        if not self.options.get("overwrite", True) and (text.exists() or perfetto.exists()):
            raise FileExistsError(f"{text} or {perfetto} exists and nki.profile(overwrite=False) was given")
        directory.mkdir(parents=True, exist_ok=True)
        text.write_text(summary_text(prof) + "\n")
        write_chrome_trace(perfetto, trace, timeline, get_spec(prof.target))
        self.report_paths = (text, perfetto)
        return result.outputs


def _decorator(cls: type[LegacyKernel], func: Any, options: dict[str, Any]) -> Any:
    """``@deco``, ``@deco(**options)`` and ``deco(func, **options)`` all give a kernel of class ``cls``."""
    if func is None:
        return lambda f: _kernel(f, cls, options)
    return _kernel(func, cls, options)


def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit``: a 0.1 kernel. ``mode="benchmark"`` / ``"baremetal"`` / ``"trace"`` behave like those decorators;
    every other mode (``auto``, ``simulation``, ``jax``, ``torchxla``) runs on the emulator.
    """
    cls = BenchmarkKernel if mode == "benchmark" else LegacyKernel
    return _decorator(cls, func, kwargs)


def trace(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.trace`` / ``@nki.jit(mode='trace')``: a sub-kernel called from kernels."""
    return _decorator(LegacyKernel, func, kwargs)


def baremetal(kernel: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.baremetal``: runs on the emulator (there is no device); the NEFF/trace options are ignored."""
    return _decorator(LegacyKernel, kernel, kwargs)


def benchmark(kernel: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.benchmark(warmup=, iters=)``: see :class:`BenchmarkKernel`."""
    return _decorator(BenchmarkKernel, kernel, kwargs)


def profile(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.profile(working_directory=...)``: see :class:`ProfileKernel`."""
    return _decorator(ProfileKernel, func, kwargs)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``nki.simulate_kernel(kernel[grid], *arrays)``: run on the emulator and return NumPy outputs."""
    return _kernel(kernel).launch(args, kwargs).outputs
