"""The cost rule of every instruction, keyed by the names the emulator's registry declares.

Each rule turns one trace record (and its typed cost attributes, the dataclass its op declares
in :mod:`nkiagent.emu.registry`) into engine cycles, from the per-instruction formulas of §4.3
of the reference; a DMA's rule says so and :func:`nkiagent.perf.cost.instruction_cost` prices
it by bytes and queues instead. There is no fallback: an op without a rule cannot be priced
(``UnpricedInstruction``), and ``tests/perf/test_rules.py`` lists every registered op and fails
for one without a rule, so a new instruction cannot silently cost "about 64 cycles". A rule is
found by the name an op's declaration gives (:func:`rule_for`): its own, or a shared formula
such as ``gpsimd_pass``, which a new op can name without an edit here.

``N`` is elements per partition (free size); ``ii`` is the engines' minimum initiation
interval (``spec.min_ii``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..emu.instructions.movement import MemsetAttrs
from ..emu.instructions.tensor_engine import MatmulAttrs, TransposeAttrs
from ..emu.registry import REGISTRY, AluAttrs, AluPairAttrs, CostAttrs
from ..emu.trace import Instruction
from .specs import HardwareSpec

__all__ = ["RULES", "SYNTHETIC_OPS", "CostRule", "elems_per_partition", "flops", "rule_for"]

_SIXTEEN_BIT = {"bfloat16", "float16"}

#: Instructions the timeline makes itself (SBUF spills to HBM and back): DMAs no kernel issues.
SYNTHETIC_OPS = ("spill_load", "spill_store")

Cycles = Callable[[Instruction, Any, HardwareSpec], float]


@dataclass(frozen=True, slots=True)
class CostRule:
    """How one op is priced: ``cycles`` on its compute engine, or ``None`` for a DMA (priced by bytes)."""

    op: str
    cycles: Cycles | None
    basis: str  #: where the formula comes from


#: Rule name (an op's name, or a formula several ops share) → the rule.
RULES: dict[str, CostRule] = {}


def rule_for(op: str) -> CostRule | None:
    """The rule pricing ``op``: the one its declaration names (``cost=``, by default its own name)."""
    declared = REGISTRY.get(op)
    return RULES.get(declared.cost if declared is not None else op)


def _rule(*ops: str, basis: str) -> Callable[[Cycles], Cycles]:
    def register(fn: Cycles) -> Cycles:
        for op in ops:
            if op in RULES:
                raise ValueError(f"two cost rules for {op}")
            RULES[op] = CostRule(op, fn, basis)
        return fn

    return register


def _dma(*ops: str, basis: str) -> None:
    for op in ops:
        RULES[op] = CostRule(op, None, basis)


def elems_per_partition(ins: Instruction) -> int:
    """``N``: the largest free size among the instruction's operands."""
    pool = ins.reads + ins.writes
    return max((a.elems_per_partition for a in pool), default=1)


def _all_16bit(ins: Instruction) -> bool:
    return all(a.dtype in _SIXTEEN_BIT for a in ins.reads + ins.writes)


def _vector_fast_factor(ins: Instruction, spec: HardwareSpec) -> float:
    """trn2/trn3 VectorE perf modes for 16-bit data (§4.1)."""
    if not spec.dve_fast_modes or not _all_16bit(ins):
        return 1.0
    mems = {a.memory for a in ins.reads + ins.writes}
    contiguous = all(a.contiguous for a in ins.reads + ins.writes)
    if ins.op in ("tensor_copy", "tensor_scalar"):
        return 4.0 if mems == {"sbuf"} and contiguous else 2.0
    if ins.op == "tensor_tensor" and all(a.memory == "sbuf" for a in ins.reads):
        return 2.0
    return 1.0


def flops(ins: Instruction, attrs: CostAttrs) -> float:
    """Floating-point operations the instruction counts for the roofline (matmuls only)."""
    return 2.0 * attrs.K * attrs.M * attrs.N if isinstance(attrs, MatmulAttrs) else 0.0


_dma("dma_copy", "dma_transpose", "sendrecv", *SYNTHETIC_OPS, basis="§4.2: bytes, contiguous chunk, queues, fixed latency")


@_rule("nc_matmul", basis="§4.3: max(min(64, M), N) cycles; fp32 4 passes, 2 with a 0/1 operand")
def _matmul(ins: Instruction, a: MatmulAttrs, spec: HardwareSpec) -> float:
    cyc = float(max(min(64, a.M), a.N))
    if a.fp32:
        cyc *= 2 if a.onezero else 4
    return cyc


@_rule("nc_transpose", basis="§4.3: TensorE max(P, min(64, F)); VectorE max(ii, N)")
def _transpose(ins: Instruction, a: TransposeAttrs, spec: HardwareSpec) -> float:
    if ins.engine == "tensor":
        return max(a.P, min(64, a.F))
    return max(spec.min_ii, elems_per_partition(ins))


@_rule("activation", "bn_stats", "max8", "nc_find_index8", basis="§4.3: max(ii, N)")
def _streaming(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, elems_per_partition(ins))


@_rule("activation_reduce", "tensor_scalar_reduce", "tensor_scalar_cumulative", basis="§4.3: max(ii, N) plus ii for the reduction")
def _with_reduction(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, elems_per_partition(ins)) + spec.min_ii


@_rule("tensor_scalar", "tensor_copy", basis="§4.1/§4.3: max(ii, N), divided by VectorE's 16-bit perf mode")
def _scalar_or_copy(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    cyc = max(spec.min_ii, elems_per_partition(ins))
    return cyc / _vector_fast_factor(ins, spec) if ins.engine == "vector" else cyc


@_rule("tensor_tensor", basis="§4.3: max(ii, 2N), N with one PSUM operand or a 16-bit add/multiply/subtract")
def _tensor_tensor(ins: Instruction, a: AluAttrs, spec: HardwareSpec) -> float:
    n, ii = elems_per_partition(ins), spec.min_ii
    mems = [x.memory for x in ins.reads]
    one_psum = len(mems) == 2 and sorted(mems) == ["psum", "sbuf"]
    fast_alu = a.alu in ("add", "multiply", "subtract") and _all_16bit(ins) and all(x.contiguous for x in ins.reads)
    cyc = max(ii, n) if (one_psum or fast_alu) else max(ii, 2 * n)
    return cyc / (_vector_fast_factor(ins, spec) if not one_psum else 1.0)


@_rule("scalar_tensor_tensor", basis="§4.3: max(ii, 2N), N for 16-bit (subtract, multiply) on even N")
def _scalar_tensor_tensor(ins: Instruction, a: AluPairAttrs, spec: HardwareSpec) -> float:
    n = elems_per_partition(ins)
    fast = a.alu == ("subtract", "multiply") and _all_16bit(ins) and n % 2 == 0
    return max(spec.min_ii, n if fast else 2 * n)


@_rule("tensor_reduce", basis="§4.3: max(ii, N), N/2 for a 16-bit add or maximum")
def _tensor_reduce(ins: Instruction, a: AluAttrs, spec: HardwareSpec) -> float:
    n = elems_per_partition(ins)
    fast = _all_16bit(ins) and a.alu in ("add", "maximum")
    return max(spec.min_ii, n / 2 if fast else n)


@_rule("tensor_tensor_scan", basis="§4.3: max(ii, 2N)")
def _scan(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, 2 * elems_per_partition(ins))


@_rule("tensor_copy_predicated", basis="§4.3: max(ii, N) from two memories, else max(ii, 2N)")
def _copy_predicated(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    n = elems_per_partition(ins)
    return max(spec.min_ii, n) if len({x.memory for x in ins.reads}) > 1 else max(spec.min_ii, 2 * n)


@_rule("memset", basis="§4.3: max(ii, N), N/2 zeroing 16-bit data")
def _memset(ins: Instruction, a: MemsetAttrs, spec: HardwareSpec) -> float:
    n = elems_per_partition(ins)
    return max(spec.min_ii, n / 2 if a.value == 0.0 and _all_16bit(ins) else n)


@_rule("reciprocal", basis="§4.3: max(ii, 8N)")
def _reciprocal(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, 8 * elems_per_partition(ins))


@_rule("bn_aggr", basis="§4.3: max(ii, 13N/3)")
def _bn_aggr(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, 13 * elems_per_partition(ins) / 3)


@_rule("iota", "affine_select", "local_gather", "gpsimd_pass", basis="§4.3: GpSimd start-up plus N")
def _gpsimd(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return spec.gpsimd_start_cycles + elems_per_partition(ins)


@_rule("tensor_partition_reduce", basis="assumption (no documented formula): GpSimd start-up plus 2N")
def _partition_reduce(ins: Instruction, a: AluAttrs, spec: HardwareSpec) -> float:
    return spec.gpsimd_start_cycles + 2 * elems_per_partition(ins)


@_rule(
    "select_reduce", "range_select", "nc_match_replace8", "nc_stream_shuffle", "dropout", "exponential",
    basis="assumption (no documented formula): one VectorE pass, max(ii, N)",
)  # fmt: skip
def _vector_pass(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, elems_per_partition(ins))


@_rule("register_alloc", "register_move", "register_load", "register_store", basis="assumption: one sequencer step, ii cycles")
def _register(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return max(spec.min_ii, elems_per_partition(ins))


@_rule("core_barrier", basis="assumption (no documented formula): a semaphore write to the peer core and a wait, one DMA fixed latency")
def _core_barrier(ins: Instruction, a: CostAttrs, spec: HardwareSpec) -> float:
    return spec.dma_fixed_ns * spec.engine_ghz(ins.engine)
