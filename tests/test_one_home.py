"""An op declared in one place reaches every consumer with no other edit (issue 19's acceptance).

A fixture declares a throwaway instruction, ``tensor_frobnicate``, with ``@instruction`` only, as
an op-family module would, and removes it afterwards. It then shows in the cheat-sheet and the
``nki_docs`` corpus, is priced by the cost model (through the shared formula its declaration
names) and is held to its declared engines. The completeness tests of the registry and of the
cost rules, run on it, pass; declared without a cost rule or without rules, they fail naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.agent.cheatsheet import render_cheatsheet
from nkiagent.agent.tools import nki_docs
from nkiagent.emu import engines
from nkiagent.emu.memory import current
from nkiagent.emu.ops import check_compute_operand, f32, record, write
from nkiagent.emu.registry import REGISTRY, InstructionDef, instruction
from nkiagent.perf.cost import instruction_cost
from nkiagent.perf.specs import get_spec
from tests.emu import test_registry as registry_tests  # (modules, so pytest does not collect their tests here again)
from tests.perf import test_rules as rules_tests

OP = "tensor_frobnicate"
X = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)


def tensor_frobnicate(dst: Any, data: Any, engine: Any = nisa.engine.unknown, name: Any = None) -> None:
    """``dst = 2·data + 1`` on VectorE or GpSimd: a throwaway op, declared by a test to follow one declaration everywhere."""
    ctx = current()
    eng = engines.select(OP, engine, "vector")
    data = check_compute_operand(ctx, OP, "data", data, eng)
    dst = check_compute_operand(ctx, OP, "dst", dst, eng)
    record(ctx, OP, eng, [("data", data)], [("dst", dst)])
    if ctx.compute:
        write(ctx, dst, f32(data) * 2 + 1)


Declare = Callable[..., InstructionDef]


@pytest.fixture
def declare() -> Iterator[Declare]:
    """Declares ``tensor_frobnicate`` (keyword arguments override the complete declaration), then removes it."""

    def make(**overrides: Any) -> InstructionDef:
        decl: dict[str, Any] = {
            "family": "element-wise",
            "engines": "vector gpsimd",
            "source": "https://example.invalid/tensor_frobnicate",
            "rules": ("data and dst on chip, with the same partitions and elements per partition",),
            "example": "nisa.tensor_frobnicate(dst=r, data=a)",
            "cost": "gpsimd_pass",  # a shared formula of nkiagent/perf/rules.py: no edit there
        }
        instruction(**{**decl, **overrides})(tensor_frobnicate)
        return REGISTRY[OP]

    yield make
    REGISTRY.pop(OP, None)
    for key in [k for k in engines._ALLOWED if k[0] == OP]:
        del engines._ALLOWED[key]


@nki.jit
def frobnicate_kernel(x: Any, eng: Any) -> Any:
    a = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    r = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    tensor_frobnicate(dst=r, data=a, engine=eng)  # (a registered op is in nki.isa from import on; this one came later)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def _run(eng: Any) -> tuple[np.ndarray, emu.Trace]:
    trace = emu.Trace()
    out = emu.run_kernel(frobnicate_kernel, (X, eng), target="trn2", trace=trace).outputs
    return np.asarray(out), trace


def test_the_cheatsheet_lists_it_under_its_family_with_its_engines(declare: Declare) -> None:
    assert OP not in render_cheatsheet()
    declare()
    sheet = render_cheatsheet().splitlines()
    (line,) = [ln for ln in sheet if ln.startswith(f"- nisa.{OP}(")]
    assert line == (
        f"- nisa.{OP}(dst, data, engine=engine.unknown, name=None) — ``dst = 2·data + 1`` on VectorE or GpSimd: a throwaway op, "
        "declared by a test to follow one declaration everywhere. [vector (default), gpsimd]"
    )
    family = max(i for i, ln in enumerate(sheet[: sheet.index(line)]) if ln.startswith("## "))
    assert sheet[family] == "## element-wise"


def test_nki_docs_serves_its_page_with_rules_example_and_cost(declare: Declare) -> None:
    declare()
    page = nki_docs(SimpleNamespace(docs_shown=set()), f"nisa.{OP}").content.split("\n\n## ")[0]
    assert page.startswith(f"## nisa.{OP} (element-wise)\nnisa.{OP}(dst, data, engine=engine.unknown, name=None)")
    for text in (
        "Engines: vector (default), gpsimd (source: https://example.invalid/tensor_frobnicate)",
        "- data and dst on chip, with the same partitions and elements per partition",
        "Example: nisa.tensor_frobnicate(dst=r, data=a)",
        "Cost: §4.3: GpSimd start-up plus N",
    ):
        assert text in page


@pytest.mark.parametrize("member", ["vector", "gpsimd"])
def test_it_runs_on_its_engines_and_the_cost_model_prices_it(declare: Declare, member: str) -> None:
    declare()
    out, trace = _run(getattr(nisa.engine, member))
    np.testing.assert_array_equal(out, X * 2 + 1)
    (ins,) = [i for i in trace if i.op == OP]
    assert ins.engine == member
    spec = get_spec("trn2")
    cost = instruction_cost(ins, spec)
    assert (cost.engine, cost.cycles) == (member, spec.gpsimd_start_cycles + 64 + spec.access_overhead_cycles)


@pytest.mark.parametrize("member", ["tensor", "scalar", "sync", "dma"])
def test_the_engine_checks_refuse_an_engine_it_does_not_declare(declare: Declare, member: str) -> None:
    declare()
    with pytest.raises(emu.NkiValidationError) as info:
        _run(getattr(nisa.engine, member))
    assert (info.value.code, info.value.message) == (
        "err_unsupported_engine",
        (
            f"Expected '{OP}' to run on engine 'vector|gpsimd', but got engine '{member}' instead; "
            "pass engine=nisa.engine.vector or engine=nisa.engine.gpsimd, or leave engine unset"
        ),
    )


def test_the_completeness_tests_pass_on_it_when_complete(declare: Declare) -> None:
    declare()
    registry_tests.test_each_declaration_is_complete(OP)
    rules_tests.test_every_declared_op_has_a_cost_rule(OP)


def test_the_cost_completeness_test_fails_naming_it_without_a_rule(declare: Declare) -> None:
    declare(cost="frobnicate_formula")
    with pytest.raises(AssertionError, match=rf"nki.isa.{OP} is declared with cost='frobnicate_formula', which names no rule"):
        rules_tests.test_every_declared_op_has_a_cost_rule(OP)


def test_the_registry_completeness_test_fails_naming_it_without_rules(declare: Declare) -> None:
    declare(rules=())
    with pytest.raises(AssertionError, match=rf"nki.isa.{OP}: no summary or no rules"):
        registry_tests.test_each_declaration_is_complete(OP)
