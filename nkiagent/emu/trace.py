"""The instruction trace: one record per executed instruction, owned by the caller.

The cost model (``nkiagent.perf``) consumes only this. Records hold shapes, dtypes,
memories, byte counts, access-pattern facts and the regions read and written — never
tensor data, so a long trace stays small and kernel code learns nothing from it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

__all__ = ["Region", "Access", "Instruction", "Trace", "collector_paused", "ADDRESS_ROLES", "PSEUDO_MEMORIES", "is_data", "pseudo_access"]

#: Roles of the accesses an instruction makes to work out its addresses (the index tile of a
#: gather, the register of a dynamic offset) or to know that it runs at all (the registers that
#: decided a dynamic loop or a ``while``): real dependences, but not the data the instruction moves
#: or computes on, so pricing leaves them out.
ADDRESS_ROLES = frozenset({"vector_offset", "scalar_offset", "control"})

#: Memories that hold no tensor: the virtual registers (``reg``) and the Vector Engine accumulator
#: registers (``acc``). Accesses to them exist so that the timeline orders the instructions passing
#: state through them, with the same overlap test as memory; they move no bytes.
PSEUDO_MEMORIES = frozenset({"reg", "acc"})


class Region(NamedTuple):
    """A conservative box of memory touched by an access.

    ``alloc`` identifies the allocation; rows ``[p_lo, p_hi]`` and bytes within a row
    ``[b_lo, b_hi)``. On chip a row is a partition; in HBM a row is one run of the tensor's
    last dimension. ``Trace.allocations`` maps ``alloc`` to its memory and base address.
    """

    alloc: int
    p_lo: int
    p_hi: int
    b_lo: int
    b_hi: int

    def overlaps(self, other: Region) -> bool:
        return (
            self.alloc == other.alloc
            and self.p_lo <= other.p_hi
            and other.p_lo <= self.p_hi
            and self.b_lo < other.b_hi
            and other.b_lo < self.b_hi
        )


class Access(NamedTuple):
    """One operand of an instruction: what was read or written, and how."""

    role: str  #: operand name: ``dst``, ``src``, ``data1``, ``stationary`` …
    memory: str  #: ``hbm``, ``shared_hbm``, ``private_hbm``, ``sbuf``, ``psum``
    shape: tuple[int, ...]
    dtype: str
    partitions: int  #: size of the partition dim (1 for HBM)
    elems_per_partition: int
    nbytes: int
    strides: tuple[int, ...]  #: in elements; () for indirect accesses
    contiguous: bool  #: innermost dim has unit stride
    region: Region
    indirect: bool = False
    #: Indirect accesses: the DMA descriptors they take, one per run of consecutive addresses within
    #: a row (first dim). Every index of a gather is its own descriptor, so rows never coalesce.
    chunks: int = 0


def is_data(a: Access) -> bool:
    """True for the operands an instruction moves or computes on (what its cost and byte counts depend on)."""
    return a.role not in ADDRESS_ROLES and a.memory not in PSEUDO_MEMORIES


def pseudo_access(role: str, memory: str, uid: int, lanes: int = 1) -> Access:
    """An access to ``lanes`` 4-byte registers of the pseudo-memory ``memory`` (see :data:`PSEUDO_MEMORIES`).

    ``uid`` names the register (or register file) as an allocation uid names a tensor; it is
    negative, so it is never mistaken for one. Lane ``i`` is row ``i`` of the region.
    """
    dtype = "float32" if memory == "acc" else "int32"
    return Access(role, memory, (lanes, 1), dtype, lanes, 1, 4 * lanes, (1, 1), True, Region(uid, 0, lanes - 1, 0, 4))


@dataclass(slots=True)
class Instruction:
    """One executed NKI instruction."""

    seq: int
    op: str  #: ISA name, e.g. ``nc_matmul``, ``dma_copy``, ``tensor_tensor``
    engine: str  #: ``tensor``, ``vector``, ``scalar``, ``gpsimd``, ``dma``, ``sync``
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    location: str  #: ``file:line`` in the kernel
    program_id: tuple[int, ...] = ()
    loops: tuple[tuple[int, str, int], ...] = ()  #: enclosing NKI loops: (loop uid, kind, iteration)
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Trace:
    """An append-only list of :class:`Instruction` records plus allocation events."""

    def __init__(self) -> None:
        self.instructions: list[Instruction] = []
        self.allocations: list[dict[str, Any]] = []
        self.target: str = ""
        self.warnings: list[str] = []

    def append(self, ins: Instruction) -> None:
        self.instructions.append(ins)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def to_json(self) -> dict[str, Any]:
        """A compact JSON-only form (used between processes: nothing is ever unpickled)."""

        def acc(a: Access) -> list[Any]:
            r = a.region
            return [a.role, a.memory, list(a.shape), a.dtype, a.partitions, a.elems_per_partition, a.nbytes, list(a.strides),
                    a.contiguous, [r.alloc, r.p_lo, r.p_hi, r.b_lo, r.b_hi], a.indirect, a.chunks]

        def clean(v: Any) -> Any:
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v if isinstance(v, (bool, int, float, str)) or v is None else str(v)

        return {
            "target": self.target,
            "allocations": self.allocations,
            "warnings": self.warnings,
            "instructions": [
                [i.seq, i.op, i.engine, [acc(a) for a in i.reads], [acc(a) for a in i.writes], i.location, list(i.program_id),
                 [list(l) for l in i.loops], {k: clean(v) for k, v in i.attrs.items()}]
                for i in self.instructions
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a trace from :meth:`to_json` output, validating field types as it goes."""

        def acc(x: list[Any]) -> Access:
            role, mem, shape, dtype, parts, epp, nbytes, strides, contiguous, reg, indirect, chunks = x
            return Access(str(role), str(mem), tuple(int(v) for v in shape), str(dtype), int(parts), int(epp), int(nbytes),
                          tuple(int(v) for v in strides), bool(contiguous), Region(*(int(v) for v in reg)), bool(indirect), int(chunks))

        def attr(v: Any) -> Any:
            return tuple(attr(x) for x in v) if isinstance(v, list) else v

        t = cls()
        t.target = str(data.get("target", ""))
        t.allocations = list(data.get("allocations", []))
        t.warnings = [str(w) for w in data.get("warnings", [])]
        for seq, op, eng, reads, writes, loc, pid, loops, attrs in data.get("instructions", []):
            t.instructions.append(
                Instruction(int(seq), str(op), str(eng), tuple(acc(a) for a in reads), tuple(acc(a) for a in writes), str(loc),
                            tuple(int(v) for v in pid), tuple((int(a), str(b), int(c)) for a, b, c in loops),
                            {str(k): attr(v) for k, v in dict(attrs).items()})
            )
        return t

    def counts(self) -> dict[str, int]:
        """Number of instructions per op name."""
        out: dict[str, int] = {}
        for ins in self.instructions:
            out[ins.op] = out.get(ins.op, 0) + 1
        return out


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while trace-shaped data is built.

    Trace records and schedule events hold no reference cycles, yet allocating 10⁵ of them
    sets off collection after collection, each scanning the whole heap: several µs per record.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
