"""Exports of real sessions (the offline tuner, and a fake-server model that cheats once) load where trainers load them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from nkiagent.cli import main
from nkiagent.training.env import compute_score, reward_fn
from nkiagent.training.export import ExportOptions, export_sessions, length_stats, write_rows
from nkiagent.training.rewards import get_spec
from nkiagent.training.schemas import openai_chat_errors, openai_preference_errors
from nkiagent.training.trajectory import load_session

from .conftest import PASTED_KEY, SCRIPT, Recorded


def _rows(root: Path, kind: str, fmt: str, **opts: Any) -> list[dict[str, Any]]:
    return export_sessions(root, kind, fmt, ExportOptions(**opts)).rows


def _assistants(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in row["messages"] if m["role"] == "assistant"]


def test_sessions_read_back_as_turns_with_the_right_labels(recorded: Recorded) -> None:
    fake = load_session(recorded.fake)
    assert [t.turn for t in fake.turns] == [1, 2, 3, 4]
    assert [c.evaluation["verdict"] for c in fake.candidates] == ["rejected", "pass"]
    # the submit turn leaves the kernel as it was: no SFT weight
    assert [(t.cheated, t.user_refused, fake.trainable(t)) for t in fake.turns] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
        (False, False, False),
    ]
    rewards = fake.rewards(get_spec("gated-speedup"), 0.4)  # no verifier given: the turned-down proposal (never evaluated) is left out
    assert [t.turn for t, *_ in rewards] == [1, 3, 4]
    cheat_turn = rewards[0]
    assert cheat_turn[1].outcome == "rejected" and cheat_turn[1].reward == -1.0
    assert cheat_turn[2] <= -1.0  # its return cannot borrow the later pass's credit
    passed = rewards[1][1]
    assert passed.outcome == "pass" and passed.reward == pytest.approx(0.3 + fake.candidates[1].evaluation["speedup"])
    assert fake.candidates[1].evaluation["speedup"] > 1.2  # whole-row tiles beat the baseline
    assert (rewards[2][1].outcome, rewards[2][1].reward) == ("unchanged", 0.0)
    tuner = load_session(recorded.tuner)  # read, evaluate, edit: only the edit changed the kernel
    assert tuner.model == "builtin/tuner" and [tuner.trainable(t) for t in tuner.turns] == [False, False, True]


def test_openai_sft_validates_and_zero_weights_the_cheat_and_the_refused_edit(recorded: Recorded) -> None:
    rows = _rows(recorded.root, "sft", "openai")
    assert len(rows) == 2
    for row in rows:
        assert openai_chat_errors(row) == []
        assert row["parallel_tool_calls"] is False
        assert {t["function"]["name"] for t in row["tools"]} >= {"write_file", "edit_file", "evaluate", "submit"}
        edit = next(t for t in row["tools"] if t["function"]["name"] == "edit_file")
        assert set(edit["function"]["parameters"]["properties"]) == {"path", "old", "new"}  # the schema the session recorded
    fake = next(r for r in rows if "Wider honest tiles." in json.dumps(r))
    assert [(m["content"], m["weight"]) for m in _assistants(fake)] == [
        (fake["messages"][2]["content"], 0),
        ("Trying another kernel.", 0),
        ("Wider honest tiles.", 1),
    ]  # ends at the last trained turn
    tuner = next(r for r in rows if r is not fake)
    assert [m["weight"] for m in _assistants(tuner)] == [0, 0, 1]
    last = _rows(recorded.root, "sft", "openai", last_turn_only=True)
    assert sorted(sum(m["weight"] for m in _assistants(r)) for r in last) == [1, 1]
    assert all(r["messages"][-1]["role"] == "assistant" and r["messages"][-1]["weight"] == 1 for r in last)


def test_personal_data_is_scrubbed(recorded: Recorded) -> None:
    text = json.dumps(_rows(recorded.root, "sft", "openai") + _rows(recorded.root, "rl", "steps"))
    assert PASTED_KEY not in text and "/home/alice" not in text and "sk-proj-" not in text
    assert "<redacted>" in text and "~/private/notes.txt" in text
    for ws in recorded.workspaces:
        assert str(ws) not in text
    raw = json.dumps(_rows(recorded.root, "sft", "openai", scrub=False))
    assert PASTED_KEY in raw  # the session itself is untouched: scrubbing is the export's job


def test_trl_and_sharegpt_rows_load_with_datasets(recorded: Recorded, tmp_path: Path) -> None:
    from datasets import load_dataset

    rows = _rows(recorded.root, "sft", "trl")
    # one row per trainable turn, never the cheat nor the refused edit as a completion
    completions = [r["completion"][0]["content"] for r in rows]
    assert "Trying another kernel." not in completions and not any("My key is" in c for c in completions)
    assert "Wider honest tiles." in completions and len(rows) == 1 + 1
    first = next(r for r in rows if r["completion"][0]["content"] == "Wider honest tiles.")
    call = first["completion"][0]["tool_calls"][0]["function"]
    assert call["name"] == "write_file" and isinstance(call["arguments"], dict) and "TILE_COLS = 1024" in call["arguments"]["content"]
    assert any(m["role"] == "tool" and m["name"] == "write_file" for m in first["prompt"])
    path = write_rows(rows, tmp_path / "trl.jsonl")
    ds = load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert {"prompt", "completion", "tools"} <= set(ds.column_names) and len(ds) == len(rows)
    assert ds[0]["prompt"][0]["role"] == "system" and ds[0]["tools"][0]["type"] == "function"

    share = _rows(recorded.root, "sft", "sharegpt")
    assert len(share) == len(rows)
    conv = next(r for r in share if r["turn"] == 3 and r["task"] == "vector_add" and "openai" in r["model"])["conversations"]
    assert [c["from"] for c in conv] == ["human", "function_call", "observation", "function_call", "observation", "function_call"]
    assert json.loads(conv[-1]["value"])["name"] == "write_file"
    ds2 = load_dataset(
        "json", data_files=str(write_rows(share, tmp_path / "share.jsonl")), split="train", cache_dir=str(tmp_path / "hf-cache")
    )
    assert set(ds2.column_names) >= {"conversations", "system", "tools"}


def test_rl_steps_carry_components_rewards_and_returns(recorded: Recorded) -> None:
    rows = _rows(recorded.root, "rl", "steps", spec="tiered", gamma=0.5)
    fake = [r for r in rows if r["model"] == "openai/test-model"]
    # the turned-down wrong kernel was never evaluated in the session: the export verified it
    assert [r["outcome"] for r in fake] == ["rejected", "wrong", "pass", "unchanged"]
    assert [r["weight"] for r in fake] == [0, 0, 1, 0]
    cheat = fake[0]
    assert cheat["reward"] == -1.0 and cheat["components"] == {"penalty": -1.0}
    assert cheat["return"] == pytest.approx(-1.0 + 0.5 * fake[1]["return"])  # a later failure may lower it; nothing lifts it above −1
    assert cheat["reward_spec"] == "tiered@1" and cheat["gamma"] == 0.5
    assert fake[2]["reward"] == 0.4 and fake[2]["speedup"] > 1.2 and fake[2]["timing_source"] == "emulator-estimate"
    assert fake[1]["return"] == pytest.approx(-0.3 + 0.5 * 0.4)  # R_t = r_t + γ·R_{t+1}
    assert all(r["completion"]["role"] == "assistant" and r["prompt"][0]["role"] == "system" for r in rows)


def test_verl_parquet_has_the_columns_and_types_verl_reads(recorded: Recorded, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    res = export_sessions(recorded.root, "rl", "verl")
    table = pq.read_table(write_rows(res.rows, tmp_path / "verl.parquet"))
    schema = table.schema
    assert schema.field("data_source").type == pa.string() and schema.field("ability").type == pa.string()
    assert schema.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert schema.field("reward_model").type == pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
    extra = schema.field("extra_info").type
    assert extra.field("index").type == pa.int64() and extra.field("reward").type == pa.float64()
    assert extra.field("need_tools_kwargs").type == pa.bool_()
    rows = table.to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
    assert {r["data_source"] for r in rows} == {"nkiagent/vector_add"}
    truth = json.loads(rows[0]["reward_model"]["ground_truth"])
    assert truth["task"] == "vector_add" and truth["target"] == "trn2" and truth["kernel_path"] == "kernels/vector_add.py"
    assert "@nki.jit" in truth["kernel"]  # the kernel in force at the prompt, which an edit answer applies to
    kwargs = rows[0]["extra_info"]["tools_kwargs"]  # verl's multi-turn tools (nkiagent.training.verl_tool) start from that kernel
    assert rows[0]["extra_info"]["need_tools_kwargs"] is True and set(kwargs) == {"read_file", "edit_file", "write_file", "evaluate"}
    assert kwargs["edit_file"]["create_kwargs"]["kernel"] == truth["kernel"]
    cheat = next(r for r in rows if r["extra_info"]["outcome"] == "rejected")
    assert cheat["extra_info"]["reward"] == -1.0 and "<tool_call>" in cheat["extra_info"]["completion"]


def test_trl_grpo_rows_have_prompt_and_reward_kwargs(recorded: Recorded, tmp_path: Path) -> None:
    from datasets import load_dataset

    rows = _rows(recorded.root, "rl", "trl-grpo")
    ds = load_dataset(
        "json", data_files=str(write_rows(rows, tmp_path / "grpo.jsonl")), split="train", cache_dir=str(tmp_path / "hf-cache")
    )
    assert {"prompt", "task", "target", "reward", "return"} <= set(ds.column_names)
    assert max(r["reward"] for r in rows if r["outcome"] == "rejected") < 0


def test_dpo_pairs_prefer_honest_faster_kernels(recorded: Recorded) -> None:
    rows = _rows(recorded.root, "dpo", "openai")
    assert rows and all(openai_preference_errors(r) == [] for r in rows)
    trl = _rows(recorded.root, "dpo", "trl")
    assert len(trl) == len(rows)
    cheat_pair = next(r for r in trl if r["rejected_outcome"] == "rejected")
    # both sides are whole kernels answering the earlier turn's prompt: no prose about measurements that prompt never showed
    chosen = cheat_pair["chosen"][0]["tool_calls"][0]["function"]
    assert (
        cheat_pair["chosen_outcome"] == "pass" and chosen["name"] == "write_file" and "TILE_COLS = 1024" in chosen["arguments"]["content"]
    )
    assert cheat_pair["prompt"][-1]["role"] == "user" and cheat_pair["chosen"][0]["content"] == ""
    assert all(r["chosen_outcome"] != "rejected" for r in trl)
    for r in trl:
        if r["chosen_outcome"] == r["rejected_outcome"] == "pass":
            assert r["chosen_speedup"] > r["rejected_speedup"] * 1.01


def test_hf_folder_loads_and_its_card_describes_it(recorded: Recorded, tmp_path: Path) -> None:
    from datasets import load_dataset

    out = tmp_path / "hf"
    code = main(
        [
            "export",
            "rl",
            "--sessions",
            str(recorded.root),
            "--format",
            "steps",
            "--out",
            str(tmp_path / "steps.jsonl"),
            "--hf",
            str(out),
            "--reward",
            "log-speedup",
            "--json",
        ]
    )
    assert code == 0
    dd = load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))  # a fresh cache: never a stale copy
    lines = (tmp_path / "steps.jsonl").read_text().splitlines()
    assert set(dd) == {"train", "validation"} and len(dd["train"]) + len(dd["validation"]) == len(lines) > 0
    assert len({r["session_id"] for r in dd["validation"]}) == 1  # split by session: one of the two sessions is held out
    assert not {r["session_id"] for r in dd["train"]} & {r["session_id"] for r in dd["validation"]}
    ds = dd["train"]
    assert "reward" in ds.column_names and ds.features["speedup"].dtype == "float64" and ds.features["kernel"].dtype == "string"
    card = (out / "README.md").read_text()
    assert "**Recommended `max_length`: " in card and "estimated at 3.2 characters per token" in card
    assert "log-speedup@1" in card and "| builtin/tuner | 1 |" in card and "| openai/test-model | 1 |" in card
    assert "| rejected | 1 |" in card and "| vector_add | 2 |" in card and "| refine | 2 |" in card


def test_parquet_schema_keeps_columns_the_first_row_lacks(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    rows = [
        {"turn": 1, "speedup": None, "prompt": [{"role": "user", "content": "a"}]},
        {"turn": 2, "speedup": 1.5, "extra": "only here", "prompt": [{"role": "user", "content": "b", "name": "x"}]},
    ]
    table = pq.read_table(write_rows(rows, tmp_path / "x.parquet"))
    assert table.schema.field("speedup").type == "double" and table.schema.field("turn").type == "int64"
    assert table.to_pylist()[1]["extra"] == "only here" and table.to_pylist()[1]["prompt"][0]["name"] == "x"
    lengths = length_stats(rows)
    assert lengths["estimated"] and lengths["max"] >= lengths["median"] >= lengths["min"] > 0 and lengths["recommended_max_length"] == 1024


def test_filters_dedup_and_held_out_tasks(recorded: Recorded, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(recorded.root, root)
    shutil.copytree(recorded.fake, root / "zz-copy")  # the same session twice
    res = export_sessions(root, "sft", "openai")
    assert res.stats["duplicates"] == 1 and len(res.rows) == 2
    assert len(export_sessions(root, "sft", "openai", ExportOptions(dedup=False)).rows) == 3
    assert export_sessions(root, "sft", "openai", ExportOptions(exclude_tasks=("vector_*",))).rows == []
    tuner_best, fake_best = (load_session(d).best() for d in (recorded.tuner, recorded.fake))
    assert tuner_best is not None and fake_best is not None
    assert tuner_best.evaluation["speedup"] < 1.2 < fake_best.evaluation["speedup"]  # 3 tuner turns stay slower than the baseline
    fast = export_sessions(root, "sft", "openai", ExportOptions(min_speedup=1.2, verdict="pass"))
    assert len(fast.rows) == 1 and fast.stats["skipped_below_min_speedup"] == 1 and fast.stats["duplicates"] == 1
    assert "Wider honest tiles." in json.dumps(fast.rows[0])
    by_source = {
        src: export_sessions(root, "sft", "openai", ExportOptions(timing_source=src)) for src in ("emulator-estimate", "neuron-profile")
    }
    assert len(by_source["emulator-estimate"].rows) == 2 and by_source["neuron-profile"].rows == []
    assert by_source["neuron-profile"].stats["skipped_timing_source"] == 3


def test_cli_export_validates_and_reports(recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sft.jsonl"
    assert main(["export", "sft", "--sessions", str(recorded.root), "--out", str(out)]) == 0
    assert all(openai_chat_errors(json.loads(line)) == [] for line in out.read_text().splitlines())
    assert "2 sft rows (openai, reward gated-speedup@1)" in capsys.readouterr().out
    assert main(["export", "dpo", "--sessions", str(recorded.root), "--format", "steps"]) == 2
    assert "dpo exports come as openai, trl, not 'steps'" in capsys.readouterr().err


def test_schema_check_catches_what_openai_rejects() -> None:
    good = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                "weight": 1,
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "assistant", "content": "done", "weight": 0},
        ]
    }
    assert openai_chat_errors(good) == []
    bad_args = json.loads(json.dumps(good))
    bad_args["messages"][1]["tool_calls"][0]["function"]["arguments"] = {}
    assert openai_chat_errors(bad_args) == ["messages[1].tool_calls[0].function.arguments must be a JSON string (got dict)"]
    weight_on_user = json.loads(json.dumps(good))
    weight_on_user["messages"][0]["weight"] = 1
    assert openai_chat_errors(weight_on_user) == ["messages[0]: unexpected key 'weight' for a user message"]
    orphan = json.loads(json.dumps(good))
    orphan["messages"][2]["tool_call_id"] = "zz"
    assert openai_chat_errors(orphan) == ["messages[2]: tool_call_id 'zz' answers no earlier tool call"]
    all_zero = json.loads(json.dumps(good))
    all_zero["messages"][1]["weight"] = 0
    assert openai_chat_errors(all_zero) == ["every assistant message has weight 0: nothing to train on"]
    assert openai_chat_errors({"messages": [], "meta": 1}) == ["unexpected top-level key 'meta'", "messages must be a non-empty list"]


def _search_session(root: Path) -> Path:
    """A search session as ``nkiagent search`` records it: candidates with parents, inline evaluations and model turns."""
    from nkiagent.sessions.store import SessionStore

    s = SessionStore(root).create({"task": "vector_add", "model": "openai/m", "strategy": "best-of-n", "target": "trn2"})
    s.append("session_start", task="vector_add", model="openai/m", target="trn2", approve="auto", kernel_path="kernels/vector_add.py")
    kids = [
        ("start", [], {"verdict": "pass", "compiled": True, "speedup": 1.0, "latency_us": 100.0}),
        ("slower", [0], {"verdict": "pass", "compiled": True, "speedup": 0.8, "latency_us": 125.0}),
        ("faster", [0], {"verdict": "pass", "compiled": True, "speedup": 1.6, "latency_us": 62.5}),
        ("cheat", [0], {"verdict": "rejected", "compiled": True, "speedup": None, "latency_us": None}),
        ("noise", [0], {"verdict": "pass", "compiled": True, "speedup": 1.605, "latency_us": 62.3}),
    ]
    for i, (name, parents, ev) in enumerate(kids):
        sha = s.save_kernel(f"# kernel {name}\n")
        turn = (
            {
                "content": f"try {name}",
                "tool_calls": [
                    {
                        "id": "e0",
                        "type": "function",
                        "function": {"name": "edit_file", "arguments": json.dumps({"path": "k.py", "old": "start", "new": name})},
                    }
                ],
                "model": "openai/m",
                "usage": {"cost_usd": 0.0},
            }
            if parents
            else None
        )
        s.append(
            "candidate",
            candidate_id=i,
            code_sha256=sha,
            parents=parents,
            strategy="best-of-n",
            island=0,
            generation=1 if parents else 0,
            turn=1 if parents else 0,
            stage="full",
            model_turn=turn,
            evaluation={**ev, "code_sha256": sha},
            reward=0.0,
            verdict=ev["verdict"],
        )
    s.close()
    return s.dir


def test_search_siblings_become_preference_pairs_and_rl_rows(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _search_session(root)
    pairs = _rows(root, "dpo", "trl")
    got = {(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs}
    # siblings of #0: faster > slower > cheat; noise is within 1% of faster, so that pair is a tie and dropped
    assert got == {
        ("try faster", "try slower"),
        ("try slower", "try cheat"),
        ("try faster", "try cheat"),
        ("try noise", "try slower"),
        ("try noise", "try cheat"),
    }
    assert all("# kernel start" in p["prompt"][0]["content"] for p in pairs)  # the parent's code is the shared prompt
    openai = _rows(root, "dpo", "openai")
    assert len(openai) == 5 and all(openai_preference_errors(r) == [] for r in openai)
    steps = _rows(root, "rl", "steps")
    assert [(r["completion"]["content"], r["outcome"], r["reward"]) for r in steps] == [
        ("try slower", "pass", 1.1),
        ("try faster", "pass", 1.9),
        ("try cheat", "rejected", -1.0),
        ("try noise", "pass", 1.905),
    ]
    assert steps[2]["weight"] == 0 and steps[2]["return"] == -1.0


def test_a_model_searchs_passing_children_become_sft_rows_with_the_prompt_the_model_saw(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    d = _search_session(root)
    events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]
    seen = [{"role": "system", "content": "You write NKI kernels."}, {"role": "user", "content": "Improve candidate #0."}]
    with (d / "events.jsonl").open("w") as fh:  # the same session, recorded by a search that keeps each child's prompt
        for e in events:
            if isinstance(e.get("model_turn"), dict):
                e["model_turn"]["prompt"] = seen
            fh.write(json.dumps(e) + "\n")
    rows = _rows(root, "sft", "openai")
    assert [r["messages"][-1]["content"] for r in rows] == ["try slower", "try faster", "try noise"]  # the cheat is no completion
    assert all(r["messages"][:2] == seen and r["messages"][-1]["weight"] == 1 and openai_chat_errors(r) == [] for r in rows)
    assert [t["function"]["name"] for t in rows[0]["tools"]] == ["edit_file"]
    trl = _rows(root, "sft", "trl")
    assert len(trl) == 3 and trl[1]["prompt"][-1]["content"] == "Improve candidate #0." and trl[1]["candidate_id"] == "2"
    steps = _rows(root, "rl", "steps")
    assert all(r["prompt"] == seen for r in steps)  # RL rows use the recorded prompt too, not a rebuilt one


# -- re-scoring: every exported RL row scores to its own reward through the trainers' reward functions --------------
#
# The rows come from real sessions: the scripted one (an edit, a redundant evaluation, a compile failure,
# a rewrite, a cheat, a failed edit, an unknown tool and a submit), the tuner's and the fake-server one
# (a cheat with prose, an edit the person turned down, an honest rewrite). Each row's recorded completion
# is scored the way a trainer scores it — ``reward_fn`` on the steps and trl-grpo rows (OpenAI messages
# and TRL messages), ``compute_score`` on the verl rows (Hermes ``<tool_call>`` text) — and must give the
# exported reward exactly. (Kept in this file so the recorded sessions are built once per test worker.)


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
