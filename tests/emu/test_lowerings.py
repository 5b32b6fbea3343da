"""Every public ``nki.language`` function is declared once (:data:`nkiagent.emu.registry.LOWERINGS`), truthfully.

The completeness test lists the public ``nl`` functions and fails naming any without a
declaration; the per-function test (its ids list every declared function) runs the declared
example in a kernel and fails when it issues an instruction the declaration does not name, or
issues none where it names some (or some where it names none).
"""

from __future__ import annotations

import inspect
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import language
from nkiagent.emu.facade import api_module
from nkiagent.emu.registry import LOWERINGS, REGISTRY, lowering

PUBLIC = api_module("nki.language", language)
RNG = np.random.default_rng(3)
SRC = RNG.uniform(0.5, 1.5, (128, 64)).astype(np.float32)  # inside every activation's valid input range


def _public_functions() -> set[str]:
    return {n for n in PUBLIC.__all__ if inspect.isfunction(getattr(PUBLIC, n))}


def test_every_public_nl_function_is_declared() -> None:
    undeclared = sorted(_public_functions() - set(LOWERINGS))
    assert not undeclared, f"nki.language functions without a @lowering declaration: {undeclared}"
    assert set(LOWERINGS) == _public_functions(), f"declared but not public: {sorted(set(LOWERINGS) - _public_functions())}"


def _issued(example: str) -> list[str]:
    """The instructions the example issues, run in a kernel that has its operands: fp32 tiles ``x``, ``y``
    ([128, 64]) and ``col`` ([128, 1]), int32 tiles ``i``, ``j``, HBM ``src`` (an input) and ``dst`` (an output)."""
    where = f"<example of {example}>"
    code = compile(example, where, "eval")

    def k(src: Any) -> Any:
        x = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=src)
        y = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=x)
        col = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=col, op=nl.add, data=x, axis=(1,))
        i = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=i, pattern=[[1, 64]], offset=0, channel_multiplier=64)
        j = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=j, value=5)
        dst = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        eval(code, {"nl": nl}, {"x": x, "y": y, "col": col, "i": i, "j": j, "src": src, "dst": dst})
        nisa.dma_copy(dst=dst, src=x)  # (an output must be written, whatever the example did)
        return dst

    trace = emu.Trace()
    emu.run_kernel(nki.jit(k), (SRC,), trace=trace)
    return [ins.op for ins in trace if ins.location.startswith(where)]


@pytest.mark.parametrize("name", sorted(LOWERINGS))
def test_the_example_issues_only_the_declared_instructions(name: str) -> None:
    d = LOWERINGS[name]
    assert getattr(PUBLIC, name) is d.impl, "nki.language shows the declared function"
    assert d.summary and d.example.startswith(f"nl.{name}(")
    issued = _issued(d.example)
    undeclared = sorted(set(issued) - set(d.lowers_to))
    assert not undeclared, f"nl.{name}'s example issued {undeclared}, which its @lowering({', '.join(d.lowers_to)}) does not name"
    assert bool(issued) == bool(d.lowers_to), f"nl.{name}'s example issued {issued}; its declaration says {list(d.lowers_to) or 'none'}"


def test_a_lowering_declaration_is_refused_when_wrong() -> None:
    with pytest.raises(ValueError, match=r"^lowering to \['tensor_frobnicate'\]: no such nki.isa instruction is declared"):
        lowering("tensor_frobnicate", example="nl.x()")

    def add() -> None:
        """Twice."""

    with pytest.raises(ValueError, match=r"^nki.language.add is declared twice: in nkiagent.emu.language and "):
        lowering("tensor_tensor", example="nl.add(x, y)")(add)

    def undocumented() -> None:
        pass

    with pytest.raises(ValueError, match=r"^nki.language.undocumented \(.*\) has no docstring"):
        lowering(example="nl.undocumented()")(undocumented)

    def mislabelled() -> None:
        """An example that calls something else."""

    with pytest.raises(ValueError, match=r"^nki.language.mislabelled: its example 'nl.add\(x, y\)' must be a call of nl.mislabelled"):
        lowering(example="nl.add(x, y)")(mislabelled)
    assert not {"undocumented", "mislabelled"} & set(LOWERINGS)
    assert all(op in REGISTRY for d in LOWERINGS.values() for op in d.lowers_to)
