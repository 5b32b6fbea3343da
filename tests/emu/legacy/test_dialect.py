"""The legacy front-end patches nothing at import: each run holds its dialect, so import order changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from nkiagent.emu import tensor
from nkiagent.emu.dialect import MODERN

#: Runs a 0.1 kernel (index grids, a 0.1 tile method, operators dispatching to the 0.1 nl) and
#: a 0.3 kernel that tries the 0.1 tile method, after importing the front-ends in the order given.
SCRIPT = textwrap.dedent("""
    import importlib, json, sys
    for name in sys.argv[1].split(","):
        importlib.import_module(name)
    import numpy as np
    from nkiagent import emu
    emu.install(force=True)
    import neuronxcc.nki as lnki, neuronxcc.nki.language as lnl
    import nki, nki.language as nl

    @lnki.jit
    def legacy(a):
        out = lnl.ndarray((4, 8), a.dtype, buffer=lnl.shared_hbm)
        i_p, i_f = lnl.arange(4)[:, None], lnl.arange(8)[None, :]
        t = lnl.load(a[i_p, i_f])
        col = lnl.load(a[0:4, 6:7])
        lnl.store(out[i_p, i_f], value=t * 2.0 + col.broadcast_to((4, 8)))
        return out

    @nki.jit
    def modern(a):
        t = nl.load(a)
        return t.broadcast_to((4, 8))

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = emu.run_kernel(legacy, (a,), api="0.1").outputs
    try:
        emu.run_kernel(modern, (a,))
        modern_error = None
    except AttributeError as e:
        modern_error = str(e)
    print(json.dumps({"legacy": np.asarray(got).tolist(), "modern": modern_error}))
""")


def _run(order: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, order], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_front_ends_in_either_order_behaves_the_same() -> None:
    first = _run("nkiagent.emu.legacy,nkiagent.emu.nki")
    assert first == _run("nkiagent.emu.nki,nkiagent.emu.legacy")
    a = [[8 * r + c for c in range(8)] for r in range(4)]
    assert first["legacy"] == [[2.0 * v + a[r][6] for v in a[r]] for r in range(4)]
    assert first["modern"] == "'NkiTensor' object has no attribute 'broadcast_to'"


def test_the_tensor_module_holds_no_front_end_hooks() -> None:
    assert not {"index_hook", "slice_hook", "assign_hook", "attr_hook", "legacy_ops"} & set(vars(tensor))
    assert tensor._dialect() is MODERN  # outside a kernel
