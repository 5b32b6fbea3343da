"""How 0.1 constructs behave beyond their numbers: the trace they leave, SBUF liveness, and the rules
of masks, accumulation and loop independence.

A 0.1 instruction returns its result and the kernel assigns it (``x[...] = nisa.exp(y)``); the
compiler lets the instruction write ``x`` directly, so the emulator's trace must show one
instruction writing ``x``, not an instruction plus a copy: otherwise the cost model would
charge legacy kernels for work the hardware never does.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from neuronxcc import nki
from neuronxcc.nki.language import par_dim

from nkiagent import emu
from nkiagent.perf import profile_trace
from tests.emu.kernels import matmul as matmul03


def _run(kernel: Any, *args: Any, target: str = "trn2") -> tuple[Any, emu.Trace, emu.RunResult]:
    trace = emu.Trace()
    result = emu.run_kernel(kernel, args, target=target, trace=trace)
    return result.outputs, trace, result


def _randn(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@nki.jit
def exp_into_target(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf, name="t")
    t[...] = nl.load(x)
    y = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf, name="y")
    y[...] = nisa.activation(op=nl.exp, data=t)
    nl.store(out, value=y)
    return out


def test_assigned_results_are_written_by_the_instruction_itself() -> None:
    x = _randn(128, 64)
    out, trace, _ = _run(exp_into_target, x)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-2)
    assert [(i.op, [w.memory for w in i.writes]) for i in trace] == [("dma_copy", ["sbuf"]), ("activation", ["sbuf"]), ("dma_copy", ["shared_hbm"])]
    names = {a["uid"]: a["name"] for a in trace.allocations}
    assert [names[i.writes[0].region.alloc] for i in trace][:2] == ["t", "y"]  # no temporary result tile remains
    assert trace.instructions[1].writes[0].dtype == "bfloat16"  # the activation writes bf16 directly (free output cast)


@nki.jit
def masked_update(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    t[i_p, i_f] = nl.multiply(t, 10.0, mask=(i_p < 100) & (i_f >= 16) & (i_f < 48))
    nl.store(out, value=t)
    return out


def test_masks_restrict_instructions_to_a_sub_rectangle() -> None:
    x = _randn(128, 64)
    out, trace, _ = _run(masked_update, x)
    ref = x.copy()
    ref[:100, 16:48] *= 10  # elements outside the mask keep their values
    np.testing.assert_array_equal(out, ref)
    (mul,) = [i for i in trace if i.op == "tensor_scalar"]
    assert mul.reads[0].shape == (100, 32) and mul.writes[0].shape == (100, 32)


@nki.jit
def psum_init(lhsT, rhs):
    out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a, b = nl.load(lhsT), nl.load(rhs)
    ones = nl.full((128, 512), 1.0, dtype=nl.float32, buffer=nl.psum)
    fresh = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        ones += nisa.nc_matmul(a, b)  # += onto initialized PSUM adds onto its contents
        fresh += nisa.nc_matmul(a, b)  # += onto never-written PSUM: the first matmul starts the group
    nl.store(out[0], value=nl.copy(ones))
    nl.store(out[1], value=nl.copy(fresh))
    return out


def test_psum_accumulation_starts_from_contents_or_overwrites_unwritten() -> None:
    lhsT, rhs = _randn(128, 128), _randn(128, 512, seed=1)
    out, trace, _ = _run(psum_init, lhsT, rhs)
    prod = lhsT.astype(np.float64).T @ rhs
    np.testing.assert_allclose(out[0], 1 + 2 * prod, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[1], 2 * prod, rtol=1e-5, atol=1e-4)
    assert [i.attrs["accumulate"] for i in trace if i.op == "nc_matmul"] == [True, False, True, True]


@nki.jit
def matmul_tiled01(lhsT, rhs):
    """Step 1 of the matmul tutorial in the 0.1 style (the 0.3 twin is tests/emu/kernels/matmul.py)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            res_psum = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                rhs_tile[...] = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum[...] += nisa.nc_matmul(lhsT_tile[...], rhs_tile[...])
            res_sb = nl.ndarray((128, 512), dtype=result.dtype, buffer=nl.sbuf)
            res_sb[...] = nisa.tensor_copy(res_psum)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return result


def test_legacy_and_current_kernels_leave_the_same_trace() -> None:
    bf16 = np.dtype(ml_dtypes.bfloat16)
    lhsT, rhs = _randn(512, 256, dtype=bf16), _randn(512, 1024, seed=1, dtype=bf16)
    out01, t01, r01 = _run(matmul_tiled01, lhsT, rhs)
    out03, t03, r03 = _run(matmul03.matmul_tiled, lhsT, rhs)
    np.testing.assert_array_equal(out01, out03)

    def shape(trace: emu.Trace) -> list[Any]:
        return [(i.op, i.engine, [(a.role, a.memory, a.shape, a.dtype, a.strides) for a in i.reads + i.writes]) for i in trace]

    assert shape(t01) == shape(t03)
    assert r01.sbuf_peak_bytes == r03.sbuf_peak_bytes
    assert profile_trace(t01)[0].latency_us == profile_trace(t03)[0].latency_us


@nki.jit
def stream_blocks(x):
    """A (32, 7, par_dim(128), 1024) fp32 tensor — 917 KiB per partition in all — used one tile at a time."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((32, 7, par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(32):
        for j in nl.affine_range(7):
            buf[i, j] = nl.load(x[i * 7 + j])
            nl.store(out[i * 7 + j], value=nl.exp(buf[i, j]))
    return out


@nki.jit
def hold_blocks(x):
    """64 tiles of 4 KiB per partition loaded before any is used: they are live together."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((64, par_dim(128), 1024), dtype=nl.float32, buffer=nl.sbuf, name="buf")
    for i in nl.affine_range(64):
        buf[i] = nl.load(x[i])
    for i in nl.affine_range(64):
        nl.store(out[i], value=buf[i])
    return out


def test_block_tensors_count_sbuf_liveness_per_tile() -> None:
    shapes = emu.ShapeSpec((224, 128, 1024))
    result = emu.run_kernel(stream_blocks, (shapes,), target="trn1", timing_only=True)
    assert result.sbuf_peak_bytes <= 3 * 4096  # a few 4 KiB tiles at a time, not 917 KiB


def test_sbuf_overflow_spills_to_hbm_with_a_warning() -> None:
    """64 live 4 KiB tiles exceed trn1's 192 KiB SBUF: the 0.1 compiler spills the excess, the emulator too."""
    x = _randn(64, 128, 1024)
    trace = emu.Trace()
    with pytest.warns(emu.NkiWarning, match=r"SBUF overflow on trn1: 20 tensor\(s\) spilled to HBM \(81920 B per partition\), first `buf\[44\]`"):
        result = emu.run_kernel(hold_blocks, (x,), target="trn1", trace=trace, api="0.1")
    np.testing.assert_array_equal(result.outputs, x)
    assert result.sbuf_peak_bytes <= 192 * 1024
    spilled = [a["name"] for a in trace.allocations if a.get("spilled")]
    assert spilled == [f"buf[{i}]" for i in range(44, 64)]
    assert any("spilled to HBM" in w for w in trace.warnings)


@nki.jit
def attention_psum_blocks(q, k):
    """The attention tutorial's v3 shape in small: every ``q`` tile x ``k`` tile product lives in PSUM at once."""
    n = q.shape[1]
    out = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    q_sb, k_sb = nl.load(q), nl.load(k)
    qk = nl.ndarray((n // 128, n // 512, par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(n // 512):
            qk[i, j, :, :] = nisa.nc_matmul(stationary=q_sb[0:128, nl.ds(i * 128, 128)], moving=k_sb[0:128, nl.ds(j * 512, 512)])
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(n // 512):
            nl.store(out[nl.ds(i * 128, 128), nl.ds(j * 512, 512)], value=nl.copy(qk[i, j]))
    return out


def test_psum_overflow_spills_and_results_stay_exact() -> None:
    q, k = _randn(128, 1024), _randn(128, 1024, seed=1)
    with pytest.warns(emu.NkiWarning, match=r"PSUM overflow on trn2: 8 tensor\(s\) spilled to HBM \(16384 B per partition\)"):
        out = nki.simulate_kernel(attention_psum_blocks, q, k)
    np.testing.assert_allclose(out, q.T @ k, rtol=1e-5, atol=1e-4)


@nki.jit
def mod_alloc_double_buffer(x):
    """Four logical blocks in two physical tiles (``ncc.sbuf.mod_alloc``): block 2 reuses block 0's storage."""
    import neuronxcc.nki.compiler as ncc

    out = nl.ndarray((2, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, par_dim(128), 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)))
    for i in nl.sequential_range(4):
        buf[i] = nl.load(x[i])
    nl.store(out[0], value=buf[0])
    nl.store(out[1], value=buf[1])
    return out


def test_mod_alloc_places_and_aliases_physical_tiles() -> None:
    x = _randn(4, 128, 64)
    out, trace, _ = _run(mod_alloc_double_buffer, x)
    np.testing.assert_array_equal(out, x[2:4])  # blocks 2 and 3 overwrote the shared physical tiles
    addresses = sorted(a["address"] for a in trace.allocations if a["memory"] == "sbuf" and a["name"].startswith("buf["))
    assert addresses == [1024, 1024 + 64 * 4]


@nki.jit
def address_counter_in_loop(x):
    """The allocated-attention pattern: a Python address counter advanced inside an ``affine_range`` body."""
    import neuronxcc.nki.compiler as ncc

    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    addr = 0
    for i in nl.affine_range(x.shape[0]):
        buf = nl.ndarray((2, par_dim(128), 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=addr, num_free_tiles=(2,)))
        addr += 2 * 64 * 4
        buf[0] = nl.load(x[i])
        buf[1] = nl.multiply(buf[0], 2.0)
        nl.store(out[i], value=buf[1])
    return out


def test_direct_allocation_in_a_loop_body_keeps_its_first_placement() -> None:
    x = _randn(6, 128, 64)
    out, trace, _ = _run(address_counter_in_loop, x)
    np.testing.assert_array_equal(out, 2 * x)
    assert {a["address"] for a in trace.allocations if a["name"].startswith("buf[")} == {0, 256}  # as traced once, not 6 * 512 B


@nki.jit
def psum_alloc_by_function(x, y):
    """``ncc.psum.alloc(partial(f, bank_map=...))``: 0.1 calls ``f(idx=, pdim_size=, fdim_size=)`` for ``(bank, partition, address)``."""
    import functools

    import neuronxcc.nki.compiler as ncc

    def psum_addr(bank_map, idx, pdim_size, fdim_size):
        return (bank_map[idx], 0, 0)

    out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((2, par_dim(128), 512), dtype=nl.float32, buffer=ncc.psum.alloc(functools.partial(psum_addr, bank_map={(0,): 3, (1,): 6})))
    for i in nl.affine_range(2):
        res[i] = nisa.nc_matmul(nl.load(x[i]), nl.load(y[i]))
        nl.store(out[i], value=nl.copy(res[i]))
    return out


def test_psum_alloc_function_places_tiles_in_its_banks() -> None:
    x, y = _randn(2, 64, 128), _randn(2, 64, 512, seed=1)
    out, trace, _ = _run(psum_alloc_by_function, x, y)
    np.testing.assert_allclose(out, np.einsum("bkm,bkn->bmn", x.astype(np.float64), y), rtol=1e-5, atol=1e-4)
    assert sorted(a["address"] for a in trace.allocations if a["name"].startswith("res[")) == [3 * 2048, 6 * 2048]


@nki.jit
def accumulations_in_affine_loops(x):
    """Associative accumulation is the one loop-carried update ``affine_range`` allows: ``+=`` and ``loop_reduce``."""
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    best = nl.full((128, 64), -1e30, dtype=nl.float32)
    for i in nl.affine_range(x.shape[0]):
        t = nl.load(x[i])
        acc += t
        best[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[i])
    nl.store(out[0], value=acc)
    nl.store(out[1], value=best)
    return out


def test_affine_loops_allow_accumulation() -> None:
    x = _randn(3, 128, 64)
    out, _, _ = _run(accumulations_in_affine_loops, x)
    np.testing.assert_allclose(out[0], x.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[1], x.max(0))


@nki.jit
def disjoint_writes(x):
    """Iterations writing disjoint parts of one tensor are independent (strided, interleaved columns here)."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p, i_f = nl.mgrid[0:128, 0:16]
    for j in nl.affine_range(4):
        nl.store(out[i_p, 4 * i_f + j], value=nl.copy(t[i_p, 4 * i_f + j]))
    return out


def test_affine_loops_writing_disjoint_strided_parts_are_fine() -> None:
    x = _randn(128, 64)
    out, trace, _ = _run(disjoint_writes, x)
    np.testing.assert_array_equal(out, x)
    assert {i.writes[0].strides for i in trace if i.op == "dma_copy" and i.writes[0].memory != "sbuf"} == {(64, 4)}


@nki.jit
def blocks_written_once(x):
    """NKIBench-style: a block tensor of 16 tiles, each loaded, used and never touched again."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((16, par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf, name="buf")
    for i in nl.affine_range(16):
        buf[i] = nl.load(x[i])
        nl.store(out[i], value=nl.exp(buf[i]))
    return out


def test_large_block_tensors_free_each_tile_after_its_last_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PLAN_BYTES of block tensors a launch re-runs with a timing-only plan and frees dead tiles; same trace, same result."""
    from nkiagent.emu.legacy import runtime

    x = _randn(16, 128, 256)
    plain = emu.Trace()
    expected = emu.run_kernel(blocks_written_once, (x,), trace=plain, api="0.1").outputs
    freed: list[int] = []
    free = runtime._free_dead_tiles

    def spy(st: Any, seq: int) -> None:
        before = set(st.tiles)
        free(st, seq)
        freed.extend(sorted(before - set(st.tiles)))

    monkeypatch.setattr(runtime, "PLAN_BYTES", 64 * 1024)  # buf is 2 MiB
    monkeypatch.setattr(runtime, "_free_dead_tiles", spy)
    out = nki.benchmark(blocks_written_once)  # launches through LegacyKernel.launch, like simulate_kernel
    np.testing.assert_array_equal(out(x), expected)
    assert len(freed) == 16  # each tile, once the exp that last reads it has run
    planned = emu.Trace()
    result = nki.jit(blocks_written_once).launch((x,), {}, planned)
    np.testing.assert_array_equal(result.outputs, expected)
    assert [(i.op, i.location) for i in planned] == [(i.op, i.location) for i in plain]
    assert [a["name"] for a in planned.allocations] == [a["name"] for a in plain.allocations]
