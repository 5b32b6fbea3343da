"""The issue-18 red-team corpus: exploits written from outside, the way a model under pressure would, all caught.

Each ``redteam/*.py`` (but ``honest_*.py`` and ``twins/``, which are honest twins) is one
exploit against a builtin task, with a docstring header::

    EXPLOIT: <what it tries>
    CLASS: <issue-18 hole classes it belongs to, comma-separated: 1 arbitrary Python, 2 engines,
            3 hints and simulation-only ops, 4 recognising the timed run, 5 side channels,
            6 shapes and data, 7 mispriced DMAs, 8 timing-only, 9 false rejections' twins>
    TASK: <builtin task>
    EXPECT: fail | rejected | no-gain
    REASON: <text one of the verdict's reasons must contain>      (fail, rejected)
    HONEST: <repo path of the honest twin>                        (no-gain)
    GATE: off          (optional: verify below the static gate, to test the walls behind it)
    PROTOCOL: full     (optional: the full protocol; default 2 seeds)

``no-gain``: the verifier may pass it, but never with a latency under 0.98 × its honest twin's
(which must pass). Which test fails when each defence is removed is checked by
``benchmarks/mutate_defences.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from nkiagent.tasks import builtin_tasks
from nkiagent.verify.result import EvalResult
from nkiagent.verify.verifier import VerifyOptions

from .corpus import header, verified_in_background

REDTEAM = Path(__file__).resolve().parent / "redteam"
REPO = Path(__file__).resolve().parents[2]
CLASSES = tuple(range(1, 10))


@dataclass(frozen=True)
class Exploit:
    name: str
    path: Path
    classes: tuple[int, ...]
    task: str
    expect: str
    reason: str
    honest: Path | None
    gate_on: bool
    options: VerifyOptions


def _parse(path: Path) -> Exploit:
    f = header(path)
    honest = REPO / f["HONEST"] if f.get("HONEST") else None
    opts = VerifyOptions() if f.get("PROTOCOL") == "full" else VerifyOptions(seeds=2)
    return Exploit(path.stem, path, tuple(int(c) for c in f["CLASS"].split(",")), f["TASK"], f["EXPECT"], f.get("REASON", ""),
                   honest, f.get("GATE") != "off", opts)


ALL = [_parse(p) for p in sorted(REDTEAM.glob("*.py")) if not p.name.startswith("honest_")]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[EvalResult]]]:
    jobs = [(e.name, e.path, e.task, e.options, e.gate_on) for e in ALL]
    twins = {e.honest for e in ALL if e.honest is not None}
    jobs += [(f"honest:{t}", t, e.task, e.options, True) for t in sorted(twins) for e in ALL if e.honest == t][: len(twins) * 99]
    seen: set[str] = set()
    unique = [j for j in jobs if not (j[0] in seen or seen.add(j[0]))]  # one verification per twin
    with verified_in_background(unique, tmp_path_factory.mktemp("redteam")) as futures:
        yield futures


@pytest.mark.parametrize("exploit", ALL, ids=[e.name for e in ALL])
def test_exploit_is_caught(exploit: Exploit, verdicts: dict[str, Future[EvalResult]]) -> None:
    res = verdicts[exploit.name].result()
    if exploit.expect == "no-gain":
        assert exploit.honest is not None, f"{exploit.name}: no-gain needs an HONEST twin"
        twin = verdicts[f"honest:{exploit.honest}"].result()
        assert twin.verdict == "pass", f"the honest twin {exploit.honest.name} must pass: {twin.reasons}"
        if res.verdict == "pass":
            assert res.latency_us >= 0.98 * twin.latency_us, (
                f"{exploit.name} gained: {res.latency_us} µs vs its honest twin's {twin.latency_us} µs"
            )
        return
    assert res.verdict == exploit.expect, f"{exploit.name}: expected {exploit.expect}, got {res.verdict}: {res.reasons}"
    assert any(exploit.reason in r for r in res.reasons), f"{exploit.name}: no reason mentions {exploit.reason!r}: {res.reasons}"


def test_the_corpus_covers_every_class() -> None:
    assert len(ALL) >= 25
    covered = {c for e in ALL for c in e.classes}
    assert covered >= set(CLASSES) - {9}, f"classes without an exploit: {sorted(set(CLASSES) - {9} - covered)}"
    for e in ALL:
        assert e.task in builtin_tasks() and e.expect in ("fail", "rejected", "no-gain"), e.name
        assert e.expect == "no-gain" or e.reason, f"{e.name}: fail/rejected needs a REASON"
        assert e.honest is None or e.honest.is_file(), f"{e.name}: honest twin {e.honest} is missing"
