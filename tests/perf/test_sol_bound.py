"""The speed of light is a bound of the cost model: no kernel's estimate is below it.

Random kernels (loads of every contiguous size and width, element-wise work on every engine in
16-bit and fp32, matmuls, stores) are bounded by the speed of light of their own work; every
builtin task's baseline is bounded by its task's speed of light on every target.
"""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf import profile_trace, speed_of_light
from nkiagent.perf.sol import dma_peak_bytes_per_ns
from nkiagent.perf.specs import get_spec
from nkiagent.tasks.loader import builtin_tasks
from nkiagent.verify.bounds import task_speed_of_light

TARGETS = ("trn1", "trn2", "trn3")


def _random_kernel(rng: random.Random):
    """A kernel of random independent tiles and the work it must do: (kernel, inputs, work, precision)."""
    import nki
    import nki.isa as nisa
    import nki.language as nl

    dt = rng.choice(["bfloat16", "float32"])
    tiles = rng.randint(1, 6)
    plan = [(rng.choice([1, 8, 32, 64, 128]), rng.choice([16, 64, 256, 512, 1024, 2048, 4096])) for _ in range(tiles)]
    kinds = [rng.choice(["copy", "scalar", "tensor", "activation", "gpsimd", "matmul"]) for _ in range(tiles)]
    np_dt = np.float32
    arrays = tuple(np.zeros((p, f), np_dt) for p, f in plan)

    @nki.jit
    def kernel(*xs):
        outs = []
        for (p, f), kind, x in zip(plan, kinds, xs):
            out = nl.ndarray((p, f), nl.float32, buffer=nl.shared_hbm)
            t = nl.ndarray((p, f), getattr(nl, dt))
            nisa.dma_copy(dst=t, src=x)
            r = nl.ndarray((p, f), getattr(nl, dt))
            if kind == "copy":
                nisa.tensor_copy(dst=r, src=t)
            elif kind == "scalar":
                nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0)
            elif kind == "tensor":
                nisa.tensor_tensor(dst=r, data1=t, data2=t, op=nl.add)
            elif kind == "activation":
                nisa.activation(dst=r, op=nl.exp, data=t)
            elif kind == "gpsimd":
                nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0, engine=nisa.gpsimd_engine)
            else:
                n = min(f, 512)
                acc = nl.ndarray((p, n), nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=acc, stationary=t[:, 0:p], moving=t[:, 0:n])
                nisa.tensor_copy(dst=r[:, 0:n], src=acc)
            nisa.dma_copy(dst=out, src=r)
            outs.append(out)
        return tuple(outs)

    flops = sum(2.0 * p * p * min(f, 512) for (p, f), k in zip(plan, kinds) if k == "matmul")
    elems = sum(p * (min(f, 512) if k == "matmul" else f) for (p, f), k in zip(plan, kinds))
    hbm = sum(p * f * 4 * 2 for p, f in plan)
    return kernel, arrays, {"matmul_flops": flops, "vector_elems": float(elems), "hbm_bytes": float(hbm)}, dt


@pytest.mark.parametrize("seed", range(30))
def test_random_kernels_never_beat_the_speed_of_light_of_their_own_work(seed: int) -> None:
    rng = random.Random(seed)
    kernel, arrays, work, dt = _random_kernel(rng)
    for target in TARGETS:
        trace = emu.Trace()
        emu.run_kernel(kernel, arrays, target=target, trace=trace, timing_only=True)
        sol = speed_of_light(get_spec(target), **work, precision=dt)
        prof, _ = profile_trace(trace, target, sol=sol)
        assert prof.latency_us * 1e3 >= sol.latency_ns, (seed, target, prof.latency_us, sol)
        assert not prof.below_speed_of_light and 0 < prof.fraction_of_sol <= 1


@pytest.mark.parametrize("target", TARGETS)
def test_a_16_kib_load_and_store_is_not_faster_than_the_bound(target: str) -> None:
    """The case that fell below the old bound on trn2: full-efficiency DMAs at 16 × 23 B/ns beat a
    bound computed from HBM's 362 GB/s. The bound now uses the queues' own peak."""
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.ndarray((128, x.shape[1]), x.dtype)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
        return out

    x = np.zeros((8192, 4096), np.float32)  # 16 KiB per partition, 256 MiB moved
    trace = emu.Trace()
    emu.run_kernel(kernel, (x,), target=target, trace=trace, timing_only=True)
    spec = get_spec(target)
    sol = speed_of_light(spec, hbm_bytes=2 * x.nbytes)
    prof, _ = profile_trace(trace, target, sol=sol)
    assert prof.latency_us * 1e3 >= sol.latency_ns
    assert sol.hbm_ns == pytest.approx(2 * x.nbytes / (spec.dma_queues * spec.dma_bytes_per_ns_per_queue))
    assert prof.fraction_of_sol > 0.95  # a streaming copy comes close: the bound is tight, not just safe
    if target == "trn2":  # the old bound (HBM's 362 GB/s) would sit above this estimate
        assert prof.latency_us * 1e3 < 2 * x.nbytes / spec.hbm_gbps
    assert dma_peak_bytes_per_ns(spec) == spec.dma_queues * spec.dma_bytes_per_ns_per_queue


def _baseline(task):
    spec = importlib.util.spec_from_file_location(f"baseline_{task.name}", task.baseline_path())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


@pytest.mark.parametrize("name", [n for n, t in builtin_tasks().items() if t.baseline])
def test_every_builtin_baseline_is_at_or_above_its_task_speed_of_light(name: str) -> None:
    emu.install()
    task = builtin_tasks()[name]
    kernel = _baseline(task)
    arrays = tuple(np.zeros(s, dtype=np.dtype(emu.dtypes.as_dtype(i.dtype))) for s, i in zip(task.input_shapes(), task.inputs))
    for target in TARGETS:
        trace = emu.Trace()
        emu.run_kernel(kernel, arrays, target=target, trace=trace, timing_only=True)
        sol = task_speed_of_light(task, dict(task.dims), target)
        prof, _ = profile_trace(trace, target, sol=sol, precision=task.precision_floor)
        assert prof.latency_us * 1e3 >= sol.latency_ns, (name, target, prof.latency_us, sol)
        assert 0 < prof.fraction_of_sol <= 1


def test_an_fp32_task_is_bounded_by_the_fp32_matmul_rate() -> None:
    spec = get_spec("trn2")
    bf16 = speed_of_light(spec, matmul_flops=1e12, precision="bfloat16")
    fp32 = speed_of_light(spec, matmul_flops=1e12, precision="float32")
    assert fp32.pe_ns == pytest.approx(1e12 / (spec.pe_peak_fp32_tflops * 1e3))
    assert fp32.pe_ns == pytest.approx(4 * bf16.pe_ns, rel=0.01)
