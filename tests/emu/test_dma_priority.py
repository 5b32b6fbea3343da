"""``priority=`` on ``dma_copy`` / ``dma_transpose`` is refused with a reason, never silently ignored (issue 20).

NKI documents the argument but not how DMA queues arbitrate between priorities, so the cost model
cannot honour it; accepting it would time a kernel as if the author had not asked for one.
"""

from __future__ import annotations

import inspect

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def copy_with_priority(x, priority):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, priority=priority)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def transpose_with_priority(x, priority):
    t = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x, priority=priority)
    out = nl.ndarray(t.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _line(fn, text: str) -> str:
    src, first = inspect.getsourcelines(fn)
    return f"{inspect.getsourcefile(fn)}:{first + next(i for i, s in enumerate(src) if text in s)}"


@pytest.mark.parametrize("kernel, op", [(copy_with_priority, "dma_copy"), (transpose_with_priority, "dma_transpose")])
def test_a_dma_priority_is_refused_with_where_and_what_to_do(kernel, op: str) -> None:
    with pytest.raises(emu.NkiValidationError) as info:
        emu.run_kernel(kernel, (X[:, :64] if op == "dma_copy" else X[:64, :64].copy(), 1), target="trn2")
    assert info.value.code == "err_dma_priority_not_modelled"
    assert info.value.message == (
        f"{op} priority=1 is not modelled: the emulator serves DMA queues without priorities (NKI does not document how they "
        "arbitrate), so it would be ignored; leave priority unset and order the DMAs by their dependences"
    )
    assert info.value.location == _line(kernel, f"nisa.{op}(")


def test_no_priority_copies_as_before() -> None:
    out = emu.run_kernel(copy_with_priority, (X, None), target="trn2").outputs
    np.testing.assert_array_equal(out, X)
