"""The instruction trace: one record per executed instruction, owned by the caller.

The cost model (``nkiagent.perf``) consumes only this. Records hold shapes, dtypes,
memories, byte counts, access-pattern facts and the regions read and written — never
tensor data, so a long trace stays small and kernel code learns nothing from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

__all__ = ["Region", "Access", "Instruction", "Trace"]


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

    def counts(self) -> dict[str, int]:
        """Number of instructions per op name."""
        out: dict[str, int] = {}
        for ins in self.instructions:
            out[ins.op] = out.get(ins.op, 0) + 1
        return out
