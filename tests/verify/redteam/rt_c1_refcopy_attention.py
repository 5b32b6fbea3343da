"""EXPLOIT: arbitrary Python (singledispatch string annotation) copies the reference output from the worker's input cache into the kernel's output; the kernel itself computes nothing
CLASS: 1
TASK: attention
EXPECT: rejected
REASON: compiling or running code built at run time

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 12.511, baseline_latency_us 85.72, first reason: none (same file without the payload: fail, relative L2 error 1; baseline 85.72 us)

The payload (run through ``functools.singledispatch.register`` evaluating a string
annotation, which the static gate does not look into) finds the worker's ``_serve`` frame
with ``inspect.stack()``, reads ``run["input_paths"]`` (``.../in_<case>_<i>.npy``), loads
``ref_<case>.npy`` from the same cache directory and writes it into the output allocation's
NumPy storage (``out._a.data``).  No instruction is recorded for that write.  The recorded
kernel only loads q, k, v once with 4 KiB-per-partition DMAs, runs 34 bf16 matmuls on a
zeroed tile (so the trace's TensorE time sits just above the task's speed of light, which the
verifier enforces as a floor) and stores a zero tile.  All 45 correctness cases, the
determinism rerun and the inputs-unchanged check pass, because the numbers are the
reference's own.  Honest twin = the same file without the payload (wrong answer), and the
baseline (85.72 us).
"""

import functools

import nki
import nki.isa as nisa
import nki.language as nl

PAYLOAD = r'''
import os, inspect
import numpy as _np
_st = inspect.stack()
_run = [f for f in _st if f.function == "_serve"][0].frame.f_locals["run"]
_out = [f for f in _st if f.function == "kernel"][0].frame.f_locals["out"]
_p = _run["input_paths"][0]
_case = os.path.basename(_p).split("_")[1]
_ref = _np.load(os.path.join(os.path.dirname(_p), "ref_%s.npy" % _case))
_out._a.data[...] = _ref.reshape(-1)
'''


def _hook(x: "exec(PAYLOAD) or type('T', (), {})"):
    pass


@functools.singledispatch
def _dispatch(x):
    return x


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    rows = s_dim // 128
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for src in (q, k, v):
        t = nl.ndarray((128, rows * d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src.ap(pattern=[[rows * d_dim, 128], [1, rows * d_dim]], offset=0))
    st = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    mv = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=st, value=0.0)
    nisa.memset(dst=mv, value=0.0)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(34):
        nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
    o = nl.ndarray((128, rows * d_dim), dtype=nl.float32, buffer=nl.sbuf)
    w = min(512, rows * d_dim)
    nisa.tensor_copy(dst=o[:, 0:w], src=acc[:, 0:w])
    nisa.memset(dst=o, value=0.0)
    nisa.dma_copy(dst=out.ap(pattern=[[rows * d_dim, 128], [1, rows * d_dim]], offset=0), src=o)
    _dispatch.register(_hook)  # PAYLOAD: out <- ref_<case>.npy
    return out
