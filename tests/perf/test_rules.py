"""The cost registry covers exactly the emulator's registry: every declared op has a rule, typed by its declaration.

The tests are parametrised by op, so their ids list every instruction; deleting a rule (or
declaring an op without one) fails ``test_every_declared_op_has_a_cost_rule[<op>]``.
"""

from __future__ import annotations

import typing

import pytest

from nkiagent import emu
from nkiagent.emu.registry import REGISTRY
from nkiagent.perf.cost import UnpricedInstruction, instruction_cost
from nkiagent.perf.rules import RULES, SYNTHETIC_OPS, rule_for
from nkiagent.perf.specs import get_spec


@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_every_declared_op_has_a_cost_rule(op: str) -> None:
    rule = rule_for(op)
    assert rule is not None, f"nki.isa.{op} is declared with cost={REGISTRY[op].cost!r}, which names no rule in nkiagent/perf/rules.py"
    assert (rule.cycles is None) == (REGISTRY[op].engines == ("dma",)), f"{op}: DMAs (and only DMAs) are priced by bytes"
    assert rule.basis


@pytest.mark.parametrize("op", sorted(op for op in REGISTRY if REGISTRY[op].engines != ("dma",)))
def test_a_rule_reads_the_attributes_its_op_declares(op: str) -> None:
    """A rule annotated for another op's attributes would read fields its records never carry."""
    rule = rule_for(op)
    assert rule is not None and rule.cycles is not None
    assert typing.get_type_hints(rule.cycles)["a"] in REGISTRY[op].attrs.__mro__


def test_every_rule_prices_a_declared_or_synthetic_op() -> None:
    """No dead rules: each prices an op of that name, an op naming it with ``cost=``, or a timeline spill."""
    used = {d.cost for d in REGISTRY.values()} | set(REGISTRY)
    assert set(RULES) - used == set(SYNTHETIC_OPS)


def test_an_op_without_a_rule_is_refused_not_priced_at_a_default() -> None:
    ins = emu.Instruction(0, "tensor_frobnicate", "vector", (), (), "kernel.py:3")
    with pytest.raises(UnpricedInstruction, match=r"^kernel.py:3: no cost rule for tensor_frobnicate: every instruction needs one"):
        instruction_cost(ins, get_spec("trn2"))


def test_an_op_on_an_engine_its_declaration_lacks_is_refused() -> None:
    """A record claiming ALU work ran on TensorE (a lane the ISA never gives it) is not priced there."""
    ins = emu.Instruction(0, "tensor_tensor", "tensor", (), (), "kernel.py:4", attrs={"alu": "add"})
    with pytest.raises(
        UnpricedInstruction, match=r"^kernel.py:4: cannot price tensor_tensor on engine 'tensor': the ISA runs it on vector\|gpsimd only$"
    ):
        instruction_cost(ins, get_spec("trn2"))


def test_a_record_with_undeclared_attributes_is_refused() -> None:
    ins = emu.Instruction(0, "tensor_tensor", "vector", (), (), "kernel.py:5", attrs={"alu": "add", "discount": 4})
    with pytest.raises(
        TypeError,
        match=r"^tensor_tensor: its trace record does not fit its declared cost attributes AluAttrs: undeclared \['discount'\], missing \[\]",
    ):
        instruction_cost(ins, get_spec("trn2"))
