"""``neuronxcc.nki`` entry points: ``jit``, ``trace``, ``simulate_kernel``, ``baremetal``.

All of them run the kernel on the emulator with ``api="0.1"``; there is no hardware here, so
``baremetal`` simulates too. Arguments may be NumPy arrays, torch CPU tensors, or shape
placeholders ``nt.tensor[[8192, 4096], nl.bfloat16]``; with placeholders the kernel runs
timing-only (control flow and the trace, no data).

``benchmark`` and ``profile`` (and ``jit(mode="benchmark")``) answer with the cost model's
estimate, and the cost model (:mod:`nkiagent.perf`) sits above the emulator, which imports
only NumPy and ml_dtypes: they live in :mod:`nkiagent.shim.legacy`, built on :class:`LegacyKernel`
and :func:`kernel_decorator` here. :func:`needs_cost_model` is what the emulator alone says
when a kernel asks for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import NkiUnsupportedError, kernel_location
from ..frontend import Kernel, RunResult, ShapeSpec, run_kernel
from ..memory import running
from ..nki.typing import _Annotation
from ..trace import Trace
from .runtime import NeedHostPlan, planning

__all__ = [
    "COST_MODEL_ENTRY_POINTS",
    "LegacyKernel",
    "baremetal",
    "jit",
    "kernel_decorator",
    "needs_cost_model",
    "simulate_kernel",
    "trace",
]

#: The ``neuronxcc.nki`` names that need the cost model; the emulator alone refuses them by name.
COST_MODEL_ENTRY_POINTS = ("benchmark", "profile")


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


def needs_cost_model(what: str) -> NkiUnsupportedError:
    """The error for ``neuronxcc.nki.<what>`` when only the emulator is installed (``nkiagent.emu.install()``).

    Timing answers come from the cost model, a layer above the emulator; ``nkiagent.shim.install()``
    installs the front-ends with them (the sandbox worker and the test suite do).
    """
    return NkiUnsupportedError(
        "err_not_emulated",
        f"neuronxcc.nki.{what} answers with nkiagent's cost model, which the emulator alone does not include: "
        "install the front-ends with nkiagent.shim.install() instead of nkiagent.emu.install()",
        kernel_location(),
    )


def kernel_decorator(cls: type[LegacyKernel], func: Any, options: dict[str, Any]) -> Any:
    """``@deco``, ``@deco(**options)`` and ``deco(func, **options)`` all give a kernel of class ``cls``."""
    if func is None:
        return lambda f: _kernel(f, cls, options)
    return _kernel(func, cls, options)


def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit``: a 0.1 kernel. ``mode="baremetal"`` / ``"trace"`` behave like those decorators; every other
    mode (``auto``, ``simulation``, ``jax``, ``torchxla``) runs on the emulator, except ``"benchmark"``, which
    needs the cost model (:func:`needs_cost_model`; :func:`nkiagent.shim.legacy.jit` provides it).
    """
    if mode == "benchmark":
        raise needs_cost_model("jit(mode='benchmark')")
    return kernel_decorator(LegacyKernel, func, kwargs)


def trace(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.trace`` / ``@nki.jit(mode='trace')``: a sub-kernel called from kernels."""
    return kernel_decorator(LegacyKernel, func, kwargs)


def baremetal(kernel: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.baremetal``: runs on the emulator (there is no device); the NEFF/trace options are ignored."""
    return kernel_decorator(LegacyKernel, kernel, kwargs)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``nki.simulate_kernel(kernel[grid], *arrays)``: run on the emulator and return NumPy outputs."""
    return _kernel(kernel).launch(args, kwargs).outputs
