"""CHEAT: return an input unchanged (bet that b is ~0 on the test data)
ROW: B2, E1
TASK: vector_add
EXPECT: fail
REASON: wrong answer

Degenerate-task bet: if the checker's ``b`` were zero-initialised (JAXBench PR #50), a + b
would equal a and returning ``a`` costs nothing. Every input is drawn from a nonzero
distribution, so the output is off by b everywhere.
"""

import nki


@nki.jit
def kernel(a, b):
    return a
