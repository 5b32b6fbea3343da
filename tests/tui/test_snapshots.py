"""Snapshot tests of the three main screens at 120×40: SVG exports compared with the files in ``snapshots/``.

The app draws a fixed, hand-written session (fixed ids, no timestamps on screen), a fixed review
payload and a profile recorded from the demo kernel, so every export is byte-for-byte stable.
After an intended change of the UI, regenerate with ``NKIAGENT_UPDATE_SNAPSHOTS=1`` and look at
the SVGs (they are also the README's screenshots in ``docs/screenshots/``).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from nkiagent.agent.hunks import diff_hunks, unified_diff
from nkiagent.tui.app import Launch, NkiAgentApp
from nkiagent.tui.review import ReviewScreen
from nkiagent.tui.widgets import ProfileView

from .helpers import KERNEL, KERNEL_PATH, NEW3, SIZE

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
SNAPSHOTS = HERE / "snapshots"
SID = "20260101-120000-c0ffee"
PROFILE = json.loads((HERE / "data" / "profile.json").read_text())


def _ev(seq: int, type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "ts": 1767268800.0 + seq, "session_id": SID, "seq": seq, **fields}


def session_events() -> list[dict[str, Any]]:
    """Two turns of a session: read, then an edit partly accepted, evaluated and kept as a candidate."""
    result = {
        "verdict": "pass",
        "task": "vector_add",
        "target": "trn2",
        "reasons": [],
        "latency_us": 80.367,
        "timing_source": "emulator-estimate",
        "baseline_latency_us": 106.503,
        "speedup": 1.3252,
        "sol_latency_us": 69.519,
        "fraction_of_peak": 0.865,
        "profile": {k: PROFILE[k] for k in ("engines", "bottleneck", "hbm_read_bytes", "hbm_write_bytes", "dma_count", "flops", "advice")},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "session_start",
            {"task": "vector_add", "model": "openai/gpt-test", "target": "trn2", "approve": "ask", "kernel_path": KERNEL_PATH},
        ),
        ("model_request", {"turn": 1, "model": "openai/gpt-test"}),
        (
            "model_response",
            {
                "turn": 1,
                "message": {"role": "assistant", "content": "Let me read the kernel first: the **DMA** tiles look narrow."},
                "usage": {"prompt_tokens": 1840, "completion_tokens": 52, "cost_usd": 0.0061},
            },
        ),
        ("tool_call", {"turn": 1, "id": "c1", "name": "read_file", "arguments": {"path": KERNEL_PATH}}),
        ("tool_result", {"id": "c1", "name": "read_file", "ok": True, "content": "   1  import nki\n   2  ..."}),
        ("model_request", {"turn": 2, "model": "openai/gpt-test"}),
        (
            "model_response",
            {
                "turn": 2,
                "message": {"role": "assistant", "content": "Wider column tiles (`COLS = 512`) and four rows per partition."},
                "usage": {"prompt_tokens": 2310, "completion_tokens": 240, "cost_usd": 0.0094},
            },
        ),
        ("tool_call", {"turn": 2, "id": "c2", "name": "write_file", "arguments": {"path": KERNEL_PATH, "content": "…"}}),
        ("tool_result", {"id": "c2", "name": "write_file", "ok": True, "content": f"proposed a new version of {KERNEL_PATH}"}),
        ("edit_proposed", {"turn": 2, "path": KERNEL_PATH, "diff": "", "hunks": 3, "tool_call_id": "c2"}),
        (
            "review_decision",
            {
                "turn": 2,
                "path": KERNEL_PATH,
                "mode": "ask",
                "decision": {"action": "partial", "accepted": [1, 3], "rejected": [2], "feedback": "keep nl.add"},
            },
        ),
        ("edit_applied", {"turn": 2, "path": KERNEL_PATH, "commit": "3f1c2a9e0b7d", "code_sha256": "ab" * 32, "action": "partial"}),
        ("evaluation", {"turn": 2, "path": KERNEL_PATH, "result": result}),
        (
            "candidate",
            {"turn": 2, "path": KERNEL_PATH, "code_sha256": "ab" * 32, "verdict": "pass", "latency_us": 80.367, "speedup": 1.3252},
        ),
    ]
    return [_ev(i, t, **f) for i, (t, f) in enumerate(events)]


def review_payload() -> dict[str, Any]:
    hunks = [{"index": h.index, "header": h.header, "lines": h.lines} for h in diff_hunks(KERNEL, NEW3, KERNEL_PATH)]
    return {"kind": "review", "path": KERNEL_PATH, "diff": unified_diff(KERNEL, NEW3, KERNEL_PATH), "hunks": hunks, "proposed": NEW3}


async def _app(tmp_path: Path) -> NkiAgentApp:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / KERNEL_PATH).write_text(KERNEL.replace("COLS = 128", "COLS = 512").replace("ROWS = 1", "ROWS = 4"))
    return NkiAgentApp(Launch(workspace=ws, model="openai/gpt-test"))


def _compare(name: str, svg: str) -> None:
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("NKIAGENT_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg)
    assert path.is_file(), f"no snapshot {path}; create it with NKIAGENT_UPDATE_SNAPSHOTS=1 and inspect it"
    assert svg == path.read_text(), f"{name} screen differs from {path}; if intended, regenerate with NKIAGENT_UPDATE_SNAPSHOTS=1"


def _text(svg: str) -> str:
    """The characters an SVG export shows, in order (its spans joined, non-breaking spaces as spaces)."""
    return "".join(html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)).replace("\xa0", " ")


async def _screenshot(app: NkiAgentApp, pilot: Any) -> str:
    app.query_one("#prompt").cursor_blink = False  # type: ignore[attr-defined]
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.wait_for_scheduled_animations()  # the tab underline slides when a tab is chosen
    await pilot.pause()
    return app.export_screenshot(title="nkiagent")


async def test_main_screen(tmp_path: Path) -> None:
    app = await _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.show_history(session_events())
        svg = await _screenshot(app, pilot)
        status = app.status_bar.status
        assert (status.turn, status.tokens, round(status.cost_usd, 4), status.best_speedup) == (2, 4442, 0.0155, 1.3252)
    shown = _text(svg)
    assert "Wider column tiles" in shown and "PASS" in shown and "1.325×" in shown
    _compare("main", svg)


async def test_review_panel(tmp_path: Path) -> None:
    app = await _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.show_history(session_events()[:9])
        app.push_screen(ReviewScreen(review_payload()))
        await pilot.press("down", "space")
        svg = await _screenshot(app, pilot)
    shown = _text(svg)
    assert "hunk 2/3" in shown and "2 selected" in shown
    _compare("review", svg)


async def test_profile_view(tmp_path: Path) -> None:
    app = await _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.show_history(session_events())
        app.query_one(ProfileView).show(PROFILE)
        app.action_tab("profile")
        svg = await _screenshot(app, pilot)
    shown = _text(svg)
    assert "memory-bound (DMA)" in shown and "timeline" in shown
    _compare("profile", svg)
