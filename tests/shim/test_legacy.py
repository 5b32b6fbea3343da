"""``neuronxcc.nki.benchmark`` / ``profile`` / ``jit(mode="benchmark")``: the cost model's estimate, labelled as one.

``tests/conftest.py`` installs the front-ends through :func:`nkiagent.shim.install`, so
``neuronxcc.nki`` here is the shim's face; the emulator's own face refuses these names
(``test_install.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from neuronxcc import nki

from nkiagent import emu
from nkiagent.perf import profile_trace

from ..emu.legacy.test_frontend import _x, add_one


@nki.jit
def matmul_tile(lhsT, rhs):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.zeros((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        res += nl.matmul(nl.load(lhsT[k * 128 : (k + 1) * 128, :]), nl.load(rhs[k * 128 : (k + 1) * 128, :]), transpose_x=True)
    nl.store(out, value=nl.copy(res))
    return out


def test_benchmark_reports_the_cost_model_estimate_for_shape_placeholders() -> None:
    bench = nki.benchmark(warmup=5, iters=10)(matmul_tile)
    out = bench(nt.tensor[[1024, 128], nl.bfloat16], nt.tensor[[1024, 512], nl.bfloat16])
    assert out == emu.ShapeSpec((128, 512), "float32")
    result = bench.benchmark_result
    latency = result.nc_latency
    trace = emu.Trace()
    emu.run_kernel(
        matmul_tile, (emu.ShapeSpec((1024, 128), "bfloat16"), emu.ShapeSpec((1024, 512), "bfloat16")), trace=trace, timing_only=True
    )
    expected = profile_trace(trace)[0].latency_us
    assert [latency.get_latency_percentile(p) for p in (0, 1, 10, 25, 50, 90, 99, 100)] == [expected] * 8
    assert latency.timing_source == result.timing_source == "emulator-estimate"
    assert "emulator-estimate" in str(latency) and "not a hardware measurement" in str(latency)
    assert (result.warmup, result.iters) == (5, 10)
    with pytest.raises(ValueError):
        latency.get_latency_percentile(101)


def test_benchmark_with_arrays_returns_outputs() -> None:
    bench = nki.benchmark(add_one)
    np.testing.assert_array_equal(bench(_x()), _x() + 1)
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) > 0
    jitted = nki.jit(add_one, mode="benchmark")
    jitted(_x())
    assert jitted.benchmark_result is not None


def test_profile_writes_the_summary_and_perfetto_timeline(tmp_path: Path) -> None:
    kernel = nki.profile(working_directory=str(tmp_path / "prof"), save_neff_name="file.neff", save_trace_name="profile.ntff")(matmul_tile)
    rng = np.random.default_rng(0)
    lhsT, rhs = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(kernel(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
    text, perfetto = kernel.report_paths
    assert text == tmp_path / "prof" / "profile.summary.txt" and perfetto == tmp_path / "prof" / "profile.perfetto.json"
    assert "emulator-estimate" in text.read_text() and "latency" in text.read_text()
    timeline = json.loads(perfetto.read_text())
    assert timeline["otherData"]["timing_source"] == "emulator-estimate"
    assert any(ev.get("name") == "nc_matmul" for ev in timeline["traceEvents"])
    with pytest.raises(FileExistsError):
        nki.profile(working_directory=str(tmp_path / "prof"), overwrite=False)(matmul_tile)(lhsT, rhs)


def test_a_benchmark_called_from_a_kernel_only_runs() -> None:
    """Inside another kernel a timed kernel is a sub-kernel: no second launch, no result of its own."""

    @nki.benchmark
    def inner(dst, src):
        dst[...] = nl.multiply(src, 3.0)

    @nki.jit
    def outer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        inner(d, t)
        nl.store(out, value=d)
        return out

    np.testing.assert_array_equal(outer(_x()), 3 * _x())
    assert inner.benchmark_result is None
