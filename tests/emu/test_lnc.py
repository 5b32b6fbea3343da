"""LNC=2: the two cores of a launch run concurrently, exchanging tiles with ``sendrecv`` and meeting at ``core_barrier``.

Every kernel here is written for these tests. Each checks numbers against NumPy, or the exact
error a kernel without its counterpart on the peer core gets.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from nkiagent import emu, shim

shim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from nkiagent.emu.errors import NkiError
from nkiagent.perf.cost import instruction_cost
from nkiagent.perf.specs import get_spec

P = 128


def _run(kernel, *args, target: str = "trn2", trace: emu.Trace | None = None):
    return emu.run_kernel(kernel, args, target=target, trace=trace).outputs


@nki.jit
def swap_halves(a):
    """Core r loads half r of ``a`` and sends it to the other core, which stores it: the output is ``a`` with its halves swapped."""
    n, d = a.shape
    half = n // 2
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    mine = nl.ndarray((half, d), dtype=a.dtype, buffer=nl.sbuf)
    theirs = nl.ndarray((half, d), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[nl.ds(me * half, half), :])
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    # the tile sent is a copy taken at the send: reusing `mine` changes nothing the peer gets
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=0.0)
    nisa.dma_copy(dst=out[nl.ds(me * half, half), :], src=theirs)
    return out


def test_an_lnc2_exchange_of_halves_swaps_them() -> None:
    a = np.random.default_rng(0).standard_normal((2 * P, 64), dtype=np.float32)
    trace = emu.Trace()
    out = _run(swap_halves[2], a, trace=trace)
    np.testing.assert_array_equal(out, np.concatenate([a[P:], a[:P]]))
    sends = [ins for ins in trace.instructions if ins.op == "sendrecv"]
    assert sorted(ins.program_id for ins in sends) == [(0,), (1,)]
    # priced as the DMA it is: its bytes over the queues plus the fixed DMA latency
    cost = instruction_cost(sends[0], get_spec("trn2"))
    assert cost.engine == "dma" and cost.latency_ns > get_spec("trn2").dma_fixed_ns
    assert sends[0].reads[0].nbytes == sends[0].writes[0].nbytes == P * 64 * 4


@nki.jit
def all_reduce_sum(a):
    """Each core sums its half of the rows' tiles and the two add their partial sums through ``sendrecv``: both hold the total."""
    n, d = a.shape
    tiles = n // P
    per_core = tiles // 2
    out = nl.ndarray((2 * P, d), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    acc = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in nl.sequential_range(per_core):
        x = nl.ndarray((P, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[nl.ds((me * per_core + t) * P, P), :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
    peer = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=acc, dst=peer, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    total = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=acc, data2=peer, op=nl.add)
    nisa.dma_copy(dst=out[nl.ds(me * P, P), :], src=total)  # each core stores its copy of the total
    return out


def test_an_all_reduce_written_with_sendrecv_matches_numpy() -> None:
    a = np.random.default_rng(1).standard_normal((8 * P, 32), dtype=np.float32)
    out = _run(all_reduce_sum[2], a)
    want = a.reshape(8, P, 32).sum(axis=0)
    np.testing.assert_allclose(out[:P], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:P], out[P:])  # both cores hold the same total


@nki.jit
def ring_of_two(a):
    """Three exchanges in a row: the Nth sendrecv of one core pairs with the Nth of the other (program order)."""
    d = a.shape[1]
    out = nl.ndarray((3 * P, d), dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    for k in nl.sequential_range(3):
        mine = nl.ndarray((P, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=a[nl.ds((2 * k + me) * P, P), :])
        theirs = nl.ndarray((P, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        if me == 0:
            nisa.dma_copy(dst=out[nl.ds(k * P, P), :], src=theirs)
    return out


def test_sendrecv_pairs_messages_in_program_order() -> None:
    a = np.random.default_rng(2).standard_normal((6 * P, 16), dtype=np.float32)
    out = _run(ring_of_two[2], a)
    np.testing.assert_array_equal(out, np.concatenate([a[(2 * k + 1) * P : (2 * k + 2) * P] for k in range(3)]))


def _exchange_then_read(barrier: bool):
    @nki.jit
    def kernel(a):
        """Each core writes its half of a shared tensor, then reads the other core's half: only a barrier makes that safe."""
        n, d = a.shape
        half = n // 2
        shared = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        t = nl.ndarray((half, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.ds(me * half, half), :])
        nisa.dma_copy(dst=shared[nl.ds(me * half, half), :], src=t)
        if barrier:
            nisa.core_barrier(shared, cores=(0, 1))
        other = nl.ndarray((half, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=other, src=shared[nl.ds((1 - me) * half, half), :])
        nisa.dma_copy(dst=out[nl.ds(me * half, half), :], src=other)
        return out

    return kernel


def test_core_barrier_orders_the_cores_writes_before_their_reads() -> None:
    a = np.random.default_rng(3).standard_normal((2 * P, 8), dtype=np.float32)
    trace = emu.Trace()
    out = _run(_exchange_then_read(barrier=True)[2], a, trace=trace)
    np.testing.assert_array_equal(out, np.concatenate([a[P:], a[:P]]))
    barriers = [ins for ins in trace.instructions if ins.op == "core_barrier"]
    assert [ins.engine for ins in barriers] == ["gpsimd", "gpsimd"]
    spec = get_spec("trn2")
    assert instruction_cost(barriers[0], spec).busy_ns >= spec.dma_fixed_ns  # a semaphore round trip between the cores


def test_without_the_barrier_core_0_reads_the_half_core_1_has_not_written() -> None:
    """The same kernel minus its barrier: core 0 runs ahead and reads uninitialised memory (NaN), as on hardware it may."""
    a = np.random.default_rng(3).standard_normal((2 * P, 8), dtype=np.float32)
    out = _run(_exchange_then_read(barrier=False)[2], a)
    assert np.isnan(out[:P]).all()
    np.testing.assert_array_equal(out[P:], a[:P])


@nki.jit
def one_sided(a):
    """Only core 0 calls sendrecv: it waits for a tile core 1 never sends."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    if me == 0:
        nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_sendrecv_without_its_counterpart_is_a_deadlock_naming_the_cores_op_and_line() -> None:
    with pytest.raises(NkiError) as e:
        _run(one_sided[2], np.ones((P, 4), np.float32))
    err = e.value
    line = f"{__file__}:{_line_of('send_to_rank=1, recv_from_rank=1')}"
    assert err.code == "err_lnc_deadlock" and err.location == line
    assert err.message == (
        "the cores of this LNC launch wait on each other and none can proceed: "
        f"program [0] (rank 0) waits in sendrecv at {line} for the tile rank 1 sends it; program [1] (rank 1) finished. "
        "Every sendrecv and core_barrier needs its counterpart on the peer core, in the same order"
    )


@nki.jit
def barriers_mismatched(a):
    """Core 1 meets one barrier, core 0 two: core 0's second barrier never completes."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    nisa.core_barrier(out, cores=(0, 1))
    if me == 0:
        nisa.core_barrier(out, cores=(0, 1))  # the unmatched one
    return out


def test_an_unmatched_barrier_is_a_deadlock_naming_it() -> None:
    with pytest.raises(NkiError) as e:
        _run(barriers_mismatched[2], np.ones((P, 4), np.float32))
    line = f"{__file__}:{_line_of('# the unmatched one')}"
    assert e.value.code == "err_lnc_deadlock" and e.value.location == line
    assert (
        f"program [0] (rank 0) waits in core_barrier at {line} for barrier #2 of ranks [0, 1]; program [1] (rank 1) finished"
        in e.value.message
    )


@nki.jit
def one_extra_on_core_1(a):
    """Both cores exchange once; core 1 then waits on its own thread for a second tile after core 0 has finished."""
    me = nl.program_id(0)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.sendrecv(src=t, dst=t, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    if me == 1:
        nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)  # no second one on core 0
    return t


def test_a_deadlock_found_after_core_0_finished_is_located_where_core_1_waits() -> None:
    """The launch itself finds this one (core 0 is done, core 1 parked on its thread): the error still points at core 1's line."""
    with pytest.raises(NkiError) as e:
        _run(one_extra_on_core_1[2], np.ones((P, 4), np.float32))
    line = f"{__file__}:{_line_of('# no second one on core 0')}"
    assert e.value.code == "err_lnc_deadlock" and e.value.location == line
    assert (
        f"program [0] (rank 0) finished; program [1] (rank 1) waits in sendrecv at {line} for the tile rank 0 sends it." in e.value.message
    )


def _line_of(text: str) -> int:
    with open(__file__) as f:
        lines = f.read().splitlines()
    return next(i + 1 for i, s in enumerate(lines) if text in s and "_line_of" not in s)


def test_a_failure_on_one_core_while_the_other_waits_is_the_failure() -> None:
    """Core 1 fails before its sendrecv while core 0 waits on its own thread: the launch raises core 1's error, and no thread is left."""
    import threading

    @nki.jit
    def kernel(a):
        me = nl.program_id(0)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        if me == 1:
            nisa.tensor_tensor(dst=t, data1=t, data2=a, op=nl.add)  # an HBM operand: refused
        nisa.sendrecv(src=t, dst=t, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        return t

    before = threading.active_count()
    with pytest.raises(NkiError) as e:
        _run(kernel[2], np.ones((P, 4), np.float32))
    assert e.value.code == "err_unsupported_memory"
    assert threading.active_count() == before


def _calling(call):
    @nki.jit
    def kernel(a):
        me = nl.program_id(0)
        t = nl.ndarray((P, 4), dtype=a.dtype, buffer=nl.sbuf)
        small = nl.ndarray((P, 2), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        call(a, t, small, me)
        return t

    return kernel


@pytest.mark.parametrize(
    "call, code, text",
    [
        (lambda a, t, small, me: nisa.sendrecv(src=t, dst=t, send_to_rank=2, recv_from_rank=0, pipe_id=0), "err_lnc_rank",
         "sendrecv send_to_rank=2: the cores of an LNC=2 launch are ranks 0 and 1 (e.g. 1 - nl.program_id(0))"),
        (lambda a, t, small, me: nisa.sendrecv(src=t, dst=small, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0),
         "err_sendrecv_mismatch",
         "sendrecv src [128, 4] float32 and dst [128, 2] float32 must have the same dtype, partition count and elements per partition"),
        (lambda a, t, small, me: nisa.sendrecv(src=a, dst=t, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0),
         "err_unsupported_memory", "sendrecv"),
        (lambda a, t, small, me: nisa.core_barrier(a, cores=(0, 2)), "err_core_barrier_cores",
         "only cores=(0, 1) (or a single core) is supported"),
        (lambda a, t, small, me: nisa.core_barrier(a, cores=(0, 1), engine=nisa.engine.vector), "err_unsupported_engine",
         ("Expected 'core_barrier' to run on engine 'gpsimd', but got engine 'vector' instead; pass engine=nisa.engine.gpsimd, "
          "or leave engine unset (its page names GpSimd, the default, and no other engine)")),
        (lambda a, t, small, me: nisa.sendrecv(src=t if me == 0 else small, dst=t if me == 0 else small, send_to_rank=1 - me,
                                               recv_from_rank=1 - me, pipe_id=0),
         "err_sendrecv_mismatch", "sendrecv dst [128, 2] float32 cannot hold the tile rank 0 sent at "),
    ],
    ids=["rank", "tile-size", "hbm-operand", "cores", "barrier-engine", "peer-tile-size"],
)  # fmt: skip
def test_sendrecv_and_core_barrier_refuse_what_the_docs_refuse(call, code: str, text: str) -> None:
    with pytest.raises(NkiError) as e:
        _run(_calling(call)[2], np.ones((P, 4), np.float32))
    assert e.value.code == code and text in e.value.message


def test_a_gpsimd_dma_sendrecv_over_its_size_limit_is_refused_with_the_limit() -> None:
    @nki.jit
    def kernel(a):
        me = nl.program_id(0)
        t = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        nisa.sendrecv(src=t, dst=t, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0, dma_engine=nisa.dma_engine.gpsimd_dma)
        return t

    with pytest.raises(
        NkiError,
        match=re.escape(
            "at most 1024 bytes per partition of 32-bit data over a multiple of 16 partitions; src [128, 512] float32 has 128 partitions of 2048 bytes"
        ),
    ):
        _run(kernel[2], np.ones((P, 4), np.float32))


def test_sendrecv_outside_an_lnc2_launch_says_how_to_launch() -> None:
    with pytest.raises(NkiError) as e:
        _run(swap_halves, np.ones((2 * P, 4), np.float32))
    assert e.value.code == "err_lnc_required" and "launch the kernel as kernel[2](...)" in e.value.message


def test_sendrecv_needs_trn2() -> None:
    with pytest.raises(NkiError) as e:
        _run(swap_halves[2], np.ones((2 * P, 4), np.float32), target="trn1")
    assert e.value.code == "err_isa_unsupported_target" and "sendrecv is only available on trn2" in e.value.message


def _barrier_on(cores):
    @nki.jit
    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        nisa.core_barrier(out, cores)
        return out

    return kernel


def test_a_one_core_barrier_waits_for_no_one_and_a_two_core_one_at_lnc1_is_not_emulated() -> None:
    a = np.ones((P, 4), np.float32)
    np.testing.assert_array_equal(_run(_barrier_on(0), a), a)  # the library's ``core_barrier(output, (0))`` at one shard
    with pytest.raises(NkiError) as e:
        _run(_barrier_on((0, 1)), a)
    assert e.value.code == "err_not_emulated" and e.value.message.startswith(
        "nki.isa.core_barrier(cores=(0, 1)) in a launch of 1 program is not emulated"
    )


@pytest.mark.parametrize("name", ["all_gather", "all_reduce", "collective_permute_implicit", "rank_id"])
def test_a_multi_rank_collective_imports_and_a_call_is_the_not_emulated_error_naming_it(name: str) -> None:
    """AWS's library imports ``nki.collectives`` and builds a ReplicaGroup at module level: both work; the call stops the run."""
    import nki.collectives as ncc
    from nki.collectives import ReplicaGroup

    group = ReplicaGroup([[0, 1, 2, 3]])
    assert group.groups == [[0, 1, 2, 3]]

    @nki.jit
    def kernel(a):
        getattr(ncc, name)(srcs=[a], dsts=[a], replica_group=group)
        return a

    with pytest.raises(NkiError) as e:
        _run(kernel, np.ones((P, 4), np.float32))
    assert e.value.code == "err_not_emulated" and e.value.location == f"{__file__}:{_line_of('getattr(ncc, name)(srcs=')}"
    assert e.value.message.startswith(f"nki.collectives.{name} is not emulated by the nkiagent emulator: collectives exchange data")


def test_a_replica_group_refuses_overlapping_rank_lists() -> None:
    from nki.collectives import ReplicaGroup

    with pytest.raises(NkiError, match=re.escape("ReplicaGroup [[0, 1], [1, 2]]: a rank appears in more than one rank-list")):
        ReplicaGroup([[0, 1], [1, 2]])
