"""The precision a task's matmuls need is what its tolerance forces, shown on its own inputs.

The speed of light prices a task's matmul FLOPs at TensorE's bf16 rate unless the task declares
them ``fp32_flops``; a bound too high would reject honest kernels, one too low is merely loose.
So each declaration is checked here against the task's reference and tolerance: a task whose
reference survives bf16-rounded inputs on every input distribution declares no fp32 FLOPs (its
kernels may cast to bf16), and one that declares them fails with bf16 inputs. For attention, the
cheapest fp32-accurate scheme the speed of light assumes (``FP32_ACCURATE_PASSES`` bf16 passes:
hi·hi + hi·lo + lo·hi) passes and the two-pass one fails.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkiagent.perf.sol import FP32_ACCURATE_PASSES
from nkiagent.sandbox.arrays import make_inputs
from nkiagent.tasks import builtin_tasks, get_task
from nkiagent.verify.compare import compare

MATMUL_TASKS = sorted(name for name, t in builtin_tasks().items() if t.flops)


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


def test_the_matmul_tasks_are_the_ones_expected() -> None:
    assert MATMUL_TASKS == ["attention", "bmm", "causal_attention", "matmul", "rmsnorm_matmul", "swiglu"]


@pytest.mark.parametrize("name", MATMUL_TASKS)
def test_a_task_declares_fp32_flops_exactly_when_bf16_inputs_fail_its_tolerance(name: str) -> None:
    task = get_task(name)
    failures = []
    for dist in task.distributions:
        inputs = make_inputs(task, task.dims, 0, dist)
        ref = task.reference(*inputs)
        rounded = task.reference(*[_bf16(x).astype(x.dtype) if x.dtype.kind == "f" else x for x in inputs])
        if not compare(np.asarray(rounded, np.float32), ref, task.tolerance).ok:
            failures.append(dist)
    if task.fp32_flops is None:
        assert failures == [], f"{name}: bf16 inputs fail {failures}, yet the task declares no fp32 FLOPs"
    else:
        assert failures, f"{name} declares fp32 FLOPs, but bf16-rounded inputs pass every distribution"
        assert 0 < task.fp32_flops(task.dims) <= task.flops(task.dims)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, passes: int, causal: bool) -> np.ndarray:
    """Attention with the scores from ``passes`` bf16 matmuls (1: hi·hi, 2: + lo·hi, 3: + hi·lo), bf16 P and v."""
    qh, kh = _bf16(q), _bf16(k)
    ql, kl = _bf16(q - qh), _bf16(k - kh)
    terms = [(qh, kh), (ql, kh), (qh, kl)][:passes]
    s = sum(a @ b.T for a, b in terms) / np.sqrt(q.shape[1])
    if causal:
        s[np.triu_indices(s.shape[0], 1)] = -np.inf
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (_bf16(p) @ _bf16(v) / p.sum(axis=-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("name", ["attention", "causal_attention"])
def test_attention_scores_need_three_bf16_passes_and_three_are_enough(name: str) -> None:
    task = get_task(name)
    q, k, v = make_inputs(task, task.dims, 0, "large")
    ref = task.reference(q, k, v)
    ok = {n: compare(_attention(q, k, v, n, name == "causal_attention"), ref, task.tolerance).ok for n in (1, 2, 3)}
    assert ok == {1: False, 2: False, 3: True}
    assert FP32_ACCURATE_PASSES == 3
