"""The instruction trace: one record per executed instruction, owned by the caller.

The cost model (``nkiagent.perf``) consumes only this. Records hold shapes, dtypes,
memories, byte counts, access-pattern facts and the regions read and written — never
tensor data, so a long trace stays small and kernel code learns nothing from it.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "ADDRESS_ROLES", "NO_REORDER", "PSEUDO_MEMORIES", "Access", "Instruction", "Region", "Trace", "TraceStreamError", "TraceStreamReader",
    "TraceStreamWriter", "collector_paused", "is_data", "pseudo_access",
]  # fmt: skip

#: Roles of the accesses an instruction makes to work out its addresses (the index tile of a
#: gather, the register of a dynamic offset) or to know that it runs at all (the registers that
#: decided a dynamic loop or a ``while``): real dependences, but not the data the instruction moves
#: or computes on, so pricing leaves them out.
ADDRESS_ROLES = frozenset({"vector_offset", "scalar_offset", "control"})

#: The frame ``nl.no_reorder()`` adds to :attr:`Instruction.loops` of the instructions inside
#: it (loop uids start at 1): the cost model keeps those in program order.
NO_REORDER = (0, "no_reorder", 0)

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
    #: enclosing NKI loops: (loop uid, kind, iteration), and :data:`NO_REORDER` inside a ``no_reorder`` block
    loops: tuple[tuple[int, str, int], ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Trace:
    """An append-only list of :class:`Instruction` records plus allocation events."""

    def __init__(self, sink: Callable[[str, Instruction | None], None] | None = None) -> None:
        self.instructions: list[Instruction] = []
        self.allocations: list[dict[str, Any]] = []
        self.target: str = ""
        self.warnings: list[str] = []
        #: Set by a timing-only run that read tensor values into control flow or addresses (it read
        #: zeros): where it did. Such a trace may not be the kernel's, so its latency is not faithful.
        self.unfaithful: list[str] = []
        #: Called with ``("I", ins)`` for every record as it is made, ``("M", ins)`` when the
        #: emulator rewrites the last record, ``("X", None)`` when it drops an aborted attempt. The
        #: sandboxed worker streams these out of the kernel's process as they happen, so the
        #: copy the cost model prices is beyond the reach of kernel code (see TraceStreamWriter).
        self.sink = sink

    def append(self, ins: Instruction) -> None:
        self.instructions.append(ins)
        if self.sink is not None:
            self.sink("I", ins)

    def amend_last(self, *, writes: tuple[Access, ...] | None = None, attrs: dict[str, Any] | None = None) -> None:
        """Rewrite the newest record (the 0.1 front-end folds a copy into the instruction that produced it)."""
        ins = self.instructions[-1]
        if writes is not None:
            ins.writes = writes
        if attrs is not None:
            ins.attrs = attrs
        if self.sink is not None:
            self.sink("M", ins)

    def reset(self) -> None:
        """Forget everything recorded so far (an aborted attempt that the launch will redo)."""
        self.instructions.clear()
        self.allocations.clear()
        self.warnings.clear()
        self.unfaithful.clear()
        if self.sink is not None:
            self.sink("X", None)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def to_json(self) -> dict[str, Any]:
        """A compact JSON-only form (used between processes: nothing is ever unpickled)."""
        return {
            "target": self.target,
            "allocations": self.allocations,
            "warnings": self.warnings,
            "unfaithful": self.unfaithful,
            "instructions": [
                [i.seq, i.op, i.engine, [_access_json(a) for a in i.reads], [_access_json(a) for a in i.writes], i.location,
                 list(i.program_id), [list(l) for l in i.loops], _attrs_json(i.attrs)]
                for i in self.instructions
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a trace from :meth:`to_json` output, validating field types as it goes."""
        t = cls()
        t.target = str(data.get("target", ""))
        t.allocations = list(data.get("allocations", []))
        t.warnings = [str(w) for w in data.get("warnings", [])]
        t.unfaithful = [str(w) for w in data.get("unfaithful", [])]
        for seq, op, eng, reads, writes, loc, pid, loops, attrs in data.get("instructions", []):
            t.instructions.append(_instruction(seq, op, eng, tuple(_access_from(a) for a in reads),
                                               tuple(_access_from(a) for a in writes), str(loc), pid, loops, attrs))
        return t

    def digest(self, formatted: dict[Access, bytes] | None = None) -> str:
        """A fingerprint of everything the cost model reads: two runs with equal digests are priced the same.

        Tensor data never enters a record, so for NKI — whose instruction stream is fixed by the
        shapes, and by registers a kernel reads on purpose — every run of one shape must give
        the same digest; the verifier rejects a kernel whose stream depends on the data.
        """
        import hashlib

        h = hashlib.sha256(self.target.encode())
        # operands repeat (loops touch the same views again and again, every run of a shape the same ones):
        # format each distinct one once — ``formatted`` may be shared by the digests of one verification
        if formatted is None:
            formatted = {}

        def operands(accesses: tuple[Access, ...]) -> bytes:
            return b"|".join([formatted.get(a) or formatted.setdefault(a, repr(a).encode()) for a in accesses])

        for i in self.instructions:
            h.update(repr((i.seq, i.op, i.engine, i.location, i.program_id, i.loops, sorted(i.attrs.items()))).encode())
            h.update(b"<" + operands(i.reads) + b">" + operands(i.writes) + b";")
        for a in self.allocations:
            h.update(repr(sorted(a.items())).encode())
        return h.hexdigest()

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


def _access_json(a: Access) -> list[Any]:
    r = a.region
    return [a.role, a.memory, list(a.shape), a.dtype, a.partitions, a.elems_per_partition, a.nbytes, list(a.strides),
            a.contiguous, [r.alloc, r.p_lo, r.p_hi, r.b_lo, r.b_hi], a.indirect, a.chunks]


def _access_from(x: list[Any]) -> Access:
    role, mem, shape, dtype, parts, epp, nbytes, strides, contiguous, reg, indirect, chunks = x
    return Access(str(role), str(mem), tuple(int(v) for v in shape), str(dtype), int(parts), int(epp), int(nbytes),
                  tuple(int(v) for v in strides), bool(contiguous), Region(*(int(v) for v in reg)), bool(indirect), int(chunks))


def _clean(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v if isinstance(v, (bool, int, float, str)) or v is None else str(v)


def _attrs_json(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: _clean(v) for k, v in attrs.items()}


def _attr_from(v: Any) -> Any:
    return tuple(_attr_from(x) for x in v) if isinstance(v, list) else v


def _instruction(seq: Any, op: Any, eng: Any, reads: tuple[Access, ...], writes: tuple[Access, ...], loc: str, pid: Any, loops: Any,
                 attrs: Any) -> Instruction:
    return Instruction(int(seq), str(op), str(eng), reads, writes, loc, tuple(int(v) for v in pid),
                       tuple((int(a), str(b), int(c)) for a, b, c in loops), {str(k): _attr_from(v) for k, v in dict(attrs).items()})


#: Stands for the kernel file's path in streamed locations: the worker runs a scratch copy, and
#: every run of one kernel must stream the same records wherever its copy lies.
KERNEL_PATH = "<kernel>"


class TraceStreamError(ValueError):
    """A trace stream that does not decode: lines that the worker's writer did not produce."""


class TraceStreamWriter:
    """Streams trace events out of the process as JSON lines, each handed to ``write`` as it is made.

    Why: kernel code runs in the process that records its trace, so a record kept there can be
    reached and edited before it is priced. Written at once to a pipe that only the parent
    reads, a record is out of reach the moment it exists; the parent rebuilds the trace with
    :class:`TraceStreamReader`. Access records and locations are sent once each and named by
    number afterwards (loops touch the same views again and again), which keeps the stream small.
    """

    def __init__(self, write: Callable[[bytes], Any], kernel_path: str = "") -> None:
        self._write = write
        self._kernel = kernel_path
        self._accs: dict[Access, int] = {}
        self._locs: dict[str, int] = {}
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        self._names: dict[str, str] = {}
        self.sent = 0  #: instruction records sent for the current run, net of resets

    def _emit(self, obj: list[Any]) -> None:
        self._write(self._dumps(obj).encode() + b"\n")

    def _name(self, text: str) -> str:
        quoted = self._names.get(text)
        if quoted is None:
            quoted = self._names[text] = self._dumps(text)
        return quoted

    def _acc(self, a: Access) -> int:
        n = self._accs.get(a)
        if n is None:
            n = self._accs[a] = len(self._accs)
            self._emit(["A", n, _access_json(a)])
        return n

    def _public(self, loc: str) -> str:
        return KERNEL_PATH + loc[len(self._kernel):] if self._kernel and loc.startswith(self._kernel + ":") else loc

    def _loc(self, loc: str) -> int:
        n = self._locs.get(loc)
        if n is None:
            n = self._locs[loc] = len(self._locs)
            self._emit(["L", n, self._public(loc)])
        return n

    def begin(self, run_id: int) -> None:
        self.sent = 0
        self._emit(["R", int(run_id)])

    def __call__(self, kind: str, ins: Instruction | None) -> None:
        if ins is None:
            self.sent = 0
            self._emit(["X"])
            return
        if kind == "I":
            self.sent += 1
        acc, dumps, name = self._acc, self._dumps, self._name
        # the line is assembled by hand (json.dumps of the whole record costs more than the run's arithmetic
        # for small instructions); names and attribute values still go through json, which escapes them
        reads = ",".join([str(acc(a)) for a in ins.reads])
        writes = ",".join([str(acc(a)) for a in ins.writes])
        loops = ",".join([f"[{u},{name(k)},{n}]" for u, k, n in ins.loops])
        attrs = dumps(_attrs_json(ins.attrs)) if ins.attrs else "{}"
        line = (f'["{kind}",{ins.seq},{name(ins.op)},{name(ins.engine)},[{reads}],[{writes}],{self._loc(ins.location)},'
                f'[{",".join(map(str, ins.program_id))}],[{loops}],{attrs}]\n')
        self._write(line.encode())

    def end(self, run_id: int, trace: Trace) -> None:
        """Close a run with what is only final once it has ended: target, allocation records, warnings."""
        allocations = [{**a, "location": self._public(str(a["location"]))} if "location" in a else a for a in trace.allocations]
        self._emit(["E", int(run_id), trace.target, allocations, [str(w) for w in trace.warnings], self.sent, trace.unfaithful])


class TraceStreamReader:
    """Rebuilds the traces a :class:`TraceStreamWriter` streamed, one per run id; refuses anything else."""

    def __init__(self, kernel_path: str = "") -> None:
        self._kernel = kernel_path
        self._accs: list[Access] = []
        self._locs: list[str] = []
        self._buf = b""
        self._run: int | None = None
        self._trace: Trace | None = None
        self.traces: dict[int, Trace] = {}

    def _private(self, loc: str) -> str:
        return self._kernel + loc[len(KERNEL_PATH):] if self._kernel and loc.startswith(KERNEL_PATH + ":") else loc

    def feed(self, data: bytes) -> None:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            try:
                self._line(json.loads(line))
            except TraceStreamError:
                raise
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                raise TraceStreamError(f"undecodable trace line {line[:80]!r}: {exc}") from exc

    def _line(self, obj: list[Any]) -> None:
        kind = obj[0]
        if kind == "A" and obj[1] == len(self._accs):
            self._accs.append(_access_from(obj[2]))
        elif kind == "L" and obj[1] == len(self._locs):
            self._locs.append(self._private(str(obj[2])))
        elif kind == "R" and self._trace is None and int(obj[1]) not in self.traces:
            self._run, self._trace = int(obj[1]), Trace()
        elif kind in ("I", "M") and self._trace is not None:
            _, seq, op, eng, reads, writes, loc, pid, loops, attrs = obj
            ins = _instruction(seq, op, eng, tuple(self._accs[r] for r in reads), tuple(self._accs[w] for w in writes),
                               self._locs[loc], pid, loops, attrs)
            if kind == "I":
                self._trace.instructions.append(ins)
            elif self._trace.instructions:
                self._trace.instructions[-1] = ins
            else:
                raise TraceStreamError("a record was amended before any was made")
        elif kind == "X" and self._trace is not None:
            self._trace.instructions.clear()
        elif kind == "E" and self._trace is not None and int(obj[1]) == self._run:
            _, _, target, allocations, warnings, sent, unfaithful = obj
            if int(sent) != len(self._trace.instructions):
                raise TraceStreamError(f"run {self._run}: {sent} records announced, {len(self._trace.instructions)} received")
            self._trace.target = str(target)
            self._trace.allocations = [{**a, "location": self._private(str(a["location"]))} if "location" in a else dict(a) for a in allocations]
            self._trace.warnings = [str(w) for w in warnings]
            self._trace.unfaithful = [str(w) for w in unfaithful]
            assert self._run is not None
            self.traces[self._run] = self._trace
            self._run, self._trace = None, None
        else:
            raise TraceStreamError(f"unexpected trace line {str(obj)[:80]}")

    def progress(self) -> tuple[int | None, int]:
        """The run being streamed now (``None`` between runs) and the records it has sent so far."""
        return self._run, len(self._trace.instructions) if self._trace is not None else 0

    def finish(self) -> dict[int, Trace]:
        """The complete runs' traces; a run left open or a partial line means the stream was cut or forged."""
        if self._buf or self._trace is not None:
            raise TraceStreamError("the trace stream ended in the middle of a run")
        return self.traces
