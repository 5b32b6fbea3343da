"""Searches driven by a real litellm model against the local fake OpenAI server: prompts, diffs, costs, the USD budget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nkiagent.agent.models import prewarm
from nkiagent.agent.tuner import scan_tunables
from nkiagent.search import SearchConfig, run_search
from nkiagent.search.db import Candidate
from nkiagent.search.mutate import ModelMutator
from nkiagent.sessions.store import read_events
from nkiagent.tasks import get_task

from ..agent.fake_openai import FakeOpenAI, Reply
from .test_search import DEMO, TASK

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm"),
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
]
SOURCE = Path(DEMO).read_text()
TILE_LINE = "TILE_COLS = 128  # nkiagent: tune [128, 256, 512, 1024]"
#: gpt-4o-mini's price in litellm's bundled cost map: 100k prompt + 1k completion tokens = $0.0156
COST = 0.0156


def _config(tile: int, rows: int) -> str:
    tunables = {t.name: t for t in scan_tunables(SOURCE)[0]}
    out = SOURCE.replace(tunables["TILE_COLS"].text, tunables["TILE_COLS"].line_with(tile))
    return out.replace(tunables["ROWS_PER_PARTITION"].text, tunables["ROWS_PER_PARTITION"].line_with(rows))


def _edit(old: str, new: str) -> Reply:
    return Reply(
        content="editing",
        tool_calls=[("edit_file", json.dumps({"path": "kernel.py", "old": old, "new": new}))],
        prompt_tokens=100_000,
        completion_tokens=1_000,
    )


def _write(tile: int, rows: int) -> Reply:
    return Reply(
        content=f"tiles {tile}",
        tool_calls=[("write_file", json.dumps({"path": "kernel.py", "content": _config(tile, rows)}))],
        prompt_tokens=100_000,
        completion_tokens=1_000,
    )


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    prewarm().join()  # priced through litellm's cost map (the fast path used while litellm loads reports no cost)
    with FakeOpenAI(lifetime_s=120) as srv:
        yield srv


def _cfg(strategy: str, srv: FakeOpenAI, **kw: object) -> SearchConfig:
    base: dict[str, object] = {
        "task": TASK,
        "kernel": DEMO,
        "strategy": strategy,
        "model": "openai/gpt-4o-mini",
        "api_base": srv.url,
        "workers": 1,
        "model_concurrency": 1,
        "hidden": False,
        "cascade": False,
    }
    return SearchConfig(**{**base, **kw})  # type: ignore[arg-type]


def _candidates(d: Path) -> list[dict]:
    return [e for e in read_events(d / "events.jsonl") if e["type"] == "candidate"]


@pytest.mark.parametrize("strategy", ["best-of-n", "refine", "beam", "evolve"])
def test_each_strategy_with_a_model_over_http(tmp_path: Path, server: FakeOpenAI, strategy: str) -> None:
    server.push(_write(1024, 1), _write(256, 2))
    out = run_search(_cfg(strategy, server, max_candidates=3), tmp_path)
    cands = _candidates(out.session.dir)
    assert out.stop_reason == "max candidates (3) evaluated" and len(server.requests) == 2
    assert [c["speedup"] for c in cands] == [0.5426, 1.4238, 0.5975]
    assert [c["cost_usd"] for c in cands] == [0.0, COST, COST] and out.cost_usd == pytest.approx(2 * COST)
    assert all(c["model_turn"]["tool_calls"][0]["function"]["name"] == "write_file" for c in cands[1:])
    assert all(c["model_turn"]["usage"]["prompt_tokens"] == 100_000 for c in cands[1:])
    assert [c["model_turn"]["prompt"] for c in cands[1:]] == [r["body"]["messages"] for r in server.requests]  # what the model saw, for SFT
    body = server.requests[0]["body"]
    assert body["model"] == "gpt-4o-mini" and {t["function"]["name"] for t in body["tools"]} == {"edit_file", "write_file"}
    prompt = body["messages"][1]["content"]
    assert "## Parent kernel (kernel.py)" in prompt and TILE_LINE in prompt and "speedup 0.543×" in prompt


def test_refine_is_one_conversation_with_each_turns_evaluation(tmp_path: Path, server: FakeOpenAI) -> None:
    server.push(_edit(TILE_LINE, TILE_LINE.replace("= 128", "= 1024")), _edit("ROWS_PER_PARTITION = 1 ", "ROWS_PER_PARTITION = 2 "))
    out = run_search(_cfg("refine", server, max_candidates=3), tmp_path)
    cands = _candidates(out.session.dir)
    assert [(c["parents"], c["speedup"]) for c in cands] == [([], 0.5426), ([0], 1.4238), ([1], 1.2641)]
    second = server.requests[1]["body"]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "user"]
    assert second[3]["content"].startswith("candidate #1 (cascade stage full):\nverdict: pass")
    assert "speedup 1.424×" in second[3]["content"] and "best kernel so far is candidate #1" in second[4]["content"]


def test_unusable_edits_cost_money_and_the_usd_budget_stops_the_search(tmp_path: Path, server: FakeOpenAI) -> None:
    server.push(_edit("NOT IN THE KERNEL", "x"), _write(1024, 1), _write(512, 2))
    out = run_search(_cfg("best-of-n", server, max_candidates=10, budget_usd=0.03), tmp_path)
    events = read_events(out.session.dir / "events.jsonl")
    assert out.stop_reason == "budget of $0.03 spent ($0.0312)" and out.candidates == 2
    (note,) = [e for e in events if e["type"] == "note" and e["text"].startswith("no child")]
    assert (
        note["text"]
        == "no child from candidate #0: edit_file: `old` occurs 0 times in the parent (it must occur exactly once): 'NOT IN THE KERNEL'"
    )
    assert note["cost_usd"] == COST


def test_a_model_that_keeps_failing_ends_the_search(tmp_path: Path, server: FakeOpenAI) -> None:
    server.push(*[Reply(status=401, error="bad key")] * 10)
    out = run_search(_cfg("beam", server, max_candidates=5), tmp_path)
    assert out.stop_reason == "search space exhausted: three rounds proposed nothing new" and out.candidates == 1
    notes = [e["text"] for e in read_events(out.session.dir / "events.jsonl") if e["type"] == "note"]
    assert len(notes) == 6 and all("model error" in n and "bad key" in n for n in notes)  # 3 rounds × 2 samples of the one beam


def test_the_prompt_shows_parent_and_inspirations_with_their_measured_results() -> None:
    def cand(i: int, speedup: float) -> Candidate:
        ev = {
            "verdict": "pass",
            "task": "vector_add",
            "target": "trn2",
            "latency_us": 10.0 / speedup,
            "timing_source": "emulator-estimate",
            "model_version": "v",
            "speedup": speedup,
            "baseline_latency_us": 10.0,
            "profile": {"summary": f"summary of #{i}"},
        }
        return Candidate(i, "sha", [], "evolve", 0, 1, 0, "full", ev, speedup)

    mutator = ModelMutator(
        model=type("M", (), {"name": "m"})(), task=get_task("vector_add"), target="trn2"
    )  # opening() never calls the model
    messages = mutator.opening(cand(3, 1.25), "PARENT CODE", [(cand(5, 2.0), "INSPIRATION CODE")])
    text = messages[1]["content"]
    assert messages[0]["role"] == "system" and text.index("PARENT CODE") < text.index("## Inspiration: candidate #5") < text.index(
        "INSPIRATION CODE"
    )
    assert "candidate #3 (cascade stage full):\nverdict: pass" in text and "speedup 1.250×" in text and "speedup 2.000×" in text
    assert "summary of #5" in text
