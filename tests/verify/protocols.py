"""How much of the protocol the honest-kernel suites run, and the hidden-shape rule they check.

The full protocol (the default seeds × each distribution of the task × the visible and hidden shapes)
runs once per task, on the kernel the suite cares most about (the optimized one on trn2). The
other evaluations run fewer seeds: the baseline on trn2 one seed of every distribution and
shape; the optimized kernel on trn1 and trn3 one seed of the task's first distribution on every
shape (where an honest kernel can break: capacity on trn1, a ragged tail) — numerics do not
depend on the target, and the emulator's capacity and engine rules do not depend on the data;
the baseline on trn1 and trn3 the visible shape, which is what its latency (the denominator of
every speedup there) is measured on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from nkiagent.sandbox.launch import Limits
from nkiagent.tasks.spec import Task
from nkiagent.verify.inputs import InputCache
from nkiagent.verify.protocol import VISIBLE_SEEDS
from nkiagent.verify.verifier import VerifyOptions

#: dimensions that cannot grow past the visible size: attention's head dim is already the partition count
FIXED = {"attention": {"D"}, "causal_attention": {"D"}}


def protocol_for(task: Task, kind: str, target: str, limits: Limits | None = None) -> VerifyOptions:
    """The options of one honest evaluation (see the module docstring); only trn2's optimized run asks for the speedup.

    Its inputs go to a cache of the task's own (see :func:`release_inputs`). The suites verify two
    tasks at a time, so each verification runs its cases in one worker process."""
    full = (kind, target) == ("optimized", "trn2")
    distributions = None if target == "trn2" else task.distributions[:1]
    # a baseline's job off trn2 is the latency a speedup is measured against: one run of the visible shape
    hidden = target == "trn2" or kind != "baseline"
    return VerifyOptions(seeds=VISIBLE_SEEDS if full else 1, distributions=distributions, hidden=hidden, with_baseline=full, limits=limits or Limits(),
                         input_cache=str(_own_cache(task.name)), parallel=1)


def _own_cache(task_name: str) -> Path:
    return Path(InputCache().root) / f"honest-{task_name}"


def assert_one_hidden_shape_is_larger_everywhere(task: Task) -> None:
    """One hidden shape exceeds the visible one in every dimension that can grow (see :data:`FIXED`),
    so a kernel written only up to the visible size fails."""
    fixed = FIXED.get(task.name, set())
    assert any(all(h[k] > v or (k in fixed and h[k] == v) for k, v in task.dims.items()) for h in task.hidden_dims), (
        f"{task.name}: no hidden shape is larger than {task.dims} in every dimension: {task.hidden_dims}"
    )


def release_inputs(task_name: str) -> None:
    """Drop a task's inputs and references once its honest evaluations are done: the cache is on
    tmpfs (RAM), and the honest suites' inputs would otherwise hold several GiB to the end. They
    are the suite's own (:func:`protocol_for`), so no other test file, in this process or in
    another pytest-xdist worker, is reading them."""
    shutil.rmtree(_own_cache(task_name), ignore_errors=True)
