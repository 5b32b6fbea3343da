"""The speed of light is a bound of the cost model (issue 20): no estimate below it, no fraction of peak above 1.

Two kinds of kernel, on every target:

* real ones — every builtin task's baseline, the honest and unusual corpora of ``tests/verify``,
  the demo starting kernels and ``examples/`` — against their task's speed of light, the number
  the verifier rejects a kernel for beating;
* randomly generated legal kernels (DMAs of every size, strided and indirect, HBM → HBM, bf16
  and fp32 matmuls, element-wise work on every engine) and the calibration kernels of
  ``tests/perf/kernels`` against the speed of light of *their own* work: the FLOPs, HBM bytes and
  element-wise outputs their trace shows. A model constant that beats its bound (a DMA faster
  than the queues' peak, a matmul faster than TensorE's) fails here on the kernel that uses it.

The comparison is exact (no tolerance): a bound that is a bound is never beaten, even by 0.1%.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nkiagent import emu
from nkiagent.emu.trace import Trace, is_data
from nkiagent.perf import profile_trace, speed_of_light
from nkiagent.perf.sol import SpeedOfLight
from nkiagent.perf.specs import get_spec
from nkiagent.perf.timeline import Timeline
from nkiagent.sandbox.arrays import make_inputs
from nkiagent.sandbox.worker import _pick_kernel
from nkiagent.tasks import builtin_tasks, get_task
from tests.verify.corpus import header

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("trn1", "trn2", "trn3")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _real_kernels() -> list[tuple[Path, str]]:
    """(kernel file, task) of every real kernel the repository ships or tests."""
    out = [(t.baseline_path(), name) for name, t in sorted(builtin_tasks().items()) if t.baseline_path()]
    out += [(p, p.name.removesuffix("_opt.py")) for p in sorted((ROOT / "tests/verify/honest").glob("*_opt.py"))]
    out += [(p, header(p)["TASK"]) for p in sorted((ROOT / "tests/verify/unusual").glob("*.py"))]
    out += [(p, p.stem) for p in sorted((ROOT / "nkiagent/agent/demo_kernels").glob("[a-z]*.py"))]
    out.append((ROOT / "examples/vector_add.py", "vector_add"))
    return [(p, task) for p, task in out if p is not None]


REAL = _real_kernels()


def _trace_file(path: Path, task_name: str, target: str) -> Trace:
    """The kernel's trace on the task's visible shape: timing-only, or with data when the kernel reads it."""
    task = get_task(task_name)
    kernel = _pick_kernel(runpy.run_path(str(path)), None)
    api = "0.1" if "neuronxcc" in path.read_text() else "0.3"
    trace = Trace()
    shapes = tuple(emu.ShapeSpec(s.resolve(task.dims), s.dtype) for s in task.inputs)
    emu.run_kernel(kernel, shapes, target=target, trace=trace, api=api, timing_only=True)
    if trace.unfaithful:  # it reads its inputs into control flow or addresses: price the run with data
        trace = Trace()
        emu.run_kernel(kernel, tuple(make_inputs(task, task.dims, 0, "normal")), target=target, trace=trace, api=api)
    return trace


def test_the_corpus_has_every_kind_of_real_kernel() -> None:
    kinds = {p.parent.name for p, _ in REAL}
    assert {"baselines", "honest", "unusual", "demo_kernels", "examples"} <= kinds
    assert len(REAL) >= 60


@pytest.mark.parametrize("path, task", REAL, ids=[f"{p.parent.name}/{p.stem}" for p, _ in REAL])
def test_a_real_kernels_estimate_is_never_below_its_tasks_speed_of_light(path: Path, task: str) -> None:
    work = get_task(task).work()
    for target in TARGETS:
        sol = speed_of_light(get_spec(target), **work)
        prof, tl = profile_trace(_trace_file(path, task, target), target, sol=sol)
        assert tl.latency_ns >= sol.latency_ns, f"{target}: estimate {tl.latency_ns:.1f} ns < speed of light {sol.latency_ns:.1f} ns ({sol.bound})"
        assert prof.fraction_of_sol is not None and 0.0 < prof.fraction_of_sol <= 1.0
        assert not prof.below_speed_of_light and prof.roofline_us <= prof.latency_us


# ---------------------------------------------------------------------------------------------
# a kernel's own work: what its trace shows it moved and computed
# ---------------------------------------------------------------------------------------------
TRANSCENDENTAL = frozenset({"activation", "activation_reduce", "exponential"})


def own_work(trace: Trace, tl: Timeline) -> dict[str, float]:
    """The work a kernel's trace shows, in :func:`speed_of_light`'s terms.

    fp32 matmuls count as needing fp32 accuracy (unless a 0/1 operand was checked, which the rule
    prices at two passes); every element VectorE, ScalarE or GpSimd writes is element-wise work;
    HBM bytes are what its DMAs (and spill code) read and write there.
    """
    flops = fp32 = elementwise = transcendental = 0.0
    for ins, c in zip(trace.instructions, tl.costs):
        if c.flops:
            flops += c.flops
            if ins.attrs.get("fp32") and not ins.attrs.get("onezero"):
                fp32 += c.flops
        if c.engine in ("vector", "scalar", "gpsimd"):
            n = sum(a.partitions * a.elems_per_partition for a in ins.writes if is_data(a))
            elementwise += n
            if ins.op in TRANSCENDENTAL:
                transcendental += n
    hbm = float(sum(c.hbm_read + c.hbm_write for c in tl.all_costs))
    return {"matmul_flops": flops, "fp32_matmul_flops": fp32, "vector_elems": elementwise, "scalar_elems": transcendental, "hbm_bytes": hbm}


def _check_own_bound(trace: Trace, target: str) -> tuple[SpeedOfLight, float]:
    spec = get_spec(target)
    _, tl = profile_trace(trace, target)
    sol = speed_of_light(spec, **own_work(trace, tl))
    prof, _ = profile_trace(trace, target, sol=sol)
    assert tl.latency_ns >= sol.latency_ns, (
        f"{target}: estimate {tl.latency_ns:.1f} ns < the speed of light of the kernel's own work {sol.latency_ns:.1f} ns ({sol.bound})"
    )
    assert prof.fraction_of_sol is not None and prof.fraction_of_sol <= 1.0
    assert prof.roofline_us <= prof.latency_us
    return sol, tl.latency_ns


# ---------------------------------------------------------------------------------------------
# random legal kernels
# ---------------------------------------------------------------------------------------------
COLS = 8192
_P = st.sampled_from([1, 8, 16, 64, 128])
_F = st.sampled_from([8, 64, 256, 512, 1024, 2048, 4096])
_OPS = st.one_of(
    st.tuples(st.just("load"), st.sampled_from(["bfloat16", "float32"]), _P, _F, st.sampled_from([1, 2])),
    st.tuples(st.just("hbm_to_hbm"), _P, _F),
    st.tuples(st.just("store"), _P, _F),
    st.tuples(st.just("gather"), st.sampled_from([32, 128]), st.sampled_from([64, 512, 2048])),
    st.tuples(st.just("matmul"), st.booleans(), st.sampled_from([32, 128]), st.sampled_from([32, 128]),
              st.sampled_from([64, 128, 512]), st.integers(1, 4)),
    st.tuples(st.just("elementwise"), st.sampled_from(["add", "scale", "copy", "exp", "zero", "sum"]),
              st.sampled_from(["vector", "gpsimd"]), st.sampled_from(["bfloat16", "float32"]), _P, _F),
)


def random_kernel(ops: list[tuple[Any, ...]]) -> Any:
    """A kernel running ``ops`` in order on ``a32`` / ``a16`` [128, 8192]; tiles are fresh per op, so they may overlap."""
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a32, a16):
        out = nl.ndarray((128, COLS), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0:1, 0:8], src=a32[0:1, 0:8])  # every kernel writes its output
        for op in ops:
            kind = op[0]
            if kind == "load":
                _, dtype, p, f, step = op
                t = nl.ndarray((p, f), getattr(nl, dtype), buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=(a16 if dtype == "bfloat16" else a32)[0:p, 0 : f * step : step])
            elif kind == "hbm_to_hbm":
                _, p, f = op
                nisa.dma_copy(dst=out[0:p, 0:f], src=a32[0:p, 0:f])
            elif kind == "store":
                _, p, f = op
                t = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a32[0:p, 0:f])
                nisa.dma_copy(dst=out[0:p, COLS - f : COLS], src=t)
            elif kind == "gather":
                _, rows, cols = op
                fidx = nl.ndarray((rows, 1), nl.float32, buffer=nl.sbuf)
                nisa.iota(dst=fidx, pattern=[[0, 1]], offset=0, channel_multiplier=1)
                idx = nl.ndarray((rows, 1), nl.int32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=idx, src=fidx, engine=nisa.engine.vector)
                g = nl.ndarray((rows, cols), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=g, src=a32.ap([[COLS, rows], [1, cols]], offset=0, vector_offset=idx, indirect_dim=0))
            elif kind == "matmul":
                _, fp32, k, m, n, reps = op
                src, dtype = (a32, nl.float32) if fp32 else (a16, nl.bfloat16)
                s = nl.ndarray((k, m), dtype, buffer=nl.sbuf)
                v = nl.ndarray((k, n), dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=s, src=src[0:k, 0:m])
                nisa.dma_copy(dst=v, src=src[0:k, 0:n])
                acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
                for _ in range(reps):
                    nisa.nc_matmul(dst=acc, stationary=s, moving=v)
                res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=res, op=nl.exp, data=acc)
            else:
                _, what, engine, dtype, p, f = op
                eng = getattr(nisa.engine, engine)
                x = nl.ndarray((p, f), getattr(nl, dtype), buffer=nl.sbuf)
                y = nl.ndarray((p, f), getattr(nl, dtype), buffer=nl.sbuf)
                nisa.dma_copy(dst=x, src=(a16 if dtype == "bfloat16" else a32)[0:p, 0:f])
                if what == "add":
                    nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.add, engine=eng)
                elif what == "scale":
                    nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=0.5, engine=eng)
                elif what == "copy":
                    nisa.tensor_copy(dst=y, src=x, engine=eng)
                elif what == "exp":
                    nisa.activation(dst=y, op=nl.exp, data=x)
                elif what == "zero":
                    nisa.memset(dst=y, value=0.0, engine=eng)
                else:
                    r = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
                    nisa.tensor_reduce(dst=r, op=nl.add, data=x, axis=1)
        return out

    return kernel


_INPUTS = (np.random.default_rng(20).standard_normal((128, COLS)).astype(np.float32),)
_INPUTS = (_INPUTS[0], _INPUTS[0].astype(BF16))


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OPS, min_size=1, max_size=10), target=st.sampled_from(TARGETS))
def test_a_random_kernels_estimate_is_never_below_the_speed_of_light_of_its_own_work(ops: list[tuple[Any, ...]], target: str) -> None:
    trace = Trace()
    emu.run_kernel(random_kernel(ops), _INPUTS, target=target, trace=trace)
    _check_own_bound(trace, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("per_partition", [512, 2048, 4096, 16384, 65536])
def test_a_stream_of_large_dmas_reaches_but_never_beats_the_queues_peak(target: str, per_partition: int) -> None:
    """The issue's case: 16 KiB-per-partition transfers ran faster than the bound on trn2 (362 GB/s HBM vs 368 B/ns of queues)."""
    import nki.isa as nisa
    import nki.language as nl

    cols = per_partition // 4
    tiles = 8

    def stream(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in range(tiles):
            t = nl.ndarray((128, cols), a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, i * cols : (i + 1) * cols])
            nisa.dma_copy(dst=out[:, i * cols : (i + 1) * cols], src=t)
        return out

    trace = Trace()
    emu.run_kernel(stream, (emu.ShapeSpec((128, tiles * cols)),), target=target, trace=trace, timing_only=True)
    sol, latency = _check_own_bound(trace, target)
    if per_partition >= 16384:  # fixed costs amortised: within 20% of the bound
        assert latency <= 1.2 * sol.latency_ns


# ---------------------------------------------------------------------------------------------
# the calibration kernels
# ---------------------------------------------------------------------------------------------
def _calibration_runs() -> list[tuple[str, Any, tuple[Any, ...]]]:
    from tests.perf.kernels import layernorm, mamba, matmul_trn2

    rng = np.random.default_rng(3)
    mm = (rng.standard_normal((384, 256)).astype(BF16), rng.standard_normal((384, 1024)).astype(BF16))
    x = rng.standard_normal((300, 1000)).astype(np.float32)
    ln = (x, rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32))
    f32 = np.float32
    mb = (
        rng.uniform(0.01, 0.2, (1, 256, 512)).astype(f32),
        rng.standard_normal((1, 256, 512)).astype(f32),
        -rng.uniform(0.5, 2.0, (256, 4)).astype(f32),
        rng.standard_normal((1, 4, 512)).astype(f32),
        rng.standard_normal((1, 4, 512)).astype(f32),
    )
    runs: list[tuple[str, Any, tuple[Any, ...]]] = []
    for k in (matmul_trn2.matmul_sunk_single_buffer, matmul_trn2.matmul_psum_tiled_hoisted, matmul_trn2.matmul_psum_double_buffered,
              matmul_trn2.matmul_streaming):  # fmt: skip
        runs.append((k.__name__, k, mm))
    runs += [("layernorm_v1", layernorm.layernorm_v1, ln), ("layernorm_v2", layernorm.layernorm_v2, ln)]
    runs += [(k.__name__, k, mb) for k in (mamba.mamba_v1, mamba.mamba_v2, mamba.mamba_v3)]
    return runs


CALIBRATION = _calibration_runs()


@pytest.mark.parametrize("name, kernel, args", CALIBRATION, ids=[r[0] for r in CALIBRATION])
def test_a_calibration_kernels_estimate_is_never_below_the_speed_of_light_of_its_own_work(name: str, kernel: Any, args: tuple[Any, ...]) -> None:
    for target in TARGETS:
        trace = Trace()
        emu.run_kernel(kernel, args, target=target, trace=trace)
        _check_own_bound(trace, target)


@pytest.mark.parametrize("target", TARGETS)
def test_element_wise_work_on_every_engine_at_once_never_beats_the_bound(target: str) -> None:
    """Each engine at its fastest rule, in parallel: VectorE copying bf16 (4× on trn2/trn3), GpSimd zeroing
    bf16 (N/2 cycles), ScalarE applying an activation. A bound counting VectorE alone would be beaten."""
    import nki.isa as nisa
    import nki.language as nl

    def spread(a):
        out = nl.ndarray((128, 8), a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray((128, 4096), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        for _ in range(16):
            y = nl.ndarray((128, 4096), a.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=y, src=x, engine=nisa.engine.vector)
            z = nl.ndarray((128, 4096), a.dtype, buffer=nl.sbuf)
            nisa.memset(dst=z, value=0.0, engine=nisa.engine.gpsimd)
            w = nl.ndarray((128, 4096), a.dtype, buffer=nl.sbuf)
            nisa.activation(dst=w, op=nl.copy, data=x)
        nisa.dma_copy(dst=out, src=x[:, 0:8])
        return out

    trace = Trace()
    emu.run_kernel(spread, (emu.ShapeSpec((128, 4096), "bfloat16"),), target=target, trace=trace, timing_only=True)
    sol, _ = _check_own_bound(trace, target)
    assert sol.bound in ("element-wise engines", "transcendentals")


@pytest.mark.parametrize("target", TARGETS)
def test_no_matmul_or_dma_instruction_runs_faster_than_the_rates_of_the_bound(target: str) -> None:
    """Instruction by instruction: TensorE FLOPs × passes per ns never above ``pe_flops_per_ns`` (equal for
    128 × 128 × 512 bf16), DMA bytes per queue-ns never above the per-queue peak (equal from ``dma_full_chunk``)."""
    import nki.isa as nisa
    import nki.language as nl

    from nkiagent.perf.sol import matmul_passes

    spec = get_spec(target)

    def sweep(a32, a16):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        for src, dtype in ((a32, nl.float32), (a16, nl.bfloat16)):
            for k, m, n in ((128, 128, 512), (128, 128, 64), (64, 32, 128), (128, 64, 256), (32, 128, 512)):
                s = nl.ndarray((k, m), dtype, buffer=nl.sbuf)
                v = nl.ndarray((k, n), dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=s, src=src[0:k, 0:m])
                nisa.dma_copy(dst=v, src=src[0:k, 0 : 2 * n : 2])
                acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=acc, stationary=s, moving=v)
        for cols in (64, 1024, 4096, 8192):
            t = nl.ndarray((128, cols), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a32[:, 0:cols])
        nisa.dma_copy(dst=out, src=a32[:, 0:8])
        return out

    trace = Trace()
    emu.run_kernel(sweep, (emu.ShapeSpec((128, COLS)), emu.ShapeSpec((128, COLS), "bfloat16")), target=target, trace=trace,
                   timing_only=True)  # fmt: skip
    _, tl = profile_trace(trace, target)
    rates, per_queue = [], []
    for ins, c in zip(trace.instructions, tl.costs):
        if ins.op == "nc_matmul":
            rates.append(c.flops * matmul_passes(bool(ins.attrs.get("fp32")), bool(ins.attrs.get("onezero"))) / c.busy_ns)
        elif c.engine == "dma":
            per_queue.append(max(ins.reads[0].nbytes, c.hbm_read + c.hbm_write) / ((c.busy_ns - spec.dma_issue_ns) * c.queues))
    assert max(rates) == pytest.approx(spec.pe_flops_per_ns, rel=1e-12) and all(r <= spec.pe_flops_per_ns * (1 + 1e-12) for r in rates)
    assert max(per_queue) == pytest.approx(spec.dma_bytes_per_ns_per_queue, rel=1e-12)
    assert all(q <= spec.dma_bytes_per_ns_per_queue * (1 + 1e-12) for q in per_queue)
