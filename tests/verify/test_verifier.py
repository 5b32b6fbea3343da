"""The verifier's verdicts and reports: what a failing kernel is told, and parallel verification."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from nkiagent.tasks import get_task
from nkiagent.verify.pool import verify_many
from nkiagent.verify.verifier import VerifyOptions, verify

TASK = get_task("vector_add")
QUICK = VerifyOptions(seeds=2)

ADD = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.OP)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=ta)
    return out
"""


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_honest_kernel_passes_with_labelled_latency_and_speedup(tmp_path: Path) -> None:
    res = verify(_write(tmp_path, "k.py", ADD.replace("OP", "add")), TASK, "trn1", QUICK)
    assert res.verdict == "pass", res.reasons
    assert res.compiled and res.correct and res.timing_source == "emulator-estimate" and res.model_version
    assert res.latency_us > 0 and res.baseline_latency_us > 0 and res.speedup == pytest.approx(res.baseline_latency_us / res.latency_us, rel=1e-3)
    assert 0 < res.fraction_of_peak <= 1 and res.sol_latency_us <= res.latency_us
    assert len(res.code_sha256) == 64
    assert {c.name for c in res.checks} >= {"static_gate", "correctness", "deterministic", "inputs_unchanged", "speed_of_light"}


def test_wrong_answer_names_case_error_size_and_place_but_no_values(tmp_path: Path) -> None:
    res = verify(_write(tmp_path, "k.py", ADD.replace("OP", "subtract")), TASK, "trn2", QUICK)
    assert res.verdict == "fail" and res.compiled and not res.correct and res.speedup is None
    (reason,) = res.reasons
    assert reason.startswith("wrong answer on the visible shape (N=2048, D=1024) with normal inputs: ")
    assert re.search(r"(about )?\d+ of \d+ elements outside tolerance .*; max abs err [\d.e+-]+, relative L2 error [\d.e+-]+\. "
                     r"First mismatch at index \[\d+, \d+\]\.$", reason), reason
    # no reference or output values, no seed, no run order
    assert "got" not in reason and "expected" not in reason and "seed" not in reason


def test_shape_specialized_kernel_fails_on_a_hidden_shape_without_naming_it(tmp_path: Path) -> None:
    special = ADD.replace("OP", "add").replace("n, d = a.shape", "n, d = 2048, 1024")
    res = verify(_write(tmp_path, "k.py", special), TASK, "trn2", QUICK)
    assert res.verdict == "fail"
    reason = res.reasons[0]
    assert "(a hidden shape (smaller than the visible shape in every dimension) with normal inputs)" in reason, reason
    hidden = {str(v) for dims in TASK.hidden_dims for v in dims.values()} - {str(v) for v in TASK.dims.values()}
    assert not any(re.search(rf"\b{h}\b", reason) for h in hidden), reason
    assert not any(re.search(rf"\b{h}\b", json.dumps(res.to_dict())) for h in hidden)


def test_an_error_on_a_hidden_shape_names_the_authors_file_and_dtypes_but_no_sizes(tmp_path: Path) -> None:
    """Masking the numbers of a hidden-shape error keeps the words a model needs: ``float32``, not
    ``float#``; the author's file, not the worker's scratch copy."""
    wide = ADD.replace("OP", "add").replace(
        "    return out\n", "    s1 = nl.ndarray((128, d * 20), dtype=a.dtype, buffer=nl.sbuf)\n"
        "    s2 = nl.ndarray((128, d * 20), dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.memset(dst=s1, value=0.0)\n    nisa.memset(dst=s2, value=0.0)\n    nisa.tensor_tensor(dst=s1, data1=s1, data2=s2, op=nl.add)\n"
        "    return out\n")
    path = _write(tmp_path, "k.py", wide)
    res = verify(path, TASK, "trn2", QUICK)
    assert res.verdict == "fail"
    reason = res.reasons[0]
    assert reason.startswith(f"NKI error [err_sbuf_capacity_exceeded] at {path}:") and "(a hidden shape (" in reason, reason
    assert "float32" in reason and "trn2" in reason and f"{path}:#" in reason and "nkiagent-eval" not in reason, reason
    hidden = {str(v) for dims in TASK.hidden_dims for v in dims.values()} - {str(v) for v in TASK.dims.values()}
    assert not any(re.search(rf"\b{h}\b", reason) for h in hidden), reason


def test_nki_error_reports_code_and_kernel_line(tmp_path: Path) -> None:
    bad = ADD.replace("OP", "add").replace("(128, d), dtype=a.dtype, buffer=nl.sbuf)\n        tb", "(256, d), dtype=a.dtype, buffer=nl.sbuf)\n        tb")
    path = _write(tmp_path, "k.py", bad)
    res = verify(path, TASK, "trn2", QUICK)
    assert res.verdict == "fail"
    assert "[err_num_partition_exceed_arch_limit]" in res.reasons[0] and f"{path}:12" in res.reasons[0]


def test_syntax_error_is_rejected_by_the_gate_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "k.py", "import nki\ndef kernel(a, b:\n    return a\n")
    res = verify(path, TASK, "trn2", QUICK)
    assert res.verdict in ("rejected", "fail") and not res.compiled
    assert f"{path}:2" in res.reasons[0]


def test_pool_keeps_order_and_verdicts(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.py", ADD.replace("OP", "add"))
    bad = _write(tmp_path, "bad.py", ADD.replace("OP", "maximum"))
    results = verify_many([(good, TASK, "trn2"), (bad, TASK, "trn2"), (good, TASK, "trn3")], workers=2, options=QUICK)
    assert [r.verdict for r in results] == ["pass", "fail", "pass"]
    assert [r.target for r in results] == ["trn2", "trn2", "trn3"]


SLOW = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:128, 0:1])
    for i in nl.affine_range(100_000_000):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    return out
"""


def test_a_timeout_says_which_case_was_running_and_how_far_it_got(tmp_path: Path) -> None:
    from nkiagent.sandbox.launch import Limits

    res = verify(_write(tmp_path, "k.py", SLOW), TASK, "trn2", VerifyOptions(seeds=1, hidden=False, parallel=1, limits=Limits(wall_s=4.0)))
    assert res.verdict == "fail"
    (reason,) = res.reasons
    m = re.fullmatch(
        r"timeout: wall-clock limit of 4 s exceeded after 0 of this worker's \d+ runs had finished; it was running the visible shape "
        r"\(N=2048, D=1024\) with normal inputs and had recorded ([\d,]+) instructions\. The emulator executes every instruction.*",
        reason,
    )
    assert m is not None, reason
    assert int(m.group(1).replace(",", "")) > 10


def test_preparing_a_task_makes_its_inputs_and_baseline_once_for_the_first_verification(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session prepares its task as it opens; a verification that starts meanwhile waits for that work instead of repeating it."""
    import threading

    from nkiagent.verify import inputs as inputs_module
    from nkiagent.verify import verifier

    monkeypatch.setenv("NKIAGENT_INPUT_CACHE", str(tmp_path / "inputs"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(verifier, "_BASELINE_CACHE", {})
    drawn: list[int] = []
    real = inputs_module.make_case_inputs

    def counting(*args, **kwargs):
        drawn.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(inputs_module, "make_case_inputs", counting)
    task = get_task("vector_add")
    opts = VerifyOptions(seeds=1)
    ahead = threading.Thread(target=verifier.prepare, args=(task, "trn2", opts))
    ahead.start()
    res = verify(task.baseline_path(), task, "trn2", opts)
    ahead.join()
    assert res.verdict == "pass" and res.speedup == pytest.approx(1.0, rel=1e-6)
    groups = {(c.dims, c.seed) for c in inputs_module.cases(task, 1)}
    assert len(drawn) == len(groups)  # each shape and seed drawn once, by whichever came first
    stored = [p.name for p in (tmp_path / "cache" / "nkiagent" / "baselines").iterdir()]
    assert len(stored) == 1 and stored[0].startswith("vector_add-")  # the baseline ran once, and its latency is on disk
