"""Shared machinery of the kernel corpora (cheats, red team, honest): docstring headers and background verification."""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from nkiagent.tasks import get_task
from nkiagent.verify import gate
from nkiagent.verify.result import EvalResult
from nkiagent.verify.verifier import VerifyOptions, verify

__all__ = ["Job", "header", "verified_in_background"]


def header(path: Path) -> dict[str, str]:
    """The ``KEY: value`` lines of a kernel file's module docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in doc.splitlines() if ":" in line and not line.startswith(" "))}


#: (key, kernel file, task, options, static gate on?)
Job = tuple[str, Path, str, VerifyOptions, bool]


@contextmanager
def verified_in_background(jobs: list[Job], tmp: Path, workers: int = 2) -> Iterator[dict[str, Future[EvalResult]]]:
    """Verify ``jobs`` ``workers`` at a time on trn2 while the tests ask for the results.

    A job with the gate off is verified from a copy in its own directory, and only for files
    there does the gate answer "no violations": what the walls below the gate do alone. Each
    verification runs its cases in one worker process: the ``workers`` verifications at a time
    keep the cores busy, and a second process per verification would only add its start-up.
    """
    gate_off = tmp / "gate_off"
    gate_off.mkdir(exist_ok=True)
    real_check = gate.check_source

    def check(source: str, filename: str = "<kernel>") -> list[gate.Violation]:
        return [] if Path(filename).parent == gate_off else real_check(source, filename)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gate, "check_source", check)
        pool = ThreadPoolExecutor(max_workers=workers)
        futures = {}
        for key, path, task, options, gate_on in jobs:
            where = path if gate_on else Path(shutil.copy(path, gate_off / path.name))
            futures[key] = pool.submit(verify, where, get_task(task), "trn2", replace(options, parallel=1))
        yield futures
        pool.shutdown(wait=True, cancel_futures=True)
