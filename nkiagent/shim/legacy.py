"""``neuronxcc.nki.benchmark`` / ``profile`` / ``jit(mode="benchmark")``: the legacy timing entry points, on the cost model.

There is no hardware here: each call runs the kernel on the emulator (:class:`LegacyKernel`,
the 0.1 launch with its host-memory re-planning) with a trace, prices the trace with
:func:`nkiagent.perf.profile_trace`, and reports that estimate, labelled ``emulator-estimate``,
where AWS's tool reports a measurement. They live here, not in the emulator, because the
emulator may import nothing above it (docs/architecture.md) and the cost model is above it.
The cost model is imported on first use, so installing the faces does not load it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nkiagent.emu.frontend import RunResult
from nkiagent.emu.legacy import frontend as _emu
from nkiagent.emu.legacy.frontend import LegacyKernel, kernel_decorator
from nkiagent.emu.memory import running
from nkiagent.emu.trace import Trace

if TYPE_CHECKING:
    from nkiagent.perf import Profile
    from nkiagent.perf.timeline import Timeline

__all__ = ["TIMING_SOURCE", "BenchmarkKernel", "BenchmarkResult", "LatencyEstimate", "ProfileKernel", "benchmark", "jit", "profile"]

TIMING_SOURCE = "emulator-estimate"


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

    def __init__(self, profile: Profile, warmup: int, iters: int) -> None:
        self.profile = profile
        self.nc_latency = LatencyEstimate(profile.latency_us)
        self.warmup = warmup
        self.iters = iters

    def __repr__(self) -> str:
        return f"<BenchmarkResult {self.nc_latency!r} on {self.profile.target}>"


class _PricedKernel(LegacyKernel):
    """A 0.1 kernel whose top-level calls run with a trace and price it; called from another kernel, it only runs."""

    def _priced(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[RunResult, Trace, Profile, Timeline]:
        """One launch with a trace: ``(result, trace, profile, timeline)`` from the cost model for the run's target."""
        from nkiagent.perf import profile_trace

        trace = Trace()
        result = self.launch(args, kwargs, trace)
        prof, timeline = profile_trace(trace, result.target)
        return result, trace, prof, timeline


class BenchmarkKernel(_PricedKernel):
    """``@nki.benchmark(warmup=, iters=)``: each call runs the kernel and sets ``benchmark_result`` from the cost model."""

    benchmark_result: BenchmarkResult | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if running() is not None:
            return super().__call__(*args, **kwargs)
        result, _, prof, _ = self._priced(args, kwargs)
        self.benchmark_result = BenchmarkResult(prof, int(self.options.get("warmup", 10)), int(self.options.get("iters", 100)))
        return result.outputs


class ProfileKernel(_PricedKernel):
    """``@nki.profile(working_directory=...)``: each call writes the cost model's report there.

    ``<stem>.summary.txt`` is the text summary and ``<stem>.perfetto.json`` the timeline
    (Chrome trace / Perfetto), where ``stem`` comes from ``save_trace_name`` (default
    ``profile``). They replace the NEFF/NTFF files of the real tool.
    """

    report_paths: tuple[Path, Path] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if running() is not None:
            return super().__call__(*args, **kwargs)
        from nkiagent.perf.report import summary_text, write_chrome_trace
        from nkiagent.perf.specs import get_spec

        result, trace, prof, timeline = self._priced(args, kwargs)
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


def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit``: the emulator's (:func:`nkiagent.emu.legacy.frontend.jit`), with ``mode="benchmark"`` a :class:`BenchmarkKernel`."""
    if mode == "benchmark":
        return kernel_decorator(BenchmarkKernel, func, kwargs)
    return _emu.jit(func, mode, **kwargs)


def benchmark(kernel: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.benchmark(warmup=, iters=)``: see :class:`BenchmarkKernel`."""
    return kernel_decorator(BenchmarkKernel, kernel, kwargs)


def profile(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.profile(working_directory=...)``: see :class:`ProfileKernel`."""
    return kernel_decorator(ProfileKernel, func, kwargs)
