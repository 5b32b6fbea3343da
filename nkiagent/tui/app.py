"""The nkiagent app: pair-program a kernel, review every hunk, see where the time goes.

Layout: the conversation and the prompt on the left; kernel, candidates, profile and search tabs on
the right; a status bar at the bottom. Reviews take the whole screen (:class:`ReviewScreen`).

Threads: the agent loop (model calls, tools, evaluations) runs on a thread worker through an
:class:`~nkiagent.tui.bridge.AgentBridge`; its events and tokens arrive here as messages posted
thread-safely, and a review interrupt opens the review screen through ``call_from_thread`` and
waits on a future. ``/profile`` and ``/undo`` run on workers too, so no key ever waits for a
model or the verifier. ``/search`` runs :func:`nkiagent.search.run_search` on its own worker; each
candidate arrives as a :class:`SearchCandidate` message for the search tab, and ``ctrl+c`` stops
it through the engine's ``should_stop`` hook after the round in flight (everything evaluated is
recorded in the search session, which ``nkiagent search --resume ID`` continues). Nothing heavy (LangGraph,
litellm, the verifier, the search engine) is imported before the first frame.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, TabbedContent, TabPane

from ..config import Settings
from ..verify.protocol import VISIBLE_SEEDS
from .bridge import AgentBridge
from .commands import COMMANDS, help_text, parse, transcript_markdown
from .widgets import Conversation, KernelView, Leaderboard, ProfileView, SearchView, StatusBar

__all__ = ["AgentEvent", "Launch", "NkiAgentApp", "RunFinished", "SearchCandidate", "SearchFinished", "Token"]

if TYPE_CHECKING:
    from ..search.db import Candidate
    from ..search.engine import SearchConfig

W = TypeVar("W", bound=Widget)

TITLE = "nkiagent"
REVIEW_TITLE = "● review waiting — nkiagent"


@dataclass
class Launch:
    """How the app opens: idle in a workspace, starting a session, or reopening a stored one."""

    workspace: Path
    task: str | None = None
    model: str = "builtin/tuner"
    target: str = "trn2"
    approve: str | None = "ask"  #: None when reopening keeps the session's own mode
    api_base: str | None = None
    max_turns: int = 30
    resume: Path | None = None  #: a session directory to reopen
    sessions_dir: Path | None = None
    verify_seeds: int = VISIBLE_SEEDS
    headline: str = ""  #: a line shown first (e.g. where the demo workspace is)
    settings: Settings | None = None  #: the rest of the configuration (timeouts, retries, key variable, budgets); None: the defaults


class AgentEvent(Message):
    """A session event from the agent thread."""

    def __init__(self, type_: str, event: dict[str, Any]) -> None:
        super().__init__()
        self.type_ = type_
        self.event = event


class Token(Message):
    """Streamed model text from the agent thread (``text`` plus whatever the app buffered meanwhile)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class RunFinished(Message):
    """The agent thread stopped: the session ended (``state``), was cancelled (None) or failed (``error``)."""

    def __init__(self, state: dict[str, Any] | None, error: str = "") -> None:
        super().__init__()
        self.state = state
        self.error = error


class SearchCandidate(Message):
    """One candidate the search evaluated (its ``candidate`` event fields)."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__()
        self.event = event


class SearchFinished(Message):
    """The search thread stopped: ``reason`` (a budget, or stopped by the user), or ``error``; ``session_dir`` when known."""

    def __init__(self, reason: str, session_dir: Path | None, error: str = "") -> None:
        super().__init__()
        self.reason = reason
        self.session_dir = session_dir
        self.error = error


class NkiAgentApp(App[None]):
    """See the module docstring."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: Textual resolves relative paths against a subclass's module
    TITLE = TITLE
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "cancel_turn", "cancel", priority=True),
        Binding("ctrl+q", "quit", "quit"),
        Binding("f2", "tab('kernel')", "kernel"),
        Binding("f3", "tab('candidates')", "candidates"),
        Binding("f4", "tab('profile')", "profile"),
        Binding("f5", "tab('search')", "search"),
    ]

    def __init__(self, launch: Launch) -> None:
        super().__init__()
        self.launch = launch
        self._tokens: list[str] = []  # streamed text not drawn yet (filled on the agent thread)
        self._tokens_lock = threading.Lock()
        self._token_posted = False
        self.bridge = AgentBridge(self._post_event, self._post_token, self._request_review)
        self.session_dir: Path | None = None
        self.kernel_path = ""
        self.busy = False
        self.bells = 0
        self.searching = False
        self.search_dir: Path | None = None  #: the session of the last search started here
        self._search_stop = threading.Event()

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield Conversation(id="conversation")
                yield Input(placeholder="message the model, or /help", id="prompt")
            with TabbedContent(id="side", initial="kernel"):
                with TabPane("Kernel", id="kernel"):
                    yield KernelView(id="kernel-view")
                with TabPane("Candidates", id="candidates"):
                    yield Leaderboard(id="leaderboard")
                with TabPane("Profile", id="profile"):
                    yield ProfileView(id="profile-view")
                with TabPane("Search", id="search"):
                    yield SearchView(id="search-view")
        yield StatusBar(id="status")
        yield Footer()

    def main(self, cls: type[W], selector: str | None = None) -> W:
        """A widget of the main screen, also while the review screen is on top (``App.query_one`` asks the top screen)."""
        if not self.screen_stack:
            raise NoMatches("the app has closed its screens")
        return self.screen_stack[0].query_one(selector or cls, cls)  # type: ignore[arg-type]

    @property
    def conversation(self) -> Conversation:
        return self.main(Conversation)

    @property
    def status_bar(self) -> StatusBar:
        return self.main(StatusBar)

    async def on_mount(self) -> None:
        la = self.launch
        self.status_bar.show(model=la.model, target=la.target, approve=la.approve or "ask")
        if la.headline:
            await self.conversation.note(la.headline, "bold")
        if la.resume is not None:
            await self._replay(la.resume)
            resume = la.resume
            self._run_agent(lambda b: b.resume(resume, la.approve), "reopening the session")
        elif la.task:
            self._start(la.task)
        else:
            await self.conversation.note("Welcome to nkiagent. /task NAME starts a session (e.g. /task vector_add); /help lists commands.")
        self.main(Input, "#prompt").focus()
        self.call_after_refresh(self._prewarm_markdown)

    @work(thread=True, group="prewarm", exit_on_error=False)
    def _prewarm_markdown(self) -> None:
        """Load the Markdown parser after the first frame, so the first streamed token does not stall keys while it loads."""
        from textual.widgets import Markdown

        Markdown("warm-up")  # builds markdown-it's parser and rule tables once

    # -- the agent thread ------------------------------------------------------------------------
    def _post_event(self, type_: str, event: dict[str, Any]) -> None:
        self.post_message(AgentEvent(type_, event))

    def _post_token(self, text: str) -> None:
        """Buffer streamed text; post a :class:`Token` only if none is waiting, so keys never queue behind hundreds of tokens."""
        with self._tokens_lock:
            self._tokens.append(text)
            if self._token_posted:
                return
            self._token_posted = True
        self.post_message(Token(""))

    def _request_review(self, payload: dict[str, Any]) -> Future[dict[str, Any]]:
        """Called on the agent thread: open the review screen on the UI thread and hand back the decision's future."""
        fut: Future[dict[str, Any]] = Future()
        self.call_from_thread(self._open_review, payload, fut)
        return fut

    def _open_review(self, payload: dict[str, Any], fut: Future[dict[str, Any]]) -> None:
        self.bell()
        self.set_title(REVIEW_TITLE)
        self.status_bar.show(state="review")

        def decided(decision: dict[str, Any] | None) -> None:
            self.set_title(TITLE)
            self.status_bar.show(state="working")
            if decision is not None and not fut.done():
                fut.set_result(decision)

        from .review import ReviewScreen  # rich.syntax and pygments load with the first review, not before the first frame

        self.push_screen(ReviewScreen(payload), decided)

    def set_title(self, title: str) -> None:
        """Set the app's title and the terminal window's (OSC 2), so a waiting review shows in the tab or taskbar."""
        self.title = title
        driver = self._driver  # Textual has no public call for the terminal's own title
        if driver is not None and not self.is_headless:
            driver.write(f"\x1b]2;{title}\x07")
            driver.flush()

    def bell(self) -> None:
        """Ring the terminal bell (counted, so tests can see that a waiting review rang it)."""
        self.bells += 1
        super().bell()

    def _run_agent(self, job: Callable[[AgentBridge], dict[str, Any] | None], what: str) -> None:
        self.busy = True
        self.status_bar.show(state="working")

        def body() -> None:
            try:
                state = job(self.bridge)
            except Exception as exc:  # noqa: BLE001 — shown in the conversation; the app keeps running
                self.post_message(RunFinished(None, f"{what} failed: {type(exc).__name__}: {exc}"))
                return
            self.post_message(RunFinished(state))

        self.run_worker(body, thread=True, group="agent", name=what, exit_on_error=False)

    def _settings(self, **changes: Any) -> Settings:
        """The launch's configuration with what the person changed in the UI (model, target, review mode) on top."""
        la = self.launch
        launch = {
            "model": la.model,
            "target": la.target,
            "approve": la.approve or "ask",
            "max_turns": la.max_turns,
            "api_base": la.api_base,
            "verify_seeds": la.verify_seeds,
        }
        return replace(la.settings or Settings(), **{**launch, **changes})

    def _start(self, task: str) -> None:
        from ..agent.runner import SessionConfig  # light: the runner imports LangGraph only when a session starts

        cfg = SessionConfig.from_settings(
            self._settings(), task=task, workspace=self.launch.workspace, sessions_dir=self.launch.sessions_dir
        )
        self._run_agent(lambda b: b.start(cfg), f"starting a session on {task}")

    # -- messages from the agent thread ----------------------------------------------------------
    async def on_token(self, message: Token) -> None:
        with self._tokens_lock:
            text = message.text + "".join(self._tokens)
            self._tokens.clear()
            self._token_posted = False
        try:
            await self.conversation.add_token(text)
        except NoMatches:  # the app is closing: its widgets are gone while the agent thread still talks
            pass

    async def on_agent_event(self, message: AgentEvent) -> None:
        try:
            await self.show_event(message.type_, message.event)
        except NoMatches:
            pass

    async def show_event(self, type_: str, e: dict[str, Any]) -> None:
        """Draw one session event everywhere it matters (used live and for replayed history)."""
        if type_ == "session_start":
            self.kernel_path = e.get("kernel_path", "")
            self.launch.task = e.get("task", self.launch.task)
            if self.session_dir is None:
                self.session_dir = (self.launch.sessions_dir or self.launch.workspace / "sessions") / e["session_id"]
        await self.conversation.add_event(type_, e)
        self.status_bar.add_event(type_, e)
        self.main(Leaderboard).add_event(type_, e)
        if type_ in ("session_start", "edit_applied"):
            self._refresh_kernel()
        if type_ == "evaluation" and (e.get("result") or {}).get("verdict") == "pass":
            r = e["result"]
            self.main(ProfileView).show(
                r.get("profile"),
                target=r.get("target", ""),
                latency_us=r.get("latency_us"),
                sol_latency_us=r.get("sol_latency_us"),
                fraction_of_peak=r.get("fraction_of_peak"),
            )

    async def on_run_finished(self, message: RunFinished) -> None:
        self.busy = False
        self.set_title(TITLE)
        self.status_bar.show(state="idle")
        if message.error:
            await self.conversation.note(message.error, "bold red")

    async def _replay(self, session_dir: Path) -> None:
        from ..sessions.store import read_events

        self.session_dir = session_dir
        meta = json.loads((session_dir / "meta.json").read_text())
        self.launch.workspace = Path(meta.get("workspace", self.launch.workspace))
        self.status_bar.show(
            model=meta.get("model", "-"), target=meta.get("target", "trn2"), approve=self.launch.approve or meta.get("approve", "ask")
        )
        await self.show_history(read_events(session_dir / "events.jsonl"))
        await self.conversation.note(f"reopened session {session_dir.name}", "bold")

    async def show_history(self, events: Iterable[dict[str, Any]]) -> None:
        for e in events:
            await self.show_event(e["type"], e)

    def _refresh_kernel(self) -> None:
        path = self.launch.workspace / self.kernel_path
        if self.kernel_path and path.is_file():
            self.main(KernelView).show(self.kernel_path, path.read_text())

    # -- the prompt and slash commands -----------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    async def submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith("/"):
            try:
                cmd, arg = parse(text)
            except ValueError as exc:
                await self.conversation.note(str(exc), "red")
                return
            await getattr(self, f"cmd_{cmd.name}")(arg)
            return
        if self.busy:
            await self.conversation.note("the agent is working: ctrl+c cancels the turn, then send your message", "yellow")
            return
        if self.bridge.rt is None:
            await self.conversation.note("no session yet: /task NAME starts one", "yellow")
            return
        await self.conversation.add_user(text)
        self._run_agent(lambda b: b.say(text), "continuing the session")

    async def cmd_help(self, arg: str) -> None:
        from textual.widgets import Markdown

        await self.conversation.mount(Markdown(help_text(), classes="help"))
        self.conversation.scroll_end(animate=False)

    async def cmd_task(self, arg: str) -> None:
        if self.busy:
            await self.conversation.note("a session is running: ctrl+c cancels it first", "yellow")
            return
        self.launch.task = arg
        self.session_dir = None
        self.bridge = AgentBridge(self._post_event, self._post_token, self._request_review)
        self._start(arg)

    async def cmd_model(self, arg: str) -> None:
        self.launch.model = arg
        self.status_bar.show(model=arg)
        rt = self.bridge.rt
        if rt is not None:
            from ..agent.runner import build_model

            try:
                rt.model = build_model(self._settings(model=arg))
                rt.watch_model()
            except (ValueError, OSError) as exc:
                await self.conversation.note(f"/model: {exc}", "red")
                return
        await self.conversation.note(f"model: {arg} (from the next turn)")

    async def cmd_target(self, arg: str) -> None:
        if arg not in ("trn1", "trn2", "trn3"):
            await self.conversation.note("usage: /target trn1|trn2|trn3", "red")
            return
        self.launch.target = arg
        if self.bridge.rt is not None:
            self.bridge.rt.ctx.target = arg
        self.status_bar.show(target=arg)
        await self.conversation.note(f"target: {arg} (from the next evaluation)")

    async def cmd_approve(self, arg: str) -> None:
        if arg not in ("ask", "auto", "never"):
            await self.conversation.note("usage: /approve ask|auto|never", "red")
            return
        self.launch.approve = arg
        if self.bridge.rt is not None:
            self.bridge.rt.approve = arg
        self.status_bar.show(approve=arg)
        await self.conversation.note(f"approve: {arg}")

    async def cmd_undo(self, arg: str) -> None:
        if self.busy or self.bridge.rt is None:
            await self.conversation.note("/undo needs an open session that is not running (ctrl+c first)", "yellow")
            return
        self._undo()

    @work(thread=True, group="undo", exit_on_error=False)
    def _undo(self) -> None:
        from ..agent.workspace import WorkspaceError

        rt = self.bridge.rt
        try:
            result = rt.ctx.workspace.undo(rt.session.id)
        except (WorkspaceError, ValueError, KeyError) as exc:
            self.post_message(AgentEvent("note", {"text": f"undo: {exc}"}))
            return
        rt.emit("note", text=f"undo: {result.summary}")
        self.call_from_thread(self._refresh_kernel)

    async def cmd_profile(self, arg: str) -> None:
        if self.bridge.rt is None or not self.kernel_path:
            await self.conversation.note("/profile needs a session with a kernel", "yellow")
            return
        await self.conversation.note(f"profiling {self.kernel_path} on {self.bridge.rt.ctx.target} …")
        self._profile()

    @work(thread=True, group="profile", exit_on_error=False)
    def _profile(self) -> None:
        from .profiling import profile_in_sandbox

        rt = self.bridge.rt
        try:
            prof = profile_in_sandbox(rt.ctx.workspace.resolve(self.kernel_path), rt.ctx.task, rt.ctx.target)
        except RuntimeError as exc:
            self.post_message(AgentEvent("note", {"text": f"profile: {exc}"}))
            return
        self.call_from_thread(self.show_profile, prof)

    def show_profile(self, prof: dict[str, Any]) -> None:
        self.main(ProfileView).show(prof)
        self.action_tab("profile")

    async def cmd_export(self, arg: str) -> None:
        if self.session_dir is None:
            await self.conversation.note("/export needs a session", "yellow")
            return
        from ..sessions.store import read_events

        out = Path(arg).expanduser() if arg else self.session_dir / "transcript.md"
        out.write_text(transcript_markdown(read_events(self.session_dir / "events.jsonl")))
        await self.conversation.note(f"wrote {out}", "green")

    async def cmd_search(self, arg: str) -> None:
        from ..search.strategies import STRATEGIES

        parts = arg.split()
        usage = f"usage: /search {'|'.join(STRATEGIES)} [N] [TASK]"
        if not parts or parts[0] not in STRATEGIES or len(parts) > 3 or (len(parts) > 1 and not (parts[1].isdigit() and int(parts[1]) > 0)):
            await self.conversation.note(usage, "red")
            return
        task = parts[2] if len(parts) > 2 else self.launch.task
        if not task:
            await self.conversation.note("/search needs a task: /task NAME first, or /search STRATEGY N TASK", "yellow")
            return
        if self.searching:
            await self.conversation.note("a search is running: ctrl+c stops it first", "yellow")
            return
        from ..search.engine import SearchConfig

        la = self.launch
        current = la.workspace / self.kernel_path
        kernel = str(current) if task == la.task and self.kernel_path and current.is_file() else None  # search from the session's kernel
        cfg = SearchConfig(
            task=task,
            strategy=parts[0],
            model=la.model,
            target=la.target,
            api_base=la.api_base,
            kernel=kernel,
            max_candidates=int(parts[1]) if len(parts) > 1 else SearchConfig.max_candidates,
        )
        self.searching = True
        self._search_stop.clear()
        self.main(SearchView).begin(cfg.strategy, task, cfg.max_candidates)
        self.action_tab("search")
        await self.conversation.note(
            f"searching: {cfg.strategy} on {task} with {cfg.model}, {cfg.max_candidates} candidates (f5; ctrl+c stops)"
        )
        self._search(cfg, la.sessions_dir or la.workspace / "sessions")

    @work(thread=True, group="search", exit_on_error=False)
    def _search(self, cfg: SearchConfig, sessions_dir: Path) -> None:
        from ..search.engine import run_search

        def seen(c: Candidate) -> None:
            self.post_message(SearchCandidate(c.event_fields()))

        try:  # ctrl+c sets the event; the engine stops after the round in flight, with everything recorded
            out = run_search(cfg, sessions_dir, on_candidate=seen, should_stop=self._search_stop.is_set)
        except Exception as exc:  # noqa: BLE001 — shown in the conversation; the app keeps running
            self.post_message(SearchFinished("failed", None, f"search failed: {type(exc).__name__}: {exc}"))
        else:
            self.post_message(SearchFinished(out.stop_reason, out.session.dir))

    async def on_search_candidate(self, message: SearchCandidate) -> None:
        try:
            self.main(SearchView).add_candidate(message.event)
        except NoMatches:
            pass

    async def on_search_finished(self, message: SearchFinished) -> None:
        self.searching = False
        self.search_dir = message.session_dir
        try:
            view = self.main(SearchView)
        except NoMatches:
            return
        view.finish(message.reason)
        if message.error:
            await self.conversation.note(message.error, "bold red")
            return
        best = view.best_speedup()
        where = f"; session {message.session_dir.name} (nkiagent report {message.session_dir.name})" if message.session_dir else ""
        await self.conversation.note(
            f"search {message.reason}: {len(view.rows)} candidates, best {f'{best:.3f}×' if best is not None else 'none passed'}{where}",
            "bold",
        )

    # -- keys and palette ------------------------------------------------------------------------
    def action_tab(self, name: str) -> None:
        self.main(TabbedContent).active = name

    async def action_cancel_turn(self) -> None:
        if self.searching and not self._search_stop.is_set():
            self._search_stop.set()
            await self.conversation.note("stopping the search after its current round …", "yellow")
        if not self.busy:
            if not self.searching:
                self.notify("nothing to cancel (ctrl+q quits)")
            return
        from .review import ReviewScreen

        self.bridge.cancel()
        if isinstance(self.screen, ReviewScreen):
            self.screen.dismiss(None)
        await self.conversation.note("cancelling the current turn …", "yellow")

    async def action_quit(self) -> None:
        """Quit; a turn in flight is cancelled first, so a waiting review or stream does not keep the agent thread alive."""
        self.bridge.cancel()
        self._search_stop.set()
        self.exit()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for cmd in COMMANDS.values():
            if cmd.needs_argument:
                yield SystemCommand(cmd.usage, cmd.help, lambda c=cmd: self._prefill(c.name))
            else:
                yield SystemCommand(cmd.usage, cmd.help, lambda c=cmd: self.run_worker(getattr(self, f"cmd_{c.name}")("")))

    def _prefill(self, name: str) -> None:
        prompt = self.main(Input, "#prompt")
        prompt.value = f"/{name} "
        prompt.cursor_position = len(prompt.value)
        prompt.focus()

    @on(DataTable.RowSelected, "#candidate-table")
    def candidate_selected(self, event: DataTable.RowSelected) -> None:
        from ..agent.hunks import unified_diff

        board = self.main(Leaderboard)
        row = next(r for r in board.rows if str(r["n"]) == event.row_key.value)
        if self.session_dir is None or not row["sha"]:
            return
        candidate = (self.session_dir / "kernels" / f"{row['sha']}.py").read_text()
        current_path = self.launch.workspace / self.kernel_path
        current = current_path.read_text() if current_path.is_file() else ""
        board.show_diff(unified_diff(current, candidate, self.kernel_path))
