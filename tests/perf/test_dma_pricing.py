"""DMA pricing and ordering (issue 18, hole class 7): gathers, HBM → HBM copies, index tiles, registers.

Each test runs a small real kernel, schedules its trace and compares numbers: start times against
the end of the instruction that produced what a DMA needs, DMA costs against what the same bytes
cost when moved directly, HBM byte counts against the bytes a copy reads and writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf import profile_trace
from nkiagent.perf.cost import Cost, dma_efficiency, instruction_cost
from nkiagent.perf.specs import get_spec
from nkiagent.perf.timeline import Event, Timeline, schedule

RNG = np.random.default_rng(7)


def _schedule(kernel: Callable[..., Any], inputs: tuple[Any, ...], target: str = "trn2", api: str = "0.3") -> tuple[emu.Trace, Timeline]:
    trace = emu.Trace()
    emu.run_kernel(kernel, inputs, target=target, trace=trace, api=api)
    return trace, schedule(trace, get_spec(target))


def _events(tl: Timeline, op: str) -> list[Event]:
    return [e for e in tl.events if e.op == op]


# --------------------------------------------------------------------------------------------
# index tiles are reads: a gather waits for the instructions that compute its indices
# --------------------------------------------------------------------------------------------
def _vector_indices(rows: int, steps: int) -> Any:
    """Row indices 0 … rows-1 computed by a chain of ``steps`` VectorE instructions (then cast to int32)."""
    import nki.isa as nisa
    import nki.language as nl

    f = nl.ndarray((rows, 1), nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=f, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    for _ in range(steps):
        nisa.tensor_scalar(dst=f, data=f, op0=nl.multiply, operand0=1.0, op1=nl.add, operand1=0.0, engine=nisa.engine.vector)
    idx = nl.ndarray((rows, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=idx, src=f, engine=nisa.engine.vector)
    return idx


def gather_with_vector_indices(table):
    import nki.isa as nisa
    import nki.language as nl

    rows, cols = 128, table.shape[1]
    idx = _vector_indices(rows, steps=40)
    g = nl.ndarray((rows, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=table.ap([[cols, rows], [1, cols]], offset=0, vector_offset=idx, indirect_dim=0))
    out = nl.ndarray((rows, cols), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_a_gather_starts_after_the_vector_engine_chain_that_computes_its_indices() -> None:
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    trace, tl = _schedule(gather_with_vector_indices, (table,))
    gather = next(e for e, ins in zip(tl.events, trace.instructions) if ins.op == "dma_copy" and ins.reads[0].indirect)
    last_index_write = max(e.end_ns for e in tl.events if e.engine == "vector")
    assert last_index_write > 1000.0  # the chain is long enough to matter
    assert gather.start_ns >= last_index_write


def legacy_gather(table, rows):
    import neuronxcc.nki.language as nl

    out = nl.ndarray((128, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(table.shape[1])[None, :]
    idx = nl.load(rows[i_p, 0])
    nl.store(out[i_p, i_f], value=nl.load(table[idx, i_f]))
    return out


def test_a_legacy_index_tile_gather_waits_for_the_load_of_its_indices() -> None:
    table = RNG.standard_normal((300, 64)).astype(np.float32)
    rows = RNG.integers(0, 300, (128, 1)).astype(np.int32)
    trace, tl = _schedule(legacy_gather, (table, rows), api="0.1")
    index_load, gather, _ = _events(tl, "dma_copy")
    assert gather.start_ns >= index_load.end_ns
    assert [a.role for a in trace.instructions[gather.seq].reads] == ["src", "vector_offset"]


def dynamic_offset_from_a_computed_tile(table):
    import nki.isa as nisa
    import nki.language as nl

    f = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=f, value=3.0)
    for _ in range(40):
        nisa.tensor_scalar(dst=f, data=f, op0=nl.multiply, operand0=1.0, engine=nisa.engine.vector)
    off = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=off, src=f, engine=nisa.engine.vector)
    cols = table.shape[1]
    row = nl.ndarray((1, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=table.ap([[cols, 1], [1, cols]], scalar_offset=off))
    out = nl.ndarray((1, cols), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


def test_a_dma_with_a_dynamic_offset_tile_starts_after_the_tile_is_computed() -> None:
    table = RNG.standard_normal((8, 256)).astype(np.float32)
    _, tl = _schedule(dynamic_offset_from_a_computed_tile, (table,))
    load = _events(tl, "dma_copy")[0]
    assert load.start_ns >= max(e.end_ns for e in tl.events if e.engine == "vector") > 1000.0


def sliced_dynamic_offset_view(table):
    """The dynamically placed view is sliced before the DMA: the slice keeps its dependence on the offset tile."""
    import nki.isa as nisa
    import nki.language as nl

    f = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=f, value=3.0)
    for _ in range(40):
        nisa.tensor_scalar(dst=f, data=f, op0=nl.multiply, operand0=1.0, engine=nisa.engine.vector)
    off = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=off, src=f, engine=nisa.engine.vector)
    cols = table.shape[1]
    view = table.ap([[cols, 1], [1, cols]], scalar_offset=off)
    row = nl.ndarray((1, 64), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=view[:, 0:64])
    out = nl.ndarray((1, 64), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


def test_a_slice_of_a_dynamically_placed_view_still_waits_for_its_offset() -> None:
    _, tl = _schedule(sliced_dynamic_offset_view, (RNG.standard_normal((8, 256)).astype(np.float32),))
    assert _events(tl, "dma_copy")[0].start_ns >= max(e.end_ns for e in tl.events if e.engine == "vector") > 1000.0


# --------------------------------------------------------------------------------------------
# indirect accesses are priced per descriptor: one per run of consecutive addresses in an indexed row
# --------------------------------------------------------------------------------------------
def _dma_costs(kernel: Callable[..., Any], inputs: tuple[Any, ...], target: str = "trn2", api: str = "0.3") -> list[Cost]:
    trace = emu.Trace()
    emu.run_kernel(kernel, inputs, target=target, trace=trace, api=api)
    spec = get_spec(target)
    return [instruction_cost(i, spec) for i in trace.instructions if i.op == "dma_copy"]


def _iota_rows(rows: int) -> Any:
    import nki.isa as nisa
    import nki.language as nl

    idx = nl.ndarray((rows, 1), nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    return idx


def strided_rows(table, gather: bool):
    """Every other element of 128 rows, through an identity-index gather or the same pattern written directly."""
    import nki.isa as nisa
    import nki.language as nl

    cols = table.shape[1]
    pattern = [[cols, 128], [2, cols // 2]]
    g = nl.ndarray((128, cols // 2), table.dtype, buffer=nl.sbuf)
    src = table.ap(pattern, offset=0, vector_offset=_iota_rows(128), indirect_dim=0) if gather else table.ap(pattern, offset=0)
    nisa.dma_copy(dst=g, src=src)
    out = nl.ndarray((128, cols // 2), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_a_strided_gather_costs_one_descriptor_per_element() -> None:
    """Before: priced as one 1 KiB run per row (its last dim), 21× cheaper than the 4-byte descriptors it takes."""
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    spec = get_spec("trn2")
    gather, direct = _dma_costs(strided_rows, (table, True))[0], _dma_costs(strided_rows, (table, False))[0]
    nbytes = 128 * 256 * 4
    per_element = nbytes / (spec.dma_queues * spec.dma_bytes_per_ns_per_queue * dma_efficiency(4, spec))
    assert gather.chunk == direct.chunk == 4
    assert gather.busy_ns >= direct.busy_ns >= per_element


def consecutive_rows(table, gather: bool, hbm_dst: bool):
    """Rows 0 … 127 of ``table`` through an identity-index gather, or the same copy written directly."""
    import nki.isa as nisa
    import nki.language as nl

    cols = table.shape[1]
    src = table.ap([[cols, 128], [1, cols]], offset=0, vector_offset=_iota_rows(128), indirect_dim=0) if gather else table[0:128, :]
    out = nl.ndarray((128, cols), table.dtype, buffer=nl.shared_hbm)
    if hbm_dst:
        nisa.dma_copy(dst=out, src=src)
        return out
    g = nl.ndarray((128, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=src)
    nisa.dma_copy(dst=out, src=g)
    return out


@pytest.mark.parametrize("hbm_dst", [False, True], ids=["to-sbuf", "to-hbm"])
def test_a_gather_of_consecutive_rows_costs_no_less_than_the_direct_copy(hbm_dst: bool) -> None:
    """Each index is its own descriptor: consecutive indices do not merge rows into one run.
    Before, an HBM → HBM gather took one queue per 8 rows while the direct copy, one run, took one queue."""
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    gather = _dma_costs(consecutive_rows, (table, True, hbm_dst))[0]
    direct = _dma_costs(consecutive_rows, (table, False, hbm_dst))[0]
    assert gather.chunk == 512 * 4
    assert gather.busy_ns >= direct.busy_ns and gather.latency_ns >= direct.latency_ns


def test_a_gather_costs_the_same_whatever_its_index_values() -> None:
    def k(table, rows):
        import nki.isa as nisa
        import nki.language as nl

        idx = nl.ndarray((128, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        g = nl.ndarray((128, table.shape[1]), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=table.ap([[table.shape[1], 128], [1, table.shape[1]]], offset=0, vector_offset=idx, indirect_dim=0))
        out = nl.ndarray(g.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=g)
        return out

    table = RNG.standard_normal((256, 512)).astype(np.float32)
    identity, shuffled = np.arange(128, dtype=np.int32)[:, None], RNG.permutation(256)[:128, None].astype(np.int32)
    assert _dma_costs(k, (table, identity))[1] == _dma_costs(k, (table, shuffled))[1]


def legacy_column_gather(x):
    """``x[i_f, idx]`` with an iota index tile on the column dim: a transposed load, one element per descriptor."""
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    r = x.shape[0]
    out = nl.ndarray((128, r), dtype=x.dtype, buffer=nl.shared_hbm)
    idx = nisa.iota(nl.arange(128)[:, None], dtype=nl.int32)
    i_f = nl.arange(r)[None, :]
    nl.store(out, value=nl.load(x[i_f, idx]))
    return out


def legacy_column_load(x):
    """The same transposed load written directly (an affine index grid: a strided view)."""
    import neuronxcc.nki.language as nl

    r = x.shape[0]
    out = nl.ndarray((128, r), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(r)[None, :]
    nl.store(out, value=nl.load(x[i_f, i_p]))
    return out


def test_a_transposing_index_tile_gather_costs_what_the_strided_load_costs() -> None:
    """Before: priced as one R·4-byte run per partition, as if the columns were rows (8 KiB runs at full bandwidth)."""
    x = RNG.standard_normal((2048, 128)).astype(np.float32)
    np.testing.assert_array_equal(emu.run_kernel(legacy_column_gather, (x,), api="0.1").outputs, x.T)
    gather = _dma_costs(legacy_column_gather, (x,), api="0.1")[0]
    direct = _dma_costs(legacy_column_load, (x,), api="0.1")[0]
    assert gather.chunk == direct.chunk == 4
    assert gather.busy_ns >= direct.busy_ns


# --------------------------------------------------------------------------------------------
# HBM → HBM: HBM is read and written, and both directions take DMA bandwidth
# --------------------------------------------------------------------------------------------
def copy_rows(x, direct: bool):
    """``out = x`` in 128-row blocks: one HBM → HBM DMA per block, or a load into SBUF and a store."""
    import nki.isa as nisa
    import nki.language as nl

    n, d = x.shape
    out = nl.ndarray((n, d), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        if direct:
            nisa.dma_copy(dst=out[rows, :], src=x[rows, :])
        else:
            t = nl.ndarray((128, d), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[rows, :])
            nisa.dma_copy(dst=out[rows, :], src=t)
    return out


def test_an_hbm_to_hbm_copy_is_not_cheaper_than_the_load_and_store_it_replaces() -> None:
    """Rows of 8 KiB (full DMA efficiency on both routes). Before: the HBM → HBM copies moved their
    bytes through the queues once, half the pair's time (22.8 vs 45.6 µs of queue time)."""
    x = RNG.standard_normal((1024, 2048)).astype(np.float32)
    nbytes = x.nbytes
    profiles = {}
    for direct in (True, False):
        trace = emu.Trace()
        emu.run_kernel(copy_rows, (x, direct), target="trn2", trace=trace)
        profiles[direct] = profile_trace(trace, "trn2")[0]
    hh, pair = profiles[True], profiles[False]
    assert hh.hbm_read_bytes == hh.hbm_write_bytes == pair.hbm_read_bytes == pair.hbm_write_bytes == nbytes
    assert hh.engines["DMA"].busy_us >= 0.98 * pair.engines["DMA"].busy_us
    spec = get_spec("trn2")  # what it does save: the 8 stores' issue and the fixed latency of one round trip
    assert hh.latency_us >= pair.latency_us - (spec.dma_fixed_ns + 8 * spec.dma_issue_ns) / 1e3


def test_one_hbm_to_hbm_dma_counts_its_bytes_read_and_written() -> None:
    x = RNG.standard_normal((128, 2048)).astype(np.float32)
    (cost,) = _dma_costs(copy_rows, (x, True))
    spec = get_spec("trn2")
    assert cost.hbm_read == cost.hbm_write == x.nbytes
    assert cost.busy_ns - spec.dma_issue_ns == pytest.approx(2 * x.nbytes / (cost.queues * spec.dma_bytes_per_ns_per_queue))


def sbuf_to_sbuf(x):
    import nki.isa as nisa
    import nki.language as nl

    a = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    b = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=a)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b)
    return out


def test_an_sbuf_to_sbuf_dma_moves_its_bytes_once_and_none_in_hbm() -> None:
    x = RNG.standard_normal((128, 2048)).astype(np.float32)
    load, on_chip, store = _dma_costs(sbuf_to_sbuf, (x,))
    assert on_chip.hbm_read == on_chip.hbm_write == 0
    assert on_chip.busy_ns == pytest.approx(load.busy_ns) == pytest.approx(store.busy_ns)  # the same bytes, runs and queues


# --------------------------------------------------------------------------------------------
# registers and the Vector Engine accumulators carry dependences like memory
# --------------------------------------------------------------------------------------------
def _vector_count(value: float, steps: int = 40) -> Any:
    """A (1, 1) int32 tile holding ``value``, computed by a chain of ``steps`` VectorE instructions."""
    import nki.isa as nisa
    import nki.language as nl

    f = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=f, value=value)
    for _ in range(steps):
        nisa.tensor_scalar(dst=f, data=f, op0=nl.multiply, operand0=1.0, engine=nisa.engine.vector)
    n = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=n, src=f, engine=nisa.engine.vector)
    return n


def register_placed_dma(table):
    import nki.isa as nisa
    import nki.language as nl

    reg = nisa.register_alloc()
    nisa.register_load(reg, _vector_count(3.0))
    cols = table.shape[1]
    row = nl.ndarray((1, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=table.ap([[cols, 1], [1, cols]], scalar_offset=reg))
    out = nl.ndarray((1, cols), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


def test_a_dma_placed_by_a_register_waits_for_the_register_load() -> None:
    table = RNG.standard_normal((8, 256)).astype(np.float32)
    out = emu.run_kernel(register_placed_dma, (table,)).outputs
    np.testing.assert_array_equal(out, table[3:4])
    _, tl = _schedule(register_placed_dma, (table,))
    (load,) = _events(tl, "register_load")
    assert load.start_ns >= max(e.end_ns for e in tl.events if e.engine == "vector") > 1000.0
    assert _events(tl, "dma_copy")[0].start_ns >= load.end_ns


def register_driven_loop(table):
    """A dynamic loop whose trip count a VectorE chain computes; the body gathers nothing itself, it only copies rows."""
    import nki.isa as nisa
    import nki.language as nl

    reg = nisa.register_alloc()
    nisa.register_load(reg, _vector_count(2.0))
    out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(reg):
        t = nl.ndarray((128, table.shape[1]), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
    return out


def test_a_dynamic_loop_body_waits_for_the_register_its_trip_count_comes_from() -> None:
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    trace, tl = _schedule(register_driven_loop, (table,))
    (load,) = _events(tl, "register_load")
    body = [e for e in tl.events if any(lp[1] == "dynamic" for lp in trace.instructions[e.seq].loops)]
    assert len(body) == 4
    assert min(e.start_ns for e in body) >= load.end_ns > 1000.0


def while_register(table):
    """``while reg:`` whose condition the loop body recomputes on VectorE and reloads into the register."""
    import nki.isa as nisa
    import nki.language as nl

    count = _vector_count(2.0, steps=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count)
    out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    i = 0
    while reg:
        t = nl.ndarray((128, table.shape[1]), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
        for _ in range(20):
            nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=0, engine=nisa.engine.vector)
        nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1, engine=nisa.engine.vector)
        nisa.register_load(reg, count)
        i += 1
    return out


def test_a_while_loop_iteration_waits_for_the_register_load_that_decides_it() -> None:
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_array_equal(emu.run_kernel(while_register, (table,)).outputs, table)
    _, tl = _schedule(while_register, (table,))
    first_load, second_load, _ = _events(tl, "register_load")
    second_iteration = _events(tl, "dma_copy")[2]
    assert second_iteration.start_ns >= second_load.end_ns >= first_load.end_ns


def register_rewritten(table):
    """A register-placed DMA, then the register moves on and places a second one."""
    import nki.isa as nisa
    import nki.language as nl

    reg = nisa.register_alloc(0)
    cols = table.shape[1]
    out = nl.ndarray((256, cols), table.dtype, buffer=nl.shared_hbm)
    for k in range(2):
        t = nl.ndarray((128, cols), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.ap([[cols, 128], [1, cols]], scalar_offset=reg))
        nisa.dma_copy(dst=out[k * 128 : (k + 1) * 128, :], src=t)
        nisa.register_move(reg, 128)
    return out


def test_a_register_write_waits_for_the_dma_that_reads_it_and_the_next_reader_for_the_write() -> None:
    table = RNG.standard_normal((256, 2048)).astype(np.float32)
    np.testing.assert_array_equal(emu.run_kernel(register_rewritten, (table,)).outputs, table)
    _, tl = _schedule(register_rewritten, (table,))
    load0, _, load1, _ = _events(tl, "dma_copy")
    move0 = _events(tl, "register_move")[0]
    assert move0.start_ns >= load0.end_ns  # write after read
    assert load1.start_ns >= move0.end_ns  # read after write


def accumulate_in_reverse_arrival(a, b):
    """``reduce_cmd=reduce`` continues the accumulators the previous instruction left, whose data lands last."""
    import nki.isa as nisa
    import nki.language as nl

    ta = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)  # slow: 8 KiB per partition on 2 partitions
    tb = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)  # fast
    ya, yb = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf), nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((2, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=ya, data=ta, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar_reduce(dst=yb, data=tb, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=res, reduce_cmd=nisa.reduce_cmd.reduce)
    out = nl.ndarray((2, 1), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_an_accumulating_instruction_waits_for_the_one_that_left_the_accumulators() -> None:
    a, b = RNG.standard_normal((2, 16384)).astype(np.float32), RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_allclose(emu.run_kernel(accumulate_in_reverse_arrival, (a, b)).outputs[:, 0], a.sum(1) + b.sum(1), rtol=1e-4)
    _, tl = _schedule(accumulate_in_reverse_arrival, (a, b))
    reset, cont = _events(tl, "tensor_scalar_reduce")
    assert cont.start_ns >= reset.end_ns


def placed_rows(table, by_register: bool):
    """Rows 2 … 129 of ``table`` loaded at a dynamic offset from a register, or at the same static offset."""
    import nki.isa as nisa
    import nki.language as nl

    cols = table.shape[1]
    offset: Any = 2
    if by_register:
        offset = nisa.register_alloc(2)
    t = nl.ndarray((128, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=table.ap([[cols, 128], [1, cols]], scalar_offset=offset))
    s = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, cols), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=y, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=s)
    out = nl.ndarray((128, cols), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_register_and_accumulator_accesses_cost_nothing_and_move_no_bytes() -> None:
    """Pseudo-regions order instructions; prices, HBM byte counts, DMA counts and advice read only the data."""
    table = RNG.standard_normal((256, 512)).astype(np.float32)
    profiles, costs = {}, {}
    for by_register in (True, False):
        trace = emu.Trace()
        emu.run_kernel(placed_rows, (table, by_register), target="trn2", trace=trace)
        assert any(a.memory == "acc" for i in trace.instructions for a in i.writes)
        spec = get_spec("trn2")
        costs[by_register] = [instruction_cost(i, spec) for i in trace.instructions if i.op != "register_alloc"]
        profiles[by_register] = profile_trace(emu.Trace.from_json(trace.to_json()), "trn2")[0]  # (through the worker's JSON form)
    assert costs[True] == costs[False]
    reg, static = profiles[True], profiles[False]
    assert (reg.hbm_read_bytes, reg.hbm_write_bytes, reg.dma_count, reg.dma_histogram, reg.advice) == (
        static.hbm_read_bytes, static.hbm_write_bytes, static.dma_count, static.dma_histogram, static.advice)
