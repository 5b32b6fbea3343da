"""Every op runs only on the engines the NKI ISA gives it, and the trace records the engine it ran on.

The expected engines are written out here from the AWS docs (independently of
:data:`nkiagent.emu.engines.ENGINES`, which must agree); every op with an ``engine=``
parameter is tried with every ``nisa.engine`` member on trn1 and trn2, in the 0.3 API and
the 0.1 one: an allowed engine computes the right numbers and is the engine in the trace,
any other is refused with ``err_unsupported_engine`` at the kernel's line.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import NkiError, engines, isa
from nkiagent.emu.legacy import isa as legacy_isa
from nkiagent.emu.registry import REGISTRY

MEMBERS = ("tensor", "vector", "scalar", "gpsimd", "dma", "sync")
TARGETS = {"trn1": 2, "trn2": 3}

#: The engines per op with an ``engine=`` parameter, per NeuronCore generation, from the ISA pages
#: (tensor_copy v2.28.1 "Supported engines: NeuronCore v2: Vector, GpSimd; v3+: Vector, Scalar, GpSimd";
#: tensor_scalar on ScalarE: add/multiply only from NeuronCore-v3, tbl-aluop).
DOCUMENTED = {
    "tensor_tensor": {2: ("vector", "gpsimd"), 3: ("vector", "gpsimd")},
    "tensor_scalar": {2: ("vector", "gpsimd"), 3: ("vector", "scalar", "gpsimd")},
    "tensor_copy": {2: ("vector", "gpsimd"), 3: ("vector", "scalar", "gpsimd")},
    "memset": {2: ("vector", "gpsimd"), 3: ("vector", "gpsimd")},
    "nc_transpose": {2: ("tensor", "vector"), 3: ("tensor", "vector")},
}
#: The single engine of every other instruction.
SINGLE = {
    "nc_matmul": "tensor", "activation": "scalar", "activation_reduce": "scalar", "tensor_reduce": "vector",
    "tensor_tensor_scan": "vector", "scalar_tensor_tensor": "vector", "tensor_scalar_reduce": "vector",
    "tensor_scalar_cumulative": "vector", "tensor_copy_predicated": "vector", "bn_stats": "vector", "bn_aggr": "vector",
    "reciprocal": "vector", "exponential": "vector", "dropout": "vector", "select_reduce": "vector", "range_select": "vector",
    "max8": "vector", "nc_find_index8": "vector", "nc_match_replace8": "vector", "nc_stream_shuffle": "vector",
    "tensor_partition_reduce": "gpsimd", "iota": "gpsimd", "affine_select": "gpsimd", "local_gather": "gpsimd",
    "nc_n_gather": "gpsimd", "dma_copy": "dma", "dma_transpose": "dma", "register_alloc": "sync", "register_move": "sync",
    "register_load": "sync", "register_store": "sync", "nonzero_with_count": "gpsimd", "sendrecv": "dma", "core_barrier": "gpsimd",
    "sequence_bounds": "gpsimd",
}  # fmt: skip
HINTS = {"tensor_copy": "; on trn1 copy on ScalarE with nisa.activation(op=nl.copy)"}
X = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)


def _instructions(module: Any) -> set[str]:
    """The instructions a module defines: its public functions, less the one query that is not an instruction."""
    return {
        n for n, f in vars(module).items()
        if inspect.isfunction(f) and not n.startswith("_") and f.__module__.startswith("nkiagent.emu.instructions.")
    } - {"get_nc_version"}  # fmt: skip


#: Where the functions of each API's ``isa`` namespace are defined.
_DEFINED_IN = {"nkiagent.emu.isa": "nkiagent.emu.instructions.", "nkiagent.emu.legacy.isa": "nkiagent.emu.legacy.isa"}


def _takes_engine(module: Any) -> set[str]:
    """The instructions of ``module`` (0.3 ``isa`` or the 0.1 front-end) with an ``engine`` parameter."""
    return {
        n for n, f in vars(module).items()
        if inspect.isfunction(f) and f.__module__.startswith(_DEFINED_IN[module.__name__]) and "engine" in inspect.signature(f).parameters
    }  # fmt: skip


def test_the_table_lists_every_instruction_and_nothing_else() -> None:
    assert set(engines.ENGINES) == _instructions(isa) == set(DOCUMENTED) | set(SINGLE)


def test_every_op_taking_engine_is_tested_here() -> None:
    """A new op with ``engine=`` (either API) must get a row in DOCUMENTED, so the tests below try it."""
    # dma_copy's engine is the DGE trigger (test_dma_copy_*); core_barrier runs only inside an LNC launch (tests/emu/test_lnc.py)
    assert _takes_engine(isa) - {"dma_copy", "core_barrier"} == set(DOCUMENTED)
    assert _takes_engine(legacy_isa) == set(DOCUMENTED)


@pytest.mark.parametrize("op", sorted(DOCUMENTED))
@pytest.mark.parametrize("version", sorted(TARGETS.values()))
def test_table_rows_are_the_documented_engines(op: str, version: int) -> None:
    assert engines.allowed_on(op, version) == DOCUMENTED[op][version]


@pytest.mark.parametrize("op", sorted(SINGLE))
def test_single_engine_rows(op: str) -> None:
    assert engines.ENGINES[op].engines == (SINGLE[op],)


def _emu_sources() -> list[Path]:
    root = Path(engines.__file__).parent
    families = [p for p in sorted((root / "instructions").glob("*.py")) if p.stem not in ("__init__", "common")]
    return families + [root / "language.py", root / "ops.py"]


def _recorded(path: Path) -> list[tuple[str | None, str, int]]:
    """``(op, engine, line)`` of every ``record(ctx, op, "engine", …)`` with a literal engine.

    The op is a literal, a local constant (``op = "iota"``) or, in a helper, its first parameter:
    then every literal the module passes there (``_activation("activation", …)``).
    """
    tree = ast.parse(path.read_text())
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    found: list[tuple[str | None, str, int]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        consts = {t.id: [a.value.value] for a in ast.walk(fn) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Constant)
                  for t in a.targets if isinstance(t, ast.Name) and isinstance(a.value.value, str)}  # fmt: skip
        if fn.args.args:
            consts.setdefault(fn.args.args[0].arg, [c.args[0].value for c in calls if c.func.id == fn.name and c.args
                                                   and isinstance(c.args[0], ast.Constant)])  # fmt: skip
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "record" and len(call.args) >= 3:
                op_arg, eng_arg = call.args[1], call.args[2]
                ops = [op_arg.value] if isinstance(op_arg, ast.Constant) else consts.get(getattr(op_arg, "id", ""), []) or [None]
                if isinstance(eng_arg, ast.Constant):
                    found.extend((op, eng_arg.value, call.lineno) for op in ops)
    return found


@pytest.mark.parametrize("path", _emu_sources(), ids=lambda p: p.name)
def test_every_literal_engine_in_a_record_is_in_the_table(path: Path) -> None:
    """Ops without ``engine=`` name their engine in the source: it must be the table's."""
    recorded = _recorded(path)
    assert recorded, "no record() calls found: the scan is broken"
    wrong = [(op, eng, line) for op, eng, line in recorded if op not in engines.ENGINES or eng not in engines.ENGINES[op].engines]
    assert not wrong, f"{path.name}: (op, engine, line) recorded on an engine the table does not allow: {wrong}"


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_every_registered_op_refuses_every_engine_its_declaration_lacks(op: str, target: str) -> None:
    """The engine check itself, for each op and each ``nisa.engine`` member the ISA does not give it there.

    Ops with ``engine=`` reach it from kernels (``test_engine_choice`` below); the others take no
    ``engine=`` (a kernel passing one gets Python's TypeError, as with AWS's signatures) and record
    their one engine, which ``test_every_literal_engine_in_a_record_is_in_the_table`` checks.
    """
    allowed = engines.allowed_on(op, TARGETS[target])
    refused = [m for m in MEMBERS if m not in allowed]
    assert refused, f"{op} allows every engine"

    def k(x: Any, member: str) -> Any:
        engines.select(op, getattr(nisa.engine, member), allowed[0])
        return x

    for member in refused:
        with pytest.raises(emu.NkiValidationError) as info:
            emu.run_kernel(nki.jit(k), (X, member), target=target)
        where = f" on {target} (NeuronCore-v{TARGETS[target]})" if member in REGISTRY[op].engines else ""
        assert (info.value.code, info.value.message) == (
            "err_unsupported_engine",
            (
                f"Expected '{op}' to run on engine '{'|'.join(allowed)}'{where}, but got engine '{member}' instead; pass "
                f"{' or '.join(f'engine=nisa.engine.{e}' for e in allowed)}, or leave engine unset{REGISTRY[op].placement.hint}"
            ),
        )


# --------------------------------------------------------------------------------------------
# Every engine, on every op that takes engine=
# --------------------------------------------------------------------------------------------
def _issue_03(op: str, eng: Any) -> tuple[Any, np.ndarray]:
    """A 0.3 kernel running ``op`` on ``eng`` (operands every allowed engine can use), and its expected output."""

    def k(x: Any) -> Any:
        a = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        r = nl.ndarray((32, 32), nl.float32, buffer=nl.psum if op == "nc_transpose" else nl.sbuf)
        if op == "tensor_tensor":
            nisa.tensor_tensor(dst=r, data1=a, data2=a, op=nl.add, engine=eng)  # <- op
        elif op == "tensor_scalar":
            nisa.tensor_scalar(dst=r, data=a, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0, engine=eng)  # <- op
        elif op == "tensor_copy":
            nisa.tensor_copy(dst=r, src=a, engine=eng)  # <- op
        elif op == "memset":
            nisa.memset(dst=r, value=3.0, engine=eng)  # <- op
        else:
            nisa.nc_transpose(dst=r, data=a, engine=eng)  # <- op
        s = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=r)
        out = nl.ndarray((32, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out

    return nki.jit(k), _expected(op)


def _issue_01(op: str, eng: Any) -> tuple[Any, np.ndarray]:
    """The same in the 0.1 API, where each instruction returns its result."""

    def k(x: Any) -> Any:
        a = lnl.load(x)
        if op == "tensor_tensor":
            r = lisa.tensor_tensor(a, a, np.add, engine=eng)  # <- op
        elif op == "tensor_scalar":
            r = lisa.tensor_scalar(a, np.multiply, 2.0, op1=np.add, operand1=1.0, engine=eng)  # <- op
        elif op == "tensor_copy":
            r = lisa.tensor_copy(a, engine=eng)  # <- op
        elif op == "memset":
            r = lisa.memset((32, 32), 3.0, lnl.float32, engine=eng)  # <- op
        else:
            r = lisa.nc_transpose(a, engine=eng)  # <- op
        out = lnl.ndarray((32, 32), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, value=lnl.copy(r))
        return out

    return legacy_nki.jit(k), _expected(op)


def _expected(op: str) -> np.ndarray:
    return {"tensor_tensor": X + X, "tensor_scalar": X * 2 + 1, "tensor_copy": X, "memset": np.full_like(X, 3.0), "nc_transpose": X.T}[op]


ISSUERS: dict[str, Callable[[str, Any], tuple[Any, np.ndarray]]] = {"0.3": _issue_03, "0.1": _issue_01}


def _op_line(issuer: Callable[..., Any], op: str) -> str:
    """``file:line`` of the line in ``issuer`` that calls ``op`` (marked ``# <- op``)."""
    lines, start = inspect.getsourcelines(issuer)
    (hit,) = [start + i for i, text in enumerate(lines) if "# <- op" in text and f".{op}(" in text]
    return f"{__file__}:{hit}"


def _run(kernel: Any, target: str, api: str) -> tuple[np.ndarray, emu.Trace]:
    trace = emu.Trace()
    out = emu.run_kernel(kernel, (X,), target=target, trace=trace, api=api).outputs
    return np.asarray(out), trace


@pytest.mark.parametrize("api", sorted(ISSUERS))
@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("op", sorted(DOCUMENTED))
def test_engine_choice(op: str, member: str, target: str, api: str) -> None:
    """An allowed engine runs the op there (right numbers, that engine in the trace); any other is refused."""
    kernel, expected = ISSUERS[api](op, getattr(nisa.engine, member))
    allowed = DOCUMENTED[op][TARGETS[target]]
    if member in allowed:
        out, trace = _run(kernel, target, api)
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        line = _op_line(ISSUERS[api], op)
        assert [i.engine for i in trace if i.op == op and i.location == line] == [member]
        return
    with pytest.raises(emu.NkiValidationError) as info:
        _run(kernel, target, api)
    err = info.value
    where = f" on {target} (NeuronCore-v{TARGETS[target]})" if member in DOCUMENTED[op][3] else ""
    choices = " or ".join(f"engine=nisa.engine.{e}" for e in allowed)
    assert err.code == "err_unsupported_engine"
    assert err.message == (
        f"Expected '{op}' to run on engine '{'|'.join(allowed)}'{where}, but got engine '{member}' instead; "
        f"pass {choices}, or leave engine unset{HINTS.get(op, '')}"
    )
    assert err.location == _op_line(ISSUERS[api], op)


@pytest.mark.parametrize("api", sorted(ISSUERS))
@pytest.mark.parametrize("op", sorted(DOCUMENTED))
def test_unknown_engine_is_the_default(op: str, api: str) -> None:
    kernel, expected = ISSUERS[api](op, nisa.engine.unknown)
    out, trace = _run(kernel, "trn2", api)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    default = "tensor" if op == "nc_transpose" and api == "0.3" else "vector"  # (0.3's dst is PSUM; 0.1 picks VectorE for ≤ 32×32)
    assert [i.engine for i in trace if i.op == op and i.location == _op_line(ISSUERS[api], op)] == [default]


@pytest.mark.parametrize(("op", "dtype", "engine"), [("add", np.int32, "gpsimd"), ("multiply", np.uint32, "gpsimd"), ("maximum", np.int32, "vector"),
                                                      ("power", np.float32, "gpsimd"), ("add", np.float32, "vector")])  # fmt: skip
def test_alu_default_engines(op: str, dtype: Any, engine: str) -> None:
    """The docs' defaults: 32-bit integer add/multiply and power on GpSimd, the rest on VectorE."""
    trace = emu.Trace()

    def k(x: Any) -> Any:
        a = nl.load(x)
        r = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=a, data2=a, op=getattr(nl, op))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    emu.run_kernel(nki.jit(k), (np.ones((8, 8), dtype),), trace=trace)
    assert [i.engine for i in trace if i.op == "tensor_tensor"] == [engine]


def test_a_number_that_is_no_engine_is_refused_in_01() -> None:
    def k(x: Any) -> Any:
        return lisa.tensor_copy(lnl.load(x), engine=9)

    with pytest.raises(emu.NkiTypeError) as info:
        emu.run_kernel(legacy_nki.jit(k), (X,), api="0.1")
    assert info.value.code == "err_invalid_engine"
    assert info.value.message.startswith("engine=9 is not an nisa.engine member; pass one of nisa.engine.unknown, nisa.engine.tensor")


def test_engine_numbers_are_members_in_01() -> None:
    """0.1 kernels may pass the enum's numbers (5 is vector)."""
    trace = emu.Trace()

    def k(x: Any) -> Any:
        out = lnl.ndarray((32, 32), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, value=lisa.tensor_copy(lnl.load(x), engine=3))
        return out

    emu.run_kernel(legacy_nki.jit(k), (X,), api="0.1", trace=trace)
    assert [i.engine for i in trace if i.op == "tensor_copy"] == ["gpsimd"]


# --------------------------------------------------------------------------------------------
# dma_copy: engine= picks the hardware-DGE trigger
# --------------------------------------------------------------------------------------------
def _dma(engine: Any = nisa.engine.unknown, dge: Any = nisa.dge_mode.unknown, indirect: bool = False) -> Any:
    def k(x: Any, idx: Any) -> Any:
        t = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        src = x
        if indirect:
            i = nl.ndarray((32, 1), nl.uint32, buffer=nl.sbuf)
            nisa.dma_copy(dst=i, src=idx)
            src = x.ap(pattern=[[32, 32], [1, 32]], vector_offset=i, indirect_dim=0)
        nisa.dma_copy(dst=t, src=src, dge_mode=dge, engine=engine)  # <- dma
        out = nl.ndarray((32, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return nki.jit(k)


_DMA_LINE = f"{__file__}:{next(inspect.getsourcelines(_dma)[1] + i for i, s in enumerate(inspect.getsourcelines(_dma)[0]) if '# <- dma' in s)}"
IDX = np.arange(32, dtype=np.uint32)[::-1].reshape(32, 1).copy()


def _dma_run(kernel: Any, target: str = "trn2") -> tuple[np.ndarray, emu.Trace]:
    trace = emu.Trace()
    return np.asarray(emu.run_kernel(kernel, (X, IDX), target=target, trace=trace).outputs), trace


def _dma_error(kernel: Any, target: str = "trn2") -> NkiError:
    with pytest.raises(emu.NkiValidationError) as info:
        _dma_run(kernel, target)
    assert info.value.location == _DMA_LINE
    return info.value


@pytest.mark.parametrize("member", ["sync", "scalar"])
def test_dma_copy_hwdge_trigger_engines(member: str) -> None:
    out, trace = _dma_run(_dma(getattr(nisa.engine, member), nisa.dge_mode.hwdge))
    np.testing.assert_array_equal(out, X)
    (ins,) = [i for i in trace if i.location == _DMA_LINE]
    assert (ins.engine, ins.attrs["dge_trigger"], ins.attrs["dge_mode"]) == ("dma", member, 2)  # a DMA: no compute lane


def test_dma_copy_without_engine_has_no_trigger() -> None:
    _, trace = _dma_run(_dma())
    (ins,) = [i for i in trace if i.location == _DMA_LINE]
    assert (ins.engine, ins.attrs["dge_trigger"]) == ("dma", None)


@pytest.mark.parametrize("member", ["tensor", "vector", "gpsimd", "dma"])
def test_dma_copy_trigger_must_be_sync_or_scalar(member: str) -> None:
    err = _dma_error(_dma(getattr(nisa.engine, member), nisa.dge_mode.hwdge))
    assert (err.code, err.message) == (
        "err_unsupported_engine",
        (
            f"Expected 'dma_copy' to be triggered by engine 'sync|scalar', but got engine '{member}' instead; engine= picks the sequencer "
            "that triggers hardware DGE: pass engine=nisa.engine.sync or engine=nisa.engine.scalar with dge_mode=nisa.dge_mode.hwdge, or leave engine unset"
        ),
    )


@pytest.mark.parametrize("dge", ["unknown", "swdge", "none"])
def test_dma_copy_trigger_needs_hwdge(dge: str) -> None:
    err = _dma_error(_dma(nisa.engine.sync, getattr(nisa.dge_mode, dge)))
    assert (err.code, err.message) == (
        "err_dma_engine_without_hwdge",
        (
            "dma_copy engine=nisa.engine.sync picks the trigger of hardware DGE and is only valid with dge_mode=nisa.dge_mode.hwdge; "
            "pass dge_mode=nisa.dge_mode.hwdge, or leave engine unset"
        ),
    )


def test_hwdge_needs_trn2() -> None:
    err = _dma_error(_dma(dge=nisa.dge_mode.hwdge), target="trn1")
    assert (err.code, err.message) == (
        "err_dma_hwdge_gen",
        "dma_copy dge_mode=hwdge needs trn2 or later (hardware DGE is NeuronCore-v3+), not trn1; use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset",
    )


def test_hwdge_cannot_gather() -> None:
    err = _dma_error(_dma(dge=nisa.dge_mode.hwdge, indirect=True))
    assert (err.code, err.message) == (
        "err_dma_hwdge_indirect",
        (
            "dma_copy with dge_mode=hwdge cannot gather or scatter, but `src` is a vector-indirect view of `x`; hardware DGE has no "
            "indirect mode: use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset"
        ),
    )


def test_swdge_gathers() -> None:
    out, _ = _dma_run(_dma(dge=nisa.dge_mode.swdge, indirect=True))
    np.testing.assert_array_equal(out, X[::-1])
