"""The Ray executor gives the local pool's results for a fixed seed; the CLI runs a search and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nkiagent.cli import main
from nkiagent.search import SearchConfig, run_search
from nkiagent.search.evaluate import EvalJob, LocalExecutor, RayExecutor
from nkiagent.sessions.store import read_events

from .test_search import DEMO, TASK


def _lineage(d: Path) -> list[tuple]:
    return [
        (e["candidate_id"], e["code_sha256"], tuple(e["parents"]), e["island"], e["verdict"], e["speedup"])
        for e in read_events(d / "events.jsonl")
        if e["type"] == "candidate"
    ]


def test_ray_executor_matches_the_local_pool_for_a_fixed_seed(tmp_path: Path) -> None:
    import ray  # the `ray` extra; CI installs it (.ci/run)

    cfg = {
        "task": TASK,
        "kernel": DEMO,
        "strategy": "evolve",
        "max_candidates": 3,
        "workers": 2,
        "hidden": False,
        "cascade": True,
        "seed": 7,
    }
    local = run_search(SearchConfig(**cfg), tmp_path / "local")  # type: ignore[arg-type]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_search(SearchConfig(**{**cfg, "executor": "ray"}), tmp_path / "ray")  # type: ignore[arg-type]
        ex = RayExecutor()
        assert ex.workers == 2
        bad = ex.map([EvalJob("import os\n", TASK, hidden=False)])[0]
        ex.close()  # a Ray it did not start is left running
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert _lineage(local.session.dir) == _lineage(remote.session.dir) and len(_lineage(local.session.dir)) == 3
    assert bad["verdict"] in ("fail", "rejected") and bad["stage"] in ("static", "small")


def test_cascade_stops_broken_kernels_early_and_says_where() -> None:
    ex = LocalExecutor(1)
    (syntax,) = ex.map([EvalJob("def kernel(:\n", TASK, hidden=False)])
    assert syntax["verdict"] == "fail" and syntax["stage"] == "static"
    wrong = Path(DEMO).read_text().replace("op=nl.add", "op=nl.subtract")
    (res,) = ex.map([EvalJob(wrong, TASK, hidden=False)])
    assert res["verdict"] == "fail" and res["stage"] == "small"
    assert res["reasons"][0].startswith("wrong answer") and res["reasons"][0].endswith("[small-shape stage {'N': 256, 'D': 512}]")


def test_cli_search_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "sessions"
    rc = main(
        [
            "search",
            "--task",
            TASK,
            "--kernel",
            DEMO,
            "--strategy",
            "beam",
            "--n",
            "3",
            "--workers",
            "2",
            "--no-cascade",
            "--sessions-dir",
            str(sessions),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["candidates"] == 3 and out["stop_reason"] == "max candidates (3) evaluated"
    assert out["best"]["timing_source"] == "emulator-estimate" and Path(out["best"]["kernel"]).is_file()
    rc = main(["search", "--resume", out["session_id"], "--n", "4", "--sessions-dir", str(sessions)])
    text = capsys.readouterr().out
    assert rc == 0 and "stopped: max candidates (4) evaluated; 4 candidates" in text and text.startswith("#3 ")
    assert main(["report", out["session_id"], "--sessions-dir", str(sessions)]) == 0
    md = (sessions / out["session_id"] / "report.md").read_text()
    png = (sessions / out["session_id"] / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and "![best speedup vs candidates and cost](report.png)" in md
    assert f"| {out['session_id']} | vector_add_small | beam | builtin/tuner | 4 |" in md
    assert main(["report", "nope", "--sessions-dir", str(sessions)]) == 2
    assert "error: not a session:" in capsys.readouterr().out


def test_an_executor_divides_its_sandboxes_between_the_jobs_it_runs_at_once() -> None:
    """``workers`` is the number of sandboxes: four jobs on two workers get one process each, a lone job both."""
    seen = LocalExecutor(2, evaluate=lambda job: {"parallel": job.parallel})
    job = EvalJob("", "vector_add")
    assert [r["parallel"] for r in seen.map([job] * 4)] == [1, 1, 1, 1]
    assert [r["parallel"] for r in seen.map([job])] == [2]
    seen.close()
