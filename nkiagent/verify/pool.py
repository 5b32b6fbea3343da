"""Verifying many candidates at once on a local pool (one sandboxed worker process each).

The parent's share of the work (gate, comparisons, profiles) is light and the kernels run in
their own processes, so a thread per slot is enough to keep ``workers`` processes busy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..tasks.spec import Task
from .result import EvalResult
from .verifier import VerifyOptions, verify

__all__ = ["default_workers", "verify_many"]


def default_workers() -> int:
    """All cores by default."""
    return max(1, os.cpu_count() or 1)


def verify_many(
    items: Sequence[tuple[str | Path, Task, str]], workers: int | None = None, options: VerifyOptions | None = None
) -> list[EvalResult]:
    """Verify ``(kernel_path, task, target)`` items with up to ``workers`` sandboxes at once, in input order.

    The sandboxes are divided between the candidates: with more candidates than workers each
    verification runs its cases in one process, with fewer each gets a share of the workers.
    """
    n = max(1, workers or default_workers())
    at_once = max(1, min(n, len(items)))
    opts = replace(options or VerifyOptions(), parallel=max(1, n // at_once))
    if at_once == 1:
        return [verify(p, t, tg, opts) for p, t, tg in items]
    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="nkiagent-verify") as pool:
        return list(pool.map(lambda it: verify(it[0], it[1], it[2], opts), items))
