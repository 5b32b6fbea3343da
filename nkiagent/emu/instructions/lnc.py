"""Logical NeuronCores: ``sendrecv`` and ``core_barrier``, the two instructions the cores of one LNC=2 launch talk with.

Both run on the launch's scheduler (:mod:`nkiagent.emu.lnc`, reached as ``ctx.lnc``: an op
family imports only the shared machinery), which runs the programs one at a time and hands
over where one has to wait for the other, so a tile sent by one core arrives in the other's
``dst`` and a barrier holds each core until both arrive, with the semantics of AWS's pages:

* ``sendrecv`` sends a copy of ``src`` to ``send_to_rank`` and receives the tile
  ``recv_from_rank`` sends into ``dst``. Messages pair up by program order (the Nth
  ``sendrecv`` one core sends to the other is the Nth that core receives), as
  ``nki.lnc.sendrecv``'s page says; ``pipe_id`` only groups transfers on hardware.
* ``core_barrier`` returns once every core of ``cores`` has reached as many barriers.

A wait that can never end (a ``sendrecv`` or barrier with no counterpart on the peer) is the
scheduler's deadlock error, naming each core, the op and the kernel line it waits at.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import engines as _engines
from ..errors import NkiRuntimeError, NkiTypeError, NkiUnsupportedError, NkiValidationError
from ..memory import KernelContext, current
from ..ops import SBUF_ONLY, check_memory, check_partitions, kernel_location, record, require_tensor, write
from ..registry import instruction, page
from ..tensor import NkiTensor
from .common import _require_gen, dma_engine, engine

#: ``dma_engine=gpsimd_dma``: the most bytes one partition may carry, by element size (``nki.isa.sendrecv``'s page).
_GPSIMD_DMA_BYTES = {4: 1024, 2: 512, 1: 256}


def _launch(ctx: KernelContext) -> Any:
    """The running launch's scheduler, which every LNC op needs."""
    sched = ctx.lnc
    assert sched is not None, "every launch runs under a scheduler (frontend._run_programs)"
    return sched


def _rank(op: str, role: str, value: Any, programs: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise NkiTypeError("err_lnc_rank", f"{op} {role} must be an int rank (0 or 1), got {type(value).__name__}")
    r = int(value)
    if r not in (0, 1) or r >= programs:
        raise NkiValidationError(
            "err_lnc_rank",
            f"{op} {role}={r}: the cores of an LNC=2 launch are ranks 0 and 1 (e.g. 1 - nl.program_id(0))",
        )
    return r


def _tile(shape: tuple[int, ...]) -> tuple[int, int]:
    """(partitions, elements per partition): what the docs require ``src`` and ``dst`` to agree on."""
    p = shape[0] if shape else 1
    return p, int(np.prod(shape, dtype=np.int64)) // max(p, 1)


def _describe(shape: tuple[int, ...], dtype: Any) -> str:
    return f"[{', '.join(map(str, shape))}] {dt.dtype_name(dtype)}"


@instruction(
    family="data movement",
    engines="dma",
    source=page("sendrecv"),
    rules=(
        "only inside an LNC=2 launch (kernel[2](...)) on trn2+; send_to_rank and recv_from_rank are 0 or 1",
        "src and dst in SBUF, with the same dtype, partition count and elements per partition; the peer's tile must match dst too",
        "the Nth sendrecv a core sends to a peer pairs with the Nth that peer receives from it (program order); pipe_id only groups transfers",
        "dma_engine=nisa.dma_engine.gpsimd_dma: partitions a multiple of 16 and at most 1024/512/256 bytes per partition for 32/16/8-bit data",
    ),
    example="nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - nl.program_id(0), recv_from_rank=1 - nl.program_id(0), pipe_id=0)",
    nc_version=3,
)
def sendrecv(
    src: Any, dst: Any, send_to_rank: Any, recv_from_rank: Any, pipe_id: Any, dma_engine: Any = dma_engine.dma, name: Any = None
) -> None:
    """Send ``src`` to the core ``send_to_rank`` and receive the tile ``recv_from_rank`` sends into ``dst`` (a DMA between the cores of one LNC)."""
    ctx = current()
    op = "sendrecv"
    _require_gen(ctx, op)
    src = require_tensor(op, "src", src)
    dst = require_tensor(op, "dst", dst)
    sched = _launch(ctx)
    n = len(sched.programs)
    if n != 2:
        raise NkiRuntimeError(
            "err_lnc_required",
            f"nisa.sendrecv exchanges tiles between the two cores of an LNC=2 launch; this launch runs {n} program{'s' * (n != 1)} "
            "(launch the kernel as kernel[2](...))",
        )
    to = _rank(op, "send_to_rank", send_to_rank, n)
    frm = _rank(op, "recv_from_rank", recv_from_rank, n)
    for role, t in (("src", src), ("dst", dst)):
        check_memory(op, role, t, SBUF_ONLY)
        check_partitions(ctx, op, role, t, start_rule=False)
    if src.dtype != dst.dtype or _tile(src.shape) != _tile(dst.shape):
        raise NkiValidationError(
            "err_sendrecv_mismatch",
            f"sendrecv src {_describe(src.shape, src.dtype)} and dst {_describe(dst.shape, dst.dtype)} must have the same dtype, "
            "partition count and elements per partition",
        )
    if int(getattr(dma_engine, "value", dma_engine)) == 2:
        _check_gpsimd_dma(src)
    where = kernel_location()
    values = np.array(src._np(), copy=True) if ctx.compute else None
    msg = sched.exchange(op, to, frm, values, src.shape, src.dtype, where)
    if msg.dtype != dst.dtype or _tile(msg.shape) != _tile(dst.shape):
        raise NkiValidationError(
            "err_sendrecv_mismatch",
            f"sendrecv dst {_describe(dst.shape, dst.dtype)} cannot hold the tile rank {frm} sent at {msg.where}, "
            f"{_describe(msg.shape, msg.dtype)}: the paired sendrecv calls must move tiles of the same dtype and size",
        )
    record(ctx, op, "dma", (("src", src),), (("dst", dst),))
    if msg.values is not None:
        write(ctx, dst, msg.values.reshape(dst.shape))


def _check_gpsimd_dma(src: NkiTensor) -> None:
    p, free = _tile(src.shape)
    size = np.dtype(src.dtype).itemsize
    limit = _GPSIMD_DMA_BYTES.get(size, 256)
    if p % 16 or free * size > limit:
        raise NkiValidationError(
            "err_sendrecv_gpsimd_dma",
            f"sendrecv with dma_engine=nisa.dma_engine.gpsimd_dma moves at most {limit} bytes per partition of "
            f"{8 * size}-bit data over a multiple of 16 partitions; src {_describe(src.shape, src.dtype)} has {p} partitions of "
            f"{free * size} bytes: use dma_engine=nisa.dma_engine.dma",
        )


def _cores(value: Any) -> tuple[int, ...]:
    """``cores`` as a tuple: the library passes ``(0)`` (an int) for a one-core barrier."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    out = []
    for c in items:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise NkiTypeError("err_core_barrier_cores", f"core_barrier cores must be core ids (0, 1), got {type(c).__name__}")
        out.append(int(c))
    if not out or len(set(out)) != len(out) or not set(out) <= {0, 1}:
        raise NkiValidationError(
            "err_core_barrier_cores", f"core_barrier cores={tuple(out)}: only cores=(0, 1) (or a single core) is supported"
        )
    return tuple(sorted(out))


@instruction(
    family="registers and control",
    engines="gpsimd",
    source=page("core_barrier"),
    hint=" (its page names GpSimd, the default, and no other engine)",
    rules=(
        "trn2+; cores=(0, 1) synchronises the two cores of an LNC=2 launch; a single core (cores=(0)) waits for no one",
        "a core not in cores may not call it; each core returns once every core of cores has reached as many barriers",
        "data names the tensor the cores synchronise on (their writes to it before the barrier are visible after it)",
    ),
    example="nisa.core_barrier(out, cores=(0, 1))",
    nc_version=3,
)
def core_barrier(data: Any, cores: Any, engine: Any = engine.gpsimd, name: Any = None) -> None:
    """Hold this core until every core of ``cores`` has reached the barrier (a semaphore each core writes to the other and waits on)."""
    ctx = current()
    op = "core_barrier"
    _require_gen(ctx, op)
    data = require_tensor(op, "data", data)
    members = _cores(cores)
    on = _engines.select(op, engine, "gpsimd")
    sched = _launch(ctx)
    n = len(sched.programs)
    if max(members) >= n:
        raise NkiUnsupportedError(
            "err_not_emulated",
            f"nki.isa.core_barrier(cores={members}) in a launch of {n} program{'s' * (n != 1)} is not emulated: at LNC=1 the "
            "paired core runs a separate launch; launch the kernel as kernel[2](...) or pass cores=(0)",
        )
    rank = sched.rank()
    if rank not in members:
        raise NkiValidationError("err_core_barrier_cores", f"core_barrier cores={members} does not include this core (rank {rank})")
    record(ctx, op, on, (("data", data),), ())
    if len(members) > 1:
        sched.barrier(op, members, kernel_location())
