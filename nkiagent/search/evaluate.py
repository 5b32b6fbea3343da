"""Cascade evaluation and the executors that run it: a local process pool or a Ray cluster.

Cascade (cheap checks first, so a broken candidate costs little): the static gate (no
execution) → the kernel on the task's smallest shape, one seed, no hidden shapes → the full
verification with the search's :class:`~nkiagent.verify.verifier.VerifyOptions`. Every stage is
:func:`nkiagent.verify.verifier.verify` (the gate is its first step), so a candidate is only
ever called fast by the verifier's own ``pass``.

A job carries the kernel text and the task's name (or task-file path), never a task object: a
Ray worker on another machine loads the task itself, and runs with its own backend.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["EvalJob", "Executor", "LocalExecutor", "RayExecutor", "cascade_evaluate", "make_executor"]


@dataclass(frozen=True)
class EvalJob:
    """One candidate to evaluate. ``seeds``/``hidden``/``distributions`` set the full stage's protocol."""

    source: str
    task: str
    target: str = "trn2"
    seeds: int = 1
    distributions: tuple[str, ...] = ("normal",)
    hidden: bool = True
    cascade: bool = True
    #: sandboxed processes this job's verification may run at once (``None``: one per core). An executor
    #: that runs several jobs at once gives each its share, so ``workers`` is the number of sandboxes.
    parallel: int | None = None


_TASKS: dict[str, Any] = {}
_TASKS_LOCK = threading.Lock()


def _task(ref: str) -> Any:
    from ..tasks import get_task

    with _TASKS_LOCK:
        if ref not in _TASKS:
            _TASKS[ref] = get_task(ref)
        return _TASKS[ref]


def _small(task: Any) -> Any:
    """The task on its smallest shape (visible or hidden) and nothing else: the cascade's middle stage."""
    dims = min(task.all_dims(), key=lambda d: sum(math.prod(s) for s in task.input_shapes(d)))
    return dataclasses.replace(task, dims=dims, hidden_dims=[])


def cascade_evaluate(job: EvalJob) -> dict[str, Any]:
    """Evaluate one job through the cascade; the answer is the verifier's JSON plus ``stage`` (the last stage run)."""
    from ..verify.verifier import VerifyOptions, verify

    task = _task(job.task)
    fd, path = tempfile.mkstemp(prefix="nkiagent-cand-", suffix=".py")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(job.source)
        if job.cascade:
            small = verify(
                path,
                _small(task),
                job.target,
                VerifyOptions(seeds=1, distributions=job.distributions[:1], hidden=False, with_baseline=False, parallel=job.parallel),
            ).to_dict()
            if small["verdict"] != "pass":
                gate = next((c for c in small["checks"] if c["name"] == "static_gate"), None)
                small["stage"] = "static" if gate is not None and not gate["ok"] else "small"
                small["reasons"] = [f"{r} [small-shape stage {dict(_small(task).dims)}]" for r in small["reasons"]]
                return small
        opts = VerifyOptions(seeds=job.seeds, distributions=job.distributions, hidden=job.hidden, parallel=job.parallel)
        full = verify(path, task, job.target, opts).to_dict()
        full["stage"] = "full"
        return full
    finally:
        os.unlink(path)


class Executor(Protocol):
    """Evaluates jobs in parallel and answers in input order (so results never depend on timing)."""

    workers: int

    def map(self, jobs: Sequence[EvalJob]) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """A local pool: ``workers`` threads, each driving one sandboxed worker process at a time.

    The parent's share (gate, comparisons, profile) is light, so threads keep the processes busy;
    this is the same design as :func:`nkiagent.verify.pool.verify_many`, with the cascade per job.
    """

    def __init__(self, workers: int | None = None, evaluate: Callable[[EvalJob], dict[str, Any]] = cascade_evaluate) -> None:
        from ..verify.pool import default_workers

        self.workers = max(1, workers or default_workers())
        self._evaluate = evaluate
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="nkiagent-search-eval") if self.workers > 1 else None

    def map(self, jobs: Sequence[EvalJob]) -> list[dict[str, Any]]:
        if self._pool is None:
            return [self._evaluate(j) for j in jobs]
        share = max(1, self.workers // max(1, min(self.workers, len(jobs))))  # as verify_many divides them
        return list(self._pool.map(self._evaluate, [dataclasses.replace(j, parallel=j.parallel or share) for j in jobs]))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class RayExecutor:
    """Evaluations as Ray tasks: on a cluster (``address``) or a local Ray started here with ``workers`` CPUs.

    Each task runs :func:`cascade_evaluate` in a Ray worker, which sandboxes the kernel in its own
    process as locally; results come back in input order. A Ray started here is shut down by
    :meth:`close`; a cluster we only connected to is left running.
    """

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        import ray

        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        self._remote = ray.remote(num_cpus=1)(cascade_evaluate)

    def map(self, jobs: Sequence[EvalJob]) -> list[dict[str, Any]]:
        # a task holds one CPU (num_cpus=1): its verification runs one sandbox, so workers = sandboxes
        return list(self._ray.get([self._remote.remote(dataclasses.replace(j, parallel=j.parallel or 1)) for j in jobs]))

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(kind: str = "local", workers: int | None = None, ray_address: str | None = None) -> Executor:
    """``local`` (default, all cores) or ``ray``."""
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(ray_address, workers)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")
