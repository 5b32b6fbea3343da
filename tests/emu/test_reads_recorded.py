"""Every tile an instruction reads is in its trace record, so the timeline orders it after the tile's producer.

The audit watches the emulator itself: every read of tile numbers (``NkiTensor._np``, ``_source``,
``_geom``) is logged, and the kernel's run is cut into windows, one per outermost NKI API call
(``nki.isa``, ``nki.language``). A read inside a call must fall inside a region that one of the
instructions the call recorded lists (as a read, or as a write of the same place: a write is
ordered after every earlier access already). A read kernel code makes between calls — building
an ``.ap(vector_offset=...)`` view reads its index tile, and a dynamic offset records its
``register_load`` there — must be listed by the first call after it that records it at all, and
by some call before the kernel ends. Reads a deferred matmul group makes when it lands belong to
the matmuls it holds, recorded earlier.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import instructions
from nkiagent.emu import isa as emu_isa
from nkiagent.emu import language as emu_language
from nkiagent.emu import ops as emu_ops
from nkiagent.emu.instructions import elementwise
from nkiagent.emu.tensor import NkiTensor
from nkiagent.emu.trace import Instruction, Region

RNG = np.random.default_rng(18)


def _covers(outer: Region, inner: Region) -> bool:
    return (
        outer.alloc == inner.alloc
        and outer.p_lo <= inner.p_lo
        and inner.p_hi <= outer.p_hi
        and outer.b_lo <= inner.b_lo
        and inner.b_hi <= outer.b_hi
    )


class _Audit:
    """Reads of tile numbers, cut into windows of outermost API calls (see the module docstring)."""

    def __init__(self, trace: emu.Trace) -> None:
        self.trace = trace
        self.depth = 0
        self.flushing = 0
        self.inside: list[tuple[Region, str]] = []  # reads the open call made
        self.loose: list[tuple[Region, str]] = []  # reads kernel code made, not yet recorded by any call
        self.start = 0  # first instruction of the open window
        self.missing: list[str] = []

    def read(self, t: NkiTensor) -> None:
        read = (t.region(), t.name)
        if self.flushing:
            self._unrecorded([read], [i for i in self.trace.instructions if i.op == "nc_matmul"], "matmul group")
        elif self.depth:
            self.inside.append(read)
        else:
            self.loose.append(read)

    def close(self, name: str) -> None:
        """End the window at an outermost call."""
        window = self.trace.instructions[self.start :]
        self.loose = [r for r in self.loose if not self._covered(r[0], window)]
        self._unrecorded(self.inside, window, name)
        self.inside, self.start = [], len(self.trace.instructions)

    def finish(self) -> None:
        for region, tensor in self.loose:
            self.missing.append(f"kernel code: `{tensor}` {region} is read but no instruction records it")

    @staticmethod
    def _covered(region: Region, window: list[Instruction]) -> bool:
        return any(_covers(a.region, region) for ins in window for a in ins.reads + ins.writes)

    def _unrecorded(self, reads: list[tuple[Region, str]], window: list[Instruction], name: str) -> None:
        for region, tensor in reads:
            if not self._covered(region, window):
                ops = ", ".join(i.op for i in window) or "nothing"
                self.missing.append(f"{name}: `{tensor}` {region} is read but not recorded by {ops}")


@contextmanager
def _audited(trace: emu.Trace, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Audit]:
    audit = _Audit(trace)
    for method in ("_np", "_source", "_geom"):
        original = getattr(NkiTensor, method)

        def logged(self: NkiTensor, *args: Any, _original: Callable[..., Any] = original) -> Any:
            audit.read(self)
            return _original(self, *args)

        monkeypatch.setattr(NkiTensor, method, logged)

    def outermost(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            audit.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                audit.depth -= 1
                if not audit.depth:
                    audit.close(name)

        return call

    for module, facade in ((emu_isa, nisa), (emu_language, nl)):
        for name, fn in list(vars(module).items()):
            if not name.startswith("_") and isinstance(fn, types.FunctionType) and fn.__module__.startswith("nkiagent.emu"):
                wrapped = outermost(f"{module.__name__.rsplit('.', 1)[-1]}.{name}", fn)
                if name in dir(facade):  # first: the facade caches what it hands out, and must cache the original
                    monkeypatch.setattr(facade, name, wrapped)
                monkeypatch.setattr(module, name, wrapped)
    flush = emu_ops.flush_matmul_group

    def flushing(ctx: Any) -> Any:
        audit.flushing += 1
        try:
            return flush(ctx)
        finally:
            audit.flushing -= 1

    for module in (emu_ops, *_FAMILIES):  # (an op module calls the one it imported)
        if hasattr(module, "flush_matmul_group"):
            monkeypatch.setattr(module, "flush_matmul_group", flushing)
    yield audit
    audit.finish()


#: The op-family modules (each imports the shared helpers it calls).
_FAMILIES = [m for m in vars(instructions).values() if isinstance(m, types.ModuleType)]


def _audit(kernel: Callable[..., Any], args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch, target: str = "trn2") -> list[str]:
    trace = emu.Trace()
    with _audited(trace, monkeypatch) as audit:
        emu.run_kernel(kernel, args, target=target, trace=trace)
    assert trace.instructions
    return audit.missing


# --------------------------------------------------------------------------------------------
# kernels: one family of operand kinds each
# --------------------------------------------------------------------------------------------
def _sb(t: Any, dtype: Any = None) -> Any:
    s = nl.ndarray(t.shape, dtype=dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=t)
    return s


def _out(t: Any) -> Any:
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def _iota_rows(rows: int) -> Any:
    """A (rows, 1) int32 index tile 0, 1, … computed on chip."""
    idx = nl.ndarray((rows, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    return idx


def gather_by_vector_offset(table: Any) -> Any:
    rows, cols = 64, table.shape[1]
    g = nl.ndarray((rows, cols), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=table.ap([[cols, rows], [1, cols]], offset=0, vector_offset=_iota_rows(rows), indirect_dim=0))
    return _out(g)


def load_of_a_selected_view(table: Any) -> Any:
    return _out(nl.load(table.select(0, _iota_rows(table.shape[0]))))


def scatter_by_vector_offset(table: Any) -> Any:
    rows, cols = 64, table.shape[1]
    out = nl.ndarray(table.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out.ap([[cols, rows], [1, cols]], offset=0, vector_offset=_iota_rows(rows), indirect_dim=0), src=_sb(table[0:rows, :]))
    return out


def dynamic_offset_from_a_tile(table: Any) -> Any:
    off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=off, pattern=[[0, 1]], offset=3, channel_multiplier=0)
    row = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=table.ap([[table.shape[1], 1], [1, table.shape[1]]], scalar_offset=off))
    return _out(row)


def activation_with_scale_and_bias(x: Any) -> Any:
    xs = _sb(x)
    scale, bias = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=scale, op=nl.maximum, data=xs, axis=1)
    nisa.tensor_reduce(dst=bias, op=nl.add, data=xs, axis=1)
    y, rsum = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.exp, data=xs, scale=scale, bias=bias, reduce_op=nl.add, reduce_res=rsum)
    return _out(y), _out(rsum)


def predicated_and_selecting_copies(x: Any) -> Any:
    xs = _sb(x)
    pred = nl.ndarray(x.shape, nl.uint8, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=pred, data=xs, op0=nl.greater, operand0=0.0)
    keep = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=keep, value=0.0)
    nisa.tensor_copy_predicated(dst=keep, src=xs, predicate=pred)
    low = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=low, op=nl.minimum, data=xs, axis=1)
    sel, top = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=pred, on_true=xs, on_false=low, reduce_res=top, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    return _out(keep), _out(sel), _out(top)


def reductions_with_tile_operands(x: Any) -> Any:
    xs = _sb(x)
    col = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=col, op=nl.maximum, data=xs, axis=1)
    y, res = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=y, data=xs, op0=nl.subtract, operand0=col, reduce_op=nl.add, reduce_res=res)
    lo, hi = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=lo, value=2.0)
    nisa.tensor_scalar(dst=hi, data=col, op0=nl.multiply, operand0=0.0, op1=nl.add, operand1=9.0)
    r, m = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=r, on_true_tile=xs, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=lo, bound1=hi, reduce_res=m)
    s = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=s, data0=xs, data1=y, initial=col, op0=nl.multiply, op1=nl.add)
    d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=xs, prob=lo)
    return _out(y), _out(res), _out(r), _out(m), _out(s), _out(d)


def on_chip_gathers(x: Any) -> Any:
    xs = _sb(x)
    ind16 = nl.ndarray((x.shape[0], 4), nl.uint16, buffer=nl.sbuf)
    nisa.iota(dst=ind16, pattern=[[1, 4]], offset=0, channel_multiplier=0)
    lg = nl.ndarray((x.shape[0], 64), x.dtype, buffer=nl.sbuf)
    nisa.local_gather(dst=lg, src_buffer=xs, index=ind16)
    ind32 = nl.ndarray((x.shape[0], 8), nl.uint32, buffer=nl.sbuf)
    nisa.iota(dst=ind32, pattern=[[2, 8]], offset=1, channel_multiplier=0)
    ng = nl.ndarray((x.shape[0], 8), x.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=ng, data=xs, indices=ind32)
    return _out(lg), _out(ng)


def register_driven_loop(n: Any, x: Any) -> Any:
    reg = nisa.register_alloc()
    nisa.register_load(reg, _sb(n))
    acc = _sb(x)
    for _ in nl.dynamic_range(reg):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    return _out(acc)


def accumulating_matmuls(x: Any) -> Any:
    """Two matmuls accumulated into one PSUM tile: the emulator lands them together when the tile is read."""
    xs = _sb(x, nl.bfloat16)
    acc = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
    for k in range(2):
        nisa.nc_matmul(dst=acc, stationary=xs[:, k * 32 : (k + 1) * 32], moving=xs)
    y = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=acc)
    return _out(y)


TABLE = RNG.standard_normal((128, 96)).astype(np.float32)
X = RNG.standard_normal((128, 64)).astype(np.float32)
KERNELS = [
    (gather_by_vector_offset, (TABLE,)),
    (load_of_a_selected_view, (TABLE,)),
    (scatter_by_vector_offset, (TABLE,)),
    (dynamic_offset_from_a_tile, (TABLE,)),
    (activation_with_scale_and_bias, (X,)),
    (predicated_and_selecting_copies, (X,)),
    (reductions_with_tile_operands, (X,)),
    (on_chip_gathers, (X,)),
    (register_driven_loop, (np.array([[3]], np.int32), X)),
    (accumulating_matmuls, (X,)),
]


@pytest.mark.parametrize("kernel, args", KERNELS, ids=[k.__name__ for k, _ in KERNELS])
def test_every_tile_an_op_reads_is_in_its_record(kernel: Callable[..., Any], args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    assert _audit(kernel, args, monkeypatch) == []


def test_the_audit_catches_a_read_left_out_of_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit itself: an op whose record drops an operand is reported."""
    real = emu_ops.record

    def forgetful(ctx: Any, op: str, engine: str, reads: Any, writes: Any, **attrs: Any) -> None:
        real(ctx, op, engine, [r for r in reads if r[0] != "bias"], writes, **attrs)

    monkeypatch.setattr(elementwise, "record", forgetful)
    missing = _audit(activation_with_scale_and_bias, (X,), monkeypatch)
    assert len(missing) == 1 and missing[0].startswith("isa.activation: `") and missing[0].endswith("is read but not recorded by activation")
