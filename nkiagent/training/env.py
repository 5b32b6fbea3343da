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
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from .answers import UNCHANGED, apply_answer, needs_evaluation, score_answer
from .rewards import DEFAULT_SPEC, Reward, RewardSpec, get_spec

__all__ = ["KernelEnv", "Scored", "Scorer", "compute_score", "default_scorer", "reward_fn", "starting_kernel"]


def starting_kernel(task: str) -> tuple[str, str]:
    """(text, workspace path) of the kernel an agent session on ``task`` starts from: what a prompt without
    a recorded kernel shows, so edit-style answers to it apply to this file."""
    from ..agent.runner import starting_kernel as start
    from ..agent.workspace import kernel_path
    from ..tasks import get_task

    t = get_task(task)
    return start(t).read_text(), kernel_path(t.name.rsplit("/", 1)[-1])


@dataclass
class Scored:
    reward: Reward
    evaluation: dict[str, Any] | None  #: ``None`` when the completion held no code

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation or {}
        return {
            **self.reward.to_dict(),
            "verdict": ev.get("verdict"),
            "reasons": list(ev.get("reasons", []))[:3],
            "speedup": ev.get("speedup"),
            "latency_us": ev.get("latency_us"),
            "timing_source": ev.get("timing_source"),
            "fraction_of_peak": ev.get("fraction_of_peak"),
            "code_sha256": ev.get("code_sha256"),
        }


@dataclass
class Scorer:
    """Verify and score kernels in batches (see the module docstring). Thread-safe.

    However many requests call it at once, at most ``workers`` kernels are verified at a time
    (one shared pool: a reward server's clients cannot start a sandbox each), and a kernel that
    is being verified for one caller is waited for, not verified again, by the others.
    """

    spec: str = DEFAULT_SPEC
    seeds: int = 1
    hidden: bool = True
    workers: int | None = None
    cache_size: int = 4096
    #: ``(code, task, target)`` items → evaluation dicts, in order; default: the local pool of sandboxed
    #: workers. ``nkiagent serve-reward --executor ray`` passes a Ray cluster's.
    evaluate_many: Callable[[Sequence[tuple[str, str, str]]], list[dict[str, Any]]] | None = None
    verified: int = field(default=0, init=False)  #: kernels actually verified (cache and in-flight hits not counted)
    _cache: OrderedDict[tuple[str, str, str], dict[str, Any]] = field(default_factory=OrderedDict, init=False, repr=False)
    _inflight: dict[tuple[str, str, str], Future[dict[str, Any]]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.reward_spec: RewardSpec = get_spec(self.spec)

    def options(self) -> Any:
        from ..verify.verifier import VerifyOptions

        return VerifyOptions(seeds=self.seeds, hidden=self.hidden, parallel=1)

    def _verify_one(self, code: str, task: str, target: str) -> dict[str, Any]:
        from ..tasks import get_task
        from ..verify.verifier import verify

        with tempfile.TemporaryDirectory(prefix="nkiagent-score-") as tmp:
            path = Path(tmp) / "kernel.py"
            path.write_text(code)
            return verify(path, get_task(task), target, self.options()).to_dict()

    def _run(self, todo: dict[tuple[str, str, str], tuple[str, str, str]]) -> list[dict[str, Any]]:
        """Verify the kernels this caller owns: through ``evaluate_many``, or the shared pool."""
        if self.evaluate_many is not None:
            return self.evaluate_many(list(todo.values()))
        from ..verify.pool import default_workers

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers or default_workers(), thread_name_prefix="nkiagent-score")
            pool = self._pool
        return [f.result() for f in [pool.submit(self._verify_one, *it) for it in todo.values()]]

    def evaluate(self, items: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """Evaluation dicts of ``(code, task, target)`` items, in order (distinct ones verified once, in parallel)."""
        keys = [(hashlib.sha256(code.encode()).hexdigest(), task, target) for code, task, target in items]
        got: dict[tuple[str, str, str], dict[str, Any]] = {}
        waiting: dict[tuple[str, str, str], Future[dict[str, Any]]] = {}
        mine: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        with self._lock:
            for k, it in zip(keys, items):
                if k in got or k in waiting or k in mine:
                    continue
                if k in self._cache:
                    got[k] = self._cache[k]
                elif k in self._inflight:
                    waiting[k] = self._inflight[k]
                else:
                    mine[k] = it
                    self._inflight[k] = Future()
            self.verified += len(mine)
        if mine:
            try:
                results = self._run(mine)
            except BaseException as exc:
                with self._lock:
                    for k in mine:
                        self._inflight.pop(k).set_exception(exc)
                raise
            with self._lock:
                for k, ev in zip(mine, results):
                    got[k] = self._cache[k] = ev
                    self._cache.move_to_end(k)
                    self._inflight.pop(k).set_result(ev)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        got.update({k: f.result() for k, f in waiting.items()})
        return [got[k] for k in keys]

    def close(self) -> None:
        """Stop the pool: queued verifications are dropped, running ones finish in their sandboxes."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def score(
        self,
        completions: Sequence[Any],
        tasks: Sequence[str],
        targets: Sequence[str],
        kernels: Sequence[str | None] | None = None,
        kernel_paths: Sequence[str | None] | None = None,
    ) -> list[Scored]:
        """Score answers (text, message or messages) against their tasks by :func:`~.answers.score_answer`.

        ``kernels[i]``/``kernel_paths[i]`` are the kernel in force when answer ``i`` was asked for
        (an edit applies to it); ``None`` means the task's starting kernel.
        """
        n = len(completions)
        kernels = list(kernels) if kernels is not None else [None] * n
        kernel_paths = list(kernel_paths) if kernel_paths is not None else [None] * n
        if not n == len(tasks) == len(targets) == len(kernels) == len(kernel_paths):
            raise ValueError(
                f"got {n} completions, {len(tasks)} tasks, {len(targets)} targets, {len(kernels)} kernels and "
                f"{len(kernel_paths)} kernel paths; they must match"
            )
        applied = []
        for comp, task, kernel, path in zip(completions, tasks, kernels, kernel_paths):
            if kernel is None:
                kernel, default_path = starting_kernel(task)
                path = path or default_path
            applied.append(apply_answer(comp, kernel, path))
        idx = [i for i, a in enumerate(applied) if needs_evaluation(a)]
        evals = self.evaluate([(applied[i].code or "", tasks[i], targets[i]) for i in idx])
        by_index = dict(zip(idx, evals))
        return [Scored(score_answer(a, self.reward_spec, by_index.get(i)), by_index.get(i)) for i, a in enumerate(applied)]


_DEFAULT: dict[str, Scorer] = {}


def default_scorer(spec: str = DEFAULT_SPEC) -> Scorer:
    """One shared scorer per reward spec, so the result cache serves every call of a training run."""
    if spec not in _DEFAULT:
        _DEFAULT[spec] = Scorer(spec)
    return _DEFAULT[spec]


def _column(kw: dict[str, Any], name: str, n: int, default: str | None) -> list[Any]:
    v = kw.get(name)
    if v is None:
        return [default] * n
    if isinstance(v, str):
        return [v] * n
    return [None if x is None else str(x) for x in v]


def reward_fn(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
    """TRL-style reward function: one float per completion.

    Dataset columns arrive as keyword lists: ``task`` (builtin name or task file; default
    ``vector_add``), ``target`` (default ``trn2``), ``kernel``/``kernel_path`` (the kernel in
    force at the prompt, which the trl-grpo export writes; default the task's starting kernel),
    optionally ``reward_spec``.
    """
    n = len(completions)
    spec = kw.get("reward_spec")
    scorer = default_scorer(spec[0] if isinstance(spec, list) and spec else spec or DEFAULT_SPEC)
    scored = scorer.score(
        list(completions),
        _column(kw, "task", n, "vector_add"),
        _column(kw, "target", n, "trn2"),
        _column(kw, "kernel", n, None),
        _column(kw, "kernel_path", n, None),
    )
    return [s.reward.reward for s in scored]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """verl custom reward: ``ground_truth`` is ``{"task", "target", "kernel", "kernel_path"}`` (a dict or its JSON, as
    the verl export writes it; without ``kernel`` the task's starting kernel is in force).

    Returns ``{"score": reward, …details}``; verl logs the extra keys.
    """
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth or {})
    task = truth.get("task") or (data_source.split("/", 1)[1] if data_source.startswith("nkiagent/") else data_source)
    spec = (extra_info or {}).get("reward_spec")
    scorer = default_scorer(spec if isinstance(spec, str) and spec else DEFAULT_SPEC)
    scored = scorer.score([solution_str], [task], [truth.get("target") or "trn2"], [truth.get("kernel")], [truth.get("kernel_path")])[0]
    d = scored.to_dict()
    return {"score": d["reward"], "outcome": d["outcome"], "verdict": d["verdict"] or "none", "speedup": d["speedup"] or 0.0}


class KernelEnv:
    """A multi-turn environment: ``reset(task)`` → observation; ``step(action)`` → (observation, reward, done, info).

    The action is the model's answer in any format :func:`~.answers.parse_answer` reads (tool
    calls, Hermes ``<tool_call>`` text, text-mode blocks, a fenced kernel). Edits of the kernel
    are applied at once (no reviewer) and the new kernel verified; the reward is
    :func:`~.answers.score_answer`'s, so re-evaluating an unchanged kernel earns 0 and a broken
    call scores as a compile failure. Nothing a model sends raises: errors come back as tool
    messages. The episode ends on ``submit`` or after ``max_turns`` steps.
    """

    def __init__(
        self,
        task: str = "vector_add",
        target: str = "trn2",
        reward: str = DEFAULT_SPEC,
        max_turns: int = 8,
        seeds: int = 1,
        hidden: bool = True,
        tools: list[str] | None = None,
    ) -> None:
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
        self.code = ""
        self.evaluation: dict[str, Any] | None = None  #: the evaluation of the kernel in force, once it changed
        self.history: list[tuple[str, float]] = []  #: (outcome, reward) of every step that did something

    def reset(self, task: str | None = None, kernel: str | None = None, kernel_path: str | None = None) -> dict[str, Any]:
        """Start an episode on ``task`` from ``kernel`` (default: the task's starting kernel, as an agent session)."""
        from ..agent.prompts import system_prompt, task_prompt
        from ..agent.tools import AgentContext, ToolRegistry, load_tools
        from ..agent.workspace import Workspace
        from ..tasks import get_task

        self.close()
        self.task_name = task or self.task_name
        t = get_task(self.task_name)
        start, default_path = starting_kernel(self.task_name)
        self.kernel = kernel_path or default_path
        self.code = start if kernel is None else kernel
        self.dir = Path(tempfile.mkdtemp(prefix="nkiagent-env-"))
        self.workspace = Workspace(self.dir)
        (self.workspace.resolve(self.kernel)).parent.mkdir(parents=True, exist_ok=True)
        self.workspace.resolve(self.kernel).write_text(self.code)
        self.ctx = AgentContext(self.workspace, t, self.target, self.seeds)
        self.registry = ToolRegistry(load_tools(None, self.tool_names))
        self.messages = [
            {"role": "system", "content": system_prompt(self.target)},
            {"role": "user", "content": task_prompt(t, self.kernel, self.target)},
        ]
        self.turn, self.done, self.evaluation, self.history = 0, False, None, []
        return {"messages": list(self.messages), "tools": self.registry.schemas(), "task": t.name, "target": self.target}

    def _evaluate(self) -> dict[str, Any]:
        return self.ctx.evaluate(self.kernel, seeds=self.seeds, hidden=self.hidden)

    def _look(self, name: str, args: dict[str, Any]) -> str:
        """The text a read-only tool gives (its evaluation of the kernel in force is not a new reward)."""
        if name in ("evaluate", "profile"):
            from ..agent.tools import compact_evaluation

            self.evaluation = self.evaluation or self._evaluate()
            return compact_evaluation(self.evaluation)
        try:
            return self.registry.call(self.ctx, name, args).content
        except Exception as exc:  # noqa: BLE001 — a tool's failure is the model's to read, never the trainer's crash
            return f"error: {name} failed: {type(exc).__name__}: {exc}"

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        """One answer → (``{"messages": replies}``, reward, done, info); ``info["errors"]`` lists the tool errors."""
        from ..agent.tools import compact_evaluation

        if self.done or self.dir is None:
            raise RuntimeError("the episode is over: call reset() first")
        self.turn += 1
        msg = (
            {**action, "role": "assistant"}
            if isinstance(action, dict)
            else {"role": "assistant", "content": action if isinstance(action, str) else ""}
        )
        applied = apply_answer(msg, self.code, self.kernel)
        evaluation = None
        if needs_evaluation(applied):
            self.code = applied.code or ""
            self.workspace.resolve(self.kernel).write_text(self.code)
            evaluation = self.evaluation = self._evaluate()
        reward = score_answer(applied, self.spec, evaluation)
        if reward.outcome != UNCHANGED:
            self.history.append((reward.outcome, reward.reward))
        texts = [
            text if text.startswith("error:") or act.name in ("write_file", "edit_file") else self._look(act.name, act.args)
            for act, text in applied.results
        ]
        if evaluation is not None and texts:
            texts[-1] += "\n" + compact_evaluation(evaluation)
        if not applied.acted:
            out = [
                {
                    "role": "user",
                    "content": "No kernel and no tool call found: answer with a ```python block holding the whole kernel, or call a tool.",
                }
            ]
        elif applied.results and msg.get("tool_calls"):
            out = [
                {"role": "tool", "tool_call_id": act.id or f"call_{i}", "content": text}
                for i, ((act, _), text) in enumerate(zip(applied.results, texts))
            ]
        else:
            out = [{"role": "user", "content": "\n\n".join(texts) if texts else compact_evaluation(evaluation or {})}]
        self.messages += [msg, *out]
        self.done = applied.submitted or self.turn >= self.max_turns
        info = {
            "turn": self.turn,
            "outcome": reward.outcome,
            "components": reward.components,
            "reward_spec": self.spec.id,
            "evaluation": evaluation,
            "submitted": applied.submitted,
            "errors": list(applied.errors),
        }
        return {"messages": out}, reward.reward, self.done, info

    def episode_reward(self) -> float:
        """One number for the episode, for trainers that want one (TRL's ``get_reward``, verl's ``calc_reward``):
        a cheat's reward if any step cheated — a later honest edit does not wash it out — else the last
        step that did something (the kernel left in force, or a broken call), 0 when none did."""
        cheats = [r for outcome, r in self.history if outcome == "rejected"]
        if cheats:
            return min(cheats)
        return self.history[-1][1] if self.history else 0.0

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self.done = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
