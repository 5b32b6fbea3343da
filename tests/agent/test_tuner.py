"""builtin/tuner: the tunable parser, the search it conducts through tool calls, and the demo kernel.

The tuner is driven by a tiny loop standing in for the agent graph: its tool calls go to the
real handlers of ``nkiagent.agent.tools`` (numbered ``read_file``, proposing ``edit_file``,
``evaluate`` with its JSON line, ``submit``) over a temporary copy of the kernel, and every
accepted edit is written to disk, as the graph does in ``--approve auto``. The end-to-end
tests run the real verifier (one seed); the others evaluate through a latency table, so the
search logic (reverts, rejected edits, budgets, resyncs) is checked in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nkiagent.agent.context import condense
from nkiagent.agent.demo_kernels import demo_kernel_path
from nkiagent.agent.tools import AgentContext, ToolRegistry, compact_evaluation, load_tools
from nkiagent.agent.tuner import TunerModel, parse_evaluation, scan_tunables
from nkiagent.agent.types import Message, Model, ModelTurn
from nkiagent.tasks import get_task
from nkiagent.verify.gate import check_source

KERNEL = "kernels/vector_add.py"
DEMO_SOURCE = demo_kernel_path("vector_add").read_text()  # type: ignore[union-attr]


class _Workspace:
    """The part of the agent's workspace the tool handlers use: paths confined to a root."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        real = (self.root / path).resolve()
        if not real.is_relative_to(self.root.resolve()):
            raise PermissionError(f"{path} is outside the workspace")
        return real

    def read(self, path: str | os.PathLike[str]) -> str:
        return self.resolve(path).read_text()

    def exists(self, path: str | os.PathLike[str]) -> bool:
        return self.resolve(path).exists()

    def list(self, path: str | os.PathLike[str] = ".") -> Iterator[str]:
        base = self.resolve(path)
        return (str(p.relative_to(self.root)) for p in sorted(base.rglob("*")) if p.is_file())

    def write(self, path: str, text: str) -> None:
        self.resolve(path).write_text(text)


@dataclass
class _Run:
    """What a driven conversation produced."""

    messages: list[Message]
    edits: list[tuple[str, str]] = field(default_factory=list)  #: (file before, file after) of every applied edit
    rejected: list[str] = field(default_factory=list)  #: the file each rejected edit would have produced
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    submitted: dict[str, Any] | None = None

    def calls(self) -> list[str]:
        return [tc["function"]["name"] for m in self.messages if m.get("role") == "assistant" for tc in m.get("tool_calls", [])]


def _drive(
    model: Model,
    ctx: Any,
    *,
    auto_evaluate: bool = False,
    accept: Callable[[str], bool] = lambda new: True,
    condense_to: int | None = None,
    max_turns: int = 60,
) -> _Run:
    """Run the conversation like the graph: one model turn, its tool calls, the results appended, until submit.

    ``condense_to`` shortens old tool results before each model turn, as the graph does for long sessions.
    """
    registry = ToolRegistry(load_tools())
    run = _Run(
        [
            {"role": "system", "content": "You write NKI kernels."},
            {"role": "user", "content": f"Task: vector_add (level 1)\n\nkernel_path: {KERNEL}\n\nMake it faster."},
        ]
    )
    original = ctx.evaluate

    def counted(path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        ev = original(path, *args, **kwargs)
        run.evaluations.append(ev)
        return ev

    ctx.evaluate = counted
    for _ in range(max_turns):
        turn = model.complete(condense(run.messages, condense_to) if condense_to else run.messages, registry.schemas())
        run.messages.append(turn.to_message())
        if not turn.tool_calls:
            return run
        for call in turn.tool_calls:
            res = registry.call(ctx, call.name, call.arguments)
            content = res.content
            if res.edit is not None:
                if accept(res.edit["new"]):
                    ctx.workspace.write(res.edit["path"], res.edit["new"])
                    run.edits.append((res.edit["old"], res.edit["new"]))
                    content = f"Your edit to {res.edit['path']} was applied."
                    if auto_evaluate:  # what the graph does after an applied edit to the kernel
                        content += f"\n\nEvaluation of {res.edit['path']}:\n" + compact_evaluation(ctx.evaluate(res.edit["path"]))
                else:
                    run.rejected.append(res.edit["new"])
                    content = f"The reviewer rejected your edit to {res.edit['path']}."
            run.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            if res.submitted:
                run.submitted = res.data
                run.evaluations.pop()  # submit's own full verification: the session's result, not one of the model's evaluations
                return run
    raise AssertionError(f"no submit after {max_turns} turns: {run.calls()}")


def _workspace(root: Path, source: str) -> _Workspace:
    (root / "kernels").mkdir(parents=True)
    ws = _Workspace(root)
    ws.write(KERNEL, source)
    return ws


def _config(source: str) -> dict[str, Any]:
    return {t.name: t.value for t in scan_tunables(source)[0]}


def _assert_one_tunable_per_edit(edits: list[tuple[str, str]]) -> None:
    for before, after in edits:
        old_lines, new_lines = before.splitlines(), after.splitlines()
        assert len(old_lines) == len(new_lines)
        changed = [i + 1 for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
        assert len(changed) == 1, changed
        tunable_lines = {t.line for t in scan_tunables(before)[0]}
        assert changed[0] in tunable_lines
        a, b = _config(before), _config(after)
        assert sum(a[k] != b[k] for k in a) == 1 and a.keys() == b.keys()


# -- the parser ------------------------------------------------------------------------------------
def test_scan_tunables_syntax() -> None:
    source = """import nki
TILE_N = 512  # nkiagent: tune [128, 256, 512, 1024]
BLOCK = 256  # nkiagent: tune range(128, 513, 128)  free text after the choices
FUSE = False  # nkiagent: tune
ENGINE = "vector"  # nkiagent: tune ["vector", "gpsimd"]
SCALE: float = 0.5  # nkiagent: tune (0.25, 0.5, 1.0)
EPS = 1e-6  #: not tunable
BAD = 3  # nkiagent: tune [1, 'x']
def f():
    INNER = 2  # nkiagent: tune [1, 2]
    return INNER
"""
    tunables, problems = scan_tunables(source)
    assert [(t.name, t.value, t.choices) for t in tunables] == [
        ("TILE_N", 512, (128, 256, 512, 1024)),
        ("BLOCK", 256, (128, 256, 384, 512)),
        ("FUSE", False, (False, True)),
        ("ENGINE", "vector", ("vector", "gpsimd")),
        ("SCALE", 0.5, (0.25, 0.5, 1.0)),
    ]
    assert [p.split(":")[0] for p in problems] == ["line 8", "line 10"]
    tile, block, fuse, engine, _ = tunables
    assert tile.is_size and block.is_size and not fuse.is_size and not engine.is_size
    assert tile.line_with(1024) == "TILE_N = 1024  # nkiagent: tune [128, 256, 512, 1024]"
    assert engine.line_with("gpsimd") == 'ENGINE = "gpsimd"  # nkiagent: tune ["vector", "gpsimd"]'
    assert (tile.neighbour(512, 1), tile.neighbour(512, -1), tile.neighbour(1024, 1)) == (1024, 256, None)
    assert (tile.neighbour(300, 1), tile.neighbour(300, -1)) == (512, 256)  # a value off the list
    assert fuse.neighbour(False, 1) is True
    assert scan_tunables("def broken(:\n")[1][0].startswith("cannot parse")


def test_parse_evaluation_forms() -> None:
    as_json = {"verdict": "pass", "latency_us": 74.8, "speedup": 1.42, "profile": {"bottleneck": "memory-bound (DMA)"}}
    assert parse_evaluation("verdict: pass …\n" + json.dumps(as_json)) == as_json
    compact = "verdict: fail (task t, target trn2)\n- wrong answer (seed 0)\nlatency: 12.5 µs (emulator-estimate, m)"
    parsed = parse_evaluation(compact)
    assert (
        parsed is not None
        and parsed["verdict"] == "fail"
        and parsed["reasons"] == ["wrong answer (seed 0)"]
        and parsed["latency_us"] == 12.5
    )
    assert parse_evaluation("proposed an edit to k.py") is None


def test_demo_kernels_and_baselines_declare_tunables() -> None:
    for task in ("vector_add", "softmax"):
        path = demo_kernel_path(task)
        assert path is not None
        tunables, problems = scan_tunables(path.read_text())
        assert tunables and not problems and not check_source(path.read_text(), str(path))
    assert demo_kernel_path("no_such_task") is None
    for task in ("vector_add", "silu", "gelu"):  # the baselines' tile width is tunable, its default unchanged
        tunables, problems = scan_tunables(get_task(task).baseline_path().read_text())  # type: ignore[union-attr]
        assert [(t.name, t.value, t.choices) for t in tunables] == [("TILE_F", 512, (128, 256, 512))] and not problems


# -- the search, against a latency table -----------------------------------------------------------
class _TableContext:
    """A ToolContext whose evaluations come from a table of configurations (code hashes are real)."""

    def __init__(self, ws: _Workspace, table: Callable[[dict[str, Any]], tuple[str, float | None]], bottleneck: str) -> None:
        self.workspace, self.table, self.bottleneck = ws, table, bottleneck
        self.proposed: dict[str, str] = {}

    text = AgentContext.text

    def evaluate(self, path: str, seeds: int | None = None, hidden: bool = True) -> dict[str, Any]:
        source = self.workspace.read(path)
        verdict, latency = self.table(_config(source))
        return {
            "verdict": verdict,
            "task": "vector_add",
            "target": "trn2",
            "reasons": [] if verdict == "pass" else ["wrong answer"],
            "latency_us": latency,
            "timing_source": "emulator-estimate",
            "model_version": "test",
            "baseline_latency_us": 100.0,
            "speedup": round(100.0 / latency, 4) if verdict == "pass" and latency else None,
            "sol_latency_us": None,
            "fraction_of_peak": None,
            "profile": {"bottleneck": self.bottleneck},
            "code_sha256": hashlib.sha256(source.encode()).hexdigest(),
        }


def _demo_table(cfg: dict[str, Any]) -> tuple[str, float | None]:
    """Wider tiles are faster up to whole rows; more rows per partition only help narrow tiles; 1024 × 4 fails."""
    if cfg["TILE_COLS"] == 1024 and cfg["ROWS_PER_PARTITION"] == 4:
        return "fail", None
    base = {128: 200.0, 256: 185.0, 512: 106.0, 1024: 75.0}[cfg["TILE_COLS"]]
    rows = cfg["ROWS_PER_PARTITION"] - 1
    return "pass", base + (2.0 * rows if cfg["TILE_COLS"] == 1024 else -rows)


def test_search_keeps_improvements_reverts_the_rest(tmp_path: Path) -> None:
    ctx = _TableContext(_workspace(tmp_path, DEMO_SOURCE), _demo_table, "memory-bound (DMA)")
    run = _drive(TunerModel(max_evals=20), ctx)
    calls = run.calls()
    assert calls[:2] == ["read_file", "evaluate"] and calls[-1] == "submit" and calls.count("read_file") == 1
    _assert_one_tunable_per_edit(run.edits)
    # memory-bound: TILE_COLS grows first and keeps growing while it helps
    tried = [_config(after) for _, after in run.edits]
    assert [c["TILE_COLS"] for c in tried[:3]] == [256, 512, 1024]
    assert _config(ctx.workspace.read(KERNEL)) == {"TILE_COLS": 1024, "ROWS_PER_PARTITION": 1}
    assert all(ev["verdict"] == "pass" for ev in run.evaluations[:4])
    assert run.submitted is not None and "TILE_COLS = 1024" in run.submitted["summary"] and "2.67× faster" in run.submitted["summary"]
    # every configuration evaluated once (a revert goes back to a known configuration)
    hashes = [ev["code_sha256"] for ev in run.evaluations]
    assert len(hashes) == len(set(hashes))
    texts = [m["content"] for m in run.messages if m["role"] == "assistant"]
    assert texts[2].startswith("Start (TILE_COLS = 128, ROWS_PER_PARTITION = 1): pass, 200.000 µs.")
    assert "Trying TILE_COLS = 256 (memory-bound: bigger DMAs)" in texts[2]


def test_compute_bound_tries_other_knobs_first(tmp_path: Path) -> None:
    source = "TILE_F = 512  # nkiagent: tune [256, 512, 1024]\nFUSED = False  # nkiagent: tune\n"
    ctx = _TableContext(
        _workspace(tmp_path, source), lambda c: ("pass", 50.0 - 10 * c["FUSED"] - c["TILE_F"] / 1024), "compute-bound (VectorE)"
    )
    run = _drive(TunerModel(), ctx)
    first_edit = next(
        m
        for m in run.messages
        if m["role"] == "assistant" and m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "edit_file"
    )
    assert "Trying FUSED = True (compute-bound on VectorE: a different code path)" in first_edit["content"]
    assert _config(ctx.workspace.read(KERNEL)) == {"TILE_F": 1024, "FUSED": True}


def test_budget_rejected_edits_and_graph_feedback(tmp_path: Path) -> None:
    # a budget of 3 configurations: start, 256, 512 — then submit the best, which is already in the file
    ctx = _TableContext(_workspace(tmp_path, DEMO_SOURCE), _demo_table, "memory-bound (DMA)")
    run = _drive(TunerModel(max_evals=3), ctx)
    assert len(run.evaluations) == 3 and run.calls()[-1] == "submit"
    assert "budget of 3 evaluations is spent" in run.submitted["summary"]  # type: ignore[index]
    assert _config(ctx.workspace.read(KERNEL))["TILE_COLS"] == 512

    # the reviewer rejects every TILE_COLS = 512 and the loop evaluates applied edits itself (compact text, no JSON):
    # the tuner never calls evaluate after an edit, never proposes a rejected edit twice, and still finishes
    ctx = _TableContext(_workspace(tmp_path / "reviewed", DEMO_SOURCE), _demo_table, "memory-bound (DMA)")
    run = _drive(TunerModel(), ctx, auto_evaluate=True, accept=lambda new: "TILE_COLS = 512 " not in new)
    calls = run.calls()
    assert calls.count("evaluate") == 1 and calls[-1] == "submit"
    rejected = [tuple(_config(text).values()) for text in run.rejected]
    assert rejected == [(512, 1), (512, 4)]  # each rejected configuration proposed once
    assert _config(ctx.workspace.read(KERNEL)) == {"TILE_COLS": 256, "ROWS_PER_PARTITION": 4}


def test_resyncs_when_an_edit_did_not_land(tmp_path: Path) -> None:
    # the loop says "applied" but writes nothing: the evaluation's code hash gives it away, the tuner re-reads
    ctx = _TableContext(_workspace(tmp_path, DEMO_SOURCE), _demo_table, "memory-bound (DMA)")
    model = TunerModel(max_evals=4)
    registry = ToolRegistry(load_tools())
    messages: list[Message] = [{"role": "user", "content": f"kernel_path: {KERNEL}"}]
    names = []
    for _ in range(6):
        turn = model.complete(messages, registry.schemas())
        messages.append(turn.to_message())
        call = turn.tool_calls[0]
        names.append(call.name)
        res = registry.call(ctx, call.name, call.arguments)
        content = f"Your edit to {KERNEL} was applied." if res.edit is not None and len(names) == 3 else res.content
        if res.edit is not None and len(names) != 3:
            ctx.workspace.write(KERNEL, res.edit["new"])
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    assert names[:6] == ["read_file", "evaluate", "edit_file", "evaluate", "read_file", "edit_file"]
    assert json.loads(messages[-2]["tool_calls"][0]["function"]["arguments"])["new"].startswith("ROWS_PER_PARTITION = 2")


class _FreshEachTurn:
    """A new tuner for every turn, as after resuming a session: all it knows is the conversation."""

    name = "builtin/tuner"

    def complete(self, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None = None) -> ModelTurn:
        return TunerModel().complete(messages, tools, on_token)


def test_condensed_history_gives_the_same_search(tmp_path: Path) -> None:
    plain = _drive(TunerModel(), _TableContext(_workspace(tmp_path / "plain", DEMO_SOURCE), _demo_table, "memory-bound (DMA)"))
    # the loop shortens old tool results (the kernel text first): the same tuner remembers what it saw
    condensed = _drive(
        TunerModel(), _TableContext(_workspace(tmp_path / "condensed", DEMO_SOURCE), _demo_table, "memory-bound (DMA)"), condense_to=3000
    )
    assert condensed.calls() == plain.calls() and condensed.submitted == plain.submitted
    # a fresh tuner re-reads the file when the last read was shortened, rebuilds the earlier states from
    # its edits, and evaluates nothing twice
    fresh = _drive(
        _FreshEachTurn(), _TableContext(_workspace(tmp_path / "fresh", DEMO_SOURCE), _demo_table, "memory-bound (DMA)"), condense_to=3000
    )
    assert fresh.submitted == plain.submitted and len(fresh.evaluations) == len(plain.evaluations)
    assert [c for c in fresh.calls() if c != "read_file"] == [c for c in plain.calls() if c != "read_file"]


def test_seed_changes_the_order_of_equal_priority_knobs(tmp_path: Path) -> None:
    runs = iter(range(100))

    def first_try(seed: int) -> str:
        ctx = _TableContext(_workspace(tmp_path / f"run{next(runs)}", DEMO_SOURCE), _demo_table, "memory-bound (DMA)")
        run = _drive(TunerModel(max_evals=2, seed=seed), ctx)
        return json.loads(run.messages[6]["tool_calls"][0]["function"]["arguments"])["new"].split(" =")[0]

    firsts = [first_try(seed) for seed in range(6)]
    assert firsts[0] == "TILE_COLS" and set(firsts) == {"TILE_COLS", "ROWS_PER_PARTITION"}
    assert first_try(3) == firsts[3]  # deterministic for a seed


def test_needs_kernel_path_and_tools() -> None:
    turn = TunerModel().complete([{"role": "user", "content": "make it fast"}], ToolRegistry(load_tools()).schemas())
    assert not turn.tool_calls and "kernel_path" in turn.content
    turn = TunerModel().complete([{"role": "user", "content": f"kernel_path: {KERNEL}"}], [])
    assert not turn.tool_calls and "missing" in turn.content


# -- end to end with the real verifier ---------------------------------------------------------------
def test_tunes_the_demo_kernel_past_the_baseline(tmp_path: Path) -> None:
    task = get_task("vector_add")
    ctx = AgentContext(_workspace(tmp_path, DEMO_SOURCE), task, "trn2", verify_seeds=1)
    run = _drive(TunerModel(max_evals=8), ctx)
    assert run.calls()[-1] == "submit" and run.submitted is not None
    _assert_one_tunable_per_edit(run.edits)
    final_sha = hashlib.sha256(ctx.workspace.read(KERNEL).encode()).hexdigest()
    final = next(ev for ev in run.evaluations if ev["code_sha256"] == final_sha)
    start = run.evaluations[0]
    assert start["verdict"] == final["verdict"] == "pass"
    assert final["latency_us"] < start["latency_us"] and final["speedup"] > 1.0
    assert f"{final['speedup']:.2f}× the task's baseline" in run.submitted["summary"]


def test_no_tunables_submits_after_one_evaluation(tmp_path: Path) -> None:
    plain = "\n".join(line.split("  # nkiagent")[0] for line in DEMO_SOURCE.splitlines()) + "\n"
    ctx = AgentContext(_workspace(tmp_path, plain), get_task("vector_add"), "trn2", verify_seeds=1)
    run = _drive(TunerModel(), ctx)
    assert run.calls() == ["read_file", "evaluate", "submit"] and len(run.evaluations) == 1
    assert run.submitted is not None and run.submitted["summary"].startswith("No `# nkiagent: tune` constants")
    assert not run.edits


def test_the_profile_the_model_reads_names_lines_of_its_own_file(tmp_path: Path) -> None:
    """Hot lines, the critical path and idle waits quote ``kernels/vector_add.py:N``, never the worker's scratch copy."""
    from nkiagent.agent.tools import profile

    ctx = AgentContext(_workspace(tmp_path, DEMO_SOURCE), get_task("vector_add"), "trn2", verify_seeds=1)
    shown = profile(ctx, KERNEL)
    assert shown.ok, shown.content
    prof = shown.data["evaluation"]["profile"]
    places = [h["location"] for h in prof["hot_lines"]] + [s["location"] for s in prof["critical_path"]]
    assert places and all(p.startswith(f"{KERNEL}:") for p in places), places
    assert f"{KERNEL}:" in shown.content and "nkiagent-eval" not in shown.content and str(tmp_path) not in shown.content
