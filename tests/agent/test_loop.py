"""The agent loop end to end: review modes, partial acceptance, feedback, crash and resume, the demo."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from nkiagent.agent.runner import SessionConfig, drive, resume_session, start_session
from nkiagent.sessions.store import read_events

KERNEL = textwrap.dedent(
    """\
    import nki
    import nki.isa as nisa
    import nki.language as nl

    COLS = 128  # first constant


    @nki.jit
    def kernel(a, b):
        n, d = a.shape
        out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(n // 128):
            ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=ta)
        return out


    # The constants below are far enough from the kernel body
    # that a diff touching both shows them as separate hunks.
    #
    #
    #
    #
    ROWS = 1  # last constant
    """
)


def _repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    repo = Repo.init(ws)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.invalid")
    (ws / "kernels" / "vector_add.py").write_text(KERNEL)
    (ws / "notes.txt").write_text("user notes\n")
    (ws / ".gitignore").write_text("sessions/\n")
    repo.index.add(["kernels/vector_add.py", "notes.txt", ".gitignore"])
    repo.index.commit("init")
    return ws


def _script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    return f"scripted:{path}"


def _edit(old: str, new: str) -> dict[str, Any]:
    return {
        "content": "editing",
        "tool_calls": [{"name": "edit_file", "arguments": {"path": "kernels/vector_add.py", "old": old, "new": new}}],
    }


SUBMIT = {"content": "done", "tool_calls": [{"name": "submit", "arguments": {"path": "kernels/vector_add.py", "summary": "ok"}}]}


def _config(ws: Path, model: str, approve: str) -> SessionConfig:
    return SessionConfig(task="vector_add", model=model, workspace=ws, approve=approve, max_turns=10, verify_seeds=1)


def test_partial_acceptance_lands_exactly_the_chosen_hunks_and_feedback_reaches_the_model(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    # one edit with three far-apart hunks: COLS, the op, ROWS
    new = KERNEL.replace("COLS = 128", "COLS = 512").replace("op=nl.add", "op=nl.multiply").replace("ROWS = 1", "ROWS = 4")
    model = _script(
        tmp_path,
        [
            {
                "content": "three changes",
                "tool_calls": [{"name": "write_file", "arguments": {"path": "kernels/vector_add.py", "content": new}}],
            },
            _edit("ROWS = 4", "ROWS = 2"),
            SUBMIT,
        ],
    )
    decisions = iter(
        [{"action": "partial", "hunks": [1, 3], "feedback": "keep nl.add"}, {"action": "reject", "feedback": "leave ROWS alone"}]
    )
    seen: list[dict[str, Any]] = []

    def review(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return next(decisions)

    rt, graph, first = start_session(_config(ws, model, "ask"))
    outcome = drive(rt, graph, first, review)
    assert len(seen) == 2 and len(seen[0]["hunks"]) == 3
    text = (ws / "kernels" / "vector_add.py").read_text()
    assert "COLS = 512" in text and "ROWS = 4" in text and "op=nl.add" in text  # hunks 1 and 3, not 2
    repo = Repo(ws)
    ref = f"refs/nkiagent/{outcome.session.id}"
    assert repo.git.show(f"{ref}:kernels/vector_add.py") == text.rstrip("\n")  # the snapshot holds exactly that
    events = read_events(outcome.session.events_path)
    decisions_logged = [e["decision"]["action"] for e in events if e["type"] == "review_decision"]
    assert decisions_logged == ["partial", "reject"]
    requests = [e for e in events if e["type"] == "model_request"]
    told = json.dumps(requests[1]["messages"])
    assert "applied hunks 1, 3 of 3" in told and "rejected hunks 2" in told and "keep nl.add" in told
    assert "leave ROWS alone" in json.dumps(requests[2]["messages"])
    assert outcome.stop_reason.startswith("submitted")
    # an evaluation followed the applied edit and was recorded
    assert any(e["type"] == "evaluation" and e["result"]["verdict"] == "pass" for e in events)


def test_edits_in_one_turn_are_one_proposal_reviewed_applied_and_evaluated_once(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    path = "kernels/vector_add.py"
    calls = [
        {"name": "read_file", "arguments": {"path": path}},
        {"name": "edit_file", "arguments": {"path": path, "old": "COLS = 128", "new": "COLS = 256"}},
        {"name": "evaluate", "arguments": {"path": path}},
        {"name": "edit_file", "arguments": {"path": path, "old": "COLS = 256", "new": "COLS = 512"}},  # on top of the first
        {"name": "edit_file", "arguments": {"path": path, "old": "ROWS = 1", "new": "ROWS = 2"}},
        {"name": "read_file", "arguments": {"path": path}},
    ]
    model = _script(tmp_path, [{"content": "two edits", "tool_calls": calls}, SUBMIT])
    seen: list[dict[str, Any]] = []

    def review(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return {"action": "accept"}

    rt, graph, first = start_session(_config(ws, model, "ask"))
    outcome = drive(rt, graph, first, review)
    assert len(seen) == 1 and len(seen[0]["hunks"]) == 2  # one review: COLS and ROWS
    text = (ws / "kernels" / "vector_add.py").read_text()
    assert "COLS = 512" in text and "ROWS = 2" in text
    events = read_events(outcome.session.events_path)
    assert [e["turn"] for e in events if e["type"] == "evaluation"] == [1, 2]  # once after the edits landed, once for the submit
    second = [e for e in events if e["type"] == "model_request"][1]["messages"]
    answered = [m for m in second if m["role"] == "tool"]
    ids = [c["id"] for c in next(m for m in second if m.get("tool_calls"))["tool_calls"]]
    assert [m["tool_call_id"] for m in answered] == ids  # every call answered, in call order
    assert "2 edit calls" not in answered[1]["content"] and "Your 3 edit calls" in answered[1]["content"]
    assert "evaluated once" in answered[2]["content"] and "verdict: pass" in answered[1]["content"]
    assert "COLS = 128" in answered[0]["content"] and "COLS = 512" in answered[5]["content"]  # the last read sees the edits


def test_a_tool_error_goes_back_to_the_model_and_the_session_goes_on(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    missing = {"content": "look", "tool_calls": [{"name": "read_file", "arguments": {"path": "kernels/causal_attention.py"}}]}
    model = _script(tmp_path, [missing, SUBMIT])
    rt, graph, first = start_session(_config(ws, model, "auto"))
    outcome = drive(rt, graph, first)
    assert outcome.stop_reason.startswith("submitted")
    told = next(m for m in outcome.state["messages"] if m["role"] == "tool")["content"]
    assert told.startswith("error: no file kernels/causal_attention.py in the workspace; files: ") and "kernels/vector_add.py" in told


def test_submit_verifies_the_file_again_and_that_is_the_sessions_result(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    model = _script(tmp_path, [_edit("COLS = 128", "COLS = 256"), _edit("op=nl.add", "op=nl.multiply"), SUBMIT])
    rt, graph, first = start_session(_config(ws, model, "auto"))
    outcome = drive(rt, graph, first)
    # the best evaluated kernel is the first edit; the file now holds the wrong second one, and the submit says so
    assert outcome.best is not None and outcome.result is not None
    assert outcome.result["verdict"] == "fail" and outcome.result["code_sha256"] != outcome.best["code_sha256"]
    assert outcome.result["code_sha256"] == hashlib.sha256((ws / "kernels" / "vector_add.py").read_bytes()).hexdigest()
    events = read_events(outcome.session.events_path)
    assert next(e for e in events if e["type"] == "session_end")["result"]["verdict"] == "fail"
    # the first version can still be read by its version id after the file changed
    rt.ctx.workspace.write("kernels/vector_add.py", KERNEL, outcome.session.id)
    from nkiagent.agent.tools import read_file

    shown = read_file(rt.ctx, "kernels/vector_add.py", version=outcome.best["code_sha256"][:12])
    assert shown.ok and "COLS = 256" in shown.content and "op=nl.add" in shown.content


def test_user_work_is_untouched_and_never_mode_is_a_dry_run(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    repo = Repo(ws)
    (ws / "notes.txt").write_text("unstaged user change\n")
    (ws / "staged.txt").write_text("staged\n")
    repo.index.add(["staged.txt"])
    before = (repo.head.commit.hexsha, repo.git.diff("--cached"), repo.git.status("--porcelain"), repo.active_branch.name)
    model = _script(tmp_path, [_edit("COLS = 128", "COLS = 256"), SUBMIT])
    rt, graph, first = start_session(_config(ws, model, "never"))
    drive(rt, graph, first)
    after = (repo.head.commit.hexsha, repo.git.diff("--cached"), repo.git.status("--porcelain"), repo.active_branch.name)
    assert before == after
    assert "COLS = 128" in (ws / "kernels" / "vector_add.py").read_text()  # dry run: nothing applied


def test_session_killed_mid_run_resumes_with_events_and_edits_intact(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    model = _script(tmp_path, [_edit("COLS = 128", "COLS = 256"), _edit("ROWS = 1", "ROWS = 2"), SUBMIT])
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from nkiagent.agent.runner import SessionConfig, drive, start_session
        cfg = SessionConfig(task="vector_add", model={model!r}, workspace=Path({str(ws)!r}), approve="auto", max_turns=10, verify_seeds=1)
        rt, graph, first = start_session(cfg)
        print(rt.session.dir, flush=True)
        orig = rt.ctx.evaluate
        def slow(*a, **k):
            out = orig(*a, **k)
            if len(rt.ctx.evaluations) == 1:
                print("FIRST-EVAL", flush=True)
                time.sleep(600)
            return out
        rt.ctx.evaluate = slow
        drive(rt, graph, first)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    session_dir = Path(proc.stdout.readline().strip())
    deadline = time.time() + 240
    while time.time() < deadline and proc.stdout.readline().strip() != "FIRST-EVAL":
        pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(session_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"type": "note", "torn')  # a torn last line, as a crash mid-write leaves it
    before = read_events(session_dir / "events.jsonl")
    assert [e for e in before if e["type"] == "edit_applied"]  # the first accepted edit was recorded before the kill
    assert "COLS = 256" in (ws / "kernels" / "vector_add.py").read_text()
    rt, graph = resume_session(session_dir)
    outcome = drive(rt, graph, None)
    events = read_events(session_dir / "events.jsonl")
    assert [e["seq"] for e in events] == list(range(len(events)))  # append-only, no gaps, torn line dropped
    assert events[: len(before)] == before
    text = (ws / "kernels" / "vector_add.py").read_text()
    assert "COLS = 256" in text and "ROWS = 2" in text
    assert outcome.stop_reason.startswith("submitted")


def test_demo_headless_reaches_a_faster_pass_kernel(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nkiagent.cli", "demo", "--headless", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout[out.stdout.index("{") :])
    assert summary["best"]["speedup"] > 1.0 and Path(summary["session_dir"], "events.jsonl").is_file()


def test_terminal_edit_answer_applies_what_the_editor_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nkiagent.agent import runner

    ws = _repo(tmp_path)
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/COLS = 256/COLS = 384/' \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    answers = iter(["e"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    model = _script(tmp_path, [_edit("COLS = 128", "COLS = 256"), SUBMIT])
    rt, graph, first = start_session(_config(ws, model, "ask"))
    outcome = drive(rt, graph, first, runner.terminal_review)
    assert "COLS = 384" in (ws / "kernels" / "vector_add.py").read_text()
    events = read_events(outcome.session.events_path)
    assert [e["decision"]["action"] for e in events if e["type"] == "review_decision"] == ["edit"]
