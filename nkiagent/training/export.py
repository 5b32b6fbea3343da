"""Sessions → training data: SFT (OpenAI, TRL, ShareGPT), RL (steps, verl, TRL GRPO), preference pairs.

Everything is built from session files alone (:mod:`.trajectory`). Labels follow one rule:
only honest work is trained on or rewarded. A turn whose edit the verifier or the person
turned down has SFT weight 0 (OpenAI) or is never a completion (TRL, ShareGPT, whose rows
are "history → this turn"); a cheat gets the reward spec's lowest tier and its return is
capped there; a cheat is never the preferred side of a pair.

Rows are scrubbed of personal data (:mod:`.scrub`) and deduplicated by prompt and code hash
(the kernel a row ends with, or its completion when it carries none).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from .rewards import DEFAULT_GAMMA, DEFAULT_SPEC, OUTCOMES, RewardSpec, get_spec
from .scrub import Scrubber
from .trajectory import Candidate, SessionRecord, Turn, Verify, iter_session_dirs, load_session, tool_schemas

__all__ = [
    "FORMATS",
    "KINDS",
    "ExportOptions",
    "ExportResult",
    "dataset_card",
    "export_sessions",
    "openai_message",
    "trl_message",
    "write_hf",
    "write_rows",
]

KINDS = ("sft", "rl", "dpo")
FORMATS = {"sft": ("openai", "trl", "sharegpt"), "rl": ("steps", "verl", "trl-grpo"), "dpo": ("openai", "trl")}
#: A pass must beat the other by this relative margin to be preferred on speed (timing noise is not a preference).
SPEED_MARGIN = 0.01
VERL_ABILITY = "nki-kernel-optimization"
#: The tools examples/verl/nkiagent_tools.yaml registers (each gets the row's task and kernel in its create_kwargs).
VERL_TOOLS = ("read_file", "edit_file", "write_file", "evaluate")


@dataclass
class ExportOptions:
    spec: str = DEFAULT_SPEC
    gamma: float = DEFAULT_GAMMA
    verdict: str = "any"  #: ``pass``: only sessions with a passing candidate
    min_speedup: float | None = None  #: only sessions whose best pass is at least this fast
    last_turn_only: bool = False  #: SFT: train on the last trainable turn only
    exclude_tasks: tuple[str, ...] = ()  #: task names or glob patterns held out for evaluation
    timing_source: str | None = None  #: only sessions whose every latency came from here (``neuron-profile``: hardware only)
    dedup: bool = True
    scrub: bool = True
    #: RL: verify kernels a session proposed but never evaluated (edits the person turned down), so their turns
    #: keep a reward; off: those turns are left out (counted as ``skipped_unevaluated``)
    verify_missing: bool = True
    #: replace the NKI cheat-sheet in system prompts (~17k characters of a ~18k prompt) with a pointer to ``nki_docs``
    compact_system: bool = False


@dataclass
class ExportResult:
    kind: str
    format: str
    rows: list[dict[str, Any]]
    spec: RewardSpec
    options: ExportOptions
    stats: Counter[str] = field(default_factory=Counter)
    tasks: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    strategies: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)


# -- message shapes -----------------------------------------------------------------------------


def _args_text(raw: Any) -> str:
    """Arguments as the JSON string OpenAI wants (a model's invalid JSON is wrapped, not dropped)."""
    if isinstance(raw, str):
        try:
            json.loads(raw)
            return raw
        except ValueError:
            return json.dumps({"_raw": raw})
    return json.dumps(raw if raw is not None else {})


def _args_dict(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        out = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {"_raw": raw}
    return out if isinstance(out, dict) else {"_value": out}


def openai_message(m: dict[str, Any], weight: int | None = None) -> dict[str, Any]:
    """One message in OpenAI fine-tuning shape (only the keys that format allows)."""
    role = m.get("role", "user")
    content = m.get("content")
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
        calls = m.get("tool_calls") or []
        if calls:
            out["tool_calls"] = [
                {
                    "id": str(tc.get("id") or f"call_{i}"),
                    "type": "function",
                    "function": {
                        "name": (tc.get("function") or {}).get("name", ""),
                        "arguments": _args_text((tc.get("function") or {}).get("arguments")),
                    },
                }
                for i, tc in enumerate(calls)
            ]
            if out["content"] == "":
                out["content"] = None
        elif out["content"] is None:
            out["content"] = ""
        if weight is not None:
            out["weight"] = weight
        return out
    if role == "tool":
        return {"role": "tool", "tool_call_id": str(m.get("tool_call_id", "")), "content": content if isinstance(content, str) else ""}
    return {"role": role if role in ("system", "user") else "user", "content": content if isinstance(content, str) else ""}


def trl_message(m: dict[str, Any], call_names: dict[str, str]) -> dict[str, Any]:
    """One message in TRL's conversational tool format: arguments as a dict, tool results named."""
    role = m.get("role", "user")
    content = m.get("content") if isinstance(m.get("content"), str) else ""
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": content}
        calls = m.get("tool_calls") or []
        if calls:
            out["tool_calls"] = [
                {
                    "type": "function",
                    "function": {
                        "name": (tc.get("function") or {}).get("name", ""),
                        "arguments": _args_dict((tc.get("function") or {}).get("arguments")),
                    },
                }
                for tc in calls
            ]
            for tc in calls:
                call_names[str(tc.get("id", ""))] = (tc.get("function") or {}).get("name", "")
        return out
    if role == "tool":
        return {"role": "tool", "name": call_names.get(str(m.get("tool_call_id", "")), ""), "content": content}
    return {"role": role if role in ("system", "user") else "user", "content": content}


def _trl_messages(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    return [trl_message(m, names) for m in msgs]


def _hermes_text(m: dict[str, Any]) -> str:
    """An assistant message as plain text with Hermes-style ``<tool_call>`` blocks (verl's default tool format).

    Calls a text-mode model wrote as blocks (ids ``text_…``) are in the content already: writing them
    again would apply each edit twice when the text is scored.
    """
    from ..agent.models.textmode import TEXT_CALL_ID

    parts = [m.get("content") or ""]
    for tc in m.get("tool_calls") or []:
        if str(tc.get("id") or "").startswith(TEXT_CALL_ID):
            continue
        fn = tc.get("function") or {}
        parts.append(
            "<tool_call>\n" + json.dumps({"name": fn.get("name", ""), "arguments": _args_dict(fn.get("arguments"))}) + "\n</tool_call>"
        )
    return "\n".join(p for p in parts if p)


def _plain(msgs: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for m in msgs:
        role = m.get("role", "user")
        text = _hermes_text(m) if role == "assistant" else (m.get("content") if isinstance(m.get("content"), str) else "")
        out.append({"role": role, "content": text})
    return out


def _sharegpt(msgs: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """(system, conversations) in LLaMA-Factory's ShareGPT shape: human/gpt/function_call/observation."""
    system = "\n\n".join(m.get("content") or "" for m in msgs if m.get("role") == "system")
    conv: list[dict[str, str]] = []
    for m in msgs:
        role = m.get("role")
        if role == "system":
            continue
        if role == "assistant" and m.get("tool_calls"):
            calls = [
                {"name": (tc.get("function") or {}).get("name", ""), "arguments": _args_dict((tc.get("function") or {}).get("arguments"))}
                for tc in m["tool_calls"]
            ]
            conv.append({"from": "function_call", "value": json.dumps(calls[0] if len(calls) == 1 else calls)})
        elif role == "assistant":
            conv.append({"from": "gpt", "value": m.get("content") or ""})
        elif role == "tool":
            if conv and conv[-1]["from"] == "observation":  # several results of one call message go in one observation
                conv[-1]["value"] += "\n" + (m.get("content") or "")
            else:
                conv.append({"from": "observation", "value": m.get("content") or ""})
        else:
            conv.append({"from": "human", "value": m.get("content") or ""})
    return system, conv


# -- selection ----------------------------------------------------------------------------------


def _excluded(task: str, patterns: Iterable[str]) -> bool:
    return any(task == p or fnmatch.fnmatchcase(task, p) for p in patterns)


def _sessions(root: str | Path, opts: ExportOptions, res: ExportResult) -> Iterable[SessionRecord]:
    for d in iter_session_dirs(root):
        res.stats["sessions_read"] += 1
        rec = load_session(d)
        if not rec.turns:
            res.stats["skipped_empty"] += 1
            continue
        if _excluded(rec.task, opts.exclude_tasks):
            res.stats["skipped_excluded_task"] += 1
            continue
        if opts.timing_source is not None and any(
            c.evaluation.get("latency_us") is not None and c.evaluation.get("timing_source") != opts.timing_source for c in rec.candidates
        ):
            res.stats["skipped_timing_source"] += 1
            continue
        best = rec.best()
        if opts.verdict == "pass" and best is None:
            res.stats["skipped_no_pass"] += 1
            continue
        if opts.min_speedup is not None and (best is None or (best.evaluation.get("speedup") or 0.0) < opts.min_speedup):
            res.stats["skipped_below_min_speedup"] += 1
            continue
        res.stats["sessions_kept"] += 1
        res.tasks[rec.task] += 1
        res.models[rec.model] += 1
        res.strategies[rec.strategy] += 1
        res.verdicts.update(c.evaluation.get("verdict") or "unknown" for c in rec.candidates)
        yield rec


def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def _code_key(turn: Turn | None, completion: Any) -> Any:
    """What a row's result is: the kernel it produced (by hash) or, without one, the completion itself."""
    if turn is not None and turn.candidates:
        return turn.candidates[-1]
    return completion


# -- SFT ----------------------------------------------------------------------------------------


def _sft(rec: SessionRecord, fmt: str, opts: ExportOptions, res: ExportResult) -> list[tuple[str, dict[str, Any]]]:
    children = _sft_children(rec, fmt)
    return _sft_trajectory(rec, fmt, opts, res, quiet=bool(children)) + children


def _sft_children(rec: SessionRecord, fmt: str) -> list[tuple[str, dict[str, Any]]]:
    """One row per search child that passed and whose prompt the session recorded (model-driven searches).

    Children that failed or were rejected are no completion anywhere (OpenAI weight 0 would train nothing).
    """
    rows: list[tuple[str, dict[str, Any]]] = []
    for c in rec.candidates:
        if not (c.parents and c.prompt and c.message is not None and c.outcome == "pass"):
            continue
        called = sorted({str((tc.get("function") or {}).get("name")) for tc in c.message.get("tool_calls") or []})
        tools = tool_schemas(rec.tool_names or called, rec.meta.get("tools") or [])
        msgs = [*c.prompt, c.message]
        key = _digest(c.prompt, c.code_sha256)
        meta = {"session_id": rec.id, "task": rec.task, "model": rec.model, "candidate_id": c.candidate_id}
        if fmt == "openai":
            rows.append(
                (
                    key,
                    {
                        "messages": [openai_message(m, 1 if m is c.message else None) for m in msgs],
                        "tools": tools,
                        "parallel_tool_calls": False,
                    },
                )
            )
        elif fmt == "trl":
            conv = _trl_messages(msgs)
            rows.append((key, {"prompt": conv[:-1], "completion": conv[-1:], "tools": tools, **meta}))
        else:
            system, conv = _sharegpt(msgs)
            rows.append((key, {"conversations": conv, "system": system, "tools": json.dumps(tools), **meta}))
    return rows


def _sft_trajectory(rec: SessionRecord, fmt: str, opts: ExportOptions, res: ExportResult, quiet: bool) -> list[tuple[str, dict[str, Any]]]:
    msgs, owners = rec.trajectory, rec.trajectory_turns
    turns = {t.turn: t for t in rec.turns}
    owner = {i: turns[o] for i, o in enumerate(owners) if o is not None}  #: trajectory index → the turn of that assistant message
    trainable = [i for i, t in owner.items() if rec.trainable(t)]
    masked = len(owner) - len(trainable)
    res.stats["turns_masked"] += masked
    if not trainable:
        if not quiet:
            res.stats["skipped_nothing_trainable"] += 1
        return []
    if opts.last_turn_only:
        trainable = trainable[-1:]
    tools = tool_schemas(rec.tool_names, rec.meta.get("tools") or [])
    rows: list[tuple[str, dict[str, Any]]] = []
    if fmt == "openai":
        end = trainable[-1] + 1
        keep = set(trainable)
        out = [openai_message(m, (1 if i in keep else 0) if i in owner else None) for i, m in enumerate(msgs[:end])]
        key = _digest(msgs[:2], [_code_key(owner[i], msgs[i]) for i in trainable])
        rows.append((key, {"messages": out, "tools": tools, "parallel_tool_calls": False}))
        return rows
    for i in trainable:
        turn = owner[i]
        meta = {"session_id": rec.id, "task": rec.task, "model": rec.model, "turn": turn.turn}
        key = _digest(msgs[:i], _code_key(turn, msgs[i]))
        if fmt == "trl":
            conv = _trl_messages(msgs[: i + 1])
            rows.append((key, {"prompt": conv[:-1], "completion": conv[-1:], "tools": tools, **meta}))
        else:
            system, conv = _sharegpt(msgs[: i + 1])
            rows.append((key, {"conversations": conv, "system": system, "tools": json.dumps(tools), **meta}))
    return rows


# -- RL -----------------------------------------------------------------------------------------


def _rl(
    rec: SessionRecord, fmt: str, opts: ExportOptions, spec: RewardSpec, res: ExportResult, verify: Verify | None
) -> list[tuple[str, dict[str, Any]]]:
    """One row per scored turn (and per search child with a recorded answer), carrying the kernel in force at its
    prompt, so the row's completion re-scores to its reward (:func:`~.env.reward_fn`, :func:`~.env.compute_score`)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    path = rec.kernel_path or None
    scored = rec.rewards(spec, opts.gamma, verify)
    res.stats["skipped_unevaluated"] += sum(1 for t in rec.turns if t.completion is not None) - len(scored)
    steps = [(t.turn, t.prompt, t.completion or {}, ev or {}, r, g, rec.trainable(t), rec.kernel_at(t), path) for t, r, g, ev in scored]
    # a search's children: one single-step row each (the prompt rebuilt from the parent, the return is the reward)
    children = [c for c in rec.candidates if c.parents and c.message is not None and getattr(rec.turn(c.turn), "completion", None) is None]
    parents = [rec.kernel_by_id(c.parents[0]) for c in children]
    for c, kernel, child in zip(children, parents, rec.score([(c.message, k, None) for c, k in zip(children, parents)], spec, verify)):
        if child is None:
            res.stats["skipped_unevaluated"] += 1
            continue
        r, ev = child
        steps.append((c.turn or 0, rec.parent_prompt(c), c.message or {}, ev or {}, r, r.reward, r.outcome == "pass", kernel, None))
    for n, prompt, completion, ev, reward, ret, trainable, kernel, kpath in steps:
        res.outcomes[reward.outcome] += 1
        sha = ev.get("code_sha256")
        key = _digest(prompt, sha or completion, kernel)
        base = {
            "session_id": rec.id,
            "task": rec.task,
            "target": rec.target,
            "model": rec.model,
            "strategy": rec.strategy,
            "turn": n,
            "kernel": kernel,
            "kernel_path": kpath,
        }
        if fmt == "steps":
            rows.append(
                (
                    key,
                    {
                        **base,
                        "prompt": [openai_message(m) for m in prompt],
                        "completion": openai_message(completion),
                        "outcome": reward.outcome,
                        "verdict": ev.get("verdict"),
                        "components": reward.components,
                        "reward": reward.reward,
                        "return": ret,
                        "gamma": opts.gamma,
                        "reward_spec": spec.id,
                        "weight": 1 if trainable else 0,
                        "code_sha256": sha,
                        "speedup": ev.get("speedup"),
                        "latency_us": ev.get("latency_us"),
                        "timing_source": ev.get("timing_source"),
                    },
                )
            )
        elif fmt == "verl":
            where = {"task": rec.task, "target": rec.target, "kernel": kernel, "kernel_path": kpath}
            truth = json.dumps(where)
            rows.append(
                (
                    key,
                    {
                        "data_source": f"nkiagent/{rec.task}",
                        "prompt": _plain(prompt),
                        "ability": VERL_ABILITY,
                        "reward_model": {"style": "rule", "ground_truth": truth},
                        "extra_info": {
                            "split": "train",
                            "index": 0,
                            "session_id": rec.id,
                            "turn": n,
                            "target": rec.target,
                            "completion": _hermes_text(completion),
                            "outcome": reward.outcome,
                            "components": json.dumps(reward.components),
                            "reward": float(reward.reward),
                            "return": float(ret),
                            "reward_spec": spec.id,
                            "need_tools_kwargs": True,
                            # verl's multi-turn tools (nkiagent.training.verl_tool) start from the kernel in force
                            "tools_kwargs": {name: {"create_kwargs": where} for name in VERL_TOOLS},
                        },
                    },
                )
            )
        else:  # trl-grpo: the prompt column, plus columns that reach reward functions as keyword arguments
            rows.append(
                (
                    key,
                    {
                        "prompt": _trl_messages(prompt),
                        "completion": _trl_messages([completion]),
                        **base,
                        "reward": float(reward.reward),
                        "return": float(ret),
                        "outcome": reward.outcome,
                        "reward_spec": spec.id,
                    },
                )
            )
    return rows


# -- DPO ----------------------------------------------------------------------------------------


def _pairs(rec: SessionRecord) -> list[tuple[Candidate, Candidate]]:
    """Sibling candidates (same parents) when the session has a search tree, else consecutive edits of the loop."""
    with_parents = [c for c in rec.candidates if c.parents]
    if with_parents:
        groups: dict[tuple[str, ...], list[Candidate]] = {}
        for c in with_parents:
            groups.setdefault(tuple(sorted(c.parents)), []).append(c)
        return [(a, b) for g in groups.values() for i, a in enumerate(g) for b in g[i + 1 :]]
    edits = [c for c in rec.candidates if (t := rec.turn(c.turn)) is not None and c.code_sha256 in t.applied]
    return list(pairwise(edits))


def _preferred(a: Candidate, b: Candidate) -> tuple[Candidate, Candidate] | None:
    """(chosen, rejected): better outcome wins; among passes the faster by more than SPEED_MARGIN; ties give nothing."""
    (oa, sa), (ob, sb) = a.rank(), b.rank()
    if oa != ob:
        return (a, b) if oa > ob else (b, a)
    if oa == OUTCOMES.index("pass") and sa > 0 and sb > 0:
        if sa > sb * (1 + SPEED_MARGIN):
            return a, b
        if sb > sa * (1 + SPEED_MARGIN):
            return b, a
    return None


def _whole_kernel(rec: SessionRecord, c: Candidate) -> dict[str, Any] | None:
    """``c``'s kernel as a whole-file answer: what both sides of a loop pair become, so they answer the same prompt."""
    code = rec.kernel(c.code_sha256)
    if code is None:
        return None
    args = json.dumps({"path": rec.kernel_path or "kernel.py", "content": code})
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "write_file", "arguments": args}}],
    }


def _comparable(
    rec: SessionRecord, a: Candidate, b: Candidate
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any] | None]:
    """(prompt, answer of a, answer of b), both answers to that one prompt.

    Search siblings that saw the same prompt keep their own answers. Otherwise (edits k and k+1
    of an agent loop, or siblings whose recorded prompts differ) each side is rebuilt as the whole
    kernel it produced, under the earlier side's prompt: its own answer would quote a measurement,
    or edit a kernel, that prompt never showed.
    """
    if a.parents and (a.prompt or None) == (b.prompt or None) and a.message is not None and b.message is not None:
        return rec.parent_prompt(a), a.message, b.message
    earlier = a if (a.turn or 0) <= (b.turn or 0) else b
    turn = rec.turn(earlier.turn)
    prompt = rec.parent_prompt(earlier) if earlier.parents else turn.prompt if turn is not None else []
    return prompt, _whole_kernel(rec, a), _whole_kernel(rec, b)


def _dpo(rec: SessionRecord, fmt: str, res: ExportResult) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    tools = tool_schemas(rec.tool_names, rec.meta.get("tools") or [])
    for a, b in _pairs(rec):
        pick = _preferred(a, b)
        if pick is None:
            res.stats["pairs_tied"] += 1
            continue
        prompt, answer_a, answer_b = _comparable(rec, a, b)
        chosen, rejected = pick
        good, bad = (answer_a, answer_b) if chosen is a else (answer_b, answer_a)
        if not prompt or good is None or bad is None or good == bad:
            res.stats["pairs_incomplete"] += 1
            continue
        meta = {
            "session_id": rec.id,
            "task": rec.task,
            "chosen_outcome": chosen.outcome,
            "rejected_outcome": rejected.outcome,
            "chosen_speedup": chosen.evaluation.get("speedup"),
            "rejected_speedup": rejected.evaluation.get("speedup"),
        }
        key = _digest(prompt, chosen.code_sha256, rejected.code_sha256)
        if fmt == "openai":
            rows.append(
                (
                    key,
                    {
                        "input": {"messages": [openai_message(m) for m in prompt], "tools": tools, "parallel_tool_calls": False},
                        "preferred_output": [openai_message(good)],
                        "non_preferred_output": [openai_message(bad)],
                    },
                )
            )
        else:
            rows.append((key, {"prompt": _trl_messages(prompt), "chosen": _trl_messages([good]), "rejected": _trl_messages([bad]), **meta}))
    return rows


# -- driver -------------------------------------------------------------------------------------

_SCORERS: dict[str, Any] = {}
COMPACT_POINTER = "(The NKI cheat-sheet is left out of this prompt: call `nki_docs` with keywords to read the API and the hardware rules.)"


def _cheatsheet() -> str:
    from ..agent.assets import asset_dirs

    path = next((d / "nki_cheatsheet.md" for d in reversed(asset_dirs("prompts")) if (d / "nki_cheatsheet.md").is_file()), None)
    return path.read_text().strip() if path is not None else ""


def _compact(value: Any, cheatsheet: str) -> Any:
    """``value`` with the cheat-sheet in every system prompt (a system message, ShareGPT's ``system``) replaced by a pointer."""
    if isinstance(value, dict):
        out = {k: _compact(v, cheatsheet) for k, v in value.items()}
        for key in ("content", "system", "value"):
            text = out.get(key)
            if isinstance(text, str) and cheatsheet in text and (key != "content" or out.get("role") == "system"):
                out[key] = text.replace(cheatsheet, COMPACT_POINTER)
        return out
    if isinstance(value, list):
        return [_compact(v, cheatsheet) for v in value]
    return value


def _verifier(rec: SessionRecord, spec: RewardSpec, opts: ExportOptions) -> Verify | None:
    """Verification of a session's unevaluated proposals (one shared :class:`~.env.Scorer`: its cache spans sessions)."""
    if not opts.verify_missing:
        return None
    from .env import Scorer

    scorer = _SCORERS.setdefault(spec.id, Scorer(spec.id))

    def verify(codes: Sequence[str]) -> list[dict[str, Any]]:
        return scorer.evaluate([(code, rec.task, rec.target) for code in codes])

    return verify


def export_sessions(root: str | Path, kind: str, fmt: str, opts: ExportOptions | None = None) -> ExportResult:
    """Build the rows of one export from every session under ``root``."""
    opts = opts or ExportOptions()
    if kind not in FORMATS:
        raise ValueError(f"unknown export kind {kind!r}; choose from {', '.join(KINDS)}")
    if fmt not in FORMATS[kind]:
        raise ValueError(f"{kind} exports come as {', '.join(FORMATS[kind])}, not {fmt!r}")
    if opts.verdict not in ("any", "pass"):
        raise ValueError(f"verdict filter must be 'pass' or 'any', not {opts.verdict!r}")
    spec = get_spec(opts.spec)
    res = ExportResult(kind, fmt, [], spec, opts)
    seen: set[str] = set()
    build: Callable[[SessionRecord], list[tuple[str, dict[str, Any]]]] = {
        "sft": lambda r: _sft(r, fmt, opts, res),
        "rl": lambda r: _rl(r, fmt, opts, spec, res, _verifier(r, spec, opts)),
        "dpo": lambda r: _dpo(r, fmt, res),
    }[kind]
    cheatsheet = _cheatsheet() if opts.compact_system else None
    for rec in _sessions(root, opts, res):
        scrubber = Scrubber(rec.workspace_roots()) if opts.scrub else None
        for key, row in build(rec):
            if opts.dedup and key in seen:
                res.stats["duplicates"] += 1
                continue
            seen.add(key)
            if cheatsheet:
                row = _compact(row, cheatsheet)
            res.rows.append(scrubber.row(row) if scrubber else row)
    if kind == "rl" and fmt == "verl":
        for i, row in enumerate(res.rows):
            row["extra_info"]["index"] = i
    res.stats["rows"] = len(res.rows)
    return res


#: Explicit Arrow types of the scalar columns the exports write: a column is typed the same in every file,
#: whatever its first rows hold (a ``speedup`` that is ``None`` in the first rows is still a float column).
FIELD_TYPES: dict[str, Any] = {
    **dict.fromkeys(("reward", "return", "gamma", "speedup", "latency_us", "chosen_speedup", "rejected_speedup"), "float64"),
    **dict.fromkeys(("turn", "weight"), "int64"),
    **dict.fromkeys(
        (
            "session_id",
            "task",
            "target",
            "model",
            "strategy",
            "kernel",
            "kernel_path",
            "outcome",
            "verdict",
            "reward_spec",
            "code_sha256",
            "timing_source",
            "data_source",
            "ability",
            "system",
            "candidate_id",
            "chosen_outcome",
            "rejected_outcome",
        ),
        "string",
    ),
    "parallel_tool_calls": "bool",
}


def arrow_schema(rows: list[dict[str, Any]]) -> Any:
    """The Arrow schema of ``rows``: every column any row has (not only the first row's), nested columns inferred over
    all rows, and :data:`FIELD_TYPES` for the scalar ones."""
    import pyarrow as pa  # type: ignore[import-untyped]

    inferred = pa.array(rows).type if rows else pa.struct([])
    return pa.schema([pa.field(f.name, pa.type_for_alias(FIELD_TYPES[f.name]) if f.name in FIELD_TYPES else f.type) for f in inferred])


def write_rows(rows: list[dict[str, Any]], path: str | Path, schema: Any = None) -> Path:
    """JSONL (one row per line) or, for a ``.parquet`` path, a Parquet file with ``schema`` (default :func:`arrow_schema`;
    the splits of one dataset pass the schema of all their rows, so every file has the same one).

    JSON leaves U+2028, U+2029 and U+0085 raw, but many line readers split on them: they are
    escaped, so one row stays one line.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".parquet":
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        pq.write_table(pa.Table.from_pylist(rows, schema=schema or arrow_schema(rows)), p)
        return p
    with open(p, "w", encoding="utf-8") as fh:
        for row in rows:
            line = json.dumps(row, ensure_ascii=False)
            if "\u2028" in line or "\u2029" in line or "\x85" in line:
                line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")
            fh.write(line)
            fh.write("\n")
    return p


# -- dataset folders: splits, lengths, card ------------------------------------------------------

#: Characters per token assumed when no tokenizer is given: BPE tokenizers read Python and English at ~3–4.
CHARS_PER_TOKEN = 3.2
#: Columns that are not model input (everything else — prompts, completions, tools — is text the model reads).
META_COLUMNS = frozenset({*FIELD_TYPES, "components", "reward_model", "extra_info"}) - {"system"}


def row_text(row: dict[str, Any]) -> str:
    """The text of a row a trainer tokenizes: its message columns (and tools), without the metadata columns."""
    return json.dumps({k: v for k, v in row.items() if k not in META_COLUMNS}, ensure_ascii=False)


def length_stats(rows: list[dict[str, Any]], count_tokens: Callable[[str], int] | None = None) -> dict[str, Any]:
    """Token lengths of the rows (min, median, p95, max) and the ``max_length`` that keeps every row whole.

    ``count_tokens`` is a real tokenizer's count; without one the lengths are estimated at
    :data:`CHARS_PER_TOKEN` characters per token and the card says so.
    """
    count = count_tokens or (lambda text: int(len(text) / CHARS_PER_TOKEN) + 1)
    lengths = sorted(count(row_text(r)) for r in rows)
    if not lengths:
        return {"rows": 0, "estimated": count_tokens is None}
    pick = lambda q: lengths[min(len(lengths) - 1, int(q * (len(lengths) - 1) + 0.5))]
    longest = lengths[-1]
    return {
        "rows": len(lengths),
        "estimated": count_tokens is None,
        "min": lengths[0],
        "median": pick(0.5),
        "p95": pick(0.95),
        "max": longest,
        "recommended_max_length": 1024 * -(-longest // 1024),
        "over_1024": sum(n > 1024 for n in lengths),
    }


def _group(row: dict[str, Any]) -> str:
    """What keeps rows together in one split: their session (rows of one session are near-duplicates of each other)."""
    sid = row.get("session_id") or (row.get("extra_info") or {}).get("session_id")
    if sid:
        return str(sid)
    msgs = row.get("messages") or (row.get("input") or {}).get("messages") or []
    return _digest(msgs[:2])


def split_rows(rows: list[dict[str, Any]], validation: float) -> dict[str, list[dict[str, Any]]]:
    """``{"train": …, "validation": …}`` by session (a stable hash, so re-exports keep sessions where they were).

    With at least two sessions and ``validation`` > 0 the validation split holds at least one; verl
    rows get their ``extra_info.split`` set to match.
    """
    if not 0.0 <= validation < 1.0:
        raise ValueError(f"the validation fraction must be in [0, 1), got {validation}")
    groups = sorted({_group(r) for r in rows}, key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    n_val = 0 if validation == 0 or len(groups) < 2 else max(1, round(validation * len(groups)))
    held = set(groups[:n_val])
    out: dict[str, list[dict[str, Any]]] = {"train": [], "validation": []}
    for r in rows:
        split = "validation" if _group(r) in held else "train"
        if isinstance(r.get("extra_info"), dict) and "split" in r["extra_info"]:
            r = {**r, "extra_info": {**r["extra_info"], "split": split}}
        out[split].append(r)
    return out


def _table(counter: Counter[str], head: str) -> str:
    if not counter:
        return f"| {head} | count |\n|---|---|\n| (none) | 0 |\n"
    return f"| {head} | count |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in counter.most_common())


def _lengths_section(lengths: dict[str, Any] | None) -> str:
    if not lengths or not lengths.get("rows"):
        return ""
    how = (
        f"estimated at {CHARS_PER_TOKEN} characters per token (pass `--tokenizer` for exact counts)"
        if lengths["estimated"]
        else "counted with the tokenizer given to the export"
    )
    return (
        f"## Lengths\n\nTokens per row, {how}: min {lengths['min']}, median {lengths['median']}, p95 {lengths['p95']}, "
        f"max {lengths['max']}.\n\n**Recommended `max_length`: {lengths['recommended_max_length']}** (every row whole; "
        f"{lengths['over_1024']} of {lengths['rows']} rows are longer than 1024 tokens, TRL's default, and would be truncated — "
        "an SFT row cut before its completion trains on nothing). `--compact-system` drops the NKI cheat-sheet from the "
        "system prompt (~17k characters).\n\n"
    )


def dataset_card(
    res: ExportResult, title: str = "nkiagent sessions", lengths: dict[str, Any] | None = None, splits: dict[str, int] | None = None
) -> str:
    """A Hugging Face dataset card (README.md) whose YAML header makes ``load_dataset(DIR)`` find the parquet files of each split."""
    from .. import __version__

    o = res.options
    splits = splits or {"train": len(res.rows)}
    names = [k for k in ("train", "validation") if splits.get(k)]
    configs = "".join(f"  - split: {k}\n    path: data/{k}-*.parquet\n" for k in names)
    counts = "\n".join(f"- {k.replace('_', ' ')}: {v}" for k, v in sorted(res.stats.items()))
    split_line = ", ".join(f"{k} {splits.get(k, 0)} rows" for k in ("train", "validation"))
    return (
        f"---\nconfigs:\n- config_name: default\n  data_files:\n{configs}"
        "tags:\n- nki\n- aws-trainium\n- kernels\n- nkiagent\n---\n\n"
        f"# {title}: {res.kind} ({res.format})\n\n"
        f"Exported by nkiagent {__version__} from agent sessions; every latency is an `emulator-estimate` of nkiagent's cost model "
        "unless a row says otherwise, and only kernels the verifier passed earn a positive reward or SFT weight.\n\n"
        f"## Counts\n\n{counts}\n\n## Splits\n\n{split_line} (by session: no session is in both).\n\n"
        f"{_lengths_section(lengths)}"
        f"## Reward\n\n`{res.spec.id}`: {res.spec.description}. Returns use γ = {o.gamma}; a cheating turn's return is capped at its "
        "own reward; a turn that leaves the kernel unchanged earns 0 and a broken tool call scores as a compile failure.\n\n"
        f"## Filters\n\nverdict: {o.verdict}; min speedup: {o.min_speedup}; timing source: {o.timing_source or 'any'}; "
        f"last turn only: {o.last_turn_only}; "
        f"excluded tasks: {', '.join(o.exclude_tasks) or 'none'}; dedup: {o.dedup}; scrubbed: {o.scrub}; compact system prompt: {o.compact_system}\n\n"
        f"## Tasks\n\n{_table(res.tasks, 'task')}\n## Models\n\n{_table(res.models, 'model')}\n"
        f"## Strategies\n\n{_table(res.strategies, 'strategy')}\n## Candidate verdicts\n\n{_table(res.verdicts, 'verdict')}\n"
        + (f"## Turn outcomes\n\n{_table(res.outcomes, 'outcome')}\n" if res.outcomes else "")
        + '## Loading\n\n```python\nfrom datasets import load_dataset\nds = load_dataset("path/to/this/folder")  # DatasetDict: '
        + ", ".join(names)
        + "\n```\n"
    )


def write_hf(
    res: ExportResult,
    directory: str | Path,
    validation: float = 0.1,
    count_tokens: Callable[[str], int] | None = None,
    title: str = "nkiagent sessions",
) -> Path:
    """A Hugging Face ``datasets`` folder: ``data/{train,validation}-00000-of-00001.parquet`` (split by session, explicit
    schema) plus a dataset card with the token lengths and a recommended ``max_length``."""
    d = Path(directory)
    (d / "data").mkdir(parents=True, exist_ok=True)
    for old in (d / "data").glob("*-*.parquet"):
        old.unlink()
    splits = split_rows(res.rows, validation)
    schema = arrow_schema([r for rows in splits.values() for r in rows])
    for name, rows in splits.items():
        if rows:
            write_rows(rows, d / "data" / f"{name}-00000-of-00001.parquet", schema)
    card = dataset_card(res, title, length_stats(res.rows, count_tokens), {k: len(v) for k, v in splits.items()})
    (d / "README.md").write_text(card, encoding="utf-8")
    return d
