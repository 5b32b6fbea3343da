"""The honest corpus of unusual but legitimate kernels: every one passes.

``unusual/*.py`` were written from outside, the way a strong author would (high-level
``nl.*`` only, SPMD grids with ragged tails and a host-side launcher, flash-style attention,
accumulator carries, ``nl.shared_constant`` tables built in the kernel, dataclass and
NamedTuple configs, ``functools`` caches, per-call closure counters and dict caches,
multi-engine splits, PSUM-parked operands, iterator classes, a ``__main__`` self-test).
Many were rejected before issue 18; the docstring's ``BEFORE`` line says how. A verifier
that rejects honest code teaches a model to avoid good NKI, so these are as binding as the
cheats.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from nkiagent.verify.result import EvalResult
from nkiagent.verify.verifier import VerifyOptions

from .corpus import header, verified_in_background

UNUSUAL = sorted((Path(__file__).resolve().parent / "unusual").glob("*.py"))
OPTS = VerifyOptions(seeds=1)  #: one seed of every distribution and shape: honest kernels fail on shapes and data, not seeds


@pytest.fixture(scope="module")
def verdicts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[EvalResult]]]:
    chosen = {item.callspec.params["path"] for item in request.session.items if getattr(item, "function", None) is test_unusual_honest_kernel_passes}
    jobs = [(p.stem, p, header(p)["TASK"], OPTS, True) for p in UNUSUAL if p in chosen]
    with verified_in_background(jobs, tmp_path_factory.mktemp("unusual")) as futures:
        yield futures


@pytest.mark.parametrize("path", UNUSUAL, ids=[p.stem for p in UNUSUAL])
def test_unusual_honest_kernel_passes(path: Path, verdicts: dict[str, Future[EvalResult]]) -> None:
    res = verdicts[path.stem].result()
    assert res.verdict == "pass", f"{path.name}: {res.reasons}"
    assert res.latency_us >= res.sol_latency_us > 0


def test_the_corpus_covers_the_styles_issue_18_names() -> None:
    assert len(UNUSUAL) >= 12
    text = "\n".join(p.read_text() for p in UNUSUAL)
    for needle in ("nl.load(", "nl.program_id", "nl.sequential_range", "nl.shared_constant", "dataclass", "lru_cache", "nonlocal",
                   "engine=nisa.engine.gpsimd", "buffer=nl.psum", "def __iter__", 'if __name__ == "__main__":'):
        assert needle in text, f"no unusual kernel uses {needle}"
