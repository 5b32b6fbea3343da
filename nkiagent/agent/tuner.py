"""``builtin/tuner``: an offline "model" that tunes the constants a kernel declares, through tool calls only.

Why it exists: demos, tests and the search strategies need a model that makes real,
reviewable edits and reacts to real evaluations without an LLM, a network or a bill. It talks
to the agent loop exactly like an LLM would (``read_file`` → ``evaluate`` → ``edit_file`` …
→ ``submit``), so everything downstream (review, git snapshots, session records, search) is
exercised by it unchanged.

Tunable syntax — a module-level constant with a trailing comment::

    TILE_N = 512  # nkiagent: tune [128, 256, 512, 1024]
    BLOCK = 256  # nkiagent: tune range(128, 1025, 128)
    FUSE_EXP = False  # nkiagent: tune            (a bool with no list: [False, True])

The choices are a list or tuple of literals (numbers, booleans, strings) or ``range(...)``
with integer literals; text after them is a free comment. The kernel is parsed with
:mod:`ast` and :mod:`tokenize` only: the agent process never executes kernel code.

Search — greedy coordinate descent over those constants:

* evaluate the starting kernel; then, from the best configuration so far, try one neighbour
  of one tunable per edit (the next smaller or larger choice; numbers are ordered by value);
* keep a change when its evaluation passes and ``latency_us`` dropped; otherwise revert it
  with another ``edit_file`` before trying the next neighbour;
* the order follows the profile: when the bottleneck is memory/DMA (or dependency latency),
  size-like tunables (tiles, blocks, chunks, rows, DMA sizes) go first and grow first; when
  it is compute, the other knobs go first. After a kept change the same tunable keeps moving
  in the same direction (a line search) before the others are revisited;
* stop when no neighbour of the best configuration is left untried, or when ``max_evals``
  distinct configurations have been evaluated; make sure the best is in the file; ``submit``.

The tuner is stateless across turns: every decision is recomputed from the conversation
(its own tool calls and their results), so a resumed session continues with a fresh
instance, and equal conversations give equal turns. The loop shortens old tool results
(the kernel text of an early ``read_file`` first), so an instance keeps the full text of each
result it has seen; a fresh instance re-reads the file instead and rebuilds the earlier
states by undoing its own edits, which the loop never shortens.

Conventions with the agent loop:

* the first user message holds ``kernel_path: <path>`` on a line of its own;
* an evaluation is JSON (the whole result, or one line of it) with at least ``verdict``,
  ``latency_us``, ``speedup`` and ``profile.bottleneck``; the loop's compact text form
  (``verdict: pass …`` / ``latency: 74.8 µs …``), e.g. in the feedback of an applied edit
  that the loop evaluated itself, is read too. When an evaluation carries ``code_sha256``
  it must match the file the tuner believes it wrote, otherwise the tuner re-reads the file;
* an ``edit_file`` result that starts with ``error``, says ``rejected``/``not applied`` or
  ``skipped`` did not land; one saying the reviewer edited the proposal means the file
  must be re-read.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import math
import random
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .types import Message, ModelTurn, ToolCall

__all__ = ["Tunable", "TunableValue", "TunerModel", "parse_evaluation", "scan_tunables"]

TunableValue = bool | int | float | str
Config = tuple[tuple[str, TunableValue], ...]

_TUNE = re.compile(r"\bnkiagent:\s*tune\b(?P<spec>.*)$")
_SIZE_NAME = re.compile(r"TILE|BLOCK|CHUNK|COLS|ROWS|SIZE|WIDTH|DMA|BYTES|GROUP|PER_|(^|_)[NMKFP]$")
_KERNEL_PATH = re.compile(r"^\s*kernel_path:\s*(?P<path>\S+)\s*$", re.MULTILINE)
_NUMBERED = re.compile(r"^ *(\d+)  ?(.*)$")
_CONDENSED = re.compile(r"\[\d+ more characters condensed\]\s*$")
_CACHE_PREFIX = 400  #: condensed tool results keep their first 1200 characters
_MAX_RANGE = 64  #: a ``range(...)`` with more choices than this is a typo, not a search space
_NEEDED_TOOLS = ("read_file", "evaluate", "edit_file", "submit")


# -- tunables ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tunable:
    """One declared constant: its current value, its choices and where it is written.

    ``text`` is the whole source line, which is what an edit replaces: the value changes and
    the ``# nkiagent: tune`` comment stays, so every edit touches exactly one tunable line.
    """

    name: str
    value: TunableValue
    choices: tuple[TunableValue, ...]
    line: int  #: 1-based line number
    text: str
    span: tuple[int, int]  #: character offsets of the value inside ``text``

    @property
    def is_size(self) -> bool:
        """Tile/block/DMA sizes: the knobs that change how many bytes each transfer moves."""
        numeric = all(isinstance(c, int) and not isinstance(c, bool) for c in self.choices)
        return numeric and bool(_SIZE_NAME.search(self.name.upper()))

    def line_with(self, value: TunableValue) -> str:
        """The declaration line with ``value`` instead of the current one (strings keep their quote style)."""
        written = repr(value)
        if isinstance(value, str) and self.text[self.span[0]] == '"' and '"' not in value and "\\" not in written:
            written = f'"{value}"'
        return self.text[: self.span[0]] + written + self.text[self.span[1] :]

    def ordered(self) -> list[TunableValue]:
        """The choices in the order "up" follows: numbers by value, anything else as listed."""
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices)
        return sorted(self.choices) if numeric else list(self.choices)  # type: ignore[type-var]

    def neighbour(self, value: TunableValue, direction: int) -> TunableValue | None:
        """The choice next to ``value`` going up (+1) or down (−1) in :meth:`ordered`."""
        ordered = self.ordered()
        if value in ordered:
            i = ordered.index(value) + direction
            return ordered[i] if 0 <= i < len(ordered) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and all(isinstance(c, (int, float)) for c in ordered):
            side = [c for c in ordered if (c > value if direction > 0 else c < value)]  # type: ignore[operator]
            return (side[0] if direction > 0 else side[-1]) if side else None
        return ordered[0] if direction > 0 else None


def _literal(node: ast.expr) -> TunableValue:
    """A literal constant of the comment or declaration, evaluated without running code."""
    value = ast.literal_eval(node)
    if not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"{value!r} is not a number, boolean or string")
    return value


def _choices(spec: str, value: TunableValue) -> tuple[TunableValue, ...]:
    """Parse the text after ``tune``: a literal list/tuple or ``range(...)``, then free text."""
    spec = spec.strip()
    if not spec.startswith(("[", "(", "range(")):
        if isinstance(value, bool):
            return (False, True)
        raise ValueError("give the choices, e.g. `# nkiagent: tune [128, 256, 512]`")
    for end in (i + 1 for i, ch in enumerate(spec) if ch in "])"):
        try:
            expr = ast.parse(spec[:end], mode="eval").body
        except SyntaxError:
            continue
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "range" and not expr.keywords:
            args = [_literal(a) for a in expr.args]
            if not 1 <= len(args) <= 3 or not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                raise ValueError("range(...) takes one to three integer literals")
            span = range(*args)  # type: ignore[arg-type]
            if len(span) > _MAX_RANGE:
                raise ValueError(f"range(...) gives {len(span)} choices; at most {_MAX_RANGE}")
            values: tuple[TunableValue, ...] = tuple(span)
        elif isinstance(expr, (ast.List, ast.Tuple)):
            values = tuple(_literal(e) for e in expr.elts)
        else:
            raise ValueError("choices must be a list, a tuple or range(...)")
        unique = tuple(dict.fromkeys(values))
        if not unique:
            raise ValueError("the list of choices is empty")
        kinds = {bool if isinstance(v, bool) else str if isinstance(v, str) else float for v in unique + (value,)}
        if len(kinds) > 1:
            raise ValueError(f"the value {value!r} and the choices {list(unique)} are of different kinds")
        return unique
    raise ValueError(f"cannot read the choices {spec!r}")


def scan_tunables(source: str) -> tuple[list[Tunable], list[str]]:
    """The tunables declared in kernel ``source`` and the problems found (malformed declarations).

    Problems do not stop the scan: a kernel with one bad comment still has its other knobs tuned.
    """
    try:
        tree = ast.parse(source)
        comments = {
            tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT
        }
    except (SyntaxError, tokenize.TokenError) as exc:
        return [], [f"cannot parse the kernel: {exc}"]
    lines = source.split("\n")  # ast numbers lines by "\n"; a CRLF line keeps its "\r", so the edit matches the file
    tune_lines = {ln: m["spec"] for ln, text in comments.items() if (m := _TUNE.search(text))}
    found: list[Tunable] = []
    problems: list[str] = []
    used: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value_node = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value_node = stmt.target, stmt.value
        else:
            continue
        ln = stmt.end_lineno or stmt.lineno
        if ln not in tune_lines:
            continue
        used.add(ln)
        where = f"line {ln}"
        if not isinstance(target, ast.Name) or stmt.lineno != ln:
            problems.append(f"{where}: a tunable is a one-line `NAME = constant`")
            continue
        try:
            value = _literal(value_node)
            choices = _choices(tune_lines[ln], value)
        except (ValueError, TypeError) as exc:
            problems.append(f"{where}: {target.id}: {exc}")
            continue
        if any(t.name == target.id for t in found):
            problems.append(f"{where}: {target.id} is declared tunable twice; the first declaration is used")
            continue
        text = lines[ln - 1]
        raw = text.encode()
        # ast offsets count UTF-8 bytes; the edit works on characters
        span = (len(raw[: value_node.col_offset].decode()), len(raw[: value_node.end_col_offset].decode()))
        found.append(Tunable(target.id, value, choices, ln, text, span))
    for ln in sorted(set(tune_lines) - used):
        problems.append(f"line {ln}: `# nkiagent: tune` must end a module-level `NAME = constant` line")
    return found, problems


def _config(tunables: list[Tunable]) -> Config:
    return tuple((t.name, t.value) for t in tunables)


def _describe(config: Config) -> str:
    return ", ".join(f"{n} = {v!r}" for n, v in config) or "(no tunables)"


# -- reading the conversation ----------------------------------------------------------------------
def _text(content: Any) -> str:
    """Message content as text (OpenAI content may be a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _denumber(text: str) -> str:
    """``read_file`` numbers its lines (``   1  import nki``); recover the file text when it does."""
    lines = text.split("\n")
    matches = [_NUMBERED.match(line) for line in lines]
    if lines and all(m is not None and int(m.group(1)) == i for i, m in enumerate(matches, 1)):
        return "\n".join(m.group(2) for m in matches if m is not None)
    return text


def parse_evaluation(text: str) -> dict[str, Any] | None:
    """An evaluation in a tool result: a JSON object with ``verdict`` (the whole text or one line), or the compact text form."""
    for candidate in [text] + [ln for ln in reversed(text.splitlines()) if ln.lstrip().startswith("{")]:
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict) and "verdict" in obj:
            return obj
    verdict = re.search(r"^verdict: (\w+)", text, re.MULTILINE)
    if verdict is None:
        return None
    latency = re.search(r"^latency: ([0-9.]+)", text, re.MULTILINE)
    speedup = re.search(r"speedup ([0-9.]+)×", text)
    bottleneck = re.search(r"bottleneck:\s*(.+)$", text, re.MULTILINE | re.IGNORECASE)
    reasons = re.findall(r"^- (.+)$", text[verdict.end() :], re.MULTILINE)
    return {
        "verdict": verdict.group(1),
        "latency_us": float(latency.group(1)) if latency else None,
        "speedup": float(speedup.group(1)) if speedup else None,
        "reasons": reasons,
        "profile": {"bottleneck": bottleneck.group(1).strip() if bottleneck else ""},
    }


@dataclass
class _Observation:
    """One evaluated configuration."""

    config: Config
    verdict: str
    latency_us: float | None
    speedup: float | None
    bottleneck: str
    reasons: list[str]
    timing_source: str

    @property
    def key(self) -> tuple[int, float]:
        """Ranking: passing kernels first, then by latency."""
        return (0 if self.verdict == "pass" else 1, self.latency_us if self.latency_us is not None else math.inf)

    def outcome(self) -> str:
        if self.verdict == "pass" and self.latency_us is not None:
            return f"pass, {self.latency_us:.3f} µs"
        why = f" ({self.reasons[0][:120]})" if self.reasons else ""
        return f"{self.verdict}{why}"


@dataclass
class _State:
    """What the conversation so far says about the kernel file and the search."""

    kernel_path: str
    source: str | None = None  #: the file as the tuner believes it is now; None: must (re-)read
    fresh: bool = False  #: ``source`` comes straight from a read, with no edit since
    sha_checked: bool = True  #: False once a fresh read disagreed with an evaluation's hash (e.g. CRLF files)
    observations: list[_Observation] = field(default_factory=list)
    declined: set[Config] = field(default_factory=set)  #: configurations whose edit did not land
    submitted: bool = False
    read_error: str = ""
    note: str = ""  #: what the last tool result told us, to open the next turn's text

    def best(self) -> _Observation | None:
        return min(self.observations, key=lambda o: o.key) if self.observations else None

    def bottleneck(self, best: _Observation) -> str:
        """The best kernel's bottleneck, or the latest one known (the loop's compact feedback may not carry it)."""
        known = [o.bottleneck for o in self.observations if o.bottleneck]
        return best.bottleneck or (known[-1] if known else "")

    def evaluated(self) -> dict[Config, _Observation]:
        return {o.config: o for o in self.observations}

    def record(self, ev: dict[str, Any]) -> None:
        """Attribute ``ev`` to the configuration in the file, unless its hash says the file is not what we think."""
        if self.source is None:
            return
        sha = ev.get("code_sha256")
        if sha and self.sha_checked:
            body = self.source.rstrip("\n")
            if sha not in {hashlib.sha256(t.encode()).hexdigest() for t in (body, body + "\n")}:
                if not self.fresh:
                    # the last edit did not land as proposed: do not propose it again
                    self.declined.add(_config(scan_tunables(self.source)[0]))
                    self.source, self.note = None, "The evaluated file is not the one I expected; re-reading it."
                    return
                self.sha_checked = False
        tunables, _ = scan_tunables(self.source)
        prof = ev.get("profile") or {}
        before = self.best()
        obs = _Observation(
            config=_config(tunables),
            verdict=str(ev.get("verdict", "error")),
            latency_us=float(ev["latency_us"]) if ev.get("latency_us") is not None else None,
            speedup=float(ev["speedup"]) if ev.get("speedup") is not None else None,
            bottleneck=str(prof.get("bottleneck") or "") if isinstance(prof, dict) else "",
            reasons=[str(r) for r in ev.get("reasons") or []],
            timing_source=str(ev.get("timing_source") or "emulator-estimate"),
        )
        seen = obs.config in self.evaluated()
        self.observations.append(obs)
        label = _describe(_changed(before.config, obs.config)) if before is not None else ""
        if before is None:
            self.note = f"Start ({_describe(obs.config)}): {obs.outcome()}."
        elif seen:
            self.note = f"Back at {_describe(obs.config)}: {obs.outcome()}."
        elif obs.key < before.key:
            was = f"{before.latency_us:.3f} µs" if before.verdict == "pass" and before.latency_us is not None else before.verdict
            self.note = f"{label}: {obs.outcome()} — better than {was}, keeping it."
        else:
            self.note = f"{label}: {obs.outcome()} — no better than the best ({before.outcome()})."


def _recover_reads(events: list[tuple[str, dict[str, Any], str]]) -> dict[int, str]:
    """The file text each condensed ``read_file`` returned, rebuilt from the last full read by undoing the edits in between.

    This lets a fresh tuner (a resumed session) continue a long conversation whose old tool
    results the loop has shortened; the search state survives because edits are small and kept.
    """
    full = [
        i
        for i, (name, _, text) in enumerate(events)
        if name == "read_file" and not text.lower().startswith("error") and not _CONDENSED.search(text)
    ]
    if not full:
        return {}
    source = _denumber(events[full[-1]][2])
    out: dict[int, str] = {}
    for i in range(full[-1] - 1, -1, -1):
        name, args, text = events[i]
        if name == "read_file":
            out[i] = source
        elif name == "edit_file":
            outcome = _edit_outcome(text)
            new = str(args.get("new", ""))
            if outcome == "unknown" or (outcome == "applied" and new not in source):
                break
            if outcome == "applied":
                source = source.replace(new, str(args.get("old", "")), 1)
    return out


def _changed(base: Config, other: Config) -> Config:
    """The entries of ``other`` that differ from ``base``."""
    old = dict(base)
    return tuple((n, v) for n, v in other if n in old and old[n] != v)


def _edit_outcome(text: str) -> str:
    """``applied``, ``declined`` (did not land) or ``unknown`` (landed in a form we must re-read).

    Only the first paragraph is the loop's answer about the edit; an evaluation may follow it
    (whose verdict can itself be ``rejected``).
    """
    low = text.split("\n\n")[0].lower()
    if low.startswith(("error", "skipped")) or "not applied" in low or "rejected" in low:
        return "declined"
    if "edited your proposal" in low or "read the file" in low:
        return "unknown"
    return "applied"


# -- the model -------------------------------------------------------------------------------------
class TunerModel:
    """The offline tuner behind ``builtin/tuner``; see the module docstring.

    ``max_evals`` bounds the distinct configurations evaluated (the starting kernel included);
    ``seed`` permutes the order in which tunables of equal priority are tried, so repeated
    samples (best-of-N, islands) explore differently; seed 0 keeps the declaration order.
    """

    name = "builtin/tuner"

    def __init__(self, max_evals: int = 20, seed: int = 0) -> None:
        if max_evals < 1:
            raise ValueError("max_evals must be at least 1")
        self.max_evals = max_evals
        self.seed = seed
        #: (tool_call_id, text prefix) → full result text, for results the loop condenses later (the
        #: prefix survives condensing and keeps equal ids of different conversations apart)
        self._full: dict[tuple[str, str], str] = {}

    # The Model protocol
    def complete(self, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None = None) -> ModelTurn:
        """Decide the next tool call from the conversation; see the module docstring."""
        content, call = self._decide(messages, tools)
        turn_no = sum(1 for m in messages if m.get("role") == "assistant") + 1
        calls = [ToolCall(f"tuner-{turn_no}", call[0], call[1], json.dumps(call[1]))] if call else []
        if on_token is not None:
            on_token(content)
        return ModelTurn(content, calls, model=self.name, finish_reason="tool_calls" if calls else "stop")

    def _decide(self, messages: list[Message], tools: list[dict[str, Any]]) -> tuple[str, tuple[str, dict[str, Any]] | None]:
        """The turn's text and its one tool call (or none, when the tuner cannot work here).

        In order: know the file, evaluate what is in it, bring back the best configuration,
        try the next neighbour, submit — so every state of the conversation has one next step.
        """
        names = {t.get("function", {}).get("name") for t in tools}
        missing = [n for n in _NEEDED_TOOLS if n not in names]
        if missing:
            return f"builtin/tuner needs the tools {', '.join(_NEEDED_TOOLS)}; missing: {', '.join(missing)}.", None
        first_user = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        found = _KERNEL_PATH.search(first_user)
        if found is None:
            return "builtin/tuner needs a `kernel_path: <path>` line in the first user message.", None
        state = self._replay(messages, found.group("path"))
        path = state.kernel_path
        if state.submitted:
            return "Submitted.", None
        if state.read_error:
            return f"I cannot read {path}: {state.read_error}", None
        if state.source is None:
            first = f"Reading {path} to find its tunable constants (`# nkiagent: tune`)."
            why = state.note or (f"Re-reading {path}: its earlier text is no longer in the conversation." if state.observations else first)
            return why, ("read_file", {"path": path})
        tunables, problems = scan_tunables(state.source)
        current = _config(tunables)
        evaluated = state.evaluated()
        budget_left = len(evaluated) < self.max_evals
        if current not in evaluated and budget_left:
            if not state.observations:
                listing = "; ".join(f"{t.name} = {t.value!r} of {list(t.choices)}" for t in tunables) or "none"
                issues = f" Ignored: {'; '.join(problems)}." if problems else ""
                text = f"Tunables in {path}: {listing}.{issues} Evaluating the starting kernel."
            else:
                text = _join(state.note, f"Evaluating {_describe(current)}.")
            return text, ("evaluate", {"path": path})
        best = state.best()
        assert best is not None  # the branch above evaluated the starting kernel
        if not tunables:
            why = "No `# nkiagent: tune` constants" + (f" ({'; '.join(problems)})" if problems else "")
            summary = f"{why} in {path}; submitted as it is: {best.outcome()}."
            return _join(state.note, summary), ("submit", {"path": path, "summary": summary})
        if current != best.config:
            back = _changed(current, best.config)
            if best.config in state.declined or not back:
                summary = self._summary(
                    state, best, f"the file could not be brought back to the best configuration; submitted {_describe(current)}"
                )
                return _join(state.note, summary), ("submit", {"path": path, "summary": summary})
            name, value = back[0]
            t = next(t for t in tunables if t.name == name)
            return _join(state.note, f"Reverting {name} to {value!r}."), (
                "edit_file",
                {"path": path, "old": t.text, "new": t.line_with(value)},
            )
        candidate = self._next_candidate(state, tunables, best) if budget_left else None
        if candidate is None:
            why = (
                "no neighbour of the best configuration improves" if budget_left else f"the budget of {self.max_evals} evaluations is spent"
            )
            summary = self._summary(state, best, why)
            return _join(state.note, summary), ("submit", {"path": path, "summary": summary})
        t, value, reason = candidate
        return _join(state.note, f"Trying {t.name} = {value!r} ({reason})."), (
            "edit_file",
            {"path": path, "old": t.text, "new": t.line_with(value)},
        )

    def _replay(self, messages: list[Message], kernel_path: str) -> _State:
        """Rebuild the search state from the tool calls and their results (on the kernel file)."""
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        events: list[tuple[str, dict[str, Any], str]] = []
        for m in messages:
            if m.get("role") == "assistant":
                for tc in m.get("tool_calls") or []:
                    fn = tc.get("function", {})
                    args = fn.get("arguments") or {}
                    if isinstance(args, str):
                        try:
                            args = json.loads(args)
                        except ValueError:
                            args = {}
                    calls[tc.get("id", "")] = (fn.get("name", ""), args if isinstance(args, dict) else {})
                continue
            if m.get("role") != "tool" or m.get("tool_call_id") not in calls:
                continue
            call_id, text = m["tool_call_id"], _text(m.get("content"))
            key = (call_id, text[:_CACHE_PREFIX])
            if _CONDENSED.search(text):
                text = self._full.get(key, text)
            else:
                self._full[key] = text
            name, args = calls[call_id]
            if args.get("path") == kernel_path:
                events.append((name, args, text))
        state = _State(kernel_path)
        recovered = _recover_reads(events)
        for i, (name, args, text) in enumerate(events):
            self._observe(state, name, args, text, recovered.get(i))
        return state

    @staticmethod
    def _observe(state: _State, name: str, args: dict[str, Any], text: str, recovered: str | None) -> None:
        """Apply one tool result to ``state``; ``recovered`` is the text of a condensed read, rebuilt."""
        state.note = ""
        if name == "read_file":
            if text.lower().startswith("error"):
                state.read_error = text
            elif recovered is not None or not _CONDENSED.search(text):
                state.source, state.fresh, state.read_error = recovered if recovered is not None else _denumber(text), True, ""
            else:
                state.source = None
            return
        if name == "edit_file":
            old, new = str(args.get("old", "")), str(args.get("new", ""))
            outcome = _edit_outcome(text)
            if state.source is None:
                return
            if outcome == "declined":
                if old in state.source:
                    state.declined.add(_config(scan_tunables(state.source.replace(old, new, 1))[0]))
                if text.lower().startswith("error"):
                    state.source = None  # `old` was not found as we thought: the file differs from our copy
                state.note = "That edit did not land."
                return
            if outcome == "unknown" or old not in state.source:
                state.source = None
                state.note = "The file changed in a way I did not propose; re-reading it."
                return
            state.source, state.fresh = state.source.replace(old, new, 1), False
        if name == "submit":
            state.submitted = not text.lower().startswith("error")
            return
        ev = parse_evaluation(text)
        if ev is None and name == "evaluate":
            ev = {"verdict": "error", "reasons": [text[:200]]}  # an unreadable result still counts, so it is not retried forever
        if ev is not None:
            state.record(ev)

    def _next_candidate(self, state: _State, tunables: list[Tunable], best: _Observation) -> tuple[Tunable, TunableValue, str] | None:
        """The first untried neighbour of ``best``, in the profile-guided order."""
        bottleneck = state.bottleneck(best).lower()
        sizes_first = bottleneck.startswith(("memory", "latency"))
        compute = bottleneck.startswith("compute")

        def priority(item: tuple[int, Tunable]) -> tuple[int, float]:
            i, t = item
            rank = (0 if t.is_size else 1) if sizes_first else (1 if t.is_size else 0) if compute else 0
            order = float(i) if self.seed == 0 else random.Random(f"{self.seed}:{t.name}").random()
            return rank, order

        ordered = [t for _, t in sorted(enumerate(tunables), key=priority)]
        moves: list[tuple[Tunable, int]] = [(t, d) for t in ordered for d in (1, -1)]
        momentum = self._momentum(state, tunables, best)
        if momentum is not None:
            moves.sort(key=lambda m: (m[0].name, m[1]) != momentum)  # stable: the rest keep their order
        evaluated = state.evaluated()
        values = dict(best.config)
        for t, direction in moves:
            if t.name not in values:
                continue
            value = t.neighbour(values[t.name], direction)
            if value is None:
                continue
            config = tuple((n, value if n == t.name else v) for n, v in best.config)
            if config in evaluated or config in state.declined:
                continue
            return t, value, self._reason(t, direction, state.bottleneck(best), (t.name, direction) == momentum)
        return None

    @staticmethod
    def _momentum(state: _State, tunables: list[Tunable], best: _Observation) -> tuple[str, int] | None:
        """The tunable and direction of the step that produced ``best``, to keep moving that way."""
        i = next(i for i, o in enumerate(state.observations) if o.config == best.config)
        if i == 0:
            return None
        prev = min(state.observations[:i], key=lambda o: o.key)
        step = _changed(prev.config, best.config)
        t = next((t for t in tunables if step and t.name == step[0][0]), None)
        if len(step) != 1 or t is None:
            return None
        old, new = dict(prev.config)[t.name], step[0][1]
        ordered = t.ordered()
        if old not in ordered or new not in ordered:
            return None
        return t.name, 1 if ordered.index(new) > ordered.index(old) else -1

    @staticmethod
    def _reason(t: Tunable, direction: int, profile_bottleneck: str, momentum: bool) -> str:
        """Why this move, in the words of the profile."""
        if momentum:
            return "the last step this way helped"
        bottleneck = profile_bottleneck.lower()
        if bottleneck.startswith("memory") and t.is_size:
            return "memory-bound: bigger DMAs" if direction > 0 else "memory-bound: smaller tiles to overlap transfers"
        if bottleneck.startswith("latency") and t.is_size:
            return "latency-bound: fewer, larger steps" if direction > 0 else "latency-bound: smaller tiles to pipeline"
        if bottleneck.startswith("compute"):
            kind = profile_bottleneck.split("(")[-1].rstrip(")") if "(" in profile_bottleneck else "compute"
            return f"compute-bound on {kind}: {'fewer, larger instructions' if t.is_size else 'a different code path'}"
        return "exploring its neighbours"

    def _summary(self, state: _State, best: _Observation, why: str) -> str:
        """What was found, in numbers, for ``submit``."""
        start = state.observations[0]
        changed = _changed(start.config, best.config)
        parts = [
            f"Best configuration: {_describe(best.config)}" + (f" (changed: {_describe(changed)})." if changed else " (the starting one).")
        ]
        if best.verdict == "pass" and best.latency_us is not None:
            line = f"pass, {best.latency_us:.3f} µs ({best.timing_source})"
            if start.verdict == "pass" and start.latency_us:
                line += f" vs {start.latency_us:.3f} µs at the start: {start.latency_us / best.latency_us:.2f}× faster"
            elif start is not best:
                line += f"; the starting kernel did not pass ({start.verdict})"
            if best.speedup is not None:
                line += f"; {best.speedup:.2f}× the task's baseline"
            parts.append(line + ".")
        else:
            parts.append(f"No configuration passed; best outcome: {best.outcome()}.")
        parts.append(f"{len(state.evaluated())} configuration(s) evaluated; stopped because {why}.")
        return " ".join(parts)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)
