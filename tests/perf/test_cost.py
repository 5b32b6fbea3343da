"""Per-instruction cost formulas (§4.3 of the reference), checked on traced instructions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf.cost import instruction_cost
from nkiagent.perf.specs import get_spec


def _trace(build: Callable[..., None], target: str = "trn1", inputs: tuple = ()) -> emu.Trace:
    """Run a kernel body that takes no HBM output; returns its trace."""
    import nki.language as nl

    def kernel(*args):
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        build(*args)
        import nki.isa as nisa

        t = nl.ndarray((1, 1), nl.float32)
        nisa.memset(t, 0.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    trace = emu.Trace()
    emu.run_kernel(kernel, inputs, target=target, trace=trace)
    return trace


def _cost_of(trace: emu.Trace, op: str, target: str):
    ins = next(i for i in trace.instructions if i.op == op)
    return instruction_cost(ins, get_spec(target))


def test_tensor_tensor_two_sbuf_inputs_costs_2n_plus_access_overhead() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        a = nl.zeros((128, 512), nl.float32)
        b = nl.zeros((128, 512), nl.float32)
        c = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)

    c = _cost_of(_trace(body), "tensor_tensor", "trn1")
    assert c.engine == "vector"
    assert c.cycles == 2 * 512 + 60
    assert c.busy_ns == pytest.approx((2 * 512 + 60) / 1.12)


def test_tensor_tensor_psum_plus_sbuf_costs_n() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        a = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        b = nl.zeros((128, 512), nl.float32)
        c = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)

    assert _cost_of(_trace(body), "tensor_tensor", "trn1").cycles == 512 + 60


@pytest.mark.parametrize("dtype,factor", [("bfloat16", 1), ("float32", 4)])
def test_matmul_cost_is_max_min64_nmoving_times4_for_fp32(dtype: str, factor: int) -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        s = nl.zeros((128, 128), dtype)
        m = nl.zeros((128, 512), dtype)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)

    c = _cost_of(_trace(body), "nc_matmul", "trn1")
    assert c.engine == "tensor"
    assert c.cycles == 512 * factor
    assert c.busy_ns == pytest.approx(512 * factor / 2.8)
    assert c.flops == 2 * 128 * 128 * 512


def test_matmul_small_moving_is_bounded_by_min64_stationary() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        s = nl.zeros((128, 128), nl.bfloat16)
        m = nl.zeros((128, 8), nl.bfloat16)
        p = nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)

    assert _cost_of(_trace(body), "nc_matmul", "trn2").cycles == 64


def test_activation_costs_max_ii_n_and_reduce_adds_ii() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        x = nl.zeros((128, 1024), nl.float32)
        y = nl.ndarray((128, 1024), nl.float32)
        r = nl.ndarray((128, 1), nl.float32)
        nisa.activation(dst=y, op=nl.exp, data=x)
        nisa.activation_reduce(dst=y, op=nl.exp, data=x, reduce_op=nl.add, reduce_res=r)

    tr = _trace(body, "trn2")
    spec = get_spec("trn2")
    costs = [instruction_cost(i, spec) for i in tr.instructions if i.op.startswith("activation")]
    assert [c.cycles for c in costs] == [1024 + 60, 1024 + 64 + 60]
    assert costs[0].engine == "scalar"
    assert costs[0].busy_ns == pytest.approx((1024 + 60) / 1.2)


def test_small_op_is_floored_at_min_ii_and_gpsimd_pays_start_cost() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        x = nl.zeros((128, 8), nl.float32)
        y = nl.ndarray((128, 8), nl.float32)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
        idx = nl.ndarray((128, 512), nl.int32)
        nisa.iota(idx, [[1, 512]], offset=0, channel_multiplier=512)

    tr = _trace(body)
    assert _cost_of(tr, "tensor_scalar", "trn1").cycles == 64 + 60
    iota = _cost_of(tr, "iota", "trn1")
    assert iota.engine == "gpsimd" and iota.cycles == 150 + 512 + 60


def test_reciprocal_and_bf16_reduce_formulas() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        x = nl.zeros((128, 256), nl.float32)
        y = nl.ndarray((128, 256), nl.float32)
        nisa.reciprocal(dst=y, data=x)
        xb = nl.zeros((128, 256), nl.bfloat16)
        r = nl.ndarray((128, 1), nl.bfloat16)
        nisa.tensor_reduce(dst=r, op=nl.add, data=xb, axis=(1,))

    tr = _trace(body)
    assert _cost_of(tr, "reciprocal", "trn1").cycles == 8 * 256 + 60
    assert _cost_of(tr, "tensor_reduce", "trn1").cycles == 128 + 60


def test_strided_minor_access_halves_bandwidth() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        x = nl.zeros((128, 1024), nl.float32)
        y = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_copy(dst=y, src=x[:, 0:1024:2])  # 8-byte stride: no penalty
        z = nl.ndarray((128, 128), nl.float32)
        nisa.tensor_copy(dst=z, src=x[:, 0:1024:8])  # 32-byte stride: 2x

    tr = _trace(body)
    spec = get_spec("trn1")
    copies = [instruction_cost(i, spec) for i in tr.instructions if i.op == "tensor_copy"]
    assert [c.cycles for c in copies] == [512 + 60, 2 * 128 + 60]


def test_trn2_vector_fast_mode_for_bf16_copies() -> None:
    import nki.isa as nisa
    import nki.language as nl

    def body() -> None:
        x = nl.zeros((128, 1024), nl.bfloat16)
        y = nl.ndarray((128, 1024), nl.bfloat16)
        nisa.tensor_copy(dst=y, src=x)

    assert _cost_of(_trace(body, "trn2"), "tensor_copy", "trn2").cycles == 1024 / 4 + 60
    assert _cost_of(_trace(body, "trn1"), "tensor_copy", "trn1").cycles == 1024 + 60


def test_dma_cost_grows_with_small_chunks_and_counts_hbm_bytes() -> None:
    import nki.isa as nisa
    import nki.language as nl

    a = np.zeros((128, 4096), np.float32)

    def body(x) -> None:
        wide = nl.ndarray((128, 1024), nl.float32)
        nisa.dma_copy(dst=wide, src=x[:, 0:1024])  # 4 KiB per partition
        narrow = nl.ndarray((128, 64), nl.float32)
        for j in range(16):
            nisa.dma_copy(dst=narrow, src=x[:, j * 64 : (j + 1) * 64])  # 256 B per partition

    tr = _trace(body, inputs=(a,))
    spec = get_spec("trn1")
    dmas = [instruction_cost(i, spec) for i in tr.instructions if i.op == "dma_copy" and i.reads[0].memory == "hbm"]
    wide, narrow = dmas[0], dmas[1:]
    assert wide.hbm_read == 128 * 1024 * 4 and wide.queues == 16
    assert sum(c.busy_ns for c in narrow) > 1.5 * wide.busy_ns  # same bytes, far more time
    assert wide.latency_ns == pytest.approx(wide.busy_ns - spec.dma_issue_ns + spec.dma_fixed_ns)


# --------------------------------------------------------------------------------------------
# Engines the model has no lane for
# --------------------------------------------------------------------------------------------
def _bare(op: str, engine: str) -> emu.Instruction:
    return emu.Instruction(0, op, engine, (), (), "kernel.py:7")


@pytest.mark.parametrize(("op", "engine"), [("tensor_tensor", "sync"), ("tensor_copy", "sync"), ("tensor_tensor", "pe"), ("memset", ""),
                                            ("register_move", "vectorx"), ("dma_copy", "sync")])  # fmt: skip
def test_an_engine_without_a_lane_is_refused_not_priced(op: str, engine: str) -> None:
    """Compute on the Sync engine (or on a made-up engine) would be a fifth lane the hardware lacks."""
    from nkiagent.perf.cost import UnpricedInstruction

    with pytest.raises(UnpricedInstruction) as info:
        instruction_cost(_bare(op, engine), get_spec("trn2"))
    assert str(info.value) == (
        f"kernel.py:7: cannot price {op} on engine {engine!r}: the model prices compute on tensor, vector, scalar, gpsimd, "
        "data movement on dma and only register operations on sync"
    )


@pytest.mark.parametrize("op", ["register_alloc", "register_move", "register_load", "register_store"])
def test_register_operations_run_on_the_sync_engine(op: str) -> None:
    c = instruction_cost(_bare(op, "sync"), get_spec("trn2"))
    assert (c.engine, c.cycles) == ("sync", 64 + 60)


def test_a_trace_with_an_unpriceable_instruction_cannot_be_scheduled() -> None:
    from nkiagent.perf.cost import UnpricedInstruction
    from nkiagent.perf.timeline import schedule

    trace = emu.Trace()
    trace.instructions.append(_bare("tensor_tensor", "sync"))
    with pytest.raises(UnpricedInstruction):
        schedule(trace, get_spec("trn2"))
