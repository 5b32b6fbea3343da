"""The prompts the model reads: the cheat-sheet agrees with the emulator, templates refuse missing values."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from nkiagent.agent.cheatsheet import render_cheatsheet
from nkiagent.agent.prompts import render
from nkiagent.emu import isa
from nkiagent.emu.facade import api_module

ROOT = Path(__file__).resolve().parents[2]


def test_committed_cheatsheet_is_what_the_emulator_generates() -> None:
    """Regenerate with ``python -c 'from nkiagent.agent.cheatsheet import write_cheatsheet; write_cheatsheet()'``."""
    assert (ROOT / "prompts" / "nki_cheatsheet.md").read_text() == render_cheatsheet()


def test_cheatsheet_lists_every_supported_isa_instruction() -> None:
    sheet = render_cheatsheet()
    public = api_module("nki.isa", isa)
    for name in ("nc_matmul", "dma_copy", "tensor_tensor", "activation", "tensor_reduce"):
        assert name in public.__all__ and f"- nisa.{name}(" in sheet


def test_templates_fail_on_a_missing_value() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("task.md.j2")


@pytest.mark.parametrize(("raw", "expect"), [
    ({"action": "reject"}, "The reviewer rejected your edit to kernels/k.py."),
    ({"action": "partial", "hunks": [1, 3]}, "The reviewer applied hunks 1, 3 of 3 of your edit to kernels/k.py and rejected hunks 2."),
    ({"action": "reject", "feedback": "keep the tile size"}, 'The reviewer rejected your edit to kernels/k.py: "keep the tile size"'),
])
def test_review_feedback_renders_with_or_without_the_reviewers_words(raw: dict[str, object], expect: str) -> None:
    from nkiagent.agent.graph import _normalize_decision

    text = render("feedback.md.j2", decision=_normalize_decision(raw, 3), path="kernels/k.py", total=3, commit="", evaluation="")
    assert text.strip() == expect
