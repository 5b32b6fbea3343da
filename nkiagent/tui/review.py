"""The review panel: one entry per hunk, unified or split diff with Python highlighting, partial acceptance.

It answers the graph's ``review`` interrupt payload (``path``, ``diff``, ``hunks``,
``proposed``) with a decision in the graph's format, so the terminal review and this panel
are interchangeable: ``{"action": "accept"}``, ``{"action": "reject", "feedback"?}``,
``{"action": "partial", "hunks": [1-based …]}`` (the graph normalises all/none selections to
accept/reject and tells the model which hunks it rejected), or ``{"action": "edit",
"content"}`` with what the person saved in ``$EDITOR``.

Hunks are recomputed from the payload's old and proposed text with
:func:`nkiagent.agent.hunks.diff_hunks`, the same alignment the graph applies, so the
numbers a person toggles are the numbers that land.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

__all__ = ["ReviewScreen", "hunk_renderable", "old_text"]

_ADD = "on #12361f"
_DEL = "on #3d1518"


def old_text(payload: dict[str, Any]) -> str:
    """The file before the edit, rebuilt from the proposed text and the diff's hunks (the payload does not carry it)."""
    new_lines = payload["proposed"].split("\n")
    out: list[str] = []
    pos = 0  # 0-based index into new_lines
    for hunk in payload["hunks"]:
        header = hunk["header"]
        new_start = int(header.split("+")[1].split(",")[0].split(" ")[0])
        new_len = _len(header.split("+")[1].split(" ")[0])
        start = new_start - 1 if new_len else new_start
        out.extend(new_lines[pos:start])
        pos = start
        for line in hunk["lines"]:
            if line.startswith("\\"):
                continue
            if line[:1] in (" ", "-"):
                out.append(line[1:])
            if line[:1] in (" ", "+"):
                pos += 1
    out.extend(new_lines[pos:])
    return "\n".join(out)


def _len(rng: str) -> int:
    return int(rng.split(",")[1]) if "," in rng else 1


def _highlighted(code: str) -> list[Text]:
    return list(Syntax(code, "python", theme="monokai").highlight(code).split("\n", allow_blank=True))


def hunk_renderable(hunk: Any, old_hl: list[Text], new_hl: list[Text], split: bool) -> RenderableType:
    """One hunk as highlighted unified lines (``-``/``+`` on red/green) or an old | new table."""
    o, n = hunk.old_start - (1 if hunk.old_lines else 0), hunk.new_start - (1 if hunk.new_lines else 0)
    rows: list[tuple[Text | None, Text | None, str]] = []  # (old, new, kind)
    for line in hunk.lines:
        tag = line[:1]
        if tag == "\\":
            continue
        if tag == " ":
            rows.append((_at(old_hl, o, line[1:]), _at(new_hl, n, line[1:]), " "))
            o, n = o + 1, n + 1
        elif tag == "-":
            rows.append((_at(old_hl, o, line[1:]), None, "-"))
            o += 1
        else:
            rows.append((None, _at(new_hl, n, line[1:]), "+"))
            n += 1
    if not split:
        out = []
        for old, new, kind in rows:
            text = Text(f"{kind} ") + (new if kind == "+" else old or Text())
            if kind != " ":
                text.stylize(_ADD if kind == "+" else _DEL)
            out.append(text)
        return Group(*out)
    table = Table.grid(expand=True, padding=(0, 1))
    table.add_column(ratio=1)
    table.add_column(ratio=1)
    lefts = [r for r in rows if r[2] != "+"]
    rights = [r for r in rows if r[2] != "-"]
    # align: context rows pair up; removed/added runs are laid side by side
    i = j = 0
    while i < len(lefts) or j < len(rights):
        li = lefts[i] if i < len(lefts) else None
        rj = rights[j] if j < len(rights) else None
        if li is not None and li[2] == "-":
            left = (li[0] or Text()).copy()
            left.stylize(_DEL)
            i += 1
            right = Text()
            if rj is not None and rj[2] == "+":
                right = (rj[1] or Text()).copy()
                right.stylize(_ADD)
                j += 1
            table.add_row(left, right)
        elif rj is not None and rj[2] == "+":
            right = (rj[1] or Text()).copy()
            right.stylize(_ADD)
            table.add_row(Text(), right)
            j += 1
        else:
            table.add_row(li[0] if li else Text(), rj[1] if rj else Text())
            i, j = i + 1, j + 1
    return table


def _at(lines: list[Text], index: int, fallback: str) -> Text:
    return lines[index].copy() if 0 <= index < len(lines) else Text(fallback)


class ReviewScreen(Screen[dict[str, Any]]):
    """Review one proposed edit; dismisses with the decision (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_hunk", "toggle hunk"),
        Binding("a", "accept_all", "accept all"),
        Binding("r", "reject_all", "reject all"),
        Binding("enter", "apply", "apply selection"),
        Binding("e", "edit", "edit in $EDITOR"),
        Binding("f", "feedback", "reject with feedback"),
        Binding("s", "split", "unified/split"),
        Binding("down,j", "move(1)", "next hunk", show=False),
        Binding("up,k", "move(-1)", "previous hunk", show=False),
    ]

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__()
        from ..agent.hunks import diff_hunks

        self.payload = payload
        self.old = old_text(payload)
        self.hunks = diff_hunks(self.old, payload["proposed"], payload["path"])
        self.selected = [True] * len(self.hunks)
        self.cursor = 0
        self.split = False
        self._old_hl = _highlighted(self.old)
        self._new_hl = _highlighted(payload["proposed"])

    def compose(self) -> ComposeResult:
        yield Static(id="review-title")
        with Horizontal(id="review-body"):
            yield Static(id="hunk-list")
            with VerticalScroll(id="diff-scroll", can_focus=False):
                yield Static(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_view()

    def refresh_view(self) -> None:
        n = len(self.hunks)
        chosen = sum(self.selected)
        self.query_one("#review-title", Static).update(
            Text.assemble(
                ("Review ", "bold reverse"),
                (f" edit to {self.payload['path']}", "bold"),
                f" — {n} hunk{'s' if n != 1 else ''}, {chosen} selected — {'split' if self.split else 'unified'} view",
            )
        )
        items = Text()
        for k, hunk in enumerate(self.hunks):
            plus = sum(1 for line in hunk.lines if line.startswith("+"))
            minus = sum(1 for line in hunk.lines if line.startswith("-"))
            mark = "[x]" if self.selected[k] else "[ ]"
            style = "reverse" if k == self.cursor else ""
            items.append(f"{'›' if k == self.cursor else ' '} {mark} hunk {k + 1}  ", style=style)
            items.append(f"+{plus}", style="green")
            items.append(f" -{minus}\n", style="red")
            items.append(f"    {hunk.header}\n", style="dim")
        self.query_one("#hunk-list", Static).update(items)
        parts: list[RenderableType] = []
        for k, hunk in enumerate(self.hunks):
            mark = "✓ accept" if self.selected[k] else "✗ reject"
            head = Text(
                f"{'›' if k == self.cursor else ' '} hunk {k + 1}/{n} {hunk.header}  {mark}",
                style=("bold " if k == self.cursor else "") + ("green" if self.selected[k] else "red"),
            )
            parts += [head, hunk_renderable(hunk, self._old_hl, self._new_hl, self.split), Text()]
        self.query_one("#diff", Static).update(Group(*parts))

    def decide(self, decision: dict[str, Any]) -> None:
        """Close the panel with ``decision``; ``feedback`` is always present because the graph's feedback template reads it."""
        self.dismiss({"feedback": "", **decision})

    # -- actions ---------------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if self.hunks:
            self.cursor = (self.cursor + step) % len(self.hunks)
            self.refresh_view()

    def action_toggle_hunk(self) -> None:
        if self.hunks:
            self.selected[self.cursor] = not self.selected[self.cursor]
            self.refresh_view()

    def action_split(self) -> None:
        self.split = not self.split
        self.refresh_view()

    def action_accept_all(self) -> None:
        self.decide({"action": "accept"})

    def action_reject_all(self) -> None:
        self.decide({"action": "reject"})

    def action_apply(self) -> None:
        self.decide({"action": "partial", "hunks": [k + 1 for k, on in enumerate(self.selected) if on]})

    async def action_feedback(self) -> None:
        """Open the feedback box (mounted on demand, so until then every key reaches the review bindings)."""
        if not self.query("#feedback"):
            await self.mount(
                Input(placeholder="feedback for the model (enter sends and rejects the edit, escape cancels)", id="feedback"),
                before=self.query_one(Footer),
            )
        self.query_one("#feedback", Input).focus()

    def action_edit(self) -> None:
        from textual.app import SuspendNotSupported

        from ..agent.runner import edit_in_editor

        try:
            with self.app.suspend():
                content = edit_in_editor(self.payload["proposed"], self.payload["path"])
        except SuspendNotSupported:  # headless (tests, web): the editor runs without the terminal handover
            content = edit_in_editor(self.payload["proposed"], self.payload["path"])
        self.decide({"action": "edit", "content": content})

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.decide({"action": "reject", "feedback": text})

    async def key_escape(self) -> None:
        for box in self.query("#feedback"):
            await box.remove()
