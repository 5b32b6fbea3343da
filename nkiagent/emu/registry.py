"""One declaration per NKI instruction: signature, semantics, engines, cost attributes and docs together.

Every ``nki.isa`` instruction is a function in one op-family module of
:mod:`nkiagent.emu.instructions`, decorated with :func:`instruction`. The decorator records an
:class:`InstructionDef` in :data:`REGISTRY`, and everything else reads that table instead of a
list of its own:

* the engine checks (:mod:`nkiagent.emu.engines`) take each op's allowed engines from it,
* the cost model (:mod:`nkiagent.perf.rules`) keys its rules by the same names (or the shared
  formula an op's ``cost=`` names), and a test fails when a registered op has no rule,
* the cheat-sheet and the ``nki_docs`` corpus (:mod:`nkiagent.agent.cheatsheet`) are rendered from
  its signatures, engines, paragraphs, rules and examples,
* ``nki.isa``'s namespace (:mod:`nkiagent.emu.isa`) is built from it.

Each public ``nki.language`` function is declared the same way, with :func:`lowering`: the
instructions it lowers to (none for allocation, loops, SPMD queries and views), its docs and
one example, recorded in :data:`LOWERINGS`. The cheat-sheet and ``nki_docs`` render ``nl`` from
that table, and a test runs every example and fails when it issues an instruction its
declaration does not name, or when a public ``nl`` function is not declared.

So adding an op is writing one decorated function (JAX's ``standard_primitive`` and nkipy's op
registry have the same shape). The decorator returns the function itself, unwrapped: declaring
an op costs nothing per call.

Cost attributes are a small frozen dataclass per op family (:class:`CostAttrs`). The trace keeps
them as the plain ``attrs`` dict of its records (its wire format, which traces on disk and
tests read), and :meth:`CostAttrs.of` turns a record's dict into the declared type, refusing a
key the op does not declare: a record and its declaration cannot drift apart unnoticed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Self, TypeVar

__all__ = [
    "DOCS", "FAMILIES", "ISA_INDEX", "LOWERINGS", "REGISTRY", "SILENT", "AccumulatorAttrs", "AluAttrs", "AluPairAttrs",
    "CostAttrs", "InstructionDef", "LoweringDef", "NoAttrs", "Placement", "instruction", "lowering", "page",
]  # fmt: skip

#: The op families, in the order the cheat-sheet lists them (one module each under ``instructions/``).
FAMILIES = (
    "data movement",
    "element-wise",
    "reductions and scans",
    "TensorE",
    "statistics",
    "selection and top-8",
    "gather and shuffle",
    "random",
    "registers and control",
)

#: Where declarations cite the engines they allow from: the AWS API pages (``SILENT``: the docs name none).
DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api"
ISA_INDEX = f"{DOCS}/nki.isa.html"
SILENT = "docs name no engine: the emulator's engine kept"


def page(op: str) -> str:
    """The AWS API page of ``nki.isa.<op>``."""
    return f"{DOCS}/generated/nki.isa.{op}.html"


@dataclass(frozen=True, slots=True)
class Placement:
    """The engines one instruction may run on, the default first, from ``source``.

    ``since`` lists engines the op gained in a later NeuronCore generation, as
    ``(engine, first nc_version)``; ``hint`` is appended to the refusal (the docs' advice).
    """

    engines: tuple[str, ...]
    source: str
    since: tuple[tuple[str, int], ...] = ()
    hint: str = ""

    def on(self, nc_version: int) -> tuple[str, ...]:
        """The engines allowed on a NeuronCore of generation ``nc_version``."""
        first = dict(self.since)
        return tuple(e for e in self.engines if nc_version >= first.get(e, 0))


@dataclass(frozen=True, slots=True, kw_only=True)
class CostAttrs:
    """The attributes an instruction's record carries for the cost model; the base of every op's type.

    ``lowered_from`` is set by the 0.1 front-end on instructions it lowers an ``nl`` call to.
    """

    lowered_from: str | None = None

    @classmethod
    def of(cls, op: str, attrs: Mapping[str, Any]) -> Self:
        """``attrs`` (a trace record's dict) as this type; a key the type lacks is an error naming the op."""
        try:
            return cls(**attrs)
        except TypeError:
            declared = {f.name: f for f in fields(cls)}
            unknown = sorted(set(attrs) - set(declared))
            missing = sorted(n for n, f in declared.items() if n not in attrs and f.default is MISSING)
            raise TypeError(
                f"{op}: its trace record does not fit its declared cost attributes {cls.__name__}: "
                f"undeclared {unknown}, missing {missing}; record what the op's attrs dataclass declares (or declare it there)"
            ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class NoAttrs(CostAttrs):
    """An instruction whose cost depends on its operands alone."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AluAttrs(CostAttrs):
    """One ALU operator (``tensor_tensor``, the reductions): its name, e.g. ``"add"``."""

    alu: str
    axes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AluPairAttrs(CostAttrs):
    """Two chained ALU operators ``(op0, op1)``; ``op1`` may be ``None`` (``tensor_scalar``)."""

    alu: tuple[str, str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AccumulatorAttrs(CostAttrs):
    """An instruction driving the Vector Engine accumulators with ``reduce_cmd``."""

    reduce_cmd: str
    alu: tuple[str, str] | None = None
    reverse_pred: bool = False
    cmp: tuple[str, str] | None = None
    range_start: int = 0


@dataclass(frozen=True, slots=True)
class InstructionDef:
    """Everything declared about one ``nki.isa`` instruction."""

    name: str
    family: str
    impl: Callable[..., Any]
    placement: Placement
    attrs: type[CostAttrs]
    summary: str  #: one paragraph: what it computes
    rules: tuple[str, ...]  #: the operand, memory and target rules it enforces
    example: str  #: one call, as a kernel writes it
    nc_version: int = 2  #: the first NeuronCore generation that has it
    cost: str = ""  #: the name of its rule in ``nkiagent.perf.rules``: the op's own name, or a shared formula's

    @property
    def engines(self) -> tuple[str, ...]:
        return self.placement.engines

    @property
    def default_engine(self) -> str:
        return self.placement.engines[0]

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.impl)


#: Every declared instruction by name, in declaration order.
REGISTRY: dict[str, InstructionDef] = {}

_F = TypeVar("_F", bound=Callable[..., Any])


def instruction(
    *,
    family: str,
    engines: str,
    source: str,
    example: str,
    rules: tuple[str, ...] = (),
    attrs: type[CostAttrs] = NoAttrs,
    since: tuple[tuple[str, int], ...] = (),
    hint: str = "",
    nc_version: int = 2,
    cost: str | None = None,
) -> Callable[[_F], _F]:
    """Declare the decorated function as the ``nki.isa`` instruction of its name.

    ``engines`` lists the engines the ISA allows, space-separated, the default first;
    ``source`` is the AWS page they come from. The docstring's first paragraph is the op's
    summary. ``cost`` names the cost model's rule for it (by default a rule of the op's own name;
    an op priced like others names their shared formula, e.g. ``"gpsimd_pass"``), so the cost
    model reads it from here and needs no edit of its own. Declaring a name twice, an unknown family or a function without a docstring is an
    error at import, so an incomplete declaration cannot ship.
    """
    if family not in FAMILIES:
        raise ValueError(f"instruction family {family!r} is not one of {FAMILIES}")

    def declare(fn: _F) -> _F:
        name = fn.__name__
        if name in REGISTRY:
            raise ValueError(f"nki.isa.{name} is declared twice: in {REGISTRY[name].impl.__module__} and {fn.__module__}")
        doc = inspect.getdoc(fn)
        if not doc:
            raise ValueError(f"nki.isa.{name} ({fn.__module__}) has no docstring: its first paragraph is the op's documentation")
        REGISTRY[name] = InstructionDef(
            name, family, fn, Placement(tuple(engines.split()), source, since, hint), attrs,
            " ".join(doc.split("\n\n")[0].split()), rules, example, nc_version, cost or name,
        )  # fmt: skip
        return fn

    return declare


@dataclass(frozen=True, slots=True)
class LoweringDef:
    """Everything declared about one ``nki.language`` function: what it lowers to, and its docs."""

    name: str
    impl: Callable[..., Any]
    lowers_to: tuple[str, ...]  #: the ``nki.isa`` instructions it may issue; none for allocation, loops, queries and views
    summary: str  #: the docstring's first paragraph
    example: str  #: one call, as a kernel writes it (``tests/emu/test_lowerings.py`` runs it)


#: Every declared ``nki.language`` function by name, in declaration order.
LOWERINGS: dict[str, LoweringDef] = {}


def lowering(*lowers_to: str, example: str) -> Callable[[_F], _F]:
    """Declare the decorated function as the ``nki.language`` function of its name, lowering to ``lowers_to``.

    ``lowers_to`` names every instruction the function may issue (an ``nl`` function is sugar
    over instructions a kernel could issue itself, so the trace and the cost model see one
    instruction set); none for a function that issues no instruction. A name that is no
    registered instruction, a second declaration of a name, a function without a docstring or
    an example that does not call the function is an error at import. Returns the function itself.
    """
    unknown = [op for op in lowers_to if op not in REGISTRY]
    if unknown:
        raise ValueError(f"lowering to {unknown}: no such nki.isa instruction is declared (declare it in nkiagent/emu/instructions/ first)")

    def declare(fn: _F) -> _F:
        name = fn.__name__
        if name in LOWERINGS:
            raise ValueError(f"nki.language.{name} is declared twice: in {LOWERINGS[name].impl.__module__} and {fn.__module__}")
        doc = inspect.getdoc(fn)
        if not doc:
            raise ValueError(f"nki.language.{name} ({fn.__module__}) has no docstring: its first paragraph is the function's documentation")
        if not example.startswith(f"nl.{name}("):
            raise ValueError(f"nki.language.{name}: its example {example!r} must be a call of nl.{name}(...)")
        LOWERINGS[name] = LoweringDef(name, fn, tuple(lowers_to), " ".join(doc.split("\n\n")[0].split()), example)
        return fn

    return declare
