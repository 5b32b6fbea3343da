"""Real providers as a person meets them (issue 23): ``nkiagent run`` against a local OpenAI-compatible server *process*.

No client is patched: the server (tests/agent/fake_openai.py) runs in its own process and the CLI
talks HTTP to it. Each test asserts the line a person reads, the exit code, and how many requests
the server saw (a configuration error is never retried).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from git import Repo

from nkiagent.cli import main
from nkiagent.sessions.store import read_events

from .fake_openai import FakeOpenAIProcess, Reply

ROOT = Path(__file__).resolve().parents[2]
EVALUATE = Reply(content="measuring", tool_calls=[("evaluate", '{"path": "kernels/vector_add.py"}')])
SUBMIT = Reply(content="done", tool_calls=[("submit", '{"path": "kernels/vector_add.py", "summary": "as is"}')])


@pytest.fixture(scope="module")
def server_process() -> Iterator[FakeOpenAIProcess]:
    with FakeOpenAIProcess(lifetime_s=600) as srv:
        yield srv


@pytest.fixture()
def srv(server_process: FakeOpenAIProcess, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAIProcess:
    server_process.reset()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return server_process


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    Repo.init(root)
    return root


def _run(
    ws: Path, capsys: pytest.CaptureFixture[str], *flags: str, model: str = "openai/m", api_base: str | None = None
) -> tuple[int, str, str]:
    """``nkiagent run`` in this process (the server is the other process); (exit code, stdout, stderr)."""
    argv = ["run", "--task", "vector_add", "--model", model, "--approve", "auto", "--workspace", str(ws), "--verify-seeds", "1", *flags]
    code = main([*argv, "--api-base", api_base] if api_base else argv)
    out, err = capsys.readouterr()
    return code, out, err


def _sessions(ws: Path) -> list[Path]:
    return sorted(p for p in (ws / "sessions").glob("*") if p.is_dir()) if (ws / "sessions").is_dir() else []


def test_local_server_without_a_key_works_from_the_first_request_to_the_last(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No OPENAI_API_KEY: every turn goes out the same way, also after litellm has loaded (it used to fail then: HTTP 500, retried)."""
    import litellm  # noqa: F401 — loaded, as it is a few seconds into every real session

    srv.push(EVALUATE, SUBMIT)
    code, out, err = _run(ws, capsys, api_base=srv.url)
    assert code == 0, out + err
    sent = srv.requests
    assert len(sent) == 2 and all("authorization" not in r["headers"] for r in sent)
    assert "submitted: as is" in out and "Missing credentials" not in out + err


def test_bad_key_is_reported_at_once_and_never_retried(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv.reset(api_key="sk-right")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    t0 = time.monotonic()
    code, out, _err = _run(ws, capsys, "--retries", "5", api_base=srv.url)
    assert time.monotonic() - t0 < 10 and len(srv.requests) == 1  # one request, no backoff
    assert code == 1
    assert (
        "  error openai/m (openai): authentication failed (HTTP 401): check the API key (the provider's environment variable, "
        "or the one --api-key-env names): Incorrect API key provided: sk-***. You can find your API key at your server's config.\n"
    ) in out
    assert "server error" not in out and "retrying" not in out
    sid = _sessions(ws)[0].name
    assert f"after fixing the model's problem, continue with: nkiagent resume {sid} --sessions-dir {ws / 'sessions'}" in out


def test_key_variable_from_the_config_is_sent(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv.reset(api_key="sk-right")
    monkeypatch.setenv("MY_SERVER_KEY", "sk-right")
    (ws / ".nkiagent").mkdir()
    (ws / ".nkiagent" / "config.toml").write_text('api_key_env = "MY_SERVER_KEY"\n')
    srv.push(SUBMIT)
    code, out, _err = _run(ws, capsys, api_base=srv.url)
    assert srv.requests[0]["headers"]["authorization"] == "Bearer sk-right"
    assert "submitted: as is" in out and code == 0  # the submit's own verification passed: a passing kernel, exit 0
    # the result line gives the submitted kernel's share of the speed of light, as every evaluation did (a trial model missed it)
    assert re.search(
        r"submitted: kernels/\S+ — pass, [\d.,]+ µs \(emulator-estimate\).*, [\d.]+% of the [\d.,]+ µs speed of light \(full verification\)",
        out,
    )


def test_server_down_is_retried_visibly_then_reported(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, _err = _run(ws, capsys, "--retries", "1", api_base=f"http://127.0.0.1:{port}/v1")
    assert code == 1
    lines = out.splitlines()
    retry = next(line for line in lines if "retrying" in line)
    assert retry.startswith("  openai/m: could not reach the server; retrying in ") and retry.endswith(
        " s (attempt 2 of 2; ctrl+c cancels)"
    )
    assert "  error openai/m (openai): could not reach the server (gave up after 2 attempts): [Errno 111] Connection refused" in lines
    events = read_events(_sessions(ws)[0] / "events.jsonl")
    assert [e["attempt"] for e in events if e["type"] == "model_retry"] == [2]  # the retry is in the session's record too


def test_server_errors_are_retried_with_the_configured_retries(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.push(Reply(status=500, error="overloaded"), Reply(status=500, error="overloaded"), SUBMIT)
    code, out, _err = _run(ws, capsys, "--retries", "1", api_base=srv.url)
    assert code == 1 and len(srv.requests) == 2
    assert "  error openai/m (openai): server error (HTTP 500) (gave up after 2 attempts): overloaded" in out.splitlines()
    assert sum("server error (HTTP 500); retrying in" in line for line in out.splitlines()) == 1


def test_slow_server_times_out_after_the_timeout_of_the_repository_config(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws / ".nkiagent").mkdir()
    (ws / ".nkiagent" / "config.toml").write_text("timeout_s = 0.5\nretries = 0\n")
    srv.push(Reply(content="late", delay_s=5))
    t0 = time.monotonic()
    code, out, _err = _run(ws, capsys, api_base=srv.url)
    assert time.monotonic() - t0 < 4.5  # 0.5 s, not the 5 s the server takes (nor the old 120 s × 5)
    assert code == 1
    assert "  error openai/m (openai): no answer within the 0.5 s timeout (timeout_s in the config, --timeout-s)" in out.splitlines()


def test_ctrl_c_during_a_retry_wait_ends_at_once_quietly_with_the_resume_hint(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real process and a real SIGINT while it waits 30 s to retry (Retry-After): exit 130 within a second, no traceback."""
    srv.push(*[Reply(status=503, error="busy", retry_after_s=30)] * 3)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nkiagent.cli",
            "run",
            "--task",
            "vector_add",
            "--model",
            "openai/m",
            "--api-base",
            srv.url,
            "--approve",
            "auto",
            "--workspace",
            str(ws),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "  openai/m: server error (HTTP 503); retrying in 30.0 s (attempt 2 of 4; ctrl+c cancels)\n"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    # bounds the 30 s wait going on, not a speed: a ctrl+c landing in an import's lock callback waits for that import
    assert time.monotonic() - t0 < 15 and proc.returncode == 130
    sid = _sessions(ws)[0].name
    assert err == f"\nnkiagent run: interrupted; the session is kept: nkiagent resume {sid} --sessions-dir {ws / 'sessions'}\n"
    assert len(srv.requests) == 1  # the retry was never sent
    srv.reset()
    srv.push(SUBMIT)  # the hint works: the session, stopped before its first turn was recorded, starts that turn again
    assert main(["resume", sid, "--sessions-dir", str(ws / "sessions"), "--headless"]) == 0  # the submit verified the kernel: it passes
    assert "finished after 1 turns: submitted: as is" in capsys.readouterr().out


def test_unknown_provider_is_refused_before_a_session_exists(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(ws, capsys, model="nosuchprovider/m")
    assert code == 2 and _sessions(ws) == []
    assert err.startswith(
        "nkiagent run: nosuchprovider/m (nosuchprovider): litellm does not know this provider; write the model as "
        "provider/name (anthropic/…, openai/…, hosted_vllm/…, ollama_chat/…)"
    )


def test_missing_cloud_key_names_the_variable_and_a_flag_that_exists(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    t0 = time.monotonic()
    code, _out, err = _run(ws, capsys, model="anthropic/claude-sonnet-4-5")
    assert code == 2 and _sessions(ws) == [] and time.monotonic() - t0 < 10
    assert err == (
        "nkiagent run: anthropic/claude-sonnet-4-5 (anthropic): no API key: set ANTHROPIC_API_KEY, or name the variable that "
        "holds it with --api-key-env (api_key_env in the config)\n"
    )
    assert (
        main(
            [
                "run",
                "--task",
                "vector_add",
                "--model",
                "anthropic/x",
                "--api-key-env",
                "NOT_SET_ANYWHERE",
                "--workspace",
                str(ws),
                "--approve",
                "auto",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == (
        "nkiagent run: anthropic/x (anthropic): the key variable NOT_SET_ANYWHERE (api_key_env) is not set: "
        "export NOT_SET_ANYWHERE=… or change api_key_env in the config\n"
    )


def test_doctor_model_sends_one_tiny_request_and_says_what_works(
    srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.push(Reply(content="ok", tool_calls=[("evaluate", '{"path": "k.py"}')]))
    assert main(["doctor", "--model", "openai/m", "--api-base", srv.url, "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert f"model openai/m at {srv.url}: answered in " in out and "tool calls: yes" in out
    body = srv.requests[0]["body"]
    assert body["max_tokens"] <= 16 and len(body["messages"]) == 1
    srv.reset(api_key="sk-right")
    assert main(["doctor", "--model", "openai/m", "--api-base", srv.url, "--workspace", str(ws)]) == 1
    assert (
        "model openai/m: FAILED: openai/m (openai): authentication failed (HTTP 401): check the API key (the provider's environment "
        "variable, or the one --api-key-env names): You didn't provide an API key."
    ) in capsys.readouterr().out
    assert len(srv.requests) == 1


def test_model_cancel_during_the_retry_wait_returns_at_once(srv: FakeOpenAIProcess) -> None:
    """The seam the UI's ctrl+c uses: cancel() from another thread ends the backoff, the retry is never sent."""
    import threading

    from nkiagent.agent.models import LiteLLMModel
    from nkiagent.agent.types import TurnCancelled

    srv.push(*[Reply(status=500, error="down", retry_after_s=30)] * 2)
    model = LiteLLMModel("openai/m", api_base=srv.url, num_retries=3, backoff_max_s=30)
    seen: list[tuple[str, dict[str, object]]] = []
    model.on_status = lambda kind, fields: (seen.append((kind, fields)), kind == "retry" and threading.Timer(0.2, model.cancel).start())
    t0 = time.monotonic()
    with pytest.raises(TurnCancelled, match="waiting to retry"):
        model.complete([{"role": "user", "content": "hi"}], [])
    assert time.monotonic() - t0 < 3 and len(srv.requests) == 1
    assert [k for k, _ in seen] == ["retry"]


def test_waiting_is_reported_every_second_while_a_request_is_out(srv: FakeOpenAIProcess) -> None:
    from nkiagent.agent.models import LiteLLMModel
    from nkiagent.agent.models.base import wait_text

    srv.push(Reply(content="late", delay_s=1.3))
    model = LiteLLMModel("openai/m", api_base=srv.url, timeout_s=10)
    model.status_every_s = 0.5
    waits: list[dict[str, object]] = []
    model.on_status = lambda kind, fields: waits.append(fields) if kind == "waiting" else None
    assert model.complete([{"role": "user", "content": "hi"}], []).content == "late"
    assert len(waits) == 2 and wait_text(waits[-1]) == "waiting for openai/m: 1 s (timeout 10 s; ctrl+c cancels)"


def test_headless_progress_prints_waits_at_10_30_and_60_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    from nkiagent.commands.agent import Progress

    progress = Progress()
    progress("model_request", {"turn": 1})
    for waited in range(1, 62):
        progress("model_wait", {"model": "openai/m", "waited_s": float(waited), "timeout_s": 120.0})
    assert capsys.readouterr().out.splitlines() == [f"  waiting for openai/m: {s} s (timeout 120 s; ctrl+c cancels)" for s in (10, 30, 60)]


def test_json_events_are_one_object_per_line(srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv.push(SUBMIT)
    _code, out, _err = _run(ws, capsys, "--json-events", api_base=srv.url)
    events = [json.loads(line) for line in out.splitlines()]  # nothing else on stdout: the summary went to stderr
    assert [e["type"] for e in events][:3] == ["session_start", "model_request", "model_response"] and events[-1]["type"] == "session_end"


def test_a_ctrl_c_python_swallowed_still_ends_the_retry_wait(srv: FakeOpenAIProcess, ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The full suite once saw a SIGINT's KeyboardInterrupt raised inside an import-lock callback, where Python drops it
    ("Exception ignored in: <function _get_module_lock.<locals>.cb>"), and the 30 s retry wait ran on. The handler's
    flag alone must end the wait: here it is set with no exception at all."""
    import signal
    import threading

    from nkiagent.agent.models.base import INTERRUPTED

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    srv.push(*[Reply(status=503, error="busy", retry_after_s=30)] * 3)
    timer = threading.Timer(1.0, INTERRUPTED.set)
    timer.start()
    t0 = time.monotonic()
    code, _out, err = _run(ws, capsys, api_base=srv.url)
    assert time.monotonic() - t0 < 10 and code == 130  # not the 30 s wait
    assert "interrupted" in err
    assert len(srv.requests) == 1  # the retry was never sent
    assert not INTERRUPTED.is_set() and signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back for the caller
