"""The speed of light of a task on a target: one function, so the verifier, its hardware path and
the TUI's profile view can never bound the same task differently."""

from __future__ import annotations

from ..perf.sol import SpeedOfLight, speed_of_light
from ..perf.specs import get_spec
from ..tasks.spec import Task

__all__ = ["task_speed_of_light"]


def task_speed_of_light(task: Task, dims: dict[str, int], target: str) -> SpeedOfLight:
    """The task's minimum work at ``dims`` at the cost model's peak rates for the precision the task
    requires (:attr:`~nkiagent.tasks.spec.Task.precision_floor`): an fp32 task is bounded by TensorE's
    fp32 rate, which is what its correct kernels can reach."""
    work = task.work(dims)
    return speed_of_light(
        get_spec(target),
        matmul_flops=work["matmul_flops"],
        vector_elems=work["vector_elems"],
        scalar_elems=work["scalar_elems"],
        hbm_bytes=work["hbm_bytes"],
        precision=task.precision_floor,
    )
