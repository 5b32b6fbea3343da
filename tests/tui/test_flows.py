"""The review flows end to end in the app (Textual pilot), with the fake OpenAI server as the model.

Each test drives a real session: litellm-compatible HTTP to the local fake server, the LangGraph
loop on a thread worker, edits written through the workspace's git snapshots, evaluations by the
verifier. What is checked is what a person would check: the file on disk, the snapshot ref, the
decision in the session's events, and what the model was told in its next request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from git import Repo
from textual.widgets import Collapsible, DataTable, Markdown, Static, TabbedContent

from nkiagent.sessions.store import read_events
from nkiagent.tui.app import REVIEW_TITLE, TITLE, NkiAgentApp
from nkiagent.tui.review import ReviewScreen
from nkiagent.tui.widgets import ProfileView, VerdictCard

from ..agent.fake_openai import FakeOpenAI
from .helpers import DRAFT_PATH, KERNEL, KERNEL_PATH, NEW3, SIZE, idle, launch, request_text, submit_reply, wait_for, workspace, write_reply

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
]


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI(lifetime_s=240) as server:
        yield server


def _events(app: NkiAgentApp) -> list[dict]:
    assert app.session_dir is not None
    return read_events(app.session_dir / "events.jsonl")


def _decisions(app: NkiAgentApp) -> list[dict]:
    return [e["decision"] for e in _events(app) if e["type"] == "review_decision"]


def _snapshot(ws: Path, app: NkiAgentApp, path: str = KERNEL_PATH) -> str | None:
    repo = Repo(ws)
    ref = f"refs/nkiagent/{app.session_dir.name}"  # type: ignore[union-attr]
    try:
        return repo.git.show(f"{ref}:{path}")
    except Exception:  # noqa: BLE001 — no ref: nothing was applied
        return None


async def _review(pilot, app: NkiAgentApp) -> ReviewScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review panel")
    return app.screen  # type: ignore[return-value]


async def test_accept_all_applies_the_edit_streams_the_turn_and_shows_the_verdict_card(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, text="Three **changes**: wider tiles."), submit_reply())
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _review(pilot, app)
        assert len(screen.hunks) == 3 and app.title == REVIEW_TITLE and app.bells == 1
        await pilot.press("a")
        await wait_for(pilot, idle(app), what="the session to end")
        assert app.title == TITLE
        assert (ws / KERNEL_PATH).read_text() == NEW3
        assert _snapshot(ws, app) == NEW3.rstrip("\n")
        assert _decisions(app)[0]["action"] == "accept"
        cards = list(app.query(VerdictCard))
        # the edit's evaluation and the submit's full verification of the same file: nl.multiply is not an addition
        assert len(cards) == 2 and all(c.has_class("verdict-fail") for c in cards)
        assert "FAIL" in str(cards[0].render())
        streamed = [md.source for md in app.conversation.query(Markdown)]
        assert "Three **changes**: wider tiles." in streamed  # the streamed Markdown of turn 1
        assert "The reviewer" not in request_text(srv, 1) and f"Your edit to {KERNEL_PATH} was applied" in request_text(srv, 1)
        assert app.status_bar.status.best_speedup is None and app.status_bar.status.turn == 2
        # the candidates leaderboard: the one candidate, selected, is the kernel on disk
        app.action_tab("candidates")
        table = app.main(DataTable, "#candidate-table")
        assert table.row_count == 1
        table.focus()
        await pilot.press("enter")
        assert str(app.main(Static, "#candidate-diff").render()) == "identical to the current kernel"


async def test_reject_all_leaves_the_file_and_tells_the_model(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        await _review(pilot, app)
        await pilot.press("r")
        await wait_for(pilot, idle(app), what="the session to end")
    assert (ws / DRAFT_PATH).read_text() == KERNEL
    assert _snapshot(ws, app, DRAFT_PATH) is None
    assert _decisions(app)[0]["action"] == "reject"
    assert f"The reviewer rejected your edit to {DRAFT_PATH}." in request_text(srv, 1)


async def test_partial_two_of_three_hunks_land_on_disk_and_in_the_snapshot(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _review(pilot, app)
        await pilot.press("down", "space")  # hunk 2 (the op) off
        assert screen.selected == [True, False, True]
        await pilot.press("enter")
        await wait_for(pilot, idle(app), what="the session to end")
    expected = KERNEL.replace("COLS = 128", "COLS = 512").replace("ROWS = 1", "ROWS = 4")
    assert (ws / DRAFT_PATH).read_text() == expected
    assert _snapshot(ws, app, DRAFT_PATH) == expected.rstrip("\n")
    d = _decisions(app)[0]
    assert (d["action"], d["accepted"], d["rejected"]) == ("partial", [1, 3], [2])
    told = request_text(srv, 1)
    assert "applied hunks 1, 3 of 3" in told and "rejected hunks 2" in told


async def test_edit_in_editor_applies_what_the_editor_saved(tmp_path: Path, srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path)
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/COLS = 512/COLS = 384/' \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        await _review(pilot, app)
        await pilot.press("e")
        await wait_for(pilot, idle(app), what="the session to end")
    expected = NEW3.replace("COLS = 512", "COLS = 384")
    assert (ws / DRAFT_PATH).read_text() == expected
    assert _decisions(app)[0]["action"] == "edit"
    assert "The reviewer edited your proposal" in request_text(srv, 1)


async def test_feedback_rejection_reaches_the_next_request(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        await _review(pilot, app)
        await pilot.press("f")
        await pilot.press(*"keep nl.add")
        await pilot.press("enter")
        await wait_for(pilot, idle(app), what="the session to end")
    assert (ws / DRAFT_PATH).read_text() == KERNEL
    assert _decisions(app)[0] == {"action": "reject", "feedback": "keep nl.add"}
    assert f'The reviewer rejected your edit to {DRAFT_PATH}: \\"keep nl.add\\"' in request_text(srv, 1)


async def test_cancel_stops_the_turn_keeps_the_session_and_resume_reopens_it(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, path=DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        await _review(pilot, app)
        await pilot.press("ctrl+c")
        await wait_for(pilot, idle(app), what="the cancelled turn to stop")
        assert not isinstance(app.screen, ReviewScreen) and app.title == TITLE
        assert app.bridge.pending() == ("review",)  # the session is kept at its checkpoint
        notes = [e["text"] for e in _events(app) if e["type"] == "note"]
        assert any("turn cancelled by the user" in n for n in notes)
        session_dir = app.session_dir
    assert session_dir is not None and (ws / DRAFT_PATH).read_text() == KERNEL
    assert not any(e["type"] == "session_end" for e in read_events(session_dir / "events.jsonl"))

    # reopen the stored session: its history is drawn again and the waiting review comes back
    srv.push(submit_reply(DRAFT_PATH))
    again = NkiAgentApp(launch(ws, srv, task=None, resume=session_dir, approve=None))
    async with again.run_test(size=SIZE) as pilot:
        screen = await _review(pilot, again)
        assert len(screen.hunks) == 3
        titles = [c.title for c in again.conversation.query(Collapsible)]
        assert any(t.startswith("⚙ write_file(") for t in titles)  # replayed history
        await pilot.press("a")
        await wait_for(pilot, lambda: not again.busy and any(e["type"] == "session_end" for e in _events(again)), what="the end")
    assert (ws / DRAFT_PATH).read_text() == NEW3
    events = read_events(session_dir / "events.jsonl")
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert any(e["type"] == "note" and e["text"] == "session resumed" for e in events)
    assert json.loads(json.dumps([e["decision"]["action"] for e in events if e["type"] == "review_decision"])) == ["accept"]
    assert len(srv.requests) == 2


async def test_cancel_while_the_model_streams_keeps_the_session_and_records_no_model_error(tmp_path: Path, srv: FakeOpenAI) -> None:
    """ctrl+c while the first answer streams stops the turn; the session's record shows the cancel,
    not a failed model call, and the person's next message asks the model again in the session."""
    ws = workspace(tmp_path)
    slow = write_reply(NEW3, text="Thinking it over. " * 60, path=DRAFT_PATH)
    slow.chunk_delay_s = 0.05  # 216 content chunks: about 11 s of streaming
    srv.push(slow, write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        streaming = lambda: any("Thinking it over." in str(md.source) for md in app.conversation.query(Markdown))
        await wait_for(pilot, streaming, what="the model's answer to start streaming")
        await pilot.press("ctrl+c")
        await wait_for(pilot, idle(app), what="the cancelled turn to stop")
        events = _events(app)
        assert any(e["type"] == "note" and "turn cancelled by the user" in e["text"] for e in events)
        # stopped mid-answer (no response recorded), and a cancel is not a model failure
        assert not any(e["type"] in ("error", "model_response", "session_end") for e in events)
        assert app.bridge.pending() == ("model",)  # the turn is asked again when the person writes
        prompt = app.query_one("#prompt")
        prompt.value = "write it again, please"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _review(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: not app.busy and any(e["type"] == "session_end" for e in _events(app)), what="the end")
    assert (ws / DRAFT_PATH).read_text() == NEW3
    assert "write it again, please" in request_text(srv, 1)


async def test_slash_commands_change_the_session_and_unknown_ones_are_named(tmp_path: Path, srv: FakeOpenAI) -> None:
    ws = workspace(tmp_path)
    srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
    app = NkiAgentApp(launch(ws, srv))
    async with app.run_test(size=SIZE) as pilot:
        await _review(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, idle(app), what="the session to end")
        prompt = app.query_one("#prompt")
        for line in ("/approve auto", "/target trn1", "/model openai/other-model", "/nope", "/undo", "/export", "/profile"):
            prompt.value = line  # type: ignore[attr-defined]
            await pilot.press("enter")
            await pilot.pause(0.2)
        await wait_for(pilot, lambda: (ws / DRAFT_PATH).read_text() == KERNEL, what="undo to restore the kernel")
        assert app.bridge.rt.approve == "auto" and app.bridge.rt.ctx.target == "trn1" and app.bridge.rt.model.name == "openai/other-model"
        palette = {c.title for c in app.get_system_commands(app.screen)}
        assert {"/task NAME", "/model MODEL", "/undo", "/profile", "/export [PATH]", "/help"} <= palette
        assert (app.status_bar.status.approve, app.status_bar.status.target) == ("auto", "trn1")
        notes = [str(w.render()) for w in app.conversation.query(".note")]
        assert any(n.startswith("unknown command /nope; commands: /task, /model, /target") for n in notes)
        transcript = (app.session_dir / "transcript.md").read_text()  # type: ignore[operator]
        # /profile ran the kernel in the sandbox on trn1 and drew engines, timeline, roofline and advice
        view = app.main(ProfileView)
        await wait_for(pilot, lambda: "timeline" in str(view.query_one("#profile-body", Static).render()), what="the profile")
        shown = str(view.query_one("#profile-body", Static).render())
        assert "on trn1 (emulator-estimate)" in shown and "bottleneck: memory-bound" in shown and "FLOP/B vs ridge" in shown
        assert app.main(TabbedContent).active == "profile"
        assert "**review** (ask): accept" in transcript and f"**proposed edit** to `{DRAFT_PATH}`" in transcript
