"""``nkiagent run``, ``nkiagent demo --headless``, ``nkiagent sessions …``, ``nkiagent undo``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent.models.base import retry_text, wait_text

if TYPE_CHECKING:
    from ..config import Settings, Sourced

__all__ = [
    "Progress",
    "needs_terminal",
    "review_mode",
    "run_config",
    "run_demo",
    "run_run",
    "run_sessions",
    "run_ui",
    "run_undo",
    "session_status",
]


class Progress:
    """One line per step of the session (turn, edit, verdict, best speedup, tokens, cost), or one JSON object per event.

    ``level`` is ``quiet`` (nothing), ``normal``, ``verbose`` (tool calls and results too) or ``json``
    (every event as a line of JSON, for scripts: ``--json-events``). Waits and retries of the model are
    always shown (except quiet): a request that takes minutes must not look like a hang.
    """

    WAIT_MARKS = (10.0, 30.0, 60.0)  #: seconds of waiting at which a line is printed (then every 60 s)

    def __init__(self, level: str = "normal") -> None:
        from rich.console import Console

        self.console = Console(stderr=False, highlight=False, soft_wrap=True)  # whole lines: a pipe or log keeps each message on one
        self.level = level
        self.turn = 0
        self.best: float | None = None
        self.tokens = 0
        self.cost = 0.0
        self._next_wait = 0
        self.session_id: str | None = None  #: of the first event seen: what an interrupt's resume hint names

    def __call__(self, type_: str, event: dict[str, Any]) -> None:
        self.session_id = self.session_id or event.get("session_id")
        if self.level == "json":
            print(json.dumps(event, default=str), flush=True)
            return
        if self.level == "quiet":
            return
        c = self.console
        if type_ == "model_request":
            self._next_wait = 0
        elif type_ == "model_wait":
            marks = self.WAIT_MARKS
            due = marks[self._next_wait] if self._next_wait < len(marks) else marks[-1] + 60.0 * (self._next_wait - len(marks) + 1)
            if event.get("waited_s", 0) >= due:
                self._next_wait += 1
                c.print(f"  [yellow]{wait_text(event)}[/]")
        elif type_ == "model_retry":
            c.print(f"  [yellow]{retry_text(event)}[/]")
        elif type_ == "model_response":
            self.turn = event["turn"]
            u = event.get("usage", {})
            self.tokens += u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
            self.cost += u.get("cost_usd", 0.0)
            text = (event["message"].get("content") or "").strip().splitlines()
            calls = ", ".join(tc["function"]["name"] for tc in event["message"].get("tool_calls") or [])
            c.print(f"[bold]turn {self.turn}[/] {text[0][:100] if text else ''} [dim]{('→ ' + calls) if calls else ''}[/]")
        elif type_ == "tool_call" and event.get("name") in ("evaluate", "profile") and self.level != "verbose":
            c.print(f"  [dim]{event['name']} {event.get('arguments', {}).get('path', '')} …[/]")  # seconds of work: say it started
        elif type_ == "tool_call" and self.level == "verbose":
            c.print(f"  [dim]⚙ {event.get('name')}({json.dumps(event.get('arguments', {}))[:200]})[/]")
        elif type_ == "tool_result" and self.level == "verbose":
            c.print(
                f"  [dim]{'✓' if event.get('ok') else '✗'} {str(event.get('content', '')).splitlines()[0][:200] if event.get('content') else ''}[/]"
            )
        elif type_ == "review_decision":
            c.print(f"  review: {event['decision']['action']} edit to {event['path']} [dim]({event['mode']})[/]")
        elif type_ == "edit_applied":
            c.print(f"  applied {event['path']} [dim]{(event.get('commit') or '')[:10]}[/]")
        elif type_ == "edit_refused":
            c.print(f"  [red]not applied[/] {event['path']}: {event['reason']}")
        elif type_ == "candidate":
            v, lat, sp = event.get("verdict"), event.get("latency_us"), event.get("speedup")
            if v == "pass" and sp is not None:
                self.best = max(self.best or 0.0, sp)
            color = {"pass": "green", "fail": "red", "rejected": "magenta"}.get(str(v), "white")
            nums = (
                f"{lat:,.2f} µs ({event.get('timing_source') or 'emulator-estimate'}), {sp:.3f}×"
                if lat is not None and sp is not None
                else ""
            )
            best = f"best {self.best:.3f}×" if self.best else "best –"
            c.print(f"  [{color}]{v}[/] {nums}  [dim]{best} · tokens {self.tokens} · ${self.cost:.4f}[/]")
        elif type_ == "error":
            c.print(f"  [red]error[/] {event['message']}")
        elif type_ == "note":
            c.print(f"  [dim]{event['text']}[/]")


def _level(args: argparse.Namespace) -> str:
    if getattr(args, "json_events", False):
        return "json"
    if getattr(args, "quiet", False) or getattr(args, "json", False):
        return "quiet"
    return "verbose" if getattr(args, "verbose", False) else "normal"


def _settings(args: argparse.Namespace, workspace: Path, prefix: str = "") -> Sourced:
    """The layered configuration for ``workspace`` with this command's flags on top (:func:`nkiagent.config.load_settings`)."""
    from ..config import Settings, load_settings

    flags = {key: getattr(args, prefix + key, None) for key in Settings().to_dict()}
    return load_settings(workspace, flags)


def needs_terminal() -> bool:
    """True when keys cannot be read from a person: stdin or stdout is not a terminal (CI, a pipe, a file)."""
    return not (sys.stdin.isatty() and sys.stdout.isatty())


def review_mode(settings: Settings, command: str) -> str | None:
    """The review mode a headless command can use, or None after saying why ``ask`` cannot work here.

    ``ask`` reads answers from the terminal; without one it refuses, or falls back to what
    ``approve_without_terminal`` says.
    """
    if settings.approve != "ask" or not needs_terminal():
        return settings.approve
    if settings.approve_without_terminal == "refuse":
        print(
            f"nkiagent {command}: --approve ask reviews each edit at the terminal, and this one has none (stdin or stdout is a pipe or "
            "a file). Use --approve auto (apply every edit; each is a git snapshot `nkiagent undo` reverts) or --approve never "
            '(dry run), or set approve_without_terminal = "auto" in .nkiagent/config.toml.',
            file=sys.stderr,
        )
        return None
    print(
        f"nkiagent {command}: no terminal to review edits: --approve ask falls back to {settings.approve_without_terminal} "
        "(approve_without_terminal)",
        file=sys.stderr,
    )
    return settings.approve_without_terminal


def _summary(outcome: Any, t0: float, as_json: bool, to_stderr: bool = False, workspace: Path | None = None) -> None:
    """The end of a session in words (or JSON); on stderr when stdout carries the JSON event stream."""
    if to_stderr:
        with contextlib.redirect_stdout(sys.stderr):
            _summary(outcome, t0, as_json, workspace=workspace)
        return
    state = outcome.state
    best = state.get("best")
    usage = state.get("usage", {})
    summary = {
        "session": outcome.session.id,
        "session_dir": str(outcome.session.dir),
        "stop_reason": state.get("stop_reason"),
        "turns": state.get("turn", 0),
        "result": state.get("result"),
        "best": best,
        "usage": usage,
        "wall_s": round(time.time() - t0, 1),
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"\nsession {summary['session']} finished after {summary['turns']} turns: {summary['stop_reason']}")
    result = state.get("result")
    if result:
        if result.get("verdict") == "pass" and result.get("latency_us") is not None:
            speed = (
                f", speedup {result['speedup']:.3f}× vs {result.get('speedup_vs') or 'the task baseline'}" if result.get("speedup") else ""
            )
            frac = result.get("fraction_of_peak")
            sol = (
                f", {100 * frac:.1f}% of the {result['sol_latency_us']:,.2f} µs speed of light"
                if frac and result.get("sol_latency_us")
                else ""
            )
            print(
                f"submitted: {result['path']} — pass, {result['latency_us']:,.2f} µs ({result.get('timing_source') or 'emulator-estimate'}){speed}{sol} "
                "(full verification)"
            )
        else:
            print(
                f"submitted: {result['path']} — {result.get('verdict')} in its full verification: {'; '.join(result.get('reasons') or [])}"
            )
    if best:
        speedup = (
            f"speedup {best['speedup']:.3f}× vs {best.get('speedup_vs') or 'the task baseline'}"
            if best.get("speedup")
            else "no speedup (nothing to compare with)"
        )
        held = (
            ""
            if workspace is None
            else (
                "; the file holds it"
                if _holds(workspace, best)
                else "; the file now holds another version (the session's kernels/ keeps this one)"
            )
        )
        print(
            f"best evaluated kernel: {best['path']} version {str(best.get('code_sha256'))[:12]} — {best['latency_us']:,.2f} µs "
            f"({best.get('timing_source') or 'emulator-estimate'}), {speedup}{held}"
        )
    else:
        print("no kernel passed verification")
    print(f"tokens {usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0)}, cost ${usage.get('cost_usd', 0.0):.4f}")
    print(f"session written to {summary['session_dir']}")
    if str(state.get("stop_reason", "")).startswith("model error"):
        print(
            f"after fixing the model's problem, continue with: nkiagent resume {summary['session']} --sessions-dir {outcome.session.dir.parent}"
        )


def _exit_code(outcome: Any) -> int:
    """1 when the model failed or no kernel passed, else 0 (README, "Exit codes")."""
    if str(outcome.stop_reason).startswith("model error"):
        return 1
    return 0 if outcome.best else 1


def _interrupted(command: str, progress: Progress, sessions_dir: Path, rt: Any = None) -> int:
    """ctrl+c: cancel the request in flight, record it, and say how to go on (exit 130)."""
    if rt is not None:
        rt.cancel()
        rt.emit("note", text="interrupted by the user (ctrl+c)")
    sid = progress.session_id
    hint = f"; the session is kept: nkiagent resume {sid} --sessions-dir {sessions_dir}" if sid else ""
    print(f"\nnkiagent {command}: interrupted{hint}", file=sys.stderr)
    return 130


def _drive_headless(rt: Any, graph: Any, first: Any, command: str, progress: Progress) -> Any:
    """Drive to the end; the outcome, or the exit code 130 after ctrl+c."""
    from ..agent.runner import drive

    try:
        return drive(rt, graph, first)
    except KeyboardInterrupt:
        return _interrupted(command, progress, rt.session.dir.parent, rt)


def _holds(workspace: Path, best: dict[str, Any]) -> bool:
    """Whether the best kernel's file in the repository still has the best kernel's code."""
    import hashlib

    try:
        text = (workspace / best["path"]).read_text()
    except OSError:
        return False
    return hashlib.sha256(text.encode()).hexdigest() == best.get("code_sha256")


def run_run(args: argparse.Namespace) -> int:
    from ..agent.lock import RepositoryBusy
    from ..agent.models import ModelError
    from ..agent.runner import SessionConfig, start_session
    from ..config import ConfigError

    workspace = Path(args.workspace).resolve()
    try:
        settings = _settings(args, workspace).settings
    except ConfigError as exc:
        print(f"nkiagent run: {exc}", file=sys.stderr)
        return 2
    approve = review_mode(settings, "run")
    if approve is None:
        return 2
    settings.approve = approve
    if not settings.model.startswith(("scripted:", "builtin/")):
        from ..agent.models import prewarm

        prewarm()  # import litellm in the background while the session is set up
    t0 = time.time()
    progress = Progress(_level(args))
    try:
        cfg = SessionConfig.from_settings(settings, task=args.task, workspace=workspace, kernel_path=args.kernel)
        rt, graph, first = start_session(cfg, progress)
    except KeyboardInterrupt:
        return _interrupted("run", progress, workspace / "sessions")
    except (ModelError, RepositoryBusy) as exc:
        print(f"nkiagent run: {exc}", file=sys.stderr)
        return 2
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"nkiagent run: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    outcome = _drive_headless(rt, graph, first, "run", progress)
    if isinstance(outcome, int):
        return outcome
    _summary(outcome, t0, args.json, to_stderr=args.json_events, workspace=rt.ctx.workspace.root)
    return _exit_code(outcome)


def run_config(args: argparse.Namespace) -> int:
    """``nkiagent config show``: every setting, its value and where it came from."""
    from ..config import ConfigError, render_settings, repo_config_path, user_config_path

    workspace = Path(args.workspace).resolve()
    try:
        sourced = _settings(args, workspace)
    except ConfigError as exc:
        print(f"nkiagent config: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({k: {"value": v, "source": sourced.sources[k]} for k, v in sourced.settings.to_dict().items()}, indent=2))
        return 0
    print(
        f"# read: {user_config_path()} ({'found' if user_config_path().is_file() else 'absent'}), "
        f"{repo_config_path(workspace)} ({'found' if repo_config_path(workspace).is_file() else 'absent'}), $NKIAGENT_*, flags"
    )
    print("\n".join(render_settings(sourced)))
    return 0


def run_ui(args: argparse.Namespace) -> int:
    """``nkiagent [--task NAME --model MODEL …]``: the terminal UI in a workspace (idle until ``/task``, or a session)."""
    from ..config import ConfigError

    if needs_terminal():
        print(
            "nkiagent: the UI needs a terminal (stdin or stdout is a pipe or a file); headless: nkiagent run --task NAME "
            "--approve auto, or nkiagent demo --headless",
            file=sys.stderr,
        )
        return 2
    workspace = Path(args.ui_workspace).resolve()
    try:
        s = _settings(args, workspace, "ui_").settings
    except ConfigError as exc:
        print(f"nkiagent: {exc}", file=sys.stderr)
        return 2
    from ..tui import run_app
    from ..tui.app import Launch

    return run_app(
        Launch(
            workspace=workspace,
            task=args.ui_task,
            model=s.model,
            target=s.target,
            approve=s.approve,
            api_base=s.api_base,
            max_turns=s.max_turns,
            verify_seeds=s.verify_seeds,
            settings=s,
        )
    )


def run_demo(args: argparse.Namespace) -> int:
    from ..agent.runner import SessionConfig, copy_demo_workspace, start_session
    from ..config import Settings

    ws = copy_demo_workspace(args.task, Path(tempfile.mkdtemp(prefix="nkiagent-demo-")))
    headless = args.headless or needs_terminal()
    if not headless:
        from ..tui import run_app
        from ..tui.app import Launch

        return run_app(
            Launch(
                workspace=ws,
                task=args.task,
                model="builtin/tuner",
                target=args.target or "trn2",
                approve="ask",
                max_turns=args.max_turns,
                headline=f"demo workspace {ws} (a fresh git repo); /approve auto stops asking",
            )
        )
    t0 = time.time()
    if not args.json and not getattr(args, "json_events", False):
        why = "" if args.headless else " (no terminal, so headless: the UI needs one)"
        print(
            f"demo workspace: {ws} (a fresh git repo){why}\ntask {args.task} on {args.target or 'trn2'}, model builtin/tuner (offline), "
            "edits auto-approved\n"
        )
    settings = Settings(model="builtin/tuner", target=args.target or "trn2", approve="auto", max_turns=args.max_turns)
    progress = Progress(_level(args))
    rt, graph, first = start_session(SessionConfig.from_settings(settings, task=args.task, workspace=ws), progress)
    outcome = _drive_headless(rt, graph, first, "demo", progress)
    if isinstance(outcome, int):
        return outcome
    _summary(outcome, t0, args.json, workspace=rt.ctx.workspace.root)
    return 0 if outcome.best and (outcome.best.get("speedup") or 0) > 1.0 else 1


def _pick_session(store: Any, args: argparse.Namespace) -> str | None:
    if getattr(args, "last", False):
        rows = store.list()
        return rows[-1][0] if rows else None
    return args.id


def session_status(events: list[dict[str, Any]]) -> tuple[str, int, str]:
    """(status, turns, result) of a stored session, from its events: ``finished``, ``model error``, ``interrupted`` or ``open``."""
    turns = max((int(e.get("turn") or 0) for e in events if e["type"] == "model_response"), default=0)
    end = next((e for e in reversed(events) if e["type"] == "session_end"), None)
    best = next((e for e in reversed(events) if e["type"] == "candidate" and e.get("verdict") == "pass"), None)
    speedups = [e.get("speedup") or 0.0 for e in events if e["type"] == "candidate" and e.get("verdict") == "pass"]
    result = f"best {max(speedups):.3f}×" if best is not None else "no passing kernel"
    if end is None:
        interrupted = any(e["type"] == "note" and "interrupted" in str(e.get("text", "")) for e in events)
        return ("interrupted" if interrupted else "open"), turns, result
    reason = str(end.get("stop_reason") or "")
    return ("model error" if reason.startswith("model error") else "finished"), turns, result


def run_sessions(args: argparse.Namespace) -> int:
    from ..sessions.store import SessionStore

    store = SessionStore(Path(args.sessions_dir).resolve())
    if args.action == "list":
        rows = store.list()
        if not rows:
            print(f"no sessions in {store.root}")
        for sid, meta in rows:
            status, turns, result = session_status(store.open(sid).events())
            print(
                f"{sid}  {status:11s}  turns {turns:<3d} {result:20s} task={meta.get('task')}  model={meta.get('model')}  target={meta.get('target')}"
            )
        return 0
    picked = _pick_session(store, args)
    if not picked:
        print(f"nkiagent {args.command}: give a session id, or --last for the newest (in {store.root})", file=sys.stderr)
        return 2
    try:
        session = store.open(picked)
    except KeyError as exc:
        print(f"nkiagent {args.command}: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.action == "show":
        events = session.events()
        print(json.dumps(session.meta(), indent=2))
        counts: dict[str, int] = {}
        for e in events:
            counts[e["type"]] = counts.get(e["type"], 0) + 1
        print("events:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for e in events:
            if e["type"] == "candidate":
                print(
                    f"  turn {e.get('turn')}: {e.get('verdict')} {e.get('latency_us')} µs speedup {e.get('speedup')} ({e.get('code_sha256', '')[:12]})"
                )
        return 0
    if not args.headless and not needs_terminal():
        from ..tui import run_app
        from ..tui.app import Launch

        session.close()
        return run_app(Launch(workspace=Path(session.meta().get("workspace", ".")), resume=session.dir, approve=args.approve))
    from ..agent.lock import RepositoryBusy
    from ..agent.runner import resume_session
    from ..config import ConfigError, Settings

    try:
        stored = Settings.from_dict(session.meta().get("config", {}).get("settings", {}))
    except ConfigError as exc:
        print(f"nkiagent {args.command}: {exc}", file=sys.stderr)
        return 2
    stored.approve = args.approve or stored.approve
    approve = review_mode(stored, args.command)
    if approve is None:
        return 2
    t0 = time.time()
    session.close()
    try:
        progress = Progress(_level(args))
        rt, graph = resume_session(session.dir, progress, approve=approve)
    except (RepositoryBusy, ConfigError) as exc:
        print(f"nkiagent {args.command}: {exc}", file=sys.stderr)
        return 2
    outcome = _drive_headless(rt, graph, None, args.command, progress)
    if isinstance(outcome, int):
        return outcome
    _summary(outcome, t0, False, workspace=rt.ctx.workspace.root)
    return _exit_code(outcome)


def run_undo(args: argparse.Namespace) -> int:
    from ..agent.workspace import Workspace
    from ..sessions.store import SessionStore

    ws_root = Path(args.workspace).resolve()
    store = SessionStore(ws_root / "sessions")
    sid = args.session or (store.list()[-1][0] if store.list() else None)
    if sid is None:
        print("nkiagent undo: no session to undo", file=sys.stderr)
        return 2
    from ..agent.workspace import WorkspaceError

    try:
        path, sha = Workspace(ws_root).undo(sid)
    except (WorkspaceError, ValueError, KeyError) as exc:
        print(f"nkiagent undo: {exc}", file=sys.stderr)
        return 1
    store.open(sid).append("note", text=f"undo: restored {path} to {sha}")
    print(f"restored {path} to snapshot {str(sha)[:10]}")
    return 0
