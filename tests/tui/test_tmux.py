"""A real terminal: tmux runs ``nkiagent --task … --model …`` against the fake model server; keys in, screen out.

This is the one test that goes through a pty, the CLI entry point, Textual's real Linux driver
and key parsing. It needs the ``tmux`` binary (``apt-get install -y tmux``); without it the
test is skipped with that message, since nothing else can stand in for a terminal.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nkiagent.tui.app import REVIEW_TITLE

from ..agent.fake_openai import FakeOpenAI
from .helpers import DRAFT_PATH, KERNEL, NEW3, submit_reply, workspace, write_reply

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``tmux(*args)`` on a private server (own socket, no user config), killed afterwards."""
    base = [TMUX or "tmux", "-S", str(tmp_path / "tmux.sock"), "-f", os.devnull]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, check=True)

    yield run
    subprocess.run([*base, "kill-server"], capture_output=True, check=False)


def _until(tmux: Callable[..., subprocess.CompletedProcess[str]], cond: Callable[[str], bool], what: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux("capture-pane", "-p", "-t", "ui").stdout
        if cond(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; the terminal shows:\n{screen}")
        time.sleep(0.2)


def test_nkiagent_in_tmux_shows_the_diff_and_writes_the_accepted_file(
    tmp_path: Path, tmux: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    ws = workspace(tmp_path)
    with FakeOpenAI(lifetime_s=240) as srv:
        srv.push(write_reply(NEW3, path=DRAFT_PATH), submit_reply(DRAFT_PATH))
        env = {
            "OPENAI_API_KEY": "sk-test",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "TERM": "xterm-256color",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        cmd = [
            sys.executable,
            "-m",
            "nkiagent.cli",
            "--task",
            "vector_add",
            "--model",
            "openai/fake-model",
            "--api-base",
            srv.url,
            "--workspace",
            str(ws),
            "--max-turns",
            "4",
        ]
        # no COLUMNS/LINES from this process (pytest's own terminal): the app must size itself from the pty
        shell = "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(cmd)
        tmux("new-session", "-d", "-s", "ui", "-x", "120", "-y", "40", shell)
        screen = _until(tmux, lambda s: "Review" in s and "hunk 1/3" in s, "the review panel")
        assert f"edit to {DRAFT_PATH} — 3 hunks, 3 selected" in screen
        assert tmux("display", "-p", "-t", "ui", "#{pane_title}").stdout.strip() == REVIEW_TITLE  # the terminal's own title (OSC 2)
        assert "- COLS = 128  # first constant" in screen and "+ COLS = 512  # first constant" in screen
        tmux("send-keys", "-t", "ui", "j", "Space", "Enter")
        screen = _until(tmux, lambda s: "session ended" in s, "the session to end")
        assert "review (ask): partial: applied hunks 1, 3, rejected 2" in screen, screen
        tmux("send-keys", "-t", "ui", "C-q")
    expected = KERNEL.replace("COLS = 128", "COLS = 512").replace("ROWS = 1", "ROWS = 4")
    assert (ws / DRAFT_PATH).read_text() == expected
