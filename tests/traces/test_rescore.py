"""Every exported RL row re-scores to its own reward through the trainers' reward functions (issue 24's acceptance).

The rows come from real sessions: a scripted one with an edit, a redundant evaluation, a
compile failure, a rewrite, a cheat, a failed edit, an unknown tool and a submit, and the
fake-server one (a cheat with prose, an edit the person turned down, an honest rewrite).
Each row's recorded completion is scored the way a trainer scores it — ``reward_fn`` on the
steps and trl-grpo rows (OpenAI messages and TRL messages), ``compute_score`` on the verl
rows (Hermes ``<tool_call>`` text) — and must give the exported reward exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nkiagent.traces.env import compute_score, reward_fn
from nkiagent.traces.export import ExportOptions, export_sessions

from .conftest import SCRIPT, Recorded


def _rescored(fmt: str, row: dict[str, Any]) -> tuple[float, float]:
    if fmt == "verl":
        extra = row["extra_info"]
        return compute_score(row["data_source"], extra["completion"], row["reward_model"]["ground_truth"], extra)["score"], extra["reward"]
    got = reward_fn(
        [row["prompt"]],
        [row["completion"]],
        task=[row["task"]],
        target=[row["target"]],
        kernel=[row["kernel"]],
        kernel_path=[row["kernel_path"]],
        reward_spec=[row["reward_spec"]],
    )
    return got[0], row["reward"]


@pytest.mark.parametrize("fmt", ["steps", "trl-grpo", "verl"])
def test_every_rl_row_rescores_to_its_exported_reward(scripted: Path, recorded: Recorded, fmt: str) -> None:
    rows = []
    for root in (scripted, recorded.root):
        rows += export_sessions(root, "rl", fmt, ExportOptions(dedup=False)).rows
    assert len(rows) == len(SCRIPT) + 4 + 3  # every turn of the three sessions (the tuner's three, the fake's four)
    mismatches = [(i, *_rescored(fmt, r)) for i, r in enumerate(rows)]
    assert [m for m in mismatches if m[1] != m[2]] == []


def test_the_scripted_session_is_credited_honestly(scripted: Path) -> None:
    rows = export_sessions(scripted, "rl", "steps", ExportOptions(dedup=False)).rows
    got = {what: (r["outcome"], r["reward"], r["weight"]) for (_, what), r in zip(SCRIPT, rows)}
    assert got["read"] == ("unchanged", 0.0, 0) and got["submit"] == ("unchanged", 0.0, 0)
    edit = got["edit"]
    assert edit[0] == "pass" and edit[1] > 1.0 and edit[2] == 1
    assert got["redundant evaluation"] == ("unchanged", 0.0, 0)  # re-evaluating the edit earns nothing
    assert got["compile failure"] == ("compile_fail", -0.5, 0)
    assert got["rewrite"][0] == "pass" and got["rewrite"][2] == 1
    assert got["cheat"] == ("rejected", -1.0, 0)
    assert got["failed edit"] == ("tool_error", -0.5, 0) and got["unknown tool"] == ("tool_error", -0.5, 0)
    cheat = next(r for (_, what), r in zip(SCRIPT, rows) if what == "cheat")
    assert cheat["return"] <= -1.0  # the later turns cannot lift it
