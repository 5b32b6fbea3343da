"""RL interfaces over the real tools and verifier: a step environment, a TRL reward function, verl's ``compute_score``.

All three score kernels the same way as exports do: the code is written to a file, verified
in the sandboxed worker (never in this process) and its evaluation scored by a reward spec
(:mod:`.rewards`), so a trainer learns exactly what the exported rewards say. A
:class:`Scorer` verifies a batch over the local pool and remembers results by (code hash,
task, target, options): GRPO groups often repeat a completion, and each is verified once.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rewards import DEFAULT_SPEC, Reward, RewardSpec, get_spec

__all__ = ["KernelEnv", "Scored", "Scorer", "compute_score", "default_scorer", "extract_code", "reward_fn"]

_FENCE = re.compile(r"(`{3,})[ \t]*([\w.+-]*)[^\n]*\n(.*?)\n?\1[ \t]*(?:\n|$)", re.DOTALL)


def extract_code(completion: Any) -> str | None:
    """The kernel a completion proposes: a ``write_file`` call's content, else its last fenced python block.

    ``completion`` is text, an assistant message, or a list of messages (the last assistant
    message counts). A text with ``@nki.jit`` and no fence is taken whole.
    """
    if isinstance(completion, list):
        msgs = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return extract_code(msgs[-1]) if msgs else None
    if isinstance(completion, dict):
        for tc in reversed(completion.get("tool_calls") or []):
            fn = tc.get("function") or {}
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {}
            if fn.get("name") == "write_file" and isinstance(args, dict) and isinstance(args.get("content"), str):
                return args["content"]
        completion = completion.get("content") or ""
    if not isinstance(completion, str) or not completion.strip():
        return None
    blocks = [(lang.lower(), body) for _, lang, body in _FENCE.findall(completion)]
    code = [b for lang, b in blocks if lang in ("python", "py", "")]
    if code:
        return code[-1] + "\n"
    return completion if "@nki.jit" in completion else None


@dataclass
class Scored:
    reward: Reward
    evaluation: dict[str, Any] | None  #: ``None`` when the completion held no code

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation or {}
        return {**self.reward.to_dict(), "verdict": ev.get("verdict"), "reasons": list(ev.get("reasons", []))[:3],
                "speedup": ev.get("speedup"), "latency_us": ev.get("latency_us"), "timing_source": ev.get("timing_source"),
                "fraction_of_peak": ev.get("fraction_of_peak"), "code_sha256": ev.get("code_sha256")}


@dataclass
class Scorer:
    """Verify and score kernels in batches (see the module docstring). Thread-safe."""

    spec: str = DEFAULT_SPEC
    seeds: int = 1
    hidden: bool = True
    workers: int | None = None
    cache_size: int = 4096
    #: ``(code, task, target)`` items → evaluation dicts, in order; default: the local pool
    #: (:func:`~nkiagent.verify.pool.verify_many`). ``nkiagent serve-reward --executor ray`` passes a Ray cluster's.
    evaluate_many: Callable[[Sequence[tuple[str, str, str]]], list[dict[str, Any]]] | None = None
    _cache: OrderedDict[tuple[str, str, str], dict[str, Any]] = field(default_factory=OrderedDict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.reward_spec: RewardSpec = get_spec(self.spec)

    def options(self) -> Any:
        from ..verify.verifier import VerifyOptions

        return VerifyOptions(seeds=self.seeds, hidden=self.hidden)

    def evaluate(self, items: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """Evaluation dicts of ``(code, task, target)`` items, in order (distinct ones verified once, in parallel)."""
        from ..tasks import get_task
        from ..verify.pool import verify_many

        keys = [(hashlib.sha256(code.encode()).hexdigest(), task, target) for code, task, target in items]
        with self._lock:
            todo = {k: it for k, it in zip(keys, items) if k not in self._cache}
        if todo and self.evaluate_many is not None:
            self._remember(list(todo), self.evaluate_many(list(todo.values())))
        elif todo:
            tasks = {name: get_task(name) for _, name, _ in todo.values()}
            tmp = Path(tempfile.mkdtemp(prefix="nkiagent-score-"))
            try:
                work = []
                for i, (k, (code, name, target)) in enumerate(todo.items()):
                    path = tmp / f"k{i}_{k[0][:12]}.py"
                    path.write_text(code)
                    work.append((path, tasks[name], target))
                results = verify_many(work, workers=self.workers, options=self.options())
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            self._remember(list(todo), [r.to_dict() for r in results])
        with self._lock:
            return [self._cache[k] for k in keys]

    def _remember(self, keys: list[tuple[str, str, str]], evaluations: list[dict[str, Any]]) -> None:
        with self._lock:
            for k, ev in zip(keys, evaluations):
                self._cache[k] = ev
                self._cache.move_to_end(k)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def score(self, completions: Sequence[Any], tasks: Sequence[str], targets: Sequence[str]) -> list[Scored]:
        """Score completions (text, message or messages) against their tasks; no code scores as a compile failure."""
        if not len(completions) == len(tasks) == len(targets):
            raise ValueError(f"got {len(completions)} completions, {len(tasks)} tasks and {len(targets)} targets; they must match")
        codes = [extract_code(c) for c in completions]
        idx = [i for i, c in enumerate(codes) if c is not None]
        evals = self.evaluate([(codes[i] or "", tasks[i], targets[i]) for i in idx])
        by_index = dict(zip(idx, evals))
        return [Scored(self.reward_spec.score(by_index.get(i)), by_index.get(i)) for i in range(len(codes))]


_DEFAULT: dict[str, Scorer] = {}


def default_scorer(spec: str = DEFAULT_SPEC) -> Scorer:
    """One shared scorer per reward spec, so the result cache serves every call of a training run."""
    if spec not in _DEFAULT:
        _DEFAULT[spec] = Scorer(spec)
    return _DEFAULT[spec]


def _column(kw: dict[str, Any], name: str, n: int, default: str) -> list[str]:
    v = kw.get(name)
    if v is None:
        return [default] * n
    if isinstance(v, str):
        return [v] * n
    return [str(x) for x in v]


def reward_fn(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
    """TRL-style reward function: one float per completion.

    Dataset columns arrive as keyword lists: ``task`` (builtin name or task file; default
    ``vector_add``), ``target`` (default ``trn2``), optionally ``reward_spec``.
    """
    n = len(completions)
    spec = kw.get("reward_spec")
    scorer = default_scorer(spec[0] if isinstance(spec, list) and spec else spec or DEFAULT_SPEC)
    return [s.reward.reward for s in scorer.score(list(completions), _column(kw, "task", n, "vector_add"), _column(kw, "target", n, "trn2"))]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """verl custom reward: ``ground_truth`` is ``{"task", "target"}`` (a dict or its JSON, as the verl export writes it).

    Returns ``{"score": reward, …details}``; verl logs the extra keys.
    """
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth or {})
    task = truth.get("task") or (data_source.split("/", 1)[1] if data_source.startswith("nkiagent/") else data_source)
    spec = (extra_info or {}).get("reward_spec")
    scorer = default_scorer(spec if isinstance(spec, str) and spec else DEFAULT_SPEC)
    scored = scorer.score([solution_str], [task], [truth.get("target") or "trn2"])[0]
    d = scored.to_dict()
    return {"score": d["reward"], "outcome": d["outcome"], "verdict": d["verdict"] or "none", "speedup": d["speedup"] or 0.0}


class KernelEnv:
    """A multi-turn environment: ``reset(task)`` → observation; ``step(action)`` → (observation, reward, done, info).

    The action is the model's answer: an assistant message with tool calls, or text (tool
    calls in nkiagent's text format, or a fenced python kernel that replaces the kernel file).
    Edits are applied at once (no reviewer) and the kernel is then verified; the step's reward
    is its last evaluation scored by the spec (0 when the step evaluated nothing; a text answer
    with neither code nor tool calls scores as a compile failure). The episode ends on
    ``submit`` or after ``max_turns`` steps.
    """

    def __init__(self, task: str = "vector_add", target: str = "trn2", reward: str = DEFAULT_SPEC, max_turns: int = 8,
                 seeds: int = 1, hidden: bool = True, tools: list[str] | None = None) -> None:
        self.task_name = task
        self.target = target
        self.spec = get_spec(reward)
        self.max_turns = max_turns
        self.seeds = seeds
        self.hidden = hidden
        self.tool_names = tools
        self.dir: Path | None = None
        self.messages: list[dict[str, Any]] = []
        self.turn = 0
        self.done = True

    def reset(self, task: str | None = None) -> dict[str, Any]:
        from ..agent.prompts import system_prompt, task_prompt
        from ..agent.tools import AgentContext, ToolRegistry, load_tools
        from ..agent.workspace import Workspace, kernel_path
        from ..tasks import get_task

        self.close()
        self.task_name = task or self.task_name
        t = get_task(self.task_name)
        base = t.baseline_path()
        if base is None or not base.is_file():
            raise FileNotFoundError(f"task {t.name} has no baseline kernel to start from")
        self.dir = Path(tempfile.mkdtemp(prefix="nkiagent-env-"))
        self.kernel = kernel_path(t.name.rsplit("/", 1)[-1])
        (self.dir / self.kernel).parent.mkdir(parents=True, exist_ok=True)
        (self.dir / self.kernel).write_text(base.read_text())
        self.workspace = Workspace(self.dir)
        self.ctx = AgentContext(self.workspace, t, self.target, self.seeds)
        self.registry = ToolRegistry(load_tools(None, self.tool_names))
        self.messages = [{"role": "system", "content": system_prompt(self.target)},
                         {"role": "user", "content": task_prompt(t, self.kernel, self.target)}]
        self.turn, self.done = 0, False
        return {"messages": list(self.messages), "tools": self.registry.schemas(), "task": t.name, "target": self.target}

    def _evaluate(self, path: str) -> dict[str, Any]:
        return self.ctx.evaluate(path, seeds=self.seeds, hidden=self.hidden)

    def step(self, action: str | dict[str, Any]) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        from ..agent.models.textmode import parse
        from ..agent.tools import compact_evaluation

        if self.done or self.dir is None:
            raise RuntimeError("the episode is over: call reset() first")
        self.turn += 1
        msg = dict(action) if isinstance(action, dict) else {"role": "assistant", "content": action}
        msg["role"] = "assistant"
        calls = [(tc.get("id") or f"call_{i}", (tc.get("function") or {}).get("name", ""), (tc.get("function") or {}).get("arguments"))
                 for i, tc in enumerate(msg.get("tool_calls") or [])]
        if not calls and isinstance(msg.get("content"), str):
            parsed = parse(msg["content"])
            calls = [(c.id, c.name, c.arguments) for c in parsed]
        out: list[dict[str, Any]] = []
        evaluations: list[dict[str, Any]] = []
        submitted = False
        if calls:
            for cid, name, raw in calls:
                args = json.loads(raw) if isinstance(raw, str) and raw else dict(raw or {})
                res = self.registry.call(self.ctx, name, args)
                text = res.content
                if res.edit is not None:
                    self.workspace.write(res.edit["path"], res.edit["new"], "kernelenv")
                    text = f"applied the edit to {res.edit['path']}"
                    if res.edit["path"] == self.kernel:
                        ev = self._evaluate(self.kernel)
                        evaluations.append(ev)
                        text += "\n" + compact_evaluation(ev)
                elif "evaluation" in res.data:
                    evaluations.append(res.data["evaluation"])
                submitted = submitted or res.submitted
                out.append({"role": "tool", "tool_call_id": cid, "content": text})
        else:
            code = extract_code(msg)
            if code is None:
                out.append({"role": "user", "content": "No kernel and no tool call found: answer with a ```python block holding the whole kernel, or call a tool."})
            else:
                self.workspace.write(self.kernel, code, "kernelenv")
                ev = self._evaluate(self.kernel)
                evaluations.append(ev)
                out.append({"role": "user", "content": compact_evaluation(ev)})
        if evaluations:
            reward = self.spec.score(evaluations[-1])
        elif calls:
            reward = Reward("none", {}, 0.0, self.spec.id)
        else:
            reward = self.spec.score(None)
        self.messages += [msg, *out]
        self.done = submitted or self.turn >= self.max_turns
        info = {"turn": self.turn, "outcome": reward.outcome, "components": reward.components, "reward_spec": self.spec.id,
                "evaluation": evaluations[-1] if evaluations else None, "submitted": submitted}
        return {"messages": out}, reward.reward, self.done, info

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self.done = True

    def __enter__(self) -> KernelEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
