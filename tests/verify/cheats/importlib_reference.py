"""CHEAT: load the task through importlib and reuse its reference
ROW: A1, A4
TASK: rmsnorm
EXPECT: rejected
REASON: static gate [forbidden-import]

Same shortcut as a plain import, hidden behind ``importlib.import_module`` with a string
built at run time so a naive import scan does not see ``nkiagent``.
"""

import importlib

import nki
import nki.language as nl

_PKG = ".".join(["nkiagent", "tasks", "loader"])


@nki.jit
def kernel(x, weight):
    task = importlib.import_module(_PKG).get_task("rmsnorm")
    host = task.reference(x._a.data.reshape(x.shape), weight._a.data.reshape(weight.shape))
    return nl.shared_constant(host)
