"""The NKI cheat-sheet and the ``nki_docs`` instruction pages, generated from the emulator's registry.

``prompts/nki_cheatsheet.md`` is this module's output, committed; a test regenerates it and
fails if the two differ, so the sheet never promises an API the emulator lacks. Its
``nki.isa`` table and the per-instruction pages ``nki_docs`` searches (:func:`instruction_docs`)
come from each op's declaration (:mod:`nkiagent.emu.registry`) and its cost rule
(:mod:`nkiagent.perf.rules`), its ``nki.language`` table and pages (:func:`language_docs`) from
each function's ``@lowering`` declaration: what a model reads is what the emulator enforces and
the cost model charges.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..emu.registry import Placement

__all__ = ["instruction_docs", "language_docs", "render_cheatsheet", "write_cheatsheet"]

RULES = """\
# Rules the hardware (and the emulator) enforce
- Tiles in SBUF/PSUM are 2-D or more with the partition dim first; at most 128 partitions.
- SBUF per partition: 180224 B (trn1), 212984 B (trn2), 245752 B (trn3), counting every live tile.
- PSUM: 8 banks of 2 KiB per partition (512 fp32); a matmul result must lie within one bank (trn1/trn2).
- nc_matmul(dst, stationary[K, M], moving[K, N]): dst[M, N] = stationaryᵀ · moving; K ≤ 128, M ≤ 128,
  N ≤ 512; operands in SBUF, dst in PSUM and fp32 on trn1/trn2. accumulate=None: the first write overwrites,
  later matmuls into the same PSUM tile accumulate until another instruction reads it.
- Engines: TensorE reads SBUF and writes PSUM; GpSimd cannot touch PSUM; dma_copy moves HBM↔SBUF (not PSUM).
- tensor_tensor needs the same partitions and elements per partition (no broadcasting): use tensor_scalar
  with a [P, 1] fp32 column to broadcast along the free dims.
- activation(dst, op, data, bias=[P,1] tile, scale=float or [P,1] fp32): dst = op(data·scale + bias);
  reduce_op=nl.add with reduce_res=[P,1] sums each row for free.
- Compute instructions start at partition 0 (or 32/64/96 for ≤ 32 partitions, 0/64 for ≤ 64).
- Kernel outputs: nl.ndarray(shape, dtype, buffer=nl.shared_hbm), written by DMA, returned.

# What the verifier refuses, and what to write instead
- Imports: only nki, nki.language, nki.isa, nki.typing (or neuronxcc.nki.*), numpy, math, functools, itertools,
  typing, dataclasses, enum. No files, processes, eval/exec, getattr with computed names, dunder attributes or frames.
- Tiles are opaque: no NumPy on tile data inside functions (np.asarray, .tolist()); compute with nl.* / nisa.* ops.
- Every `except` ends in `raise`; `with` only for nl.no_reorder().
- State may not outlive a call: no `global`, no writes to module-level containers from functions, no mutable or
  computed default arguments. A per-call counter (`nonlocal`) or dict cache inside the kernel is fine when the helper
  that changes it is only called there (never returned, stored or passed on); functools.lru_cache on pure shape
  helpers is fine; so are @dataclass configs, NamedTuples and Enums (dunder methods: __init__/__post_init__ only).
- One SPMD program cannot use another program's SBUF/PSUM tiles: allocate them in every program.
- A kernel's instructions depend only on its shapes: loading data into registers to choose instructions (dynamic
  loops, data-dependent addresses) is rejected unless the task allows it; then the slowest run is the latency.
- Engines: use each op only on the engines the ISA allows (nc_matmul TensorE, activation ScalarE, tensor_tensor
  VectorE or GpSimd, ...); hint flags such as is_stationary_onezero are checked against the data.

# Performance (what the cost model rewards)
- Keep several DMAs in flight (allocate tiles inside loops so iterations overlap): each pays a fixed latency.
- Scheduling, as the compiler does it: an instruction issues once its inputs are ready and its engine (or DMA
  queues) is free, not in source order; among the ready ones the first that can start goes first, within a window of
  {lookahead} instructions. Reordering independent lines changes nothing; `with nl.no_reorder():` keeps program order on
  each engine and fences the block (for when the greedy order is worse, e.g. urgent stores behind early loads).
- Reuse loaded tiles (hoist loads out of inner loops, block the free dimensions); every reload costs HBM traffic.
- Keep TensorE busy: bf16 operands (fp32 takes 4 passes), K = M = 128, N = 512; accumulate over K in PSUM.
- Vector/Scalar cost ~max(64, N) cycles + 60 fixed per instruction whatever the partitions: fewer, wider
  instructions; fuse scale/bias/exp into one activation.
"""


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f} µs"


def _kib(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB" if nbytes >= 1024 else f"{nbytes} B"


def _cost_tables() -> list[str]:
    """The DMA cost curve and the engine cost table, as the cost model prices traced instructions (:mod:`nkiagent.perf.tables`)."""
    from ..perf.cost import dma_efficiency
    from ..perf.sol import dma_peak_bytes_per_ns
    from ..perf.specs import get_spec
    from ..perf.tables import dma_cases, dma_curve, engine_table

    specs = [get_spec(t) for t in ("trn1", "trn2", "trn3")]
    trn2 = specs[1]
    per_queue = " / ".join(f"{s.dma_bytes_per_ns_per_queue:g}" for s in specs)
    peaks = " / ".join(f"{dma_peak_bytes_per_ns(s):g}" for s in specs)
    effs = ", ".join(f"{_kib(b)} {100 * dma_efficiency(b, trn2):.0f}%" for b in (64, 256, 1024, 2048, trn2.dma_full_chunk))
    curve = ", ".join(
        f"{_kib(r.nbytes // 128)} {_us(r.latency_ns)} ({r.bytes_per_ns:.0f} B/ns)" for r in dma_curve("trn2") if r.nbytes >= 128 * 512
    )
    cases = "; ".join(f"{r.label} {_us(r.latency_ns)}" for r in dma_cases("trn2")[2:])
    ops32, ops16 = engine_table("trn2", "float32"), engine_table("trn2", "bfloat16")
    ops = "; ".join(f"{a.label} {a.busy_ns:.0f} / {b.busy_ns:.0f}" for a, b in zip(ops32, ops16))
    dma = (
        f"- A DMA takes {trn2.dma_fixed_ns:g} ns fixed ({trn2.dma_hwdge_fixed_ns:g} ns with dge_mode=hwdge, trn2+, which copies without casting: equal dtypes) + bytes / (queues × "
        f"{per_queue} B/ns per queue on trn1 / trn2 / trn3 × efficiency). Its queues are busy only {trn2.dma_issue_ns:g} ns + the "
        "transfer: the fixed part is latency, hidden behind other DMAs in flight (so hwdge gains only where nothing else is "
        "moving), while each extra DMA costs its queues that issue time. Queues: one per 8 partitions of its SBUF side "
        f"(128 partitions → all {trn2.dma_queues}); peak {peaks} B/ns, the speed of light's DMA rate. dma_copy(engine=sync|scalar) "
        "only picks which sequencer triggers hardware DGE (needs dge_mode=hwdge; no time on that engine, the DGE docs hide it "
        "behind the engine's work); priority= is refused (the queues have no priorities)."
    )
    curve_line = (
        f"- Efficiency by the shortest contiguous run per partition on either side: {effs} (full rate from "
        f"{_kib(trn2.dma_full_chunk)}). A 128-partition fp32 load of: {curve}."
    )
    return [
        "# What things cost (generated from the cost model: `emulator-estimate`, trn2 unless named)",
        dma,
        curve_line,
        f"- 2 KiB per partition or row, priced otherwise: {cases}.",
        f"- One instruction on [128, 512] tiles, ns fp32 / bf16 (VectorE unless named): {ops}.",
        "",
    ]


def _sig(fn: object) -> str:
    """``(dst, data, op=nl.add, engine=engine.unknown)``: names and defaults, no annotations."""
    import enum

    try:
        params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            continue
        if p.default is p.empty:
            parts.append(p.name)
        elif isinstance(p.default, enum.Enum):
            parts.append(f"{p.name}={type(p.default).__name__}.{p.default.name}")
        else:
            parts.append(f"{p.name}={p.default!r}")
    return "(" + ", ".join(parts) + ")"


def _first_line(fn: object) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.splitlines()[0] if doc else ""


def _engines(placement: Placement) -> str:
    """``vector (default), scalar (trn2+), gpsimd``: the engines, the default first, with the generation an engine came in."""
    since = dict(placement.since)
    names = [f"{e} (trn{since[e] - 1}+)" if e in since else e for e in placement.engines]
    return names[0] if len(names) == 1 else f"{names[0]} (default), {', '.join(names[1:])}"


def _isa_table() -> list[str]:
    """The ``nki.isa`` part of the sheet: every registered instruction by family, with its engines, then the queries."""
    from ..emu import isa
    from ..emu.facade import api_module
    from ..emu.registry import FAMILIES, REGISTRY

    out = ["# nki.isa (engines: the ISA's, default first; `nki_docs <op>` shows an op's rules and example)"]
    for family in FAMILIES:
        ops = sorted((d for d in REGISTRY.values() if d.family == family), key=lambda d: d.name)
        if ops:
            out.append(f"## {family}")
        for d in ops:
            since = f"; trn{d.nc_version - 1}+" if d.nc_version > 2 else ""
            out.append(f"- nisa.{d.name}{_sig(d.impl)} — {d.summary} [{_engines(d.placement)}{since}]")
    public = api_module("nki.isa", isa)
    missing = [n for n in public.__all__ if n in isa._KNOWN_NOT_EMULATED]  # importable, an error if called: one line
    queries = [n for n in public.__all__ if n not in REGISTRY and n not in missing and inspect.isfunction(getattr(public, n))]
    out += [f"- nisa.{n}{_sig(getattr(public, n))} — {_first_line(getattr(public, n))}" for n in queries]
    if missing:
        out.append(f"- not emulated (importable; calling one is an error that says why): {', '.join(f'nisa.{n}' for n in missing)}")
    return out + [""]


def render_cheatsheet() -> str:
    """The cheat-sheet text: rules, then every ``nki.isa`` instruction (from the registry) and ``nki.language`` API."""
    from ..perf.timeline import LOOKAHEAD

    out = [
        "# NKI cheat-sheet (generated from the nkiagent emulator; NKI 0.3+ API)",
        "",
        "import nki; import nki.language as nl; import nki.isa as nisa — kernels are @nki.jit functions.",
        "",
        RULES.format(lookahead=LOOKAHEAD),
    ]
    out += _cost_tables()
    out += _isa_table()
    out += _language_table()
    return "\n".join(out).rstrip() + "\n"


def _lowers_to(ops: tuple[str, ...]) -> str:
    return f" [→ {', '.join(ops)}]" if ops else ""


def _language_table() -> list[str]:
    """The ``nki.language`` part of the sheet: every declared function with the instructions it lowers to, then the memories."""
    from ..emu import language
    from ..emu.facade import api_module
    from ..emu.memory import Buffer
    from ..emu.registry import LOWERINGS

    out = ["# nki.language ([→ the nki.isa instructions a function lowers to, which the cost model prices]; none: no instruction)"]
    out += [f"- nl.{d.name}{_sig(d.impl)} — {d.summary}{_lowers_to(d.lowers_to)}" for d in sorted(LOWERINGS.values(), key=lambda d: d.name)]
    public = api_module("nki.language", language)
    memories = [n for n in public.__all__ if isinstance(getattr(public, n), Buffer)]
    out.append(f"- memories (buffer= of nl.ndarray): {', '.join(f'nl.{n}' for n in memories)}")
    return out


def instruction_docs() -> list[tuple[str, str]]:
    """One ``(title, body)`` page per registered instruction for ``nki_docs``: what it does, engines, rules, example, cost."""
    from ..emu.registry import REGISTRY
    from ..perf.rules import rule_for

    pages = []
    for d in REGISTRY.values():
        rule = rule_for(d.name)
        body = [
            f"nisa.{d.name}{_sig(d.impl)}", "", d.summary, "",
            f"Engines: {_engines(d.placement)} (source: {d.placement.source})",
            *([f"Needs trn{d.nc_version - 1} (NeuronCore-v{d.nc_version}) or later."] if d.nc_version > 2 else []),
            "Rules:", *(f"- {r}" for r in d.rules),
            f"Example: {d.example}",
            f"Cost: {rule.basis if rule else 'no cost rule: the cost model refuses to price it'}",
        ]  # fmt: skip
        pages.append((f"nisa.{d.name} ({d.family})", "\n".join(body)))
    return pages


def language_docs() -> list[tuple[str, str]]:
    """One ``(title, body)`` page per declared ``nki.language`` function for ``nki_docs``: what it does, the instructions it lowers to, example."""
    from ..emu.registry import LOWERINGS, REGISTRY

    pages = []
    for d in LOWERINGS.values():
        lowered = [f"- nisa.{op} [{_engines(REGISTRY[op].placement)}]" for op in d.lowers_to]
        body = [
            f"nl.{d.name}{_sig(d.impl)}", "", d.summary, "",
            *(["Lowers to (the cost model prices these instructions):", *lowered] if lowered else ["Issues no instruction."]),
            f"Example: {d.example}",
        ]  # fmt: skip
        pages.append((f"nl.{d.name} (nki.language)", "\n".join(body)))
    return pages


def write_cheatsheet(path: str | Path | None = None) -> Path:
    dest = Path(path) if path else Path(__file__).resolve().parents[2] / "prompts" / "nki_cheatsheet.md"
    dest.write_text(render_cheatsheet())
    return dest
