"""A person's habits (issue 23): configuration, terminals and pipes, their own task, refused edits, one session per repository.

Every test checks the exact words a person reads and the exit code (README, "Exit codes").
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from git import Repo

from nkiagent.agent.graph import Budget
from nkiagent.agent.runner import SessionConfig, resume_session, start_session
from nkiagent.cli import main
from nkiagent.config import Settings
from nkiagent.sessions.store import SessionStore

from .fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]


def _script(path: Path, *turns: dict[str, object]) -> str:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    return f"scripted:{path}"


def _call(name: str, **arguments: str) -> dict[str, object]:
    return {"content": name, "tool_calls": [{"name": name, "arguments": arguments}]}


def _repo(root: Path, files: dict[str, str]) -> Path:
    repo = Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.invalid")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    repo.index.add(list(files))
    repo.index.commit("init")
    return root


def _no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a pipe: isatty() is False


# -- configuration --------------------------------------------------------------------------------
def test_each_layer_overrides_the_one_before_and_config_show_names_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    user = tmp_path / "xdg" / "nkiagent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('model = "anthropic/claude-sonnet-4-5"\ntimeout_s = 30\nretries = 2\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    repo_cfg = tmp_path / "ws" / ".nkiagent" / "config.toml"
    repo_cfg.parent.mkdir(parents=True)
    repo_cfg.write_text('timeout_s = 10\napi_base = "http://127.0.0.1:8000/v1"\n')
    monkeypatch.setenv("NKIAGENT_RETRIES", "7")
    assert main(["config", "show", "--workspace", str(tmp_path / "ws"), "--max-turns", "4", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: (v["value"], v["source"]) for k, v in shown.items() if v["source"] != "default"} == {
        "model": ("anthropic/claude-sonnet-4-5", str(user)),
        "timeout_s": (10.0, str(repo_cfg)),
        "api_base": ("http://127.0.0.1:8000/v1", str(repo_cfg)),
        "retries": (7, "$NKIAGENT_RETRIES"),
        "max_turns": (4, "--max-turns"),
    }
    assert main(["config", "show", "--workspace", str(tmp_path / "ws")]) == 0
    rows = {line.split(" = ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["timeout_s"].startswith("timeout_s = 10.0 ") and rows["timeout_s"].endswith(
        f"  # {repo_cfg}: seconds one model request may take"
    )
    assert rows["retries"].startswith("retries = 7 ") and "  # $NKIAGENT_RETRIES: " in rows["retries"]


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ('timeout_s = "fast"\n', "timeout_s must be a number, not 'fast'"),
        (
            "timout_s = 5\n",
            (
                "unknown setting 'timout_s'; the settings are model, api_base, api_key_env, timeout_s, retries, temperature, "
                "max_tokens, target, approve, approve_without_terminal, max_turns, budget_usd, max_seconds, verify_seeds"
            ),
        ),
        ('approve = "sometimes"\n', "approve must be one of ask, auto, never, not 'sometimes'"),
        ("retries = -1\n", "retries must be at least 0, not -1"),
        ("retries = [\n", "not valid TOML"),
    ],
)
def test_a_bad_config_value_names_the_file_the_key_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, problem: str
) -> None:
    cfg = tmp_path / ".nkiagent" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text(toml)
    assert main(["run", "--task", "vector_add", "--workspace", str(tmp_path), "--approve", "auto"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nkiagent run: {cfg}: {problem}") and not (tmp_path / "sessions").exists()


def test_resume_reads_back_every_config_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Budgets, time limit, seeds, tool restriction, timeout, retries, sampling and key variable: all survive a resume."""
    monkeypatch.setenv("MY_KEY", "sk-local")
    ws = _repo(tmp_path / "ws", {"README.md": "x\n"})
    with FakeOpenAI(lifetime_s=60) as srv:
        srv.push(Reply(content="hello"))
        settings = Settings(
            model="openai/m",
            api_base=srv.url,
            api_key_env="MY_KEY",
            timeout_s=12.5,
            retries=1,
            temperature=0.3,
            max_tokens=900,
            target="trn1",
            approve="never",
            approve_without_terminal="auto",
            max_turns=7,
            budget_usd=0.25,
            max_seconds=600.0,
            verify_seeds=3,
        )
        assert all(getattr(settings, k) != v for k, v in Settings().to_dict().items())  # every field differs from its default
        before = SessionConfig.from_settings(settings, task="vector_add", workspace=ws, tools=["read_file", "edit_file", "submit"])
        rt, _, _ = start_session(before)
        rt.prefetched[1].result(timeout=30)  # type: ignore[index]
        session_dir = rt.session.dir
    meta = SessionStore(session_dir.parent).open(session_dir.name).meta()
    after = SessionConfig.from_meta(meta["config"])
    assert after == before and after.settings == settings
    rt2, _ = resume_session(session_dir)
    model = rt2.model
    assert (model.api_base, model.api_key, model.timeout_s, model.num_retries, model.temperature, model.max_tokens) == (
        srv.url,
        "sk-local",
        12.5,
        1,
        0.3,
        900,
    )
    assert rt2.budget == Budget(7, 0.25, 600.0) and rt2.ctx.verify_seeds == 3 and rt2.ctx.target == "trn1" and rt2.approve == "never"
    assert sorted(rt2.tools.specs) == ["edit_file", "read_file", "submit"]


# -- terminals, pipes, interrupts, extras ---------------------------------------------------------
def test_approve_ask_without_a_terminal_refuses_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_terminal(monkeypatch)
    assert main(["run", "--task", "vector_add", "--workspace", str(tmp_path)]) == 2  # --approve ask is the default
    assert capsys.readouterr().err == (
        "nkiagent run: --approve ask reviews each edit at the terminal, and this one has none (stdin or stdout is a pipe or a file). "
        "Use --approve auto (apply every edit; each is a git snapshot `nkiagent undo` reverts) or --approve never (dry run), "
        'or set approve_without_terminal = "auto" in .nkiagent/config.toml.\n'
    )
    assert not (tmp_path / "sessions").exists()
    monkeypatch.setenv("NKIAGENT_APPROVE_WITHOUT_TERMINAL", "never")
    model = _script(tmp_path / "s.jsonl", _call("submit", path="kernels/vector_add.py", summary="as is"))
    assert (
        main(["run", "--task", "vector_add", "--workspace", str(tmp_path), "--model", model, "--verify-seeds", "1"]) == 0
    )  # submit verified the starting kernel: it passes
    assert (
        "nkiagent run: no terminal to review edits: --approve ask falls back to never (approve_without_terminal)\n"
        == capsys.readouterr().err
    )


def test_the_ui_and_the_demo_never_wait_for_keys_from_a_pipe(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_terminal(monkeypatch)
    assert main([]) == 2
    assert capsys.readouterr().err == (
        "nkiagent: the UI needs a terminal (stdin or stdout is a pipe or a file); headless: "
        "nkiagent run --task NAME --approve auto, or nkiagent demo --headless\n"
    )
    main(["demo", "--max-turns", "1"])
    out = capsys.readouterr().out
    assert "(a fresh git repo) (no terminal, so headless: the UI needs one)" in out and "finished after 1 turns" in out


def test_missing_extras_end_in_one_line_naming_the_pip_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: importing it raises ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["search", "--task", "vector_add", "--executor", "ray", "--n", "1", "--sessions-dir", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err == "nkiagent search: this needs ray, which is not installed: pip install 'nkiagent[ray]'\n"
    (tmp_path / "none").mkdir()
    assert main(["export", "rl", "--format", "verl", "--sessions", str(tmp_path / "none"), "--out", str(tmp_path / "x.parquet")]) == 2
    assert capsys.readouterr().err == "nkiagent export: this needs pyarrow, which is not installed: pip install 'nkiagent[export]'\n"


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``nkiagent sessions show --last | head -1`` with more output than a pipe buffer holds: no BrokenPipeError."""
    session = SessionStore(tmp_path / "sessions").create({"task": "vector_add", "model": "m", "target": "trn2"})
    session.close()
    with session.events_path.open("a") as fh:  # in one write: append() fsyncs each event
        fh.writelines(
            json.dumps(
                {"type": "candidate", "seq": i, "turn": i, "verdict": "pass", "latency_us": 1.0, "speedup": 1.0, "code_sha256": "0" * 64}
            )
            + "\n"
            for i in range(3000)
        )
    out = subprocess.run(
        f"{sys.executable} -m nkiagent.cli sessions show --last --sessions-dir {tmp_path / 'sessions'} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert out.stdout == "{\n" and out.stderr == ""


def test_sessions_list_shows_status_turns_and_result_and_resume_last_finds_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _repo(tmp_path / "ws", {"README.md": "x\n"})
    model = _script(tmp_path / "s.jsonl", _call("submit", path="kernels/vector_add.py", summary="as is"))
    assert (
        main(["run", "--task", "vector_add", "--workspace", str(ws), "--model", model, "--approve", "auto", "-q"]) == 0
    )  # submit verified it
    capsys.readouterr()
    assert main(["sessions", "list", "--sessions-dir", str(ws / "sessions")]) == 0
    row = capsys.readouterr().out.strip()
    sid = next((ws / "sessions").iterdir()).name
    assert re.fullmatch(
        rf"{sid}  finished     turns 1   best \d+\.\d{{3}}× +task=vector_add  model={re.escape(model)}  target=trn2", row
    ), row
    _no_terminal(monkeypatch)
    assert main(["resume", "--last", "--sessions-dir", str(ws / "sessions")]) == 0  # no terminal: headless, the session's own auto mode
    assert "finished after 1 turns" in capsys.readouterr().out


# -- your own code as a task, refused edits, one session per repository ---------------------------
MODEL = """
import numpy as np

def double(x):
    return x * np.float32(2.0)
"""

KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        u = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=u)
    return out
"""


def test_own_task_file_is_portable_and_runs_without_a_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _repo(tmp_path / "first", {"model.py": textwrap.dedent(MODEL), "kernels/double.py": KERNEL.lstrip()})
    monkeypatch.chdir(first)
    assert main(["task", "new", "--from", "model.py:double", "--inputs", "x:256x128:float32"]) == 0
    assert str(first) not in (first / "tasks" / "double.py").read_text()
    moved = Path(shutil.copytree(first, tmp_path / "elsewhere"))  # another checkout: the task file still finds model.py
    shutil.rmtree(first)
    monkeypatch.chdir(moved)
    model = _script(
        tmp_path / "s.jsonl", _call("evaluate", path="kernels/double.py"), _call("submit", path="kernels/double.py", summary="ok")
    )
    capsys.readouterr()
    code = main(
        ["run", "--task", "tasks/double.py", "--kernel", "kernels/double.py", "--model", model, "--approve", "auto", "--verify-seeds", "1"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "speedup 1.000× vs the starting kernel (the task has no baseline)" in out


def test_an_edit_refused_for_your_changes_is_shown_as_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _repo(tmp_path / "ws", {"notes.txt": "mine\n"})
    (ws / "notes.txt").write_text("mine, not committed\n")
    model = _script(
        tmp_path / "s.jsonl",
        {"content": "edit", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "agent\n"}}]},
        _call("submit", path="notes.txt", summary="x"),
    )
    main(["run", "--task", "vector_add", "--workspace", str(ws), "--model", model, "--approve", "auto"])
    lines = capsys.readouterr().out.splitlines()
    assert (
        "  not applied notes.txt: refusing to edit notes.txt: it has uncommitted changes that this session did not make. "
        "Commit or stash them first, or have the agent write to another file."
    ) in lines
    assert not any(line.startswith("  applied notes.txt") for line in lines)
    assert (ws / "notes.txt").read_text() == "mine, not committed\n"


def test_a_second_session_in_the_same_repository_is_refused_with_its_holder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _repo(tmp_path / "ws", {"README.md": "x\n"})
    code = (
        "import sys, time; from pathlib import Path; from nkiagent.agent.lock import lock_repository\n"
        "lock_repository(Path(sys.argv[1]), Path(sys.argv[1]) / 'sessions', 'other-session'); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(ws)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert main(["run", "--task", "vector_add", "--workspace", str(ws), "--approve", "auto"]) == 2
        assert capsys.readouterr().err == (
            f"nkiagent run: another nkiagent session (other-session, process {holder.pid}) is working in {ws}; wait for it to end or stop it "
            "(ctrl+c there): two sessions in one repository would overwrite each other's edits. "
            f"The lock is {ws / '.git' / 'nkiagent.lock'}.\n"
        )
        assert not (ws / "sessions").exists()
    finally:
        holder.kill()
        holder.wait()
    model = _script(tmp_path / "s.jsonl", _call("submit", path="README.md", summary="x"))
    assert main(["run", "--task", "vector_add", "--workspace", str(ws), "--approve", "auto", "--model", model, "-q"]) == 1  # free again


def test_a_syntax_error_is_reported_on_its_own_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = KERNEL.lstrip().splitlines()
    source = lines[:6] + [f"# filler {i}" for i in range(24)] + ["x = = 1"] + lines[6:]  # line 31
    (tmp_path / "bad.py").write_text("\n".join(source) + "\n")
    assert main(["eval", str(tmp_path / "bad.py"), "--task", "vector_add", "--seeds", "1"]) == 1
    assert f"{tmp_path / 'bad.py'}:31: the kernel does not parse here" in capsys.readouterr().out


def test_a_task_file_that_does_not_import_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.py").write_text("from nkiagent.tasks.spec import Task\n\nTASK = Task(\n    name='x',,\n)\n")
    assert main(["eval", str(tmp_path / "t.py"), "--task", str(tmp_path / "t.py")]) == 2
    assert (
        capsys.readouterr().err == f"nkiagent eval: {tmp_path / 't.py'}:4: the task file does not parse (invalid syntax); fix the syntax\n"
    )


def test_shell_completion_is_made_from_the_parser() -> None:
    script = subprocess.run(
        [sys.executable, "-m", "nkiagent.cli", "--completion", "bash"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    probe = f'{script}\nCOMP_WORDS=(nkiagent run --time); COMP_CWORD=2; _nkiagent; echo "${{COMPREPLY[@]}}"'
    assert subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "--timeout-s"
