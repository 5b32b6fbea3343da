"""What the profile tells a model: the critical path and idle engines in the kernel's lines, advice that fits the task."""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path

import numpy as np

from nkiagent import emu
from nkiagent.perf import profile_trace
from nkiagent.perf.report import summary_text

HERE = __file__


def _line(fn, text: str) -> str:
    """``file:line`` of the first line of ``fn`` containing ``text``."""
    src, first = inspect.getsourcelines(fn)
    return f"{HERE}:{first + next(k for k, s in enumerate(src) if text in s)}"


def load_then_chain(x):
    """One big load, then a dependent chain on VectorE and ScalarE, then a store."""
    import nki.isa as nisa
    import nki.language as nl

    t = nl.ndarray((128, 4096), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)  # the big load
    u = nl.ndarray((128, 4096), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)  # VectorE
    v = nl.ndarray((128, 4096), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=v, op=nl.exp, data=u)  # ScalarE
    out = nl.ndarray((128, 4096), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=v)  # the store
    return out


def _profile(kernel, args, **kw):
    trace = emu.Trace()
    emu.run_kernel(kernel, args, target="trn2", trace=trace)
    return profile_trace(trace, "trn2", **kw)


def test_the_critical_path_runs_through_every_dependent_step_in_the_kernels_lines() -> None:
    prof, _ = _profile(load_then_chain, (np.ones((128, 4096), np.float32),))
    steps = prof.critical_path
    assert [(s["engine"], s["location"]) for s in steps] == [
        ("DMA", _line(load_then_chain, "the big load")),
        ("VectorE", _line(load_then_chain, "# VectorE")),
        ("ScalarE", _line(load_then_chain, "# ScalarE")),
        ("DMA", _line(load_then_chain, "the store")),
    ]
    assert [s["waits_for"] for s in steps] == ["start", "operands", "operands", "operands"]
    assert steps[0]["start_us"] == 0.0 and steps[-1]["end_us"] == prof.latency_us
    assert all(a["end_us"] <= b["start_us"] + 1e-3 for a, b in itertools.pairwise(steps))


def test_an_idle_engine_names_the_instruction_it_waits_for() -> None:
    prof, _ = _profile(load_then_chain, (np.ones((128, 4096), np.float32),))
    vec = next(g for g in prof.idle_gaps if g["engine"] == "VectorE")
    assert vec["start_us"] == 0.0 and vec["count"] == 1
    assert vec["waiting_for"].startswith(f"dma_copy at {_line(load_then_chain, 'the big load')} (DMA)")
    text = summary_text(prof)
    assert f"VectorE idle 0.00–{vec['end_us']:.2f} µs waiting for dma_copy at {_line(load_then_chain, 'the big load')}" in text
    assert len(text.splitlines()) <= 40


def fp32_matmuls(a, b):
    import nki.isa as nisa
    import nki.language as nl

    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    for _ in nl.affine_range(64):
        nisa.nc_matmul(dst=p, stationary=s, moving=m)
    r = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_advice_never_suggests_a_precision_the_task_forbids() -> None:
    args = (np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))
    free, _ = _profile(fp32_matmuls, args)
    assert any(a.startswith("fp32 matmul") for a in free.advice)
    strict, _ = _profile(fp32_matmuls, args, precision="float32")
    assert not any("bfloat16" in a or a.startswith("fp32 matmul") for a in strict.advice)
    assert strict.advice  # never an empty section
    # where the task allows bf16 the advice says so: a trial model took fp32 inputs for an fp32 requirement and ignored it
    allowed, _ = _profile(fp32_matmuls, args, precision="bfloat16")
    assert any(a.startswith("fp32 matmul") and "(this task's tolerance allows bf16 operands)" in a for a in allowed.advice)


def test_advice_is_never_empty_and_never_repeats() -> None:
    for kernel, args in (
        (load_then_chain, (np.ones((128, 4096), np.float32),)),
        (fp32_matmuls, (np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))),
    ):
        for precision in ("bfloat16", "float32"):
            prof, _ = _profile(kernel, args, precision=precision)
            assert prof.advice and len(prof.advice) == len(set(prof.advice))


def test_a_tasks_tolerance_decides_whether_bf16_may_be_advised() -> None:
    from dataclasses import replace

    from nkiagent.tasks import get_task

    assert get_task("layernorm").precision_floor == "float32"  # rtol 1e-4: bf16's 0.4% rounding would fail it
    assert get_task("attention").precision_floor == "bfloat16"  # relative L2 1e-2
    assert replace(get_task("attention"), precision="float32").precision_floor == "float32"


def test_a_short_summary_keeps_every_line_of_advice() -> None:
    prof, _ = _profile(fp32_matmuls, (np.ones((128, 128), np.float32), np.ones((128, 512), np.float32)))
    assert len(prof.advice) >= 2
    for max_lines in (16, 20, 40):  # the header (latency, bounds, engines, traffic) takes about ten
        text = summary_text(prof, max_lines=max_lines)
        assert len(text.splitlines()) <= max_lines
        assert all(f"  - {a}" in text for a in prof.advice), max_lines


def test_the_bottleneck_engines_waits_are_advice_naming_what_it_waited_for() -> None:
    import importlib.util

    from nkiagent.tasks import get_task

    task = get_task("softmax")
    spec = importlib.util.spec_from_file_location("softmax_baseline", task.baseline_path())
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    x = np.random.default_rng(0).standard_normal((1024, 2048)).astype(np.float32)
    prof, _ = _profile(module.kernel, (x,))
    advice = next(a for a in prof.advice if a.startswith("VectorE limits the kernel but stands idle"))
    # the scheduler overlaps one tile's exp (ScalarE) with the neighbouring tiles' VectorE steps, so
    # VectorE's longest wait is the pipeline's fill: the first tile's load
    load = next(i for i, line in enumerate(Path(str(task.baseline_path())).read_text().splitlines(), 1) if "nisa.dma_copy(dst=xt" in line)
    assert f" µs for dma_copy at {task.baseline_path()}:{load} (DMA)" in advice


def _k_tiles(a, b, accumulate_on_vector: bool):
    """Eight K tiles through one PSUM tile: summed on VectorE (acc += psum, one evacuation each) or multiplied in (acc *= psum)."""
    import nki.isa as nisa
    import nki.language as nl

    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    m = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for _ in nl.affine_range(8):
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=s, moving=m)
        if accumulate_on_vector:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=p, op=nl.add)
        else:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=p, op=nl.multiply)  # a PSUM-parked operand multiplied in place
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_k_blocking_advice_only_for_matmul_results_summed_on_vectore() -> None:
    import ml_dtypes

    args = (np.ones((128, 128), ml_dtypes.bfloat16), np.ones((128, 512), ml_dtypes.bfloat16))

    def summed(a, b):
        return _k_tiles(a, b, True)

    def copied(a, b):
        return _k_tiles(a, b, False)

    assert any(a.startswith("PSUM evacuation: 8 VectorE") for a in _profile(summed, args)[0].advice)
    assert not any(a.startswith("PSUM evacuation") for a in _profile(copied, args)[0].advice)


def _kernel_and_inputs(kernel_file, task_name: str):
    """A kernel file's ``kernel`` and the task's visible inputs (seed 0, normal)."""
    import importlib.util

    from nkiagent.sandbox.arrays import make_inputs
    from nkiagent.tasks import get_task

    task = get_task(task_name)
    spec = importlib.util.spec_from_file_location(f"kernel_{task_name}", kernel_file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.kernel, tuple(make_inputs(task, task.dims, 0, "normal"))


def _task_profile(kernel_file, task_name: str):
    return _profile(*_kernel_and_inputs(kernel_file, task_name))[0]


def test_engine_balance_is_advised_only_where_a_compute_engine_is_busier_than_the_dma_queues() -> None:
    """Moving element-wise work between engines cannot lower a latency the DMA queues' busy time already sets."""
    from pathlib import Path

    from nkiagent.tasks import get_task

    vector_bound = _task_profile(get_task("rmsnorm").baseline_path(), "rmsnorm")  # VectorE 95%, ScalarE 1%
    assert vector_bound.bottleneck == "compute-bound (VectorE)"
    assert any(a.startswith("engine balance: VectorE is 95% busy") for a in vector_bound.advice)
    dma_bound = _task_profile(Path(HERE).parent / "kernels" / "rmsnorm_prefetch.py", "rmsnorm")
    assert dma_bound.bottleneck == "memory-bound (DMA)"
    assert dma_bound.engines["VectorE"].active_pct > 70 and dma_bound.engines["DMA"].active_pct > 95
    assert not any(a.startswith("engine balance") for a in dma_bound.advice), dma_bound.advice


def _verifier_profile(kernel_file, task_name: str):
    """The profile the verifier shows a model: with the task's speed of light, so the minimum-traffic advice can fire."""
    from nkiagent.tasks import get_task
    from nkiagent.verify.verifier import _profile as verifier_profile

    task = get_task(task_name)
    trace = emu.Trace()
    emu.run_kernel(*_kernel_and_inputs(kernel_file, task_name), target="trn2", trace=trace)
    return verifier_profile(trace, task, "trn2", dict(task.dims))


def test_a_kernel_whose_dma_queues_never_rest_is_not_told_to_split_its_tiles() -> None:
    """At the task's minimum traffic with DMA 99% busy, the tail after the last compute is queued stores: splitting them only slows it."""
    from pathlib import Path

    prof = _verifier_profile(Path(HERE).parent / "kernels" / "rmsnorm_split_rows.py", "rmsnorm")
    assert prof.bottleneck == "memory-bound (DMA)" and prof.engines["DMA"].active_pct > 98
    assert not any(a.startswith("DMA-bound at the task's minimum traffic") for a in prof.advice), prof.advice
    assert prof.advice[0].startswith("no advice: the kernel is at 97.6% of its speed of light")


def test_dmas_below_the_curves_full_rate_are_small_dmas_in_the_advice() -> None:
    """2 KiB per partition runs at 70% in the cost model: the advice names them, with the size that reaches full rate."""
    from pathlib import Path

    from nkiagent.tasks import get_task

    tutorial = _verifier_profile(get_task("vector_add").baseline_path(), "vector_add")  # 512 fp32 = 2 KiB per partition
    advice = next(a for a in tutorial.advice if a.startswith("small DMAs"))
    assert "96 of 96 DMAs move contiguous chunks < 4 KiB per partition" in advice
    assert "use ≥ 4 KiB per partition per transfer (1024 fp32 / 2048 bf16 elements)" in advice and "2 KiB at 70%" in advice
    whole_rows = _verifier_profile(Path(HERE).parent / "kernels" / "rmsnorm_prefetch.py", "rmsnorm")  # 8 KiB rows
    assert not any(a.startswith("small DMAs") for a in whole_rows.advice)


def dma_transposes(x):
    """A transpose from HBM, then one of an on-chip tile, each stored."""
    import nki.isa as nisa
    import nki.language as nl

    a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.dma_transpose(dst=a, src=x, axes=(1, 0))  # from HBM
    b = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.dma_transpose(dst=b, src=a, axes=(1, 0))  # on chip
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b)
    return out


def from_hbm_only(x):
    """A transpose from HBM, stored."""
    import nki.isa as nisa
    import nki.language as nl

    a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.dma_transpose(dst=a, src=x, axes=(1, 0))
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def test_dma_transpose_advice_only_where_the_cost_model_makes_them_slow() -> None:
    """From HBM on trn2 a DMA transpose runs at 90% of a copy's rate: advising TensorE's route (which adds a PSUM
    copy) misled a trial model for seven turns. On chip (half rate) and on trn1 (element-sized runs) it is slow."""
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)

    def advice(kernel, target: str) -> list[str]:
        trace = emu.Trace()
        emu.run_kernel(kernel, (x,), target=target, trace=trace)
        return [a for a in profile_trace(trace, target)[0].advice if a.startswith("DMA transposes")]

    assert advice(from_hbm_only, "trn2") == []
    assert advice(dma_transposes, "trn2") == [
        (
            "DMA transposes: 1 dma_transpose/load_transpose2d instructions on the critical path from on-chip memory run at half a "
            "copy's DMA rate; load normally and transpose on TensorE (nc_transpose) — Opt #10"
        )
    ]
    assert [a.split(" on the critical path ")[1].split(";")[0] for a in advice(from_hbm_only, "trn1")] == [
        "run at the element size's DMA efficiency on trn1"
    ]
