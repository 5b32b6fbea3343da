"""CHEAT: forge the worker's answer on the result pipe, then exit
ROW: D1
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

pygpubench's fd overwrite: write a fake "all runs passed" answer to the harness's result
descriptor (the worker's argv names it) and leave with ``os._exit`` before the real answer.
"""

import json
import os
import sys

import nki

_FAKE = {"compiled": True, "runs": [], "nonce": ""}


@nki.jit
def kernel(a, b):
    os.write(int(sys.argv[1]), json.dumps(_FAKE).encode())
    os._exit(0)
