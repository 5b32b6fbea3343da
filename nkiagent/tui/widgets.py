"""The main screen's widgets: conversation, status bar, kernel view, candidates leaderboard, profile view, search view.

Each widget is fed plain session events (the dicts :meth:`nkiagent.sessions.store.Session.append`
writes), so a live session and a stored one replayed on resume draw the same thing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Collapsible, DataTable, Sparkline, Static

from ..agent.models.base import retry_text, wait_text
from .profiling import render_profile

__all__ = ["Conversation", "KernelView", "Leaderboard", "ProfileView", "SearchView", "Status", "StatusBar", "VerdictCard"]


def _short(args: Any, limit: int = 60) -> str:
    text = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verdict(verdict: Any) -> Text:
    return Text(str(verdict), style={"pass": "green", "fail": "red"}.get(str(verdict), "magenta"))


def _num(value: float | None, fmt: str) -> str:
    return format(value, fmt) if value is not None else "–"


def _speedup(value: float | None) -> str:
    return f"{value:.3f}×" if value is not None else "–"


class VerdictCard(Static):
    """An evaluation as a compact card: verdict, latency estimate, speedup, fraction of peak, reasons."""

    def __init__(self, result: dict[str, Any]) -> None:
        verdict = result.get("verdict", "?")
        text = Text()
        text.append(
            f" {verdict.upper()} ", style={"pass": "bold black on green", "fail": "bold white on red"}.get(verdict, "bold white on magenta")
        )
        text.append(f"  {result.get('task', '')} on {result.get('target', '')}")
        if result.get("latency_us") is not None:
            text.append(f"\n{result['latency_us']:,.2f} µs ({result.get('timing_source', 'emulator-estimate')})")
        if verdict == "pass" and result.get("speedup") is not None:
            text.append(f" · speedup {result['speedup']:.3f}×", style="bold")
        if verdict == "pass" and result.get("fraction_of_peak") is not None:
            text.append(f" · {100 * result['fraction_of_peak']:.1f}% of speed of light")
        for reason in (result.get("reasons") or [])[:4]:
            text.append(f"\n• {reason[:200]}", style="dim")
        super().__init__(text, classes=f"verdict verdict-{verdict}")


class Conversation(VerticalScroll):
    """The session as it happens: streamed Markdown turns, collapsible tool calls, verdict cards, notes."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._stream: Any = None  # MarkdownStream of the turn being streamed
        self._streamed = False
        self._calls: dict[str, tuple[Static, dict[str, Any]]] = {}
        self._wait: Static | None = None  #: the "waiting for the model: N s" line while a request is out

    async def add_token(self, text: str) -> None:
        """Append streamed model text to the current turn (a new Markdown block on the turn's first token)."""
        if self._stream is None:
            from textual.widgets import Markdown  # markdown-it loads with the first turn, not before the first frame

            md = Markdown(classes="assistant")
            await self.mount(md)
            self._stream = Markdown.get_stream(md)
            self._streamed = True
        await self._stream.write(text)
        self.scroll_end(animate=False)

    async def _end_stream(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

    async def add_user(self, text: str) -> None:
        await self.mount(Static(Text.assemble(("you  ", "bold cyan"), text), classes="user"))
        self.scroll_end(animate=False)

    async def note(self, text: str, style: str = "dim") -> None:
        await self.mount(Static(Text(text, style=style), classes="note"))
        self.scroll_end(animate=False)

    async def _show_wait(self, e: dict[str, Any]) -> None:
        """One line that counts the seconds a request has waited (updated in place, removed when the answer comes)."""
        text = Text(wait_text(e), style="dim yellow")
        if self._wait is not None and self._wait.is_attached:
            self._wait.update(text)
        else:
            self._wait = Static(text, classes="note")
            await self.mount(self._wait)
            self.scroll_end(animate=False)

    async def add_event(self, type_: str, e: dict[str, Any]) -> None:
        """Draw one session event (live or replayed)."""
        if self._wait is not None and type_ != "model_wait":
            await self._wait.remove()
            self._wait = None
        if type_ == "model_request":
            self._streamed = False
            await self.mount(Static(Text(f"turn {e.get('turn')} · {e.get('model', '')}", style="bold"), classes="turn"))
        elif type_ == "model_response":
            await self._end_stream()
            content = (e.get("message") or {}).get("content") or ""
            if content.strip() and not self._streamed:
                from textual.widgets import Markdown

                await self.mount(Markdown(content, classes="assistant"))
            self._streamed = False
        elif type_ == "tool_call":
            await self._end_stream()
            # a one-line placeholder while the tool runs; the collapsible with the result replaces it
            running = Static(Text(f"⚙ {e.get('name')}({_short(e.get('arguments', {}))}) …", style="dim"), classes="tool-running")
            self._calls[e.get("id", "")] = (running, e)
            await self.mount(running)
        elif type_ == "tool_result":
            pending = self._calls.pop(e.get("id", ""), None)
            line = pending[0] if pending is not None else None
            call = pending[1] if pending is not None else {"name": e.get("name"), "arguments": {}}
            ok = bool(e.get("ok"))
            box = Collapsible(
                Static(_short(call.get("arguments", {}), 4000), classes="tool-args"),
                Static(Text(str(e.get("content", ""))[:4000], style="" if ok else "red"), classes="tool-result"),
                title=f"⚙ {call.get('name')}({_short(call.get('arguments', {}))}) {'✓' if ok else '✗'}",
                collapsed=True,
                classes="tool",
            )
            if line is not None:
                await self.mount(box, after=line)
                await line.remove()
            else:
                await self.mount(box)
        elif type_ == "edit_proposed":
            await self.note(f"✎ proposed an edit to {e.get('path')} ({e.get('hunks')} hunk{'s' if e.get('hunks') != 1 else ''})", "yellow")
        elif type_ == "review_decision":
            d = e.get("decision", {})
            what = d.get("action", "?")
            if what == "partial":
                what = f"partial: applied hunks {', '.join(map(str, d.get('accepted', [])))}, rejected {', '.join(map(str, d.get('rejected', [])))}"
            fb = f' — "{d["feedback"]}"' if d.get("feedback") else ""
            await self.note(f"review ({e.get('mode')}): {what}{fb}", "magenta")
        elif type_ == "edit_applied":
            await self.note(f"applied {e.get('path')} (snapshot {(e.get('commit') or '')[:10]})", "green")
        elif type_ == "edit_refused":
            await self.note(f"✗ not applied: {e.get('path')}: {e.get('reason', '')}", "bold red")
        elif type_ == "model_retry":
            await self.note(retry_text(e), "yellow")
        elif type_ == "model_wait":
            await self._show_wait(e)
            return
        elif type_ == "evaluation":
            await self.mount(VerdictCard(e.get("result", {})))
        elif type_ == "note":
            await self.note(f"· {e.get('text', '')}")
        elif type_ == "error":
            await self.note(f"error ({e.get('where', '')}): {e.get('message', '')}", "bold red")
        elif type_ == "session_end":
            await self._end_stream()
            await self.note(f"■ session ended after {e.get('turns', 0)} turns: {e.get('stop_reason', '')}", "bold")
        self.scroll_end(animate=False)


@dataclass
class Status:
    """What the status bar shows."""

    model: str = "-"
    target: str = "trn2"
    approve: str = "ask"
    turn: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    best_speedup: float | None = None
    state: str = "idle"
    session: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def render(self) -> Text:
        best = _speedup(self.best_speedup)
        t = Text()
        t.append(f" {self.state} ", style="bold reverse")
        for label, value in (
            ("model", self.model),
            ("target", self.target),
            ("turn", str(self.turn)),
            ("tokens", f"{self.tokens:,}"),
            ("cost", f"${self.cost_usd:.4f}"),
            ("best", best),
            ("approve", self.approve),
        ):
            t.append(f"  {label} ", style="dim")
            t.append(value, style="bold")
        return t


class StatusBar(Static):
    """Model, target, turn, tokens, cost, best speedup, approve mode (updated from events)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.status = Status()

    def show(self, **changes: Any) -> None:
        for k, v in changes.items():
            setattr(self.status, k, v)
        self.update(self.status.render())

    def add_event(self, type_: str, e: dict[str, Any]) -> None:
        s = self.status
        if type_ == "session_start":
            self.show(
                model=e.get("model", s.model),
                target=e.get("target", s.target),
                approve=e.get("approve", s.approve),
                session=e.get("session_id", ""),
            )
        elif type_ == "model_response":
            u = e.get("usage", {})
            self.show(
                turn=e.get("turn", s.turn),
                tokens=s.tokens + u.get("prompt_tokens", 0) + u.get("completion_tokens", 0),
                cost_usd=s.cost_usd + u.get("cost_usd", 0.0),
            )
        elif type_ == "candidate" and e.get("verdict") == "pass" and e.get("speedup") is not None:
            self.show(best_speedup=max(s.best_speedup or 0.0, e["speedup"]))


class KernelView(VerticalScroll):
    """The current kernel, highlighted."""

    def compose(self) -> ComposeResult:
        yield Static(Text("no kernel yet: /task NAME starts a session", style="dim"), id="kernel-code")

    def show(self, path: str, code: str) -> None:
        from rich.syntax import Syntax  # pygments loads with the first kernel, not before the first frame

        self.border_title = path
        self.query_one("#kernel-code", Static).update(Syntax(code, "python", theme="monokai", line_numbers=True, word_wrap=False))


class Leaderboard(Vertical):
    """The session's candidates (verdict, latency estimate, speedup, fraction of speed of light) and best speedup over turns."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[dict[str, Any]] = []
        self.best_over_turns: list[float] = []
        self._last_fraction: float | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("best speedup over turns", style="dim"), id="spark-label")
        yield Sparkline([], id="spark")
        table: DataTable[str] = DataTable(id="candidate-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "turn", "verdict", "latency µs", "speedup", "% SoL", "sha")
        yield table
        with VerticalScroll(id="candidate-diff-scroll"):
            yield Static(Text("select a candidate to see its diff against the current kernel", style="dim"), id="candidate-diff")

    def add_event(self, type_: str, e: dict[str, Any]) -> None:
        if type_ == "evaluation":
            self._last_fraction = (e.get("result") or {}).get("fraction_of_peak")
        if type_ != "candidate":
            return
        row = {
            "n": len(self.rows) + 1,
            "turn": e.get("turn"),
            "verdict": e.get("verdict"),
            "latency_us": e.get("latency_us"),
            "speedup": e.get("speedup"),
            "fraction": self._last_fraction,
            "sha": e.get("code_sha256") or "",
        }
        same = next((r for r in self.rows if row["sha"] and r["sha"] == row["sha"]), None)
        if same is not None:  # the same code again (a submit verifies it once more): one candidate, its latest verdict
            same.update({k: row[k] for k in ("turn", "verdict", "latency_us", "speedup", "fraction")})
        else:
            self.rows.append(row)
        best = max([r["speedup"] for r in self.rows if r["verdict"] == "pass" and r["speedup"] is not None] or [0.0])
        self.best_over_turns.append(best)
        self.query_one("#spark", Sparkline).data = list(self.best_over_turns)
        table = self.query_one("#candidate-table", DataTable)
        table.clear()
        ranked = sorted(self.rows, key=lambda r: (r["verdict"] != "pass", -(r["speedup"] or 0.0), r["n"]))
        for r in ranked:
            table.add_row(
                str(r["n"]),
                str(r["turn"]),
                _verdict(r["verdict"]),
                _num(r["latency_us"], ",.2f"),
                _speedup(r["speedup"]),
                _num(100 * r["fraction"] if r["fraction"] is not None else None, ".1f"),
                r["sha"][:10],
                key=str(r["n"]),
            )

    def show_diff(self, diff: str) -> None:
        from rich.syntax import Syntax

        body = Syntax(diff, "diff", theme="monokai") if diff else Text("identical to the current kernel", style="dim")
        self.query_one("#candidate-diff", Static).update(body)


class SearchView(Vertical):
    """A search started with ``/search``: progress, its candidates best first, and (evolve) a summary per island.

    Fed the search session's ``candidate`` event fields (:meth:`nkiagent.search.db.Candidate.event_fields`),
    so it shows exactly what the candidate database holds.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[dict[str, Any]] = []
        self.strategy = ""
        self.task_name = ""
        self.budget = 0
        self.state = ""  #: "running", or why the search stopped
        self._t0 = 0.0
        self._elapsed: float | None = None  # frozen when the search stops
        self._timer: Any = None

    def compose(self) -> ComposeResult:
        yield Static(Text("no search yet: /search STRATEGY [N] starts one", style="dim"), id="search-progress")
        table: DataTable[str] = DataTable(id="search-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(
            "#", "verdict", "speedup", "reward", "island", "gen", "latency µs", "timing", "strategy"
        )  # the narrow panel shows the left ones
        yield table
        islands: DataTable[str] = DataTable(id="island-table", zebra_stripes=True)
        islands.add_columns("island", "candidates", "pass", "best speedup")
        yield islands

    def begin(self, strategy: str, task: str, budget: int) -> None:
        """A new search: empty tables, the clock started (ticking every second while it runs)."""
        self.rows, self.strategy, self.task_name, self.budget, self.state = [], strategy, task, budget, "running"
        self._t0, self._elapsed = time.monotonic(), None
        self.query_one("#search-table", DataTable).clear()
        self.query_one("#island-table", DataTable).clear()
        self.query_one("#island-table").display = strategy == "evolve"
        if self._timer is None:
            self._timer = self.set_interval(1.0, self._show_progress)
        self._timer.resume()
        self._show_progress()

    def finish(self, state: str) -> None:
        self.state = state
        self._elapsed = time.monotonic() - self._t0
        if self._timer is not None:
            self._timer.pause()
        self._show_progress()

    def best_speedup(self) -> float | None:
        passing = [r["speedup"] for r in self.rows if r.get("verdict") == "pass" and r.get("speedup") is not None]
        return max(passing) if passing else None

    def islands(self) -> dict[int, tuple[int, int, float | None]]:
        """island → (candidates, passing, best speedup)."""
        out: dict[int, tuple[int, int, float | None]] = {}
        for r in self.rows:
            n, ok, best = out.get(int(r.get("island", 0)), (0, 0, None))
            sp = r.get("speedup") if r.get("verdict") == "pass" else None
            out[int(r.get("island", 0))] = (n + 1, ok + (r.get("verdict") == "pass"), best if sp is None else max(best or 0.0, sp))
        return dict(sorted(out.items()))

    def add_candidate(self, e: dict[str, Any]) -> None:
        self.rows.append(e)
        table = self.query_one("#search-table", DataTable)
        table.clear()
        ranked = sorted(
            self.rows,
            key=lambda r: (r.get("verdict") != "pass", -(r.get("speedup") or 0.0), -float(r.get("reward", 0.0)), r["candidate_id"]),
        )
        for r in ranked:
            table.add_row(
                str(r["candidate_id"]),
                _verdict(r.get("verdict")),
                _speedup(r.get("speedup")),
                f"{float(r.get('reward', 0.0)):.3f}",
                str(r.get("island", 0)),
                str(r.get("generation", 0)),
                _num(r.get("latency_us"), ",.2f"),
                str(r.get("timing_source") or "–"),
                str(r.get("strategy", "")),
                key=str(r["candidate_id"]),
            )
        islands = self.query_one("#island-table", DataTable)
        islands.clear()
        for island, (n, ok, best) in self.islands().items():
            islands.add_row(str(island), str(n), str(ok), _speedup(best), key=str(island))
        self._show_progress()

    def _show_progress(self) -> None:
        elapsed = self._elapsed if self._elapsed is not None else time.monotonic() - self._t0
        best = self.best_speedup()
        t = Text()
        t.append(f" {self.strategy} ", style="bold reverse")
        t.append(f" {self.task_name}  ")
        t.append(f"{len(self.rows)}/{self.budget}", style="bold")
        t.append(" candidates  best ", style="dim")
        t.append(_speedup(best), style="bold")
        t.append(f"  {elapsed:.1f} s  ", style="dim")
        t.append(self.state, style="yellow" if self.state == "running" else "bold")
        self.query_one("#search-progress", Static).update(t)


class ProfileView(VerticalScroll):
    """Engine busy bars, text timeline, bottleneck, HBM traffic, roofline position and advice of the latest profile."""

    def compose(self) -> ComposeResult:
        yield Static(render_profile(None), id="profile-body")

    def show(self, prof: dict[str, Any] | None, **context: Any) -> None:
        self.query_one("#profile-body", Static).update(render_profile(prof, **context))
