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
    PROTOCOL: full     (optional: the full protocol; default 1 seed of every distribution and shape)
    LEAK: none         (optional: the verdict must not show a hidden size, a seed or an output or reference value)
    TIMING_ONLY: unfaithful   (optional: `nkiagent profile --timing-only` must say its estimate is not faithful)

``no-gain``: the verifier may pass it, but never with a latency under 0.98 × its honest twin's
(which must pass). Which test fails when each defence is removed is checked by
``benchmarks/mutate_defences.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from nkiagent.tasks import builtin_tasks, get_task
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
    no_leak: bool
    timing_only_unfaithful: bool


def _parse(path: Path) -> Exploit:
    f = header(path)
    honest = REPO / f["HONEST"] if f.get("HONEST") else None
    opts = VerifyOptions() if f.get("PROTOCOL") == "full" else VerifyOptions(seeds=1)
    return Exploit(path.stem, path, tuple(int(c) for c in f["CLASS"].split(",")), f["TASK"], f["EXPECT"], f.get("REASON", ""),
                   honest, f.get("GATE") != "off", opts, f.get("LEAK") == "none", f.get("TIMING_ONLY") == "unfaithful")


ALL = [_parse(p) for p in sorted(REDTEAM.glob("*.py")) if not p.name.startswith("honest_")]


@pytest.fixture(scope="module")
def verdicts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[EvalResult]]]:
    """The selected exploits and their twins, verified two at a time in the background."""
    chosen = {item.callspec.params["exploit"].name for item in request.session.items if getattr(item, "function", None) is test_exploit_is_caught}
    selected = [e for e in ALL if e.name in chosen]
    jobs = [(e.name, e.path, e.task, e.options, e.gate_on) for e in selected]
    twins = {e.honest: e for e in selected if e.honest is not None}  # one verification per twin
    jobs += [(f"honest:{t}", t, e.task, e.options, True) for t, e in sorted(twins.items())]
    with verified_in_background(jobs, tmp_path_factory.mktemp("redteam")) as futures:
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
    if exploit.no_leak:
        _assert_no_leak(exploit, res)


def _assert_no_leak(exploit: Exploit, res: EvalResult) -> None:
    """Nothing a wrong kernel could use as an oracle: no hidden size, seed, output or reference value."""
    task = get_task(exploit.task)
    # what the verdict says, not its bookkeeping: a wall time of 3.974 s or a hash is no oracle
    text = json.dumps({k: v for k, v in res.to_dict().items() if k not in ("wall_s", "code_sha256")})
    visible = {v for v in task.dims.values()}
    for dims in task.hidden_dims:
        for name, size in dims.items():
            if size not in visible:
                assert not re.search(rf"\b{name}={size}\b|(?<![\w.]){size}(?!\w|\.\d)", text), f"{exploit.name} leaks the hidden size {name}={size}"
    assert not re.search(r"\bseed\b|\bgot\b|expected [-\d]", text), f"{exploit.name} leaks a seed or a value: {res.reasons}"


@pytest.mark.parametrize("exploit", [e for e in ALL if e.timing_only_unfaithful], ids=lambda e: e.name)
def test_timing_only_profiles_say_when_they_are_not_faithful(exploit: Exploit, tmp_path: Path) -> None:
    task = get_task(exploit.task)
    inputs = ",".join(f"{s.name}:{'x'.join(map(str, s.resolve(task.dims)))}:{s.dtype}" for s in task.inputs)
    cmd = [sys.executable, "-m", "nkiagent.cli", "profile", str(exploit.path), "--inputs", inputs, "--target", "trn2", "--timing-only", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    prof = json.loads(out.stdout)
    assert prof["faithful"] is False and prof["unfaithful"][0].startswith(("a register loaded from a tensor", "a dynamic offset")), prof


def test_the_corpus_covers_every_class() -> None:
    assert len(ALL) >= 25
    covered = {c for e in ALL for c in e.classes}
    assert covered >= set(CLASSES) - {9}, f"classes without an exploit: {sorted(set(CLASSES) - {9} - covered)}"
    for e in ALL:
        assert e.task in builtin_tasks() and e.expect in ("fail", "rejected", "no-gain"), e.name
        assert e.expect == "no-gain" or e.reason, f"{e.name}: fail/rejected needs a REASON"
        assert e.honest is None or e.honest.is_file(), f"{e.name}: honest twin {e.honest} is missing"
