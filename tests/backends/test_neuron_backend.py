"""NeuronBackend against the fake toolchain: our side of the contract (error mapping, profile parsing,
the spread gate, core pinning, the artifact cache, the real-simulator route) — not AWS's tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nkiagent.backends import NeuronBackend
from nkiagent.backends.neuron import CorePool, compiler_error, profile_from_summary, summary_metrics
from nkiagent.tasks import get_task
from nkiagent.verify.verifier import VerifyOptions, verify

from .conftest import FakeNeuron

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = ROOT / "nkiagent" / "tasks" / "builtin" / "baselines" / "vector_add.py"
FAST = VerifyOptions(seeds=1, distributions=("normal",), hidden=False, with_baseline=False)

# one capture's summary as `neuron-profile view --output-format summary-json` prints it (times in s, *_percent fractions)
SUMMARY = {"kernel.neff": {"total_time": 2.5e-05, "tensor_engine_active_time": 1.0e-05, "tensor_engine_active_time_percent": 0.4,
                           "vector_engine_active_time_percent": 0.25, "dma_active_time_percent": 0.9, "hbm_read_bytes": 4194304,
                           "hbm_write_bytes": 2097152, "hardware_flops": 1.0e9, "mfu_estimated_percent": 0.05,
                           "mm_arithmetic_intensity": 159.2, "instruction_count": 321}}


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((128, 512)).astype(np.float32) for _ in range(2)]


def _backend(fake: FakeNeuron, **kw: object) -> NeuronBackend:
    return NeuronBackend("neuron-hw", fake.toolchain(), warmup=1, captures=3, **kw)  # type: ignore[arg-type]


def test_profile_parsing_fills_the_profile_type() -> None:
    prof = profile_from_summary(summary_metrics(SUMMARY), "trn1", 25.0, "neuron-profile 2.21")
    assert (prof.latency_us, prof.timing_source, prof.model_version, prof.target) == (25.0, "neuron-profile", "neuron-profile 2.21", "trn1")
    assert prof.engines["TensorE"].active_pct == 40.0 and prof.engines["TensorE"].busy_us == 10.0  # from *_active_time (s)
    assert prof.engines["VectorE"].active_pct == 25.0 and prof.engines["VectorE"].busy_us == 6.25  # fraction × latency
    assert prof.engines["DMA"].active_pct == 90.0 and prof.bottleneck == "DMA"
    assert (prof.hbm_read_bytes, prof.hbm_write_bytes, prof.flops, prof.instructions) == (4194304, 2097152, 1.0e9, 321)
    assert prof.mfu_pct == 5.0 and prof.arithmetic_intensity == 159.2
    assert summary_metrics(SUMMARY["kernel.neff"]) is SUMMARY["kernel.neff"]  # a bare metrics object is accepted too


def test_compiler_errors_map_to_code_line_and_hint() -> None:
    text = ('Traceback (most recent call last):\n  File "/tmp/w/kernel.py", line 7, in kernel\n    nisa.tensor_tensor(...)\n'
            "RuntimeError: [GCA035]  Instruction: I-21-0 with opcode: TensorTensor couldn't be allocated in SB\n")
    err = compiler_error(text, "/tmp/w/kernel.py", shown_as="kernel.py")
    assert err == {"kind": "compiler", "code": "GCA035", "location": "kernel.py:7",
                   "message": "RuntimeError: [GCA035]  Instruction: I-21-0 with opcode: TensorTensor couldn't be allocated in SB",
                   "hint": "SBUF overflow: an instruction's tiles exceed the per-partition SBUF size"}
    plain = compiler_error("neuronx-cc terminated\nsegfault in backend", "/tmp/w/kernel.py")
    assert (plain["code"], plain["location"], plain["message"], plain["hint"]) == ("compile", "/tmp/w/kernel.py:0", "segfault in backend", "")


def test_hardware_run_compiles_pins_measures_and_caches(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch) -> None:
    # first round spreads 20 % (rejected by the 1 % gate), the second 0.5 %
    monkeypatch.setenv("NKI_FAKE_TIMES", "10,12,10,10,10.05,10.02")
    be = _backend(fake_neuron)
    a, b = _inputs()
    res = be.run(VECTOR_ADD.read_text(), [a, b], "trn1")
    assert res.ok, res.error
    np.testing.assert_array_equal(res.outputs[0], a + b)
    assert (res.latency_us, res.timing_source, res.profile.timing_source) == (10.02, "neuron-profile", "neuron-profile")
    m = res.measurement
    assert [r["times_us"] for r in m["rounds"]] == [[10.0, 12.0, 10.0], [10.0, 10.05, 10.02]]
    assert (m["median_us"], m["spread"], m["stable"], m["cache_hit"], m["core"]) == (10.02, 0.005, True, False, 0)
    (build,) = fake_neuron.calls("nki.baremetal")
    assert build["additional_compile_opt"] == "--target trn1 --lnc 1"
    assert build["env"]["NEURON_RT_VISIBLE_CORES"] == "0" and build["env"]["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn1"
    captures, views = fake_neuron.calls("neuron-profile capture"), fake_neuron.calls("neuron-profile view")
    assert len(captures) == 1 + 2 * 3 and len(views) == 2 * 3  # warm-up, then two rounds of three
    assert {c["env"]["NEURON_RT_VISIBLE_CORES"] for c in captures + views} == {"0"}
    assert views[0]["argv"][:3] == ["view", "--output-format", "summary-json"]

    again = be.run(VECTOR_ADD.read_text(), [a, b], "trn1")  # same source, inputs, target: no compile
    assert again.measurement["cache_hit"] is True and len(fake_neuron.calls("nki.baremetal")) == 1
    np.testing.assert_array_equal(again.outputs[0], a + b)
    be.run(VECTOR_ADD.read_text(), [a, b], "trn2", timed=False)  # another target is another artifact
    assert len(fake_neuron.calls("nki.baremetal")) == 2


def test_unstable_timing_is_flagged_and_no_speedup_is_claimed(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_FAKE_TIMES", "10,12,10,13")  # two rounds of two, 20 % and 30 % spread; the baseline then measures 13, 13
    be = NeuronBackend("neuron-hw", fake_neuron.toolchain(), warmup=0, captures=2, max_rounds=2)
    res = verify(VECTOR_ADD, get_task("vector_add"), "trn2", VerifyOptions(seeds=1, distributions=("normal",), hidden=False), backend=be)
    assert res.verdict == "pass" and res.backend == "neuron-hw" and res.timing_source == "neuron-profile"
    spread = next(c for c in res.checks if c.name == "timing_spread")
    assert not spread.ok and spread.detail == "median 11.0 µs over 2 captures, spread 20.00% (limit 1%)"
    assert res.latency_us == 11.0 and res.baseline_latency_us == 13.0 and res.speedup is None
    assert res.toolchain["nki"] == "0.3.0"


def test_parallel_processes_get_different_cores(tmp_path: Path) -> None:
    pool = CorePool(2, tmp_path / "locks")
    code = ("import sys; from nkiagent.backends.neuron import CorePool\n"
            f"with CorePool(2, {str(tmp_path / 'locks')!r}).acquire() as core: print(core)")
    with pool.acquire() as mine:
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert (mine, other.stdout.strip()) == (0, "1")


def test_a_busy_core_sends_the_run_to_the_next_one(fake_neuron: FakeNeuron) -> None:
    be = _backend(fake_neuron)
    with be.pool.acquire() as held:
        res = be.run(VECTOR_ADD.read_text(), _inputs(), "trn2", timed=False)
    assert held == 0 and res.ok and res.measurement["core"] == 1
    assert fake_neuron.calls("nki.baremetal")[0]["env"]["NEURON_RT_VISIBLE_CORES"] == "1"


def test_compile_error_becomes_the_verifiers_reason(fake_neuron: FakeNeuron, tmp_path: Path) -> None:
    lines = VECTOR_ADD.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if "tensor_tensor" in ln)
    lines.insert(at, "            # FAKE_NCC_ERROR: NCC_IBIR441 memset of a bf16 transpose PSUM is not supported")
    kernel = tmp_path / "broken.py"
    kernel.write_text("\n".join(lines) + "\n")
    res = verify(kernel, get_task("vector_add"), "trn2", FAST, backend=_backend(fake_neuron))
    assert res.verdict == "fail" and not res.compiled
    expected = (f"compile error [NCC_IBIR441] at {kernel}:{at + 1}: RuntimeError: kernel.py:{at + 1}: [NCC_IBIR441] memset of a "
                "bf16 transpose PSUM is not supported (memset of a bf16 transpose PSUM tile)")
    assert res.reasons == [expected]
    assert [c.name for c in res.checks if not c.ok] == ["neuron_compile"]


def test_compile_only_with_the_compiler_but_no_device(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (fake_neuron.root / "dev" / "neuron0").unlink()
    monkeypatch.setenv("NKI_FAKE_NO_DEVICE", "1")  # baremetal compiles, then cannot run
    task = get_task("vector_add")
    ok = verify(VECTOR_ADD, task, "trn1", FAST, backend="neuron-sim")
    assert ok.verdict == "pass" and ok.compiled and ok.timing_source == "emulator-estimate"
    (build,) = fake_neuron.calls("nki.baremetal")
    assert build["additional_compile_opt"] == "--target trn1 --lnc 1"
    broken = tmp_path / "broken.py"
    broken.write_text(VECTOR_ADD.read_text().replace("@nki.jit", "# FAKE_NCC_ERROR: GCA035 Instruction: I-21-0 couldn't be allocated in SB\n@nki.jit"))
    line = broken.read_text().splitlines().index("# FAKE_NCC_ERROR: GCA035 Instruction: I-21-0 couldn't be allocated in SB") + 1
    bad = verify(broken, task, "trn1", FAST, backend="neuron-sim")
    assert bad.verdict == "fail" and not bad.compiled and bad.latency_us is None
    assert bad.reasons == [(f"compile error [GCA035] at {broken}:{line}: RuntimeError: kernel.py:{line}: [GCA035] Instruction: I-21-0 couldn't "
                           "be allocated in SB (SBUF overflow: an instruction's tiles exceed the per-partition SBUF size)")]


def test_real_simulator_route_through_the_sandboxed_worker(fake_neuron: FakeNeuron) -> None:
    res = verify(VECTOR_ADD, get_task("vector_add"), "trn2", FAST, backend="neuron-sim")
    assert res.verdict == "pass" and res.backend == "neuron-sim"
    assert res.timing_source == "emulator-estimate" and res.latency_us is not None  # AWS's simulator has no latency model
    assert res.toolchain == {"nki": "0.3.0", "neuronxcc": "2.21.33363.0+fake", "neuronx-cc": "2.21.33363.0+fake", "profiler": "neuron-profile"}
    sims = fake_neuron.calls("nki.simulate")
    assert len(sims) == 2 and sims[0]["shapes"] == [[2048, 1024], [2048, 1024]]  # the case and its determinism re-run
    (build,) = fake_neuron.calls("nki.baremetal")  # neuronx-cc is installed: the kernel must also compile for the target
    assert build["additional_compile_opt"] == "--target trn2 --lnc 1"
    assert fake_neuron.calls("neuron-profile capture") == []  # never timed on the simulator backend
    assert json.dumps(res.to_dict())  # the session's evaluation event carries backend and toolchain


LEGACY_ADD = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        rows = slice(i * 128, (i + 1) * 128)
        nl.store(out[rows, :], value=nl.add(nl.load(a[rows, :]), nl.load(b[rows, :])))
    return out
'''


def test_legacy_kernels_run_on_simulate_kernel(fake_neuron: FakeNeuron) -> None:
    a, b = _inputs()
    res = NeuronBackend("neuron-sim", fake_neuron.toolchain()).run(LEGACY_ADD, [a, b], "trn1")
    assert res.ok, res.error
    np.testing.assert_array_equal(res.outputs[0], a + b)
    assert res.latency_us is None and res.timing_source == ""  # the real simulator is never timed
    assert [c["shapes"] for c in fake_neuron.calls("neuronxcc.nki.simulate_kernel")] == [[[128, 512], [128, 512]]]
    assert fake_neuron.calls("nki.simulate") == []
