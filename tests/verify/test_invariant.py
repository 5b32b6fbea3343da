"""One instruction stream per shape, and estimates that say when they cannot be trusted.

An NKI kernel's instructions are fixed by its shapes, and by registers it loads on purpose.
The verifier traces every run and rejects a kernel that issues different instructions for
two inputs of one shape (it recognised an input and skipped work there), unless the task
declares data-dependent control, in which case the latency is the worst over the visible
shape's runs. A timing-only profile of a kernel that loads registers from data says it is
not faithful, because without data every register reads 0.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np

from nkiagent.emu import ShapeSpec
from nkiagent.perf import profile_kernel
from nkiagent.perf.report import summary_text
from nkiagent.tasks import get_task
from nkiagent.verify.verifier import VerifyOptions, verify

TASK = get_task("vector_add")
QUICK = VerifyOptions(seeds=2, hidden=False)

#: vector_add that loads a register from its own data (is |a[0, 0]| > 10, as in the large-magnitude
#: inputs?) and runs a throw-away loop 0 or 30 times: the numbers are right either way, but the
#: instruction stream depends on the input.
SKIPPER = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    probe = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=probe, src=a[0:1, 0:1])
    square = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=square, data1=probe, data2=probe, op=nl.multiply)
    flag = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=flag, data=square, op0=nl.greater, operand0=100.0, op1=nl.multiply, operand1=30.0)
    reps = nisa.register_alloc(0)
    nisa.register_load(reps, flag)
    for i in nl.affine_range(n // 128):
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        junk = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
        for _ in nl.dynamic_range(reps):
            nisa.tensor_tensor(dst=junk, data1=ta, data2=tb, op=nl.maximum)
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=ta)
    return out
"""


def _write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(source))
    return path


def test_a_kernel_whose_instructions_follow_the_data_is_rejected(tmp_path: Path) -> None:
    res = verify(_write(tmp_path, SKIPPER), TASK, "trn2", QUICK)
    assert res.verdict == "rejected", res.reasons
    assert res.reasons[0].startswith("integrity [data-dependent instructions]: on the visible shape (N=2048, D=1024) the kernel issued")


def _kernel(path: Path):
    from nkiagent import shim

    shim.install()
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 — the test runs its own kernel file in-process
    return ns["kernel"]


def test_where_the_task_allows_it_the_worst_run_is_priced(tmp_path: Path) -> None:
    """A task with data-dependent control passes the same kernel, and reports its slowest visible stream."""
    path = _write(tmp_path, SKIPPER)
    res = verify(path, replace(TASK, data_dependent=True), "trn2", QUICK)
    assert res.verdict == "pass", res.reasons
    assert any(c.name == "timed_runs" and c.detail.startswith("2 distinct instruction streams") for c in res.checks)
    a, b = np.full((2048, 1024), 100.0, np.float32), np.zeros((2048, 1024), np.float32)
    slow = profile_kernel(_kernel(path), (a, b), target="trn2").profile.latency_us  # |a[0, 0]| > 10: the loop runs 30 times
    fast = profile_kernel(_kernel(path), (a / 1000, b), target="trn2").profile.latency_us
    assert fast < slow and res.latency_us == slow


def test_timing_only_profile_says_it_is_not_faithful_when_registers_come_from_data(tmp_path: Path) -> None:
    path = _write(tmp_path, SKIPPER)
    kernel = _kernel(path)
    specs = (ShapeSpec((256, 512), "float32"), ShapeSpec((256, 512), "float32"))
    timing = profile_kernel(kernel, specs, target="trn2", timing_only=True)
    assert not timing.profile.faithful
    assert timing.profile.unfaithful[0].startswith("a register loaded from a tensor at ") and str(path) in timing.profile.unfaithful[0]
    assert summary_text(timing.profile).startswith("NOT FAITHFUL: this timing-only run has no data")
    a = np.full((256, 512), 100.0, np.float32)
    real = profile_kernel(kernel, (a, a), target="trn2")
    assert real.profile.faithful and not real.profile.unfaithful
    assert real.profile.latency_us > timing.profile.latency_us  # the zero register skipped the loop


def test_timing_only_profile_of_an_ordinary_kernel_is_faithful() -> None:
    run = profile_kernel(_kernel(TASK.baseline_path()), (ShapeSpec((256, 512), "float32"),) * 2, target="trn2", timing_only=True)
    assert run.profile.faithful and not summary_text(run.profile).startswith("NOT FAITHFUL")
