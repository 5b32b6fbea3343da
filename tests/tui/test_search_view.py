"""``/search`` in the app (Textual pilot): a real evolve search with ``builtin/tuner`` shown live in the search tab.

The search runs the engine for real (local pool, emulator estimates) on the builtin vector_add
from its demo kernel with a budget of 6 candidates (about 10 s). What the tab shows is checked
against the search session's own database (``candidates.sqlite``): the candidate count, the
best speedup, and one island row per island that produced candidates.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static, TabbedContent

import nkiagent.agent
from nkiagent.sessions.store import read_events
from nkiagent.tui.app import Launch, NkiAgentApp
from nkiagent.tui.widgets import SearchView

from ..agent.fake_openai import FakeOpenAI
from .helpers import KERNEL_PATH, SIZE, idle, launch, submit_reply, wait_for, workspace, write_reply
from .test_flows import srv  # noqa: F401 — the fake OpenAI server fixture

DEMO = Path(nkiagent.agent.__file__).parent / "demo_kernels" / "vector_add.py"

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


async def test_search_command_shows_progress_leaderboard_and_islands(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    app = NkiAgentApp(Launch(workspace=ws, model="builtin/tuner"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"/search evolve", "enter")  # no task yet: the app says how to give one
        await pilot.pause()
        notes = [str(s.render()) for s in app.conversation.query(Static)]
        assert any("/search needs a task" in n for n in notes)
        await pilot.press(*"/search evolve 6 vector_add", "enter")
        await wait_for(
            pilot, lambda: app.searching, timeout=60, what="the search to start"
        )  # a bound for a hang, not a speed test: loaded CI machines are slow
        assert app.main(TabbedContent).active == "search"
        await wait_for(pilot, lambda: not app.searching, timeout=120, what="the search to finish")
        view = app.main(SearchView)
        assert view.state == "max candidates (6) evaluated" and app.search_dir is not None

        con = sqlite3.connect(app.search_dir / "candidates.sqlite")
        rows = con.execute("SELECT candidate_id, island, verdict, speedup FROM candidates ORDER BY candidate_id").fetchall()
        (db_best,) = con.execute("SELECT MAX(speedup) FROM candidates WHERE verdict = 'pass'").fetchone()
        con.close()
        assert len(rows) == 6 == len(view.rows)
        assert view.best_speedup() == db_best and db_best > rows[0][3]  # the search improved on the starting kernel

        table = view.query_one("#search-table", DataTable)
        assert table.row_count == 6
        first = table.get_row_at(0)  # best first: the database's best candidate, its latency labelled as an estimate
        best_id = max((r for r in rows if r[2] == "pass"), key=lambda r: (r[3], -r[0]))[0]
        assert first[0] == str(best_id) and first[2] == f"{db_best:.3f}×" and first[7] == "emulator-estimate" and first[8] == "evolve"

        islands = view.query_one("#island-table", DataTable)
        per_island = {i: sum(1 for r in rows if r[1] == i) for i in {r[1] for r in rows}}
        assert islands.display and islands.row_count == len(per_island) >= 2
        assert {islands.get_row_at(k)[0]: int(islands.get_row_at(k)[1]) for k in range(islands.row_count)} == {
            str(i): n for i, n in per_island.items()
        }

        progress = str(view.query_one("#search-progress", Static).render())
        assert "6/6 candidates" in progress and f"best {db_best:.3f}×" in progress
        notes = [str(s.render()) for s in app.conversation.query(Static)]
        assert any(
            f"search max candidates (6) evaluated: 6 candidates, best {db_best:.3f}×; session {app.search_dir.name}" in n for n in notes
        )


async def test_ctrl_c_stops_the_search_and_keeps_what_it_recorded(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    app = NkiAgentApp(Launch(workspace=ws, model="builtin/tuner", task=None))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"/search evolve 40 vector_add", "enter")
        view = app.main(SearchView)
        await wait_for(pilot, lambda: len(view.rows) >= 1, timeout=60, what="the starting kernel's candidate")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.searching, timeout=60, what="the search to stop")
        assert view.state == "stopped by the user" and app.search_dir is not None
        con = sqlite3.connect(app.search_dir / "candidates.sqlite")
        (n,) = con.execute("SELECT COUNT(*) FROM candidates").fetchone()
        con.close()
        assert 1 <= n == len(view.rows) < 40  # every candidate shown is in the database, and the search did not run to its budget
        last = json.loads((app.search_dir / "events.jsonl").read_text().splitlines()[-1])
        assert (last["type"], last["stop_reason"], last["candidates"]) == ("session_end", "stopped by the user", n)  # a clean stop
        notes = [str(s.render()) for s in app.conversation.query(Static)]
        assert any("stopping the search" in t for t in notes) and any(f"search stopped by the user: {n} candidates" in t for t in notes)


async def test_search_runs_on_the_sessions_task_from_its_current_kernel(tmp_path: Path, srv: FakeOpenAI) -> None:  # noqa: F811
    ws = workspace(tmp_path)
    demo = DEMO.read_text()  # the model writes a kernel with tunables: the search must start from it, not from the task's default
    srv.push(write_reply(demo, text="a tunable version"), submit_reply())
    app = NkiAgentApp(launch(ws, srv, approve="auto"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, idle(app), what="the session to end")
        assert (ws / KERNEL_PATH).read_text() == demo
        await pilot.press(*"/model builtin/tuner", "enter")
        await pilot.press(*"/search refine 3", "enter")
        await wait_for(pilot, lambda: app.search_dir is not None, timeout=120, what="the search to finish")
        view = app.main(SearchView)
        assert view.state == "max candidates (3) evaluated" and view.task_name == "vector_add" and len(view.rows) == 3
        assert not view.query_one("#island-table").display  # islands are evolve's
        assert app.search_dir is not None and app.search_dir.parent == ws / "sessions" and app.search_dir != app.session_dir
        meta = json.loads((app.search_dir / "meta.json").read_text())
        assert (meta["kind"], meta["task"], meta["model"], meta["strategy"]) == ("search", "vector_add", "builtin/tuner", "refine")
        cands = [e for e in read_events(app.search_dir / "events.jsonl") if e["type"] == "candidate"]
        assert (app.search_dir / "kernels" / f"{cands[0]['code_sha256']}.py").read_text() == demo
        assert [r["candidate_id"] for r in view.rows] == [c["candidate_id"] for c in cands] == [0, 1, 2]
