"""The timeline model: overlap of independent work, waits on true dependences, diagnosis."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf import profile_kernel, profile_trace, speed_of_light
from nkiagent.perf.report import chrome_trace, summary_text
from nkiagent.perf.specs import get_spec
from nkiagent.perf.timeline import _Lane, schedule


def _events(kernel, inputs, target: str = "trn1"):
    trace = emu.Trace()
    emu.run_kernel(kernel, inputs, target=target, trace=trace)
    tl = schedule(trace, get_spec(target))
    return trace, tl


def test_two_independent_dmas_overlap_and_a_matmul_waits_for_its_loads() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a, b):
        out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((8, 8), nl.bfloat16)
        m = nl.ndarray((8, 8), nl.bfloat16)
        nisa.dma_copy(dst=s, src=a)  # 8 partitions -> one queue each, so both can run at once
        nisa.dma_copy(dst=m, src=b)
        p = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)
        r = nl.ndarray((8, 8), nl.float32)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    import ml_dtypes

    x = np.ones((8, 8), ml_dtypes.bfloat16)
    _, tl = _events(kernel, (x, x))
    load_a, load_b, mm, copy, store = tl.events
    assert load_a.start_ns == load_b.start_ns == 0.0  # overlap
    assert mm.start_ns >= max(load_a.end_ns, load_b.end_ns)  # RAW on both operands
    assert copy.start_ns >= mm.end_ns  # PSUM read waits for the matmul
    assert store.start_ns >= copy.end_ns
    assert tl.latency_ns == pytest.approx(store.end_ns)


def test_an_input_the_kernel_overwrites_keeps_its_write_after_read_order() -> None:
    """Reads of HBM that no instruction writes go untracked; an input the kernel writes is
    tracked, so a store into it waits for the load that reads its old values even when a free
    DMA queue and ready data would let the store start at once."""
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a, b):
        s = nl.ndarray((2, 32768), nl.float32)
        nisa.dma_copy(dst=s, src=a)  # a long load of a (2 partitions: few queues)
        t = nl.ndarray((2, 64), nl.float32)
        nisa.dma_copy(dst=t, src=b)  # a short load of b, which nothing writes
        nisa.dma_copy(dst=a[:, 0:64], src=t)  # overwrites part of a
        return a

    _, tl = _events(kernel, (np.ones((2, 32768), np.float32), np.ones((2, 64), np.float32)))
    load_a, load_b, store = tl.events
    assert load_a.start_ns == load_b.start_ns == 0.0 and load_a.queues != load_b.queues  # the loads overlap
    assert load_b.end_ns < load_a.end_ns  # (so the store's data is ready long before a has been read)
    assert store.start_ns >= load_a.end_ns


def test_a_lane_keeps_back_to_back_work_as_one_interval_and_still_fills_a_gap() -> None:
    lane = _Lane()
    lane.reserve(0.0, 100.0)
    lane.reserve(100.0, 50.0)
    lane.reserve(300.0, 50.0)
    assert lane.iv == [(0.0, 150.0), (300.0, 350.0)]
    assert lane.earliest(0.0, 100.0) == 150.0  # fits the idle gap [150, 300)
    assert lane.earliest(0.0, 200.0) == 350.0  # does not: after the last interval
    assert lane.fill(0.0, 200.0) == [(150.0, 300.0), (350.0, 400.0)]  # a DMA queue splits work across the gap
    lane.reserve(150.0, 150.0)  # exactly the gap: its neighbours on both sides merge with it
    assert (lane.iv, lane.ends) == ([(0.0, 350.0)], [350.0])


def test_psum_read_waits_for_the_last_accumulating_matmul() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def kernel():
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        s = nl.zeros((128, 128), nl.bfloat16)
        m = nl.zeros((128, 512), nl.bfloat16)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        for _ in nl.affine_range(4):
            nisa.nc_matmul(dst=p, stationary=s, moving=m)
        r = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    _trace, tl = _events(kernel, ())
    mms = [e for e in tl.events if e.op == "nc_matmul"]
    copy = next(e for e in tl.events if e.op == "tensor_copy")
    assert len(mms) == 4
    assert all(b.start_ns >= a.end_ns for a, b in itertools.pairwise(mms))  # WAW chain on the accumulator
    assert copy.start_ns >= mms[-1].end_ns
    # TensorE pipelines its own accumulation chain: back-to-back, at the matmul II (§3.4, §4.3) ...
    assert all(b.start_ns == pytest.approx(a.end_ns) for a, b in itertools.pairwise(mms))
    # ... while VectorE, woken by a semaphore, pays the dependence overhead to read the result.
    spec = get_spec("trn1")
    assert copy.start_ns == pytest.approx(mms[-1].end_ns + spec.dependency_overhead_cycles / spec.dve_ghz)


def test_independent_loop_iterations_overlap_across_engines() -> None:
    """DMA of iteration i+1 runs while VectorE works on iteration i: total < sum of parts."""
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            t = nl.ndarray((128, a.shape[1]), a.dtype)
            nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
            u = nl.ndarray((128, a.shape[1]), a.dtype)
            nisa.activation(dst=u, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=u)
        return out

    a = np.zeros((1024, 2048), np.float32)
    _, tl = _events(kernel, (a,))
    dma_busy = sum(e.busy_ns * len(e.queues) / 16 for e in tl.events if e.engine == "dma")
    acts = [e for e in tl.events if e.op == "activation"]
    assert tl.latency_ns < dma_busy + sum(e.busy_ns for e in acts)  # overlapped, not serialized
    assert tl.latency_ns < dma_busy + 2 * acts[0].busy_ns + 2 * 1300  # only the pipeline fill/drain is exposed


def test_memory_bound_kernel_is_diagnosed_with_advice_naming_the_cause() -> None:
    """Reloading the same operand for every matmul leaves TensorE idle while DMA is saturated."""
    import nki.isa as nisa
    import nki.language as nl

    def kernel(lhsT, rhs):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(lhsT.shape[0] // 128):
            s = nl.ndarray((128, 128), lhsT.dtype)
            m = nl.ndarray((128, 512), rhs.dtype)
            nisa.dma_copy(dst=s, src=lhsT[k * 128 : (k + 1) * 128, 0:128])
            nisa.dma_copy(dst=m, src=rhs[k * 128 : (k + 1) * 128, 0:512])
            nisa.nc_matmul(dst=p, stationary=s, moving=m)
        r = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    run = profile_kernel(kernel, (emu.ShapeSpec((4096, 128), "bfloat16"), emu.ShapeSpec((4096, 512), "bfloat16")), target="trn1", timing_only=True)
    p = run.profile
    assert p.bottleneck == "memory-bound (DMA)"
    assert p.engines["TensorE"].active_pct < 30
    assert any(a.startswith("memory-bound") and "TensorE" in a for a in p.advice)
    assert any(a.startswith("small DMAs") for a in p.advice)  # 256 B per partition for the 128-wide bf16 tiles
    assert p.timing_source == "emulator-estimate"
    text = summary_text(p)
    assert len(text.splitlines()) <= 40 and "emulator-estimate" in text


def test_timing_only_matches_functional_estimate() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    spec = importlib.util.spec_from_file_location("ex_vadd", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = np.ones((512, 1024), np.float32)
    real = profile_kernel(mod.vector_add, (a, a), target="trn2")
    fake = profile_kernel(mod.vector_add, (emu.ShapeSpec((512, 1024)), emu.ShapeSpec((512, 1024))), target="trn2", timing_only=True)
    np.testing.assert_array_equal(real.outputs, a + a)
    assert fake.profile.latency_us == real.profile.latency_us
    assert fake.outputs.shape == (512, 1024)


def test_estimate_below_speed_of_light_is_flagged() -> None:
    trace = emu.Trace()
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out

    emu.run_kernel(kernel, (np.zeros((128, 512), np.float32),), trace=trace, target="trn2")
    honest = speed_of_light(get_spec("trn2"), hbm_bytes=2 * 128 * 512 * 4)
    p, _ = profile_trace(trace, sol=honest)
    assert not p.below_speed_of_light and 0 < p.fraction_of_sol <= 1
    impossible = speed_of_light(get_spec("trn2"), matmul_flops=1e13)
    p2, _ = profile_trace(trace, sol=impossible)
    assert p2.below_speed_of_light
    assert any(a.startswith("BELOW SPEED OF LIGHT") for a in p2.advice)


def test_chrome_trace_has_a_track_per_engine_and_dma_queue() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, a.dtype)
        nisa.activation(dst=u, op=nl.exp, data=t)
        nisa.dma_copy(dst=out, src=u)
        return out

    trace, tl = _events(kernel, (np.zeros((128, 512), np.float32),))
    doc = chrome_trace(trace, tl, get_spec("trn1"))
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"TensorE", "VectorE", "ScalarE", "GpSimd"} <= names and "DMA queue 15" in names
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert {e["name"] for e in spans} == {"dma_copy", "activation"}
    assert doc["otherData"]["timing_source"] == "emulator-estimate"


def test_spilled_tiles_of_01_kernels_pay_spill_dmas_and_the_advice_says_so() -> None:
    """A 0.1 kernel whose PSUM tiles do not fit keeps 8 of them in HBM: every matmul writing one is followed
    by a store and every copy reading one preceded by a reload, which the timeline charges and the profile reports."""
    import copy

    from tests.emu.legacy.test_semantics import attention_psum_blocks

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((128, 1024)).astype(np.float32), rng.standard_normal((128, 1024)).astype(np.float32)
    trace = emu.Trace()
    with pytest.warns(emu.NkiWarning, match="PSUM overflow"):
        emu.run_kernel(attention_psum_blocks, (q, k), target="trn2", trace=trace, api="0.1")
    spilled = {a["uid"] for a in trace.allocations if a.get("spilled")}
    assert len(spilled) == 8
    prof, tl = profile_trace(trace)
    stores = [e for e in tl.events if e.op == "spill_store"]
    loads = [e for e in tl.events if e.op == "spill_load"]
    assert len(stores) == sum(1 for i in trace if i.op == "nc_matmul" and i.writes[0].region.alloc in spilled) == 8
    assert len(loads) == sum(1 for i in trace if i.engine != "dma" and any(a.region.alloc in spilled for a in i.reads)) == 8
    assert len(tl.costs) == len(trace) and len(tl.spill_costs) == 16  # per-instruction costs stay aligned with the trace
    by_seq = {e.seq: e for e in tl.events if e.op not in ("spill_store", "spill_load")}
    for e in stores:
        assert e.start_ns >= by_seq[e.seq].end_ns  # a store follows the matmul that wrote the tile
    for e in loads:
        assert by_seq[e.seq].start_ns >= e.end_ns  # the reading copy waits for its reload
    moved = sum(c.hbm_read + c.hbm_write for c in tl.spill_costs)
    assert moved == 16 * 128 * 512 * 4
    unspilled = copy.deepcopy(trace)
    for a in unspilled.allocations:
        a.pop("spilled", None)
    plain, _ = profile_trace(unspilled)
    assert prof.latency_us > plain.latency_us
    assert prof.hbm_read_bytes + prof.hbm_write_bytes == plain.hbm_read_bytes + plain.hbm_write_bytes + moved
    assert any(line.startswith("spills: 8 tile(s) exceed SBUF/PSUM and live in HBM; spill code moves 4.00 MiB in 16 DMAs") for line in prof.advice)
    assert not any(line.startswith("spills:") for line in plain.advice)
