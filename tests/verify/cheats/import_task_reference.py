"""CHEAT: import the task module and call its reference
ROW: A4
TASK: softmax
EXPECT: rejected
REASON: static gate [forbidden-import]

The kernel "subclasses" the reference: it imports the builtin task file and returns the
reference's answer, computed on the host from the inputs' private storage. A candidate
may import only NKI, NumPy and harmless standard modules, never nkiagent or the task.
"""

import nki
import nki.language as nl

from nkiagent.tasks.builtin.softmax import reference


@nki.jit
def kernel(x):
    return nl.shared_constant(reference(x._a.data.reshape(x.shape)))
