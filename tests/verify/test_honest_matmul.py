"""Zero false positives for the matmul/attention family: honest kernels pass on every target.

For each task of the family, the task's own baseline and an optimized kernel from
``tests/verify/honest/`` must get verdict ``pass`` on trn1, trn2 and trn3 (the protocols are
:func:`tests.verify.protocols.protocol_for`: the full one for the optimized kernel on trn2) —
and the optimized kernel must be
estimated faster than the baseline on trn2, with the verifier's speedup agreeing with the
two verified latencies.

The evaluations are independent worker processes, so they run two at a time (one thread per
core waits on its worker). A task's evaluations stay in one thread, in order, so each of its
input caches (one per protocol) is built once, by the first
evaluation that needs it, and never by two threads at the same time.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nkiagent.tasks import get_task
from nkiagent.verify.result import EvalResult
from nkiagent.verify.verifier import verify

from .protocols import assert_one_hidden_shape_is_larger_everywhere, protocol_for, release_inputs

#: the family and the level each task is filed under; heaviest first, so the two threads start on the two largest
LEVELS = {"matmul": 2, "rmsnorm_matmul": 3, "swiglu": 3, "attention": 3, "causal_attention": 3, "bmm": 2, "adamw": 2}
TASKS = tuple(LEVELS)
TARGETS = ("trn2", "trn1", "trn3")  #: evaluation order within a task: the full protocol first
KINDS = ("baseline", "optimized")

Key = tuple[str, str, str]  # (task, kind, target)


def _kernels(task_name: str) -> dict[str, Path]:
    """The task's own baseline and its optimized kernel in the honest corpus next to this file."""
    baseline = get_task(task_name).baseline_path()
    assert baseline is not None, f"{task_name} names no baseline"
    return {"baseline": baseline, "optimized": Path(__file__).resolve().parent / "honest" / f"{task_name}_opt.py"}


def _verify_task(task_name: str) -> dict[Key, EvalResult]:
    """Every evaluation of one task, in order (see the module docstring for why in one thread)."""
    task, kernels = get_task(task_name), _kernels(task_name)
    try:
        return {(task_name, kind, target): verify(kernels[kind], task, target, protocol_for(task, kind, target))
                for target in TARGETS for kind in KINDS}
    finally:
        release_inputs(task_name)


@pytest.fixture(scope="module")
def results() -> dict[Key, EvalResult]:
    """All 42 evaluations, once per module: they are nearly all of this file's time."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        per_task = list(pool.map(_verify_task, TASKS))
    return {key: res for chunk in per_task for key, res in chunk.items()}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("task_name", TASKS)
def test_honest_kernel_passes(results: dict[Key, EvalResult], task_name: str, kind: str, target: str) -> None:
    res = results[(task_name, kind, target)]
    assert res.verdict == "pass", f"{task_name} {kind} on {target}: {res.verdict}: {res.reasons}"
    assert res.correct and res.latency_us is not None and res.latency_us >= res.sol_latency_us


@pytest.mark.parametrize("task_name", TASKS)
def test_optimized_kernel_is_faster_than_the_baseline_on_trn2(results: dict[Key, EvalResult], task_name: str) -> None:
    base = results[(task_name, "baseline", "trn2")]
    opt = results[(task_name, "optimized", "trn2")]
    assert base.verdict == opt.verdict == "pass", (base.reasons, opt.reasons)
    assert opt.baseline_latency_us == pytest.approx(base.latency_us)
    assert opt.speedup is not None and opt.speedup > 1.0, f"{task_name}: speedup {opt.speedup}"
    assert opt.speedup == pytest.approx(base.latency_us / opt.latency_us, rel=1e-3)


@pytest.mark.parametrize("task_name", TASKS)
def test_task_level_and_hidden_shapes(task_name: str) -> None:
    """Three hidden shapes, all differing from the visible one: two smaller (they are cheap) and one
    larger in every dimension (a kernel written only up to the visible size fails)."""
    task = get_task(task_name)
    assert task.level == LEVELS[task_name]
    visible = math.prod(task.output_shape())
    assert len(task.hidden_dims) == 3 and all(h != task.dims for h in task.hidden_dims)
    assert sum(math.prod(task.output_shape(h)) < visible for h in task.hidden_dims) >= 1
    assert_one_hidden_shape_is_larger_everywhere(task)
