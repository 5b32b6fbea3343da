"""Where each instruction runs: the engines the NKI ISA lets it use, declared once.

An op that takes ``engine=`` resolves it with :func:`select` (``nisa.engine.unknown`` picks the
op's default); an op without one runs on the single engine its row lists. An engine the
hardware cannot run the op on is refused with ``err_unsupported_engine``, naming the op, the
engine given and the engines allowed, so the trace only ever holds the engine an instruction
really runs on and the cost model prices it there. ``dma_copy``'s ``engine=`` is different: it
picks the sequencer that triggers hardware DGE (:func:`dge_trigger`), never where data moves.

Each instruction declares its engines where it is defined (:func:`nkiagent.emu.registry.instruction`),
citing the AWS page they come from; where the docs name no engine, the declaration keeps the
engine the emulator always used.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .errors import NkiTypeError, NkiValidationError
from .memory import current
from .registry import REGISTRY, Placement

__all__ = ["DGE_TRIGGER", "ENGINES", "ENGINE_NAMES", "Placement", "allowed_on", "dge_trigger", "engine_name", "select"]

#: ``nisa.engine`` values by number (the enum of nki-reference §2.5; 0.1 kernels may pass the numbers).
ENGINE_NAMES = {0: "unknown", 1: "tensor", 2: "scalar", 3: "gpsimd", 4: "dma", 5: "vector", 6: "sync"}

#: NeuronCore generation → the target it is, for messages.
_TARGET_OF = {2: "trn1", 3: "trn2", 4: "trn3"}

_UNKNOWN: Any = None  # the nisa.engine.unknown member, set by instructions.common (a fast path: the everyday default)


class _Placements(Mapping[str, Placement]):
    """Op name → its :class:`Placement`, read from each instruction's declaration in the registry."""

    def __getitem__(self, op: str) -> Placement:
        return REGISTRY[op].placement

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


#: The engines of every instruction (its ``engines=`` declaration), the default first.
ENGINES: Mapping[str, Placement] = _Placements()

#: ``dma_copy(engine=...)``: the sequencer that triggers the hardware DGE block, valid with ``dge_mode=hwdge`` only.
DGE_TRIGGER = Placement(
    ("sync", "scalar"),
    "https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.dma_copy.html (engine: "
    "'the engine to use for HWDGE descriptor generation: nki.isa.engine.sync or nki.isa.engine.scalar. Only valid when dge_mode=hwdge')",
)

#: (op, nc_version) → engines allowed there; a handful of entries, asked on every explicit engine=.
_ALLOWED: dict[tuple[str, int], tuple[str, ...]] = {}


def allowed_on(op: str, nc_version: int) -> tuple[str, ...]:
    """The engines ``op`` may run on for a NeuronCore of generation ``nc_version``."""
    hit = _ALLOWED.get((op, nc_version))
    if hit is None:
        hit = _ALLOWED[(op, nc_version)] = ENGINES[op].on(nc_version)
    return hit


def engine_name(engine: Any) -> str:
    """The name of an ``nisa.engine`` value (``unknown`` included); anything else is an ``NkiTypeError``.

    0.1 kernels may pass the enum's numbers; 0.3+ rejects integer literals, as the real API does.
    """
    value = getattr(engine, "value", engine)
    if isinstance(value, str) and value in ENGINE_NAMES.values():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not hasattr(engine, "value") and current().api != "0.1":
            raise NkiTypeError("err_enum_int_literal", f"engine must be an nisa.engine member, not the integer {value}")
        if value in ENGINE_NAMES:
            return ENGINE_NAMES[value]
    raise NkiTypeError(
        "err_invalid_engine",
        f"engine={engine!r} is not an nisa.engine member; pass one of nisa.engine.{', nisa.engine.'.join(ENGINE_NAMES.values())}",
    )


def _choices(engines: tuple[str, ...]) -> str:
    return " or ".join(f"engine=nisa.engine.{e}" for e in engines)


def select(op: str, engine: Any, default: str) -> str:
    """The engine ``op`` runs on: ``default`` for ``nisa.engine.unknown``, else the engine named if the ISA allows it there.

    Why a refusal and not the default: an engine the hardware lacks for this op would make the
    cost model price the work on a lane that cannot do it (TensorE, Sync, …).
    """
    if engine is _UNKNOWN or engine is None:
        return default
    name = engine_name(engine)
    if name == "unknown":
        return default
    version = current().target.nc_version
    allowed = allowed_on(op, version)
    if name in allowed:
        return name
    where = ""
    if name in ENGINES[op].engines:  # an engine a later generation added
        where = f" on {_TARGET_OF.get(version, f'gen{version}')} (NeuronCore-v{version})"
    raise NkiValidationError(
        "err_unsupported_engine",
        f"Expected '{op}' to run on engine '{'|'.join(allowed)}'{where}, but got engine '{name}' instead; "
        f"pass {_choices(allowed)}, or leave engine unset{ENGINES[op].hint}",
    )


def dge_trigger(engine: Any, hwdge: bool) -> str | None:
    """The sequencer ``dma_copy(engine=...)`` asks to trigger hardware DGE, or ``None`` when left to the compiler.

    The DMA itself always runs on the DMA queues; the trigger adds no compute instruction, so
    the cost model has nothing to price for it (and a compute engine named here must not
    become a DMA lane either).
    """
    if engine is _UNKNOWN or engine is None:
        return None
    name = engine_name(engine)
    if name == "unknown":
        return None
    allowed = DGE_TRIGGER.engines
    if name not in allowed:
        raise NkiValidationError(
            "err_unsupported_engine",
            f"Expected 'dma_copy' to be triggered by engine '{'|'.join(allowed)}', but got engine '{name}' instead; "
            f"engine= picks the sequencer that triggers hardware DGE: pass {_choices(allowed)} with dge_mode=nisa.dge_mode.hwdge, or leave engine unset",
        )
    if not hwdge:
        raise NkiValidationError(
            "err_dma_engine_without_hwdge",
            f"dma_copy engine=nisa.engine.{name} picks the trigger of hardware DGE and is only valid with dge_mode=nisa.dge_mode.hwdge; "
            "pass dge_mode=nisa.dge_mode.hwdge, or leave engine unset",
        )
    return name
