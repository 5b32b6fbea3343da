"""The builtin tool handlers and the registry that loads tool specs from ``tools/*.json``.

A spec names its handler as ``module:function``; a handler is called as
``fn(ctx, **arguments)`` and returns a :class:`ToolResult` (or a string). Edit tools only
*propose*: the graph routes their result through review before anything touches the
workspace. Kernel code is never executed here: ``evaluate`` and ``profile`` go through the
verifier's sandboxed worker.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verify.protocol import VISIBLE_SEEDS
from .assets import asset_dirs
from .types import ToolResult, ToolSpec

__all__ = ["AgentContext", "ToolRegistry", "compact_evaluation", "load_tools"]


@dataclass
class AgentContext:
    """What tools may use: the workspace, the task, the target and the verifier options."""

    workspace: Any  #: nkiagent.agent.workspace.Workspace
    task: Any  #: nkiagent.tasks.Task
    target: str = "trn2"
    verify_seeds: int = VISIBLE_SEEDS
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    #: files as this turn's edits left them (several edit calls in one turn build one proposal:
    #: each applies to the text the previous ones proposed); emptied when the proposal is decided
    proposed: dict[str, str] = field(default_factory=dict)
    #: every kernel evaluated in this session by its code hash, so an earlier version can be read
    #: again after the conversation was condensed (``read_file`` with ``version``)
    kernels: dict[str, str] = field(default_factory=dict)
    #: titles of the ``nki_docs`` pages this session was already given: not repeated unless asked for by title
    docs_shown: set[str] = field(default_factory=set)

    def text(self, path: str) -> str:
        """A file as this turn's proposal has it, else as the workspace has it."""
        return self.proposed[path] if path in self.proposed else self.workspace.read(path)

    start_text: str | None = None  #: the session's starting kernel: the speedup reference of a task without a baseline
    _start_latency: list[float | None] = field(default_factory=list)  #: its latency, once measured ([] until then)

    def prepare(self) -> None:
        """Start making the task's first verification cheap, in the background (see :func:`nkiagent.verify.verifier.prepare`).

        A session calls it as it opens: the model's first answer takes seconds, and the inputs,
        references, baseline and worker launcher are ready by then. Failures are left to the
        verification itself, which meets the same error and reports it where the model sees it.
        """
        import threading

        from ..verify.verifier import VerifyOptions, prepare

        def run() -> None:
            try:
                prepare(self.task, self.target, VerifyOptions(seeds=self.verify_seeds))
            except Exception:  # noqa: BLE001, S110 — the first verification reports it
                pass

        threading.Thread(target=run, name="nkiagent-prepare", daemon=True).start()

    def evaluate(self, path: str, seeds: int | None = None, hidden: bool = True) -> dict[str, Any]:
        """Verify ``path``; a task without a baseline kernel gets its speedup against the starting kernel, and says so."""
        from ..verify.verifier import VerifyOptions, verify

        where = self.workspace.resolve(path)
        source = self.workspace.read(path)
        res = verify(where, self.task, self.target, VerifyOptions(seeds=seeds or self.verify_seeds, hidden=hidden))
        # the model knows its files by their workspace paths: name kernel lines that way
        out: dict[str, Any] = json.loads(json.dumps(res.to_dict()).replace(json.dumps(str(where))[1:-1], json.dumps(path)[1:-1]))
        base = self.task.baseline_path()
        if base is None or not base.is_file():
            ref = self._starting_latency()
            out["speedup_vs"] = "the starting kernel (the task has no baseline)"
            if ref and out.get("latency_us") and out.get("speedup") is None:
                out["baseline_latency_us"] = ref
                out["speedup"] = round(ref / out["latency_us"], 4)
        else:
            out["speedup_vs"] = "the task baseline"
        self.evaluations.append(out)
        if out.get("code_sha256"):
            self.kernels[out["code_sha256"]] = source
        return out

    def _starting_latency(self) -> float | None:
        """The starting kernel's latency estimate on this target (measured once, with one seed: latency does not depend on it)."""
        if not self._start_latency:
            self._start_latency.append(None)
            if self.start_text is not None:
                import tempfile

                from ..verify.verifier import VerifyOptions, verify

                with tempfile.TemporaryDirectory(prefix="nkiagent-start-") as tmp:
                    file = Path(tmp) / "starting_kernel.py"
                    file.write_text(self.start_text)
                    self._start_latency[0] = verify(
                        file, self.task, self.target, VerifyOptions(seeds=1, hidden=False, with_baseline=False)
                    ).latency_us
        return self._start_latency[0]


def load_tools(workspace: Path | None = None, only: list[str] | None = None) -> dict[str, ToolSpec]:
    """Tool specs by name from ``tools/`` (a workspace's ``.nkiagent/tools/`` overrides or adds)."""
    specs: dict[str, ToolSpec] = {}
    for d in asset_dirs("tools", workspace):
        for path in sorted(d.glob("*.json")):
            data = json.loads(path.read_text())
            try:
                spec = ToolSpec(
                    data["name"], data["description"], data["parameters"], data["handler"], bool(data.get("proposes_edit", False))
                )
            except KeyError as exc:
                raise ValueError(f"{path}: a tool spec needs {exc.args[0]!r}") from None
            specs[spec.name] = spec
    if only is not None:
        missing = sorted(set(only) - set(specs))
        if missing:
            raise KeyError(f"unknown tool(s) {', '.join(missing)}; available: {', '.join(sorted(specs))}")
        specs = {k: v for k, v in specs.items() if k in only}
    return specs


class ToolRegistry:
    """Resolved handlers for a set of tool specs."""

    def __init__(self, specs: dict[str, ToolSpec]) -> None:
        self.specs = specs
        self._handlers: dict[str, Callable[..., Any]] = {}

    def schemas(self) -> list[dict[str, Any]]:
        return [s.schema() for s in self.specs.values()]

    def handler(self, name: str) -> Callable[..., Any]:
        if name not in self._handlers:
            module, _, fn = self.specs[name].handler.partition(":")
            self._handlers[name] = getattr(importlib.import_module(module), fn)
        return self._handlers[name]

    def call(self, ctx: AgentContext, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a tool; unknown tools and bad arguments become error results the model can read."""
        if name not in self.specs:
            return ToolResult(f"error: unknown tool {name!r}; available tools: {', '.join(self.specs)}", ok=False)
        spec = self.specs[name]
        required = spec.parameters.get("required", [])
        missing = [r for r in required if r not in arguments]
        unknown = sorted(set(arguments) - set(spec.parameters.get("properties", {})))
        if missing or unknown:
            parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unexpected {', '.join(unknown)}"] if unknown else [])
            return ToolResult(f"error: bad arguments for {name}: {'; '.join(parts)}", ok=False)
        from .workspace import WorkspaceError

        try:
            out = self.handler(name)(ctx, **arguments)
        except (OSError, ValueError, KeyError, PermissionError, WorkspaceError) as exc:
            return ToolResult(f"error: {exc}", ok=False)
        return out if isinstance(out, ToolResult) else ToolResult(str(out))


# -- builtin handlers ---------------------------------------------------------------------------
def list_files(ctx: AgentContext, path: str = ".") -> ToolResult:
    files = list(ctx.workspace.list(path))
    return ToolResult("\n".join(files) if files else "(no files)", data={"files": files})


def read_file(ctx: AgentContext, path: str, version: str | None = None) -> ToolResult:
    if version:
        found = sorted(sha for sha in ctx.kernels if sha.startswith(version.lower()))
        if len(found) != 1:
            known = ", ".join(sha[:12] for sha in ctx.kernels) or "none yet"
            what = "no" if not found else f"{len(found)}"
            return ToolResult(f"error: {what} evaluated kernel version starts with {version!r}; versions: {known}", ok=False)
        text = ctx.kernels[found[0]]
    elif not ctx.workspace.exists(path):
        files = [f for f in ctx.workspace.list(".") if not f.startswith(".")][:20]
        return ToolResult(f"error: no file {path} in the workspace; files: {', '.join(files) or 'none'}", ok=False)
    else:
        text = ctx.workspace.read(path)
    numbered = "\n".join(f"{i:4d}  {line}" for i, line in enumerate(text.splitlines(), 1))
    return ToolResult(numbered, data={"path": path, "chars": len(text)})


def write_file(ctx: AgentContext, path: str, content: str) -> ToolResult:
    old = ctx.text(path) if path in ctx.proposed or ctx.workspace.exists(path) else ""
    return ToolResult(
        f"proposed a new version of {path} ({len(content.splitlines())} lines)", edit={"path": path, "old": old, "new": content}
    )


def edit_file(ctx: AgentContext, path: str, old: str, new: str) -> ToolResult:
    text = ctx.text(path)
    count = text.count(old) if old else 0
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        return ToolResult(f"error: `old` {where} in {path}; give an exact, unique snippet (read_file shows the current text)", ok=False)
    return ToolResult(f"proposed an edit to {path}", edit={"path": path, "old": text, "new": text.replace(old, new, 1)})


def compact_evaluation(ev: dict[str, Any]) -> str:
    """The evaluation a model needs to act: verdict, reasons with file:line, numbers with their source, profile summary."""
    lines = [
        f"verdict: {ev['verdict']} (task {ev['task']}, target {ev['target']})"
        + (f"; kernel version {ev['code_sha256'][:12]}" if ev.get("code_sha256") else "")
    ]
    lines += [f"- {r}" for r in ev.get("reasons", [])[:8]]
    if ev.get("latency_us") is not None:
        lines.append(f"latency: {ev['latency_us']:.3f} µs ({ev.get('timing_source')}, {ev.get('model_version')})")
    if ev.get("verdict") == "pass":
        if ev.get("speedup") is not None:
            lines.append(f"baseline: {ev['baseline_latency_us']:.3f} µs → speedup {ev['speedup']:.3f}×")
        if ev.get("fraction_of_peak") is not None:
            lines.append(f"speed of light: {ev['sol_latency_us']:.3f} µs → {100 * ev['fraction_of_peak']:.1f}% of peak")
    summary = ev.get("profile", {}).get("summary")
    if summary:
        lines.append("profile:")
        lines.extend(summary.splitlines())  # at most 40 lines: the critical path, idle engines, advice, hottest lines
    return "\n".join(lines)


def evaluate(ctx: AgentContext, path: str) -> ToolResult:
    ev = ctx.evaluate(path)
    data = {k: ev.get(k) for k in ("verdict", "reasons", "latency_us", "speedup", "baseline_latency_us", "timing_source", "code_sha256")}
    data["profile"] = {"bottleneck": ev.get("profile", {}).get("bottleneck")}
    return ToolResult(compact_evaluation(ev) + "\n" + json.dumps(data), ok=ev["verdict"] == "pass", data={"evaluation": ev})


def profile(ctx: AgentContext, path: str) -> ToolResult:
    ev = ctx.evaluate(path, seeds=1, hidden=False)
    if ev["verdict"] != "pass":
        return ToolResult(compact_evaluation(ev), ok=False, data={"evaluation": ev})
    return ToolResult(ev.get("profile", {}).get("summary", ""), data={"evaluation": ev})


def _doc_sections() -> list[tuple[str, str]]:
    """The ``nki_docs`` corpus: what the system prompt does not hold already — one page per ``nki.isa``
    instruction (from the registry), the cost model's DMA and scheduling pages, and the prompts'
    markdown other than the cheat-sheet (which the system prompt carries whole)."""
    from .cheatsheet import instruction_docs, language_docs
    from .model_docs import cost_model_pages

    sections: list[tuple[str, str]] = []
    for d in asset_dirs("prompts"):
        for path in sorted(d.glob("*.md")):
            if path.name == "nki_cheatsheet.md":
                continue
            title = path.stem
            body: list[str] = []
            for line in path.read_text().splitlines():
                if line.startswith("#"):
                    if body:
                        sections.append((title, "\n".join(body)))
                    title, body = line.lstrip("# ").strip(), []
                else:
                    body.append(line)
            if body:
                sections.append((title, "\n".join(body)))
    return sections + instruction_docs() + language_docs() + cost_model_pages()


#: Characters of pages one answer returns (whole pages, best first; the rest are named).
_DOCS_BUDGET = 6000


def nki_docs(ctx: AgentContext, query: str) -> ToolResult:
    """Pages ranked by how well they match ``query``: rare words weigh more (a word on every page says
    nothing), a word in the title more still; whole pages up to a budget, the other matches by title."""
    import math

    words = sorted({w.lower() for w in re.findall(r"\w+", query) if len(w) > 1})
    if not words:
        return ToolResult("error: give a few keywords", ok=False)
    pages = [(title, body.strip()) for title, body in _doc_sections()]
    texts = [(title.lower(), f"{title} {body}".lower()) for title, body in pages]
    idf = {w: math.log(1 + len(pages) / (1 + sum(w in text for _, text in texts))) for w in words}
    scored = []
    for (title, body), (ltitle, text) in zip(pages, texts):
        score = sum(idf[w] * (math.log1p(text.count(w)) + 3.0 * (w in ltitle)) for w in words)
        if score:
            scored.append((score, title, body))
    if not scored:
        return ToolResult(
            f"no page of the NKI reference mentions {query!r}; pages exist for every nisa instruction "
            "(e.g. `nisa.tensor_scalar`) and for the cost model's DMA timing and scheduling"
        )
    scored.sort(key=lambda s: -s[0])
    # a page given earlier in the session is named, not repeated (answers were filling the context with
    # the same DMA pages), unless the query asks for it by its title or nothing new matches
    asked = query.lower()
    fresh = [s for s in scored if s[1] not in ctx.docs_shown or s[1].lower() in asked] or scored[:1]
    earlier = [t for _, t, _ in scored if t in ctx.docs_shown and all(t != f[1] for f in fresh)][:8]
    shown: list[str] = []
    used = 0
    for _, title, body in fresh:
        page = f"## {title}\n{body}"
        if shown and used + len(page) > _DOCS_BUDGET:
            break
        shown.append(page)
        used += len(page)
        ctx.docs_shown.add(title)
    rest = [t for _, t, _ in fresh[len(shown) : len(shown) + 8]]
    more = f"\n\nalso matching: {', '.join(rest)}" if rest else ""
    if earlier:
        more += f"\n\nalso matching, shown in an earlier answer (ask with its title to see it again): {', '.join(earlier)}"
    return ToolResult("\n\n".join(shown) + more)


def submit(ctx: AgentContext, path: str, summary: str) -> ToolResult:
    """End the session; its result is the submitted file verified again with the full protocol (every seed and hidden shape)."""
    ev = ctx.evaluate(path)
    return ToolResult(
        f"submitted {path}; its full verification (the session's result):\n{compact_evaluation(ev)}",
        ok=ev["verdict"] == "pass",
        submitted=True,
        data={"path": path, "summary": summary, "evaluation": ev},
    )
