"""``corpus build`` keeps exactly the passing, distinct kernels, and drops held-out tasks before verifying anything."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nkiagent.cli import main
from nkiagent.tasks import get_task
from nkiagent.training.corpus import CorpusOptions, build_corpus, normalize_source, similarity
from nkiagent.training.schemas import openai_chat_errors

from .conftest import baseline_kernel, cheat_kernel, honest_kernel, wrong_kernel


def _restyled(code: str) -> str:
    """The same kernel with other local names, comments and docstring: an exact duplicate once normalized."""
    code = re.sub(r"\bta\b", "left", re.sub(r"\btb\b", "right", re.sub(r"\bout\b", "result", code)))
    return code.replace('"""Baseline', '"""My own kernel (really the baseline)').replace("n, d = a.shape", "n, d = a.shape  # sizes")


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    src = tmp_path / "kernels"
    va = src / "vector_add"
    va.mkdir(parents=True)
    (va / "a_baseline.py").write_text(baseline_kernel())
    (va / "b_restyled.py").write_text(_restyled(baseline_kernel()))
    (va / "c_tile256.py").write_text(baseline_kernel().replace("TILE_F = 512", "TILE_F = 256"))
    (va / "d_rows.py").write_text(honest_kernel())
    (va / "e_wrong.py").write_text(wrong_kernel())
    (va / "f_cheat.py").write_text(cheat_kernel())
    return src


def test_normalization_sees_through_style_but_not_through_code() -> None:
    base = normalize_source(baseline_kernel())
    assert normalize_source(_restyled(baseline_kernel())) == base
    assert normalize_source(baseline_kernel().replace("TILE_F = 512", "TILE_F = 256")) != base
    assert similarity(base, normalize_source(baseline_kernel().replace("TILE_F = 512", "TILE_F = 256"))) > 0.98
    assert similarity(base, normalize_source(honest_kernel())) < 0.7


def test_build_keeps_exactly_the_passing_distinct_kernels(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "corpus"
    assert main(["corpus", "build", "--from", str(source), "--out", str(out), "--seeds", "1", "--no-hidden", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["collected"] == 6 and summary["kept"] == 2
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["kept"]) == ["a_baseline.py", "d_rows.py"]
    dropped = report["dropped"]
    assert dropped["b_restyled.py"] == "duplicate: same normalized AST as an earlier kernel"
    assert dropped["c_tile256.py"].startswith("near-duplicate: ≥ 0.9 similar to the faster a_baseline.py")
    assert dropped["e_wrong.py"].startswith("fail: wrong answer")
    assert dropped["f_cheat.py"].startswith("rejected: static gate [forbidden-import]")
    rows = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(openai_chat_errors(r) == [] for r in rows)
    assert (
        rows[0]["messages"][-1]["content"].startswith("```python\n") and "TILE_COLS = 1024" in rows[0]["messages"][-1]["content"]
    )  # fastest first
    card = (out / "README.md").read_text()
    assert "2 SFT rows from 2 kernels kept of 6 collected" in card and "| vector_add | 2 |" in card and "| near-duplicate | 1 |" in card

    import pyarrow.parquet as pq

    (part,) = (out / "data").glob("train-*.parquet")
    meta = pq.read_table(part).to_pylist()
    assert [m["source"] for m in meta] == ["vector_add/d_rows.py", "vector_add/a_baseline.py"]
    assert meta[0]["speedup"] > 1.2 and meta[1]["speedup"] == 1.0 and meta[0]["timing_source"] == "emulator-estimate"


def test_history_rows_go_from_slowest_to_fastest(source: Path, tmp_path: Path) -> None:
    for name in ("b_restyled.py", "c_tile256.py", "e_wrong.py", "f_cheat.py"):
        (source / "vector_add" / name).unlink()
    rep = build_corpus(source, tmp_path / "c", CorpusOptions(seeds=1, hidden=False, with_history=True))
    (row,) = rep.rows
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert "TILE_F = 512" in row["messages"][2]["content"] and "TILE_COLS = 1024" in row["messages"][4]["content"]
    assert row["messages"][3]["content"].startswith("Evaluation: pass, latency ") and "speedup 1.000×" in row["messages"][3]["content"]


def test_held_out_tasks_and_their_copies_are_dropped_before_verification(source: Path, tmp_path: Path) -> None:
    task_file = get_task("vector_add").source_path
    assert task_file is not None
    copy = source / "my_add"
    copy.mkdir()
    (copy / "task.py").write_text(task_file.read_text().replace('name="vector_add"', 'name="my_add"'))
    (copy / "k.py").write_text(honest_kernel().replace("TILE_COLS = 1024", "TILE_COLS = 512"))
    rep = build_corpus(source, tmp_path / "c", CorpusOptions(held_out=("vector_*",)))
    assert rep.kept == [] and rep.rows == []
    reasons = {i.path.name: i.dropped for i in rep.items}
    assert reasons["k.py"] == "held-out: task my_add has a held-out task's reference"
    assert reasons["d_rows.py"] == "held-out: task vector_add is held out"
    assert all(not i.evaluation for i in rep.items)  # nothing was verified


def test_balance_caps_tasks_and_lets_tasks_take_turns_per_level(tmp_path: Path) -> None:
    from nkiagent.training.corpus import CorpusItem, balance

    add, silu = get_task("vector_add"), get_task("silu")
    items = [
        CorpusItem(t, tmp_path / f"{t.name}{i}.py", "", evaluation={"latency_us": lat})
        for t, i, lat in [(add, 0, 30.0), (add, 1, 10.0), (add, 2, 20.0), (silu, 0, 5.0), (silu, 1, 7.0)]
    ]
    balance(items, CorpusOptions(max_per_task=2, max_per_level=3))
    kept = sorted(i.path.name for i in items if not i.dropped)
    assert kept == ["silu0.py", "silu1.py", "vector_add1.py"]  # both level 1: fastest of each task first, then the next round
    reasons = {i.path.name: i.dropped for i in items if i.dropped}
    assert reasons == {
        "vector_add0.py": "balance: more than 2 kernels for task vector_add",
        "vector_add2.py": "balance: more than 3 kernels at level 1",
    }


def test_nkibench_layout_is_a_corpus_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import textwrap

    from ..tasks.test_nkibench import KERNEL, REFERENCE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bench = tmp_path / "AccelOpt" / "NKIBench"  # NKIBench's layout, with the loader test's own tiny reference and kernel
    (bench / "reference").mkdir(parents=True)
    (bench / "kernels").mkdir()
    (bench / "reference" / "sqrt2_numpy_1.py").write_text(textwrap.dedent(REFERENCE))
    (bench / "kernels" / "sqrt2_0.py").write_text(textwrap.dedent(KERNEL))
    (bench / "summary.json").write_text(
        json.dumps(
            {
                "sqrt2": {
                    "cases": {
                        "1": {
                            "values": {"M": 256, "N": 512},
                            "impls": [{"task": "./reference/sqrt2_numpy_1.py", "kernel": "./kernels/sqrt2_0.py"}],
                        }
                    }
                }
            }
        )
    )
    rep = build_corpus(tmp_path / "AccelOpt", tmp_path / "c", CorpusOptions(seeds=1, hidden=False))
    (item,) = rep.kept
    assert item.task.name == "nkibench/sqrt2" and item.evaluation["speedup"] == 1.0  # the benchmark's own kernel is its baseline
    assert rep.rows[0]["task"] == "nkibench/sqrt2" and rep.rows[0]["level"] == 3
