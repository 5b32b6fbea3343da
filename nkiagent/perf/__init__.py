"""The cost model: how fast a kernel would run on trn1/trn2/trn3, and why.

:func:`profile_kernel` runs a kernel on the emulator with tracing (optionally timing-only,
which allocates no tensor data), schedules the trace on a target's engines and DMA queues,
and returns a :class:`Profile` labelled ``emulator-estimate``.
"""

from __future__ import annotations

from typing import Any

from .profile import EngineStat, Profile, build_profile, profile_trace
from .sol import SpeedOfLight, speed_of_light
from .specs import MODEL_VERSION, SPECS, HardwareSpec, get_spec
from .timeline import Event, Timeline, schedule

__all__ = [
    "MODEL_VERSION",
    "SPECS",
    "EngineStat",
    "Event",
    "HardwareSpec",
    "Profile",
    "ProfiledRun",
    "SpeedOfLight",
    "Timeline",
    "build_profile",
    "get_spec",
    "profile_kernel",
    "profile_trace",
    "schedule",
    "speed_of_light",
]


class ProfiledRun:
    """Everything one profiled execution produced: outputs, trace, timeline and profile."""

    def __init__(self, outputs: Any, trace: Any, timeline: Timeline, profile: Profile) -> None:
        self.outputs = outputs
        self.trace = trace
        self.timeline = timeline
        self.profile = profile


def profile_kernel(
    kernel: Any,
    args: tuple[Any, ...],
    *,
    target: str | None = None,
    timing_only: bool = False,
    task_flops: float | None = None,
    sol: SpeedOfLight | None = None,
    api: str = "0.3",
) -> ProfiledRun:
    """Run ``kernel`` on the emulator with a trace and return its :class:`ProfiledRun`."""
    from ..emu import Trace, run_kernel

    trace = Trace()
    result = run_kernel(kernel, args, target=target, trace=trace, timing_only=timing_only, api=api)
    prof, tl = profile_trace(trace, result.target, task_flops=task_flops, sol=sol)
    return ProfiledRun(result.outputs, trace, tl, prof)
