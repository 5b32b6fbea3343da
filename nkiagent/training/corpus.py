"""``nkiagent corpus build``: a supervised fine-tuning set from a folder of (task, kernel) pairs.

An SFT corpus is only as good as its collection, so every kernel goes through the same
gates an agent's candidate does, and the report says what was dropped and why:

1. **collect** — either the folder layout (one sub-folder per task: its ``task.py``, or a
   builtin task's name as the folder name, plus any number of kernel ``.py`` files), or an
   NKIBench checkout (``summary.json``; each case's kernel);
2. **decontaminate** — drop held-out tasks (by name or glob, and any task whose reference
   code is a held-out task's), and kernels near-identical to a held-out task's baseline;
3. **exact duplicates** — one kernel per normalized-AST hash (docstrings, comments and
   local names do not count), before anything is verified;
4. **verify** — the verifier on every remaining kernel; only ``pass`` is kept, with its
   latency (``emulator-estimate``), speedup and fraction of peak;
5. **near duplicates** — within a task, fastest first, a kernel whose normalized token
   sequence is at least ``similarity`` alike to one already kept is dropped;
6. **balance** — at most ``max_per_task`` per task and ``max_per_level`` per level
   (fastest kept, tasks taking turns);
7. **write** — ``sft.jsonl`` (chat rows: task prompt → kernel, or the refinement history
   slowest → fastest with ``with_history``), a parquet ``data/`` folder with metadata
   columns and a dataset card ``README.md``.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import fnmatch
import hashlib
import inspect
import io
import json
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verify.protocol import VISIBLE_SEEDS

__all__ = ["CorpusItem", "CorpusOptions", "CorpusReport", "balance", "build_corpus", "collect", "normalize_source", "similarity"]

_BUILTINS = frozenset(dir(builtins))
SYSTEM = "You are an expert AWS Trainium kernel engineer. Write a correct, fast NKI kernel for the task; answer with the whole kernel file."


@dataclass
class CorpusOptions:
    target: str = "trn2"
    seeds: int = VISIBLE_SEEDS
    hidden: bool = True
    workers: int | None = None
    similarity: float = 0.9
    held_out: tuple[str, ...] = ()
    max_per_task: int | None = None
    max_per_level: int | None = None
    with_history: bool = False


@dataclass
class CorpusItem:
    task: Any  #: nkiagent.tasks.Task
    path: Path
    source: str
    normalized: str = ""
    evaluation: dict[str, Any] = field(default_factory=dict)
    dropped: str = ""  #: why it was not kept ("" if kept)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.normalized.encode()).hexdigest()

    @property
    def latency(self) -> float:
        lat = self.evaluation.get("latency_us")
        return float(lat) if isinstance(lat, (int, float)) else float("inf")


@dataclass
class CorpusReport:
    items: list[CorpusItem]
    rows: list[dict[str, Any]]
    out: Path

    @property
    def kept(self) -> list[CorpusItem]:
        return [i for i in self.items if not i.dropped]

    def dropped(self) -> Counter[str]:
        return Counter(i.dropped.split(":")[0] for i in self.items if i.dropped)


# -- normalization ------------------------------------------------------------------------------


class _Canon(ast.NodeTransformer):
    """Docstrings out; every name bound in the file (functions, arguments, variables) renamed in order of appearance.

    Import aliases (``nl``, ``nisa``, ``np``) and attributes (``nl.add``) keep their names: they are the API, not style.
    """

    def __init__(self, keep: set[str]) -> None:
        self.keep = keep
        self.names: dict[str, str] = {}

    def _name(self, n: str) -> str:
        if n in self.keep or n in _BUILTINS:
            return n
        return self.names.setdefault(n, f"v{len(self.names)}")

    def _strip_doc(self, body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return body[1:] or [ast.Pass()]
        return body

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._strip_doc(node.body)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        node.body = self._strip_doc(node.body)
        self.generic_visit(node)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        node.annotation = None
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        self.generic_visit(node)  # keyword names are the callee's API (dst=, op=): kept
        return node


def normalize_source(source: str) -> str:
    """Canonical text of a kernel: same for copies that differ only in docstrings, comments, formatting and local names.

    Code that does not parse is returned as its whitespace-collapsed text (the verifier fails it anyway).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return " ".join(source.split())
    keep: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.update((a.asname or a.name).split(".")[0] for a in node.names)
    return ast.unparse(_Canon(keep).visit(tree))


_TOKEN = re.compile(r"\w+|[^\w\s]")


def _tokens(normalized: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(normalized).readline) if t.string.strip()]
    except (tokenize.TokenError, SyntaxError):
        return _TOKEN.findall(normalized)


def similarity(a: str, b: str) -> float:
    """Token-sequence similarity (0…1) of two normalized sources."""
    return difflib.SequenceMatcher(None, _tokens(a), _tokens(b), autojunk=False).ratio()


# -- collection ---------------------------------------------------------------------------------


def collect(src: str | Path) -> list[CorpusItem]:
    """(task, kernel) pairs of a folder layout or an NKIBench checkout (see the module docstring)."""
    from ..tasks import builtin_tasks, load_task_file
    from ..tasks.nkibench import load_nkibench

    root = Path(src)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus source {src} is not a directory")
    if (root / "summary.json").is_file() or (root / "NKIBench" / "summary.json").is_file():
        items = []
        for task in load_nkibench(root).values():
            path = task.baseline_path()
            if path is not None and path.is_file():
                items.append(CorpusItem(task, path, path.read_text()))
        return items
    builtin = builtin_tasks()
    items = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        task_file = sub / "task.py"
        if task_file.is_file():
            task = load_task_file(task_file)
        elif sub.name in builtin:
            task = builtin[sub.name]
        else:
            raise ValueError(f"{sub}: no task.py and {sub.name!r} is not a builtin task (see `nkiagent tasks`)")
        for k in sorted(sub.rglob("*.py")):
            if k != task_file and "__pycache__" not in k.parts:
                items.append(CorpusItem(task, k, k.read_text()))
    return items


def _reference_digest(task: Any) -> str:
    try:
        return hashlib.sha256(normalize_source(inspect.getsource(task.reference)).encode()).hexdigest()
    except (OSError, TypeError):
        return ""


def _held_out(names: tuple[str, ...]) -> list[Any]:
    """The held-out tasks that can be loaded (names that are only patterns match by name alone)."""
    from ..tasks import builtin_tasks, get_task

    tasks = []
    for n in names:
        if any(c in n for c in "*?["):
            tasks += [t for name, t in builtin_tasks().items() if fnmatch.fnmatchcase(name, n)]
        else:
            try:
                tasks.append(get_task(n))
            except (KeyError, FileNotFoundError):
                continue
    return tasks


# -- the pipeline -------------------------------------------------------------------------------


def _prompt(task: Any, target: str) -> str:
    from ..agent.prompts import task_prompt
    from ..agent.workspace import kernel_path

    return task_prompt(task, kernel_path(task.name.rsplit("/", 1)[-1]), target) + "\nWrite the whole kernel file."  # nkibench/x → x


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _feedback(ev: dict[str, Any]) -> str:
    sp = ev.get("speedup")
    return (
        f"Evaluation: pass, latency {ev.get('latency_us'):.3f} µs ({ev.get('timing_source')})"
        + (f", speedup {sp:.3f}× over the baseline" if isinstance(sp, (int, float)) else "")
        + ". Make it faster."
    )


def _rows(kept: list[CorpusItem], opts: CorpusOptions, root: Path) -> list[dict[str, Any]]:
    by_task: dict[str, list[CorpusItem]] = {}
    for it in kept:
        by_task.setdefault(it.task.name, []).append(it)
    rows = []
    for name, group in sorted(by_task.items()):
        task = group[0].task
        prompt = _prompt(task, opts.target)
        chains = [sorted(group, key=lambda i: -i.latency)] if opts.with_history else [[i] for i in sorted(group, key=lambda i: i.latency)]
        for chain in chains:
            msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
            for k, it in enumerate(chain):
                if k:
                    msgs.append({"role": "user", "content": _feedback(chain[k - 1].evaluation)})
                msgs.append({"role": "assistant", "content": _fence(it.source)})
            last = chain[-1]
            ev = last.evaluation
            rows.append(
                {
                    "messages": msgs,
                    "task": name,
                    "level": int(task.level),
                    "target": opts.target,
                    "latency_us": ev.get("latency_us"),
                    "timing_source": ev.get("timing_source"),
                    "speedup": ev.get("speedup"),
                    "fraction_of_peak": ev.get("fraction_of_peak"),
                    "code_sha256": ev.get("code_sha256"),
                    "source": last.path.relative_to(root).as_posix() if last.path.is_relative_to(root) else last.path.name,
                }
            )
    return rows


def balance(kept: list[CorpusItem], opts: CorpusOptions) -> None:
    """Mark the kernels over ``max_per_task`` (per task, slowest first) and ``max_per_level`` (tasks take turns) as dropped."""
    by_task: dict[str, list[CorpusItem]] = {}
    for it in sorted(kept, key=lambda i: i.latency):
        by_task.setdefault(it.task.name, []).append(it)
    for group in by_task.values():
        for it in group[opts.max_per_task or len(group) :]:
            it.dropped = f"balance: more than {opts.max_per_task} kernels for task {it.task.name}"
    if opts.max_per_level:
        by_level: dict[int, list[list[CorpusItem]]] = {}
        for group in by_task.values():
            by_level.setdefault(int(group[0].task.level), []).append([i for i in group if not i.dropped])
        for level, groups in by_level.items():
            taken = 0
            for rank in range(max((len(g) for g in groups), default=0)):  # tasks take turns, fastest first
                for g in groups:
                    if rank < len(g):
                        if taken >= opts.max_per_level:
                            g[rank].dropped = f"balance: more than {opts.max_per_level} kernels at level {level}"
                        else:
                            taken += 1


def build_corpus(src: str | Path, out: str | Path, opts: CorpusOptions | None = None) -> CorpusReport:
    """Run the pipeline of the module docstring and write ``out``."""
    from ..verify.pool import verify_many
    from ..verify.verifier import VerifyOptions

    opts = opts or CorpusOptions()
    root = Path(src).resolve()
    items = collect(root)
    for it in items:
        it.normalized = normalize_source(it.source)
    held = _held_out(opts.held_out)
    held_refs = {d for d in (_reference_digest(t) for t in held) if d}
    held_kernels = [normalize_source(p.read_text()) for t in held if (p := t.baseline_path()) is not None and p.is_file()]
    seen: set[str] = set()
    for it in items:
        name = it.task.name
        if any(name == h or fnmatch.fnmatchcase(name, h) for h in opts.held_out):
            it.dropped = f"held-out: task {name} is held out"
        elif held_refs and _reference_digest(it.task) in held_refs:
            it.dropped = f"held-out: task {name} has a held-out task's reference"
        elif any(similarity(it.normalized, h) >= opts.similarity for h in held_kernels):
            it.dropped = "held-out: near-identical to a held-out task's baseline kernel"
        elif it.digest in seen:
            it.dropped = "duplicate: same normalized AST as an earlier kernel"
        else:
            seen.add(it.digest)
    todo = [it for it in items if not it.dropped]
    results = verify_many(
        [(it.path, it.task, opts.target) for it in todo], workers=opts.workers, options=VerifyOptions(seeds=opts.seeds, hidden=opts.hidden)
    )
    for it, res in zip(todo, results):
        it.evaluation = res.to_dict()
        if res.verdict != "pass":
            it.dropped = f"{res.verdict}: " + (res.reasons[0] if res.reasons else "")
    kept_by_task: dict[str, list[CorpusItem]] = {}
    for it in sorted((i for i in items if not i.dropped), key=lambda i: i.latency):
        twins = kept_by_task.setdefault(it.task.name, [])
        close = next((k for k in twins if similarity(it.normalized, k.normalized) >= opts.similarity), None)
        if close is not None:
            it.dropped = f"near-duplicate: ≥ {opts.similarity:g} similar to the faster {close.path.name}"
        else:
            twins.append(it)
    balance([i for i in items if not i.dropped], opts)
    kept = [i for i in items if not i.dropped]
    out_dir = Path(out)
    rows = _rows(kept, opts, root)
    _write(rows, items, out_dir, opts)
    return CorpusReport(items, rows, out_dir)


def _write(rows: list[dict[str, Any]], items: list[CorpusItem], out: Path, opts: CorpusOptions) -> None:
    from .export import write_rows

    out.mkdir(parents=True, exist_ok=True)
    write_rows([{"messages": r["messages"]} for r in rows], out / "sft.jsonl")
    (out / "data").mkdir(exist_ok=True)
    for old in (out / "data").glob("train-*.parquet"):
        old.unlink()
    if rows:
        write_rows(rows, out / "data" / "train-00000-of-00001.parquet")
    dropped = Counter(i.dropped.split(":")[0] for i in items if i.dropped)
    kept = [i for i in items if not i.dropped]
    tasks = Counter(i.task.name for i in kept)
    levels = Counter(f"level {i.task.level}" for i in kept)
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        "    path: data/train-*.parquet",
        "tags:",
        "- nki",
        "- aws-trainium",
        "- kernels",
        "- nkiagent",
        "---",
        "",
        "# NKI kernel corpus",
        "",
        (
            f"{len(rows)} SFT rows from {len(kept)} kernels kept of {len(items)} collected; every kept kernel passed nkiagent's verifier "
            f"on {opts.target} ({opts.seeds} seeds, hidden shapes {'on' if opts.hidden else 'off'}); latencies are emulator estimates."
        ),
        "",
        "## Dropped",
        "",
        "| reason | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in dropped.most_common()],
        "",
        "## Kept by task",
        "",
        "| task | kernels |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in sorted(tasks.items())],
        "",
        "## Kept by level",
        "",
        "| level | kernels |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in sorted(levels.items())],
        "",
        (
            f"Near-duplicate threshold {opts.similarity:g}; held-out tasks: {', '.join(opts.held_out) or 'none'}; "
            f"rows: {'refinement history, slowest to fastest' if opts.with_history else 'one task prompt → kernel per kernel'}."
        ),
        "",
    ]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")
    (out / "report.json").write_text(
        json.dumps({"kept": [i.path.name for i in kept], "dropped": {i.path.name: i.dropped for i in items if i.dropped}}, indent=2)
    )
