"""Matmul batching: consecutive ``nc_matmul``s into one PSUM tile landed as one GEMM, and wide products.

A fast path (see :mod:`nkiagent.emu.fast`): with it off (``NKIAGENT_EMU_FAST=0`` or
``run_kernel(..., fast=False)``) every ``nc_matmul`` lands on its own, one GEMM per instruction
accumulated into PSUM as the hardware does, and no wide product is formed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from ..memory import KernelContext, current
from ..tensor import NkiTensor

__all__ = ["WIDE_ROWS_MAX", "MatmulGroup", "WideProduct", "flush_matmul_group"]

F32 = np.dtype(np.float32)


class MatmulGroup:
    """Consecutive ``nc_matmul``s accumulating into one PSUM tile, landed as one GEMM.

    Hardware accumulates K tiles one after another; summing them with a single BLAS call over
    the concatenated K is the same fp32 accumulation (up to rounding order) and far cheaper to
    emulate than one small GEMM per instruction. The group lands before any other instruction
    runs and before anything reads the tile, so no one can observe the deferral — which is also
    why it may keep the operand views and read their numbers only when it lands.
    """

    __slots__ = ("dst", "key", "mask", "mode", "rows", "views")

    def __init__(self, dst: NkiTensor, key: tuple[Any, ...], mode: str, mask: np.ndarray | None, rows: int) -> None:
        self.dst = dst
        self.key = key
        self.mode = mode  #: "accumulate", "overwrite" or "mask" (per-element first write overwrites)
        self.mask = mask
        self.rows = rows
        self.views: list[tuple[NkiTensor, NkiTensor]] = []  #: (stationary, moving) operand views, in issue order


#: Widest stationary block (rows of the product) that a flush computes speculatively.
WIDE_ROWS_MAX = 4096


def _wide_key(g: MatmulGroup) -> tuple[tuple[Any, ...], int, int, int] | None:
    """How the group's stationary pieces widen to full rows of their allocation, if they do.

    Tutorial kernels multiply column slices ``blk[:, bk, c0:c0 + 128]`` of one stationary block
    by the same moving operands for every ``c0``, each into its own PSUM tile with a read in
    between. Returns the key shared by those groups (operand allocations, versions and
    geometry, with ``c0`` taken out), ``c0``, the slice width and the full row length.
    """
    parts: list[Any] = []
    c0 = width = last = -1
    for st, mv in g.views:
        strides = st._strides
        if st._addr is not None or mv._addr is not None or strides is None or len(strides) != 2 or strides[1] != 1:
            return None
        a = st._a
        if c0 < 0:
            last, width = a.shape[-1], st._shape[1]
            c0 = st._offset % last
            if c0 + width > last or last <= width or last > WIDE_ROWS_MAX:
                return None
        elif a.shape[-1] != last or st._offset % last != c0 or st._shape[1] != width:
            return None
        ma = mv._a
        parts.append((a.uid, a.version, st._offset - c0, strides, ma.uid, ma.version, mv._offset, mv._shape, mv._strides))
    return tuple(parts), c0, width, last


def _widened(g: MatmulGroup, c0: int, last: int) -> list[NkiTensor]:
    """The group's stationary pieces widened to full rows (see :func:`_wide_key`); made only when a wide block is stacked."""
    return [st._view((st._shape[0], last), cast(tuple[int, ...], st._strides), st._offset - c0) for st, _ in g.views]  # (direct views)


def _scratch(ctx: KernelContext, name: str, shape: tuple[int, int]) -> np.ndarray:
    """A reusable fp32 work array of ``shape`` (contents undefined).

    Matmul groups need the same large temporaries again and again; fresh ones cost a page fault
    per 4 KiB on every use (glibc maps big blocks anew each time), reused ones do not.
    """
    size = shape[0] * shape[1]
    buf = ctx.mm_scratch.get(name)
    if buf is None or buf.size < size:
        buf = ctx.mm_scratch[name] = np.empty(size, np.float32)
    return buf[:size].reshape(shape)


def _stack_k(ctx: KernelContext, name: str, views: Iterable[NkiTensor], cols: int, transposed: bool = False) -> np.ndarray:
    """The operand views' numbers stacked along K (their partition dim) as fp32, in one pass each.

    ``[K, cols]``, or ``[cols, K]`` C-contiguous when ``transposed`` (the layout OpenBLAS runs
    fastest for a narrow stationary operand), in the reusable work array ``name``; fp32 pieces
    that already lie as ``[K, cols]`` rows of one array are not copied at all.
    """
    pieces = [_piece(t._source()[0]) for t in views]
    if not transposed:
        joined = _joined(pieces)
        if joined is not None:
            return joined
    rows = sum(p.shape[0] for p in pieces)
    return _stacked(pieces, _scratch(ctx, name, (cols, rows) if transposed else (rows, cols)), transposed)


def _piece(v: np.ndarray) -> np.ndarray:
    """An operand's numbers as ``[K, free]``."""
    return v.reshape(v.shape[0] if v.ndim else 1, -1)


def _stacked(pieces: list[np.ndarray], out: np.ndarray, transposed: bool = False) -> np.ndarray:
    """Copy ``pieces`` into ``out`` one after another along K.

    Conversion from the storage dtype (bf16, fp8 …) happens in the same copy, so no fp32 copy
    of a whole operand block is ever made.
    """
    r = 0
    for p in pieces:
        np.copyto(out[:, r : r + p.shape[0]] if transposed else out[r : r + p.shape[0]], p.T if transposed else p, casting="unsafe")
        r += p.shape[0]
    return out


def _joined(pieces: list[np.ndarray]) -> np.ndarray | None:
    """The fp32 pieces as one ``[K, cols]`` array without copying, when they are consecutive rows
    of one array (row blocks of one tile, or of an fp32 input that pending DMAs read), else ``None``."""
    first = pieces[0]
    base = first.base
    step, width = first.strides[0], first.shape[1]
    if first.dtype != F32 or base is None or step <= 0:
        return None
    start = first.__array_interface__["data"][0]
    at = start
    for p in pieces:
        if (
            p.base is not base
            or p.dtype != F32
            or p.strides != first.strides
            or p.shape[1] != width
            or p.__array_interface__["data"][0] != at
        ):
            return None
        at += p.shape[0] * step
    rows = (at - start) // step
    return np.ndarray((rows, width), F32, buffer=base, offset=start - base.__array_interface__["data"][0], strides=first.strides)


def _stacked_moving(ctx: KernelContext, g: MatmulGroup) -> np.ndarray:
    """The group's moving operands stacked along K: ``[K, N]`` fp32."""
    return _stack_k(ctx, "moving", [mv for _, mv in g.views], g.dst.size // g.rows)


#: Stacked stationary blocks a run keeps (see :func:`_wide_stationary`), and their bytes at most.
WIDE_ST_KEPT = 2
WIDE_ST_BYTES_MAX = 64 << 20


def _wide_stationary(ctx: KernelContext, g: MatmulGroup, c0: int, last: int) -> np.ndarray:
    """The widened stationary block, K-major fp32, kept by where its numbers come from.

    Tutorial kernels multiply one stationary block by several moving slices in turn (one wide
    product each), and load the same input rows into a fresh block for every output stripe:
    a block is stacked and converted once per version of the storage its numbers are read
    from (the SBUF tile, or the HBM tensor a pending DMA copies), not per product or per load.
    The last few blocks are kept; fp32 pieces that already lie as ``[K, last]`` rows of one
    array are used where they lie.
    """
    sources = [t._source() for t in _widened(g, c0, last)]
    pieces = [_piece(v) for v, _ in sources]
    joined = _joined(pieces)
    if joined is not None:
        return joined
    key = tuple(
        [
            (origin.uid, origin.version, p.__array_interface__["data"][0], p.shape, p.strides, p.dtype)
            for p, (_, origin) in zip(pieces, sources)
        ]
    )
    held = ctx.mm_wide_st
    block = held.get(key)
    if block is None:
        block = _stacked(pieces, np.empty((sum(p.shape[0] for p in pieces), last), F32))
        while held and (len(held) >= WIDE_ST_KEPT or sum(b.nbytes for b in held.values()) + block.nbytes > WIDE_ST_BYTES_MAX):
            del held[next(iter(held))]  # the oldest first
        if block.nbytes <= WIDE_ST_BYTES_MAX:
            held[key] = block
    return block


class WideProduct:
    """A wide product held for the groups that take their rows from it (see :func:`_product`)."""

    __slots__ = ("full", "key", "lent", "site", "uses")

    def __init__(self, key: tuple[Any, ...], full: np.ndarray | None, site: tuple[Any, ...]) -> None:
        self.key = key
        self.full = full  #: None until a second group with this key asks (or the site has paid off before)
        self.site = site
        self.uses = 0
        self.lent: list[tuple[int, int]] = []  #: row ranges that became PSUM storage (and may since have changed)


def _site(st: NkiTensor, last: int) -> tuple[Any, ...]:
    """Where a stationary block comes from — its allocation's source line and the widened geometry — to learn from."""
    a = st._a
    return (a.rec.location if a.rec is not None else a.name, a.shape, (st._shape[0], last), st._strides)


def _product(ctx: KernelContext, g: MatmulGroup, keep: bool) -> np.ndarray:
    """The group's ``stationaryᵀ · moving``, from a wider product of the same operands when one exists.

    When a second group shows the column-slice pattern of :func:`_wide_key`, one GEMM computes
    the rows of every slice of the block at once and later groups take their rows from it: a
    few large GEMMs instead of many 128-row ones, which BLAS runs several times slower per FLOP.
    Once a wide product of blocks allocated at one source line served several groups, later
    blocks from that line go wide at their first group (a kernel's loops repeat the pattern);
    one that served a single group stops that. The rows are the same dot products, so only the
    summation order inside BLAS can differ.

    With ``keep`` the caller takes the result as its PSUM tile's storage; otherwise the result
    may live in a scratch array, consumed before the next group lands. A wide product is never
    scratch, and rows once kept are not served again (nor slices overlapping them): their tile may
    have changed them since.
    """
    wk = _wide_key(g) if ctx.fast else None
    if wk is not None:
        key, c0, width, last = wk
        held = ctx.mm_wide
        if held is None or held.key != key:
            if held is not None and held.full is not None:
                ctx.mm_wide_sites[held.site] = held.uses > 1
            site = _site(g.views[0][0], last)
            held = ctx.mm_wide = WideProduct(key, None, site)
            go_wide = ctx.mm_wide_sites.get(site, False)
        else:
            go_wide = True
        if go_wide and not any(lo < c0 + width and c0 < hi for lo, hi in held.lent):
            held.uses += 1
            if held.full is None:
                moving = _stacked_moving(ctx, g)
                # a transposed view of the K-major block: BLAS reads it as is, no [M, K] copy
                held.full = np.matmul(_wide_stationary(ctx, g, c0, last).T, moving)
            if keep:
                held.lent.append((c0, c0 + width))
            return held.full[c0 : c0 + width]
    moving = _stacked_moving(ctx, g)
    stationary = _stack_k(ctx, "stationary", [st for st, _ in g.views], g.rows, transposed=True)
    return np.matmul(stationary, moving, out=None if keep else _scratch(ctx, "product", (g.rows, moving.shape[1])))


def flush_matmul_group(ctx: KernelContext | None = None) -> None:
    """Compute the pending matmul group's product and store it into its PSUM tile."""
    ctx = ctx or current()
    g = ctx.mm_group
    if g is None:
        return
    ctx.mm_group = None
    dst = g.dst
    a = dst._a
    a.pending = False
    # A first write of a whole fp32 tile takes the product itself as storage instead of a copy of it.
    keep = g.mode == "overwrite" and a.dtype == np.float32 and a.untouched() and dst.covers_storage()
    prod = _product(ctx, g, keep)
    if keep and prod.flags.c_contiguous:
        a.adopt(prod.reshape(-1))
        return
    cur = dst._np() if dst._addr is None and g.mode == "accumulate" else None  # (an overwrite must not read: no fill)
    if cur is not None and cur.dtype == np.float32:
        np.add(cur, prod.reshape(cur.shape), out=cur)  # in place, no temporaries
        a.version += 1
    elif g.mode == "overwrite":
        dst._store(prod.reshape(dst.shape))
    else:
        cur_pf = _ops.f32(dst).reshape(g.rows, -1)
        new = cur_pf + prod if g.mode == "accumulate" else np.where(g.mask, cur_pf + prod, prod)
        dst._store(new.reshape(dst.shape))


from .. import ops as _ops
