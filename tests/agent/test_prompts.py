"""The prompts the model reads: the cheat-sheet agrees with the emulator, templates refuse missing values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest

from nkiagent.agent.cheatsheet import render_cheatsheet
from nkiagent.agent.prompts import render
from nkiagent.emu import isa
from nkiagent.emu.facade import api_module
from nkiagent.emu.registry import LOWERINGS, REGISTRY

ROOT = Path(__file__).resolve().parents[2]


def test_committed_cheatsheet_is_what_the_emulator_generates() -> None:
    """Regenerate with ``python -c 'from nkiagent.agent.cheatsheet import write_cheatsheet; write_cheatsheet()'``."""
    assert (ROOT / "prompts" / "nki_cheatsheet.md").read_text() == render_cheatsheet()


@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_cheatsheet_lists_every_registered_instruction_with_its_engines(op: str) -> None:
    d = REGISTRY[op]
    (line,) = [ln for ln in render_cheatsheet().splitlines() if ln.startswith(f"- nisa.{op}(")]
    assert op in api_module("nki.isa", isa).__all__
    assert d.summary in line and all(e in line.rsplit("[", 1)[1] for e in d.engines)


@pytest.mark.parametrize("name", sorted(LOWERINGS))
def test_cheatsheet_lists_every_declared_nl_function_with_what_it_lowers_to(name: str) -> None:
    d = LOWERINGS[name]
    (line,) = [ln for ln in render_cheatsheet().splitlines() if ln.startswith(f"- nl.{name}(")]
    assert d.summary in line
    assert line.endswith(f" [→ {', '.join(d.lowers_to)}]" if d.lowers_to else d.summary)


@pytest.mark.parametrize("name", ["softmax", "add", "affine_range"])
def test_nki_docs_serves_an_nl_functions_lowering_and_example(name: str) -> None:
    from nkiagent.agent.tools import nki_docs

    d = LOWERINGS[name]
    page = nki_docs(_docs_context(), f"nl.{name} nki.language").content.split("\n\n## ")[0]
    assert page.startswith(f"## nl.{name} (nki.language)\nnl.{name}(")
    assert d.summary in page and f"Example: {d.example}" in page
    lowered = [f"- nisa.{op} [" for op in d.lowers_to] or ["Issues no instruction."]
    assert all(text in page for text in lowered)


def _docs_context() -> Any:
    """A fresh session's context, as far as ``nki_docs`` uses it (the pages it already gave)."""
    from types import SimpleNamespace

    return SimpleNamespace(docs_shown=set())


@pytest.mark.parametrize("op", ["tensor_scalar_cumulative", "nc_matmul", "local_gather"])
def test_nki_docs_serves_an_instructions_rules_example_and_cost(op: str) -> None:
    """The page comes from the op's declaration and its cost rule, not from a hand-written copy."""
    from nkiagent.agent.tools import nki_docs
    from nkiagent.perf.rules import rule_for

    d = REGISTRY[op]
    page = nki_docs(_docs_context(), f"nisa.{op}").content.split("\n\n## ")[0]
    assert page.startswith(f"## nisa.{op} ({d.family})\nnisa.{op}(")
    rule = rule_for(op)
    assert rule is not None
    for text in (d.summary, *d.rules, f"Example: {d.example}", f"Cost: {rule.basis}"):
        assert text in page


def test_templates_fail_on_a_missing_value() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("task.md.j2")


@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        ({"action": "reject"}, "The reviewer rejected your edit to kernels/k.py."),
        ({"action": "partial", "hunks": [1, 3]}, "The reviewer applied hunks 1, 3 of 3 of your edit to kernels/k.py and rejected hunks 2."),
        ({"action": "reject", "feedback": "keep the tile size"}, 'The reviewer rejected your edit to kernels/k.py: "keep the tile size"'),
    ],
)
def test_review_feedback_renders_with_or_without_the_reviewers_words(raw: dict[str, object], expect: str) -> None:
    from nkiagent.agent.graph import _normalize_decision

    text = render("feedback.md.j2", decision=_normalize_decision(raw, 3), path="kernels/k.py", total=3, commit="", evaluation="")
    assert text.strip() == expect


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("how are DMA transfers timed, queues and bandwidth", "cost model: DMA timing, queues and bandwidth"),
        ("does instruction order matter, dependences", "cost model: scheduling, dependences and instruction order"),
        ("affine_select causal mask", "nisa.affine_select (selection and top-8)"),
        # a trial model's words; the answer was eight unrelated instruction pages before the views page existed
        ("reshape HBM tensor view access pattern", "tensor views: reshape, slice, permute, broadcast and bit-cast of HBM tensors"),
    ],
)
def test_nki_docs_answers_with_what_the_system_prompt_does_not_hold(query: str, first: str) -> None:
    from nkiagent.agent.prompts import system_prompt
    from nkiagent.agent.tools import nki_docs

    answer = nki_docs(_docs_context(), query).content
    pages = answer.split("\n\nalso matching: ")[0].split("\n\n## ")
    assert pages[0].startswith(f"## {first}\n")
    prompt = system_prompt("trn2")
    for page in pages:
        body = page.split("\n", 1)[1]
        assert body not in prompt  # never a copy of the cheat-sheet the model already has
    assert len(answer) <= 6000 + 2000  # whole pages within the budget (the first one always whole)


def test_the_task_prompt_says_what_a_speedup_is_measured_against() -> None:
    """A starting kernel that is not the baseline shows a speedup before any edit; the model is told why."""
    from nkiagent.agent.prompts import task_prompt
    from nkiagent.tasks import get_task

    text = task_prompt(get_task("layernorm"), "kernels/layernorm.py", "trn2", turns=10)
    assert "Speedups are the task's baseline kernel's latency divided by yours" in text
    assert "You have 10 turns (model responses)" in text


def test_nki_docs_names_pages_it_gave_earlier_instead_of_repeating_them() -> None:
    from nkiagent.agent.tools import nki_docs

    ctx = _docs_context()
    first = nki_docs(ctx, "how are DMA transfers timed, queues and bandwidth").content
    title = "cost model: DMA timing, queues and bandwidth"
    assert first.startswith(f"## {title}\n")
    again = nki_docs(ctx, "DMA queues bandwidth transfer size").content
    assert f"## {title}\n" not in again
    assert "shown in an earlier answer (ask with its title to see it again): " in again and title in again.rsplit("earlier answer", 1)[1]
    asked = nki_docs(ctx, title).content  # by its title: given again
    assert asked.startswith(f"## {title}\n")
