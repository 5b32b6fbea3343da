"""Properties of the judge over random legal kernels: the same verdict every time, never below the speed of light.

Hypothesis draws vector_add kernels from a small grammar of legal choices (tile shape, loop
order, engine, API level, an extra staging copy, a bf16 round trip). Each is verified twice:
the two verdicts and latencies must be equal (the judge is a function of the kernel), and a
kernel that passes must not be reported faster than the task's speed of light (the bound is
a bound). A kernel the grammar makes wrong (bf16 loses precision) must fail both times.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nkiagent.tasks import get_task
from nkiagent.verify.verifier import VerifyOptions, verify

TASK = get_task("vector_add")
OPTS = VerifyOptions(seeds=1, parallel=1)  #: the two evaluations of a kernel run at once, one process each

TEMPLATE = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for {outer} in nl.affine_range({outer_n}):
        for {inner} in nl.affine_range({inner_n}):
            rows = nl.ds(i * {tp}, {tp})
            cols = nl.ds(j * {tf}, {tf})
{body}
    return out
"""

NISA_BODY = """\
            ta = nl.ndarray(({tp}, {tf}), dtype={mid}, buffer=nl.sbuf)
            tb = nl.ndarray(({tp}, {tf}), dtype={mid}, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, cols])
            nisa.dma_copy(dst=tb, src=b[rows, cols])
            tc = nl.ndarray(({tp}, {tf}), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add, engine=nisa.engine.{engine})
{stage}            nisa.dma_copy(dst=out[rows, cols], src=tc)"""

NL_BODY = """\
            ta = nl.load(a[rows, cols])
            tb = nl.load(b[rows, cols])
            tc = nl.add(ta, tb)
{stage}            nl.store(out[rows, cols], tc)"""

STAGE = """\
            staged = nl.ndarray(({tp}, {tf}), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=staged, src=tc)
            tc = staged
"""


@st.composite
def kernels(draw: st.DrawFn) -> tuple[str, bool]:
    """A kernel source and whether it must be correct (False: a bf16 round trip loses the 1e-6 tolerance)."""
    tp = draw(st.sampled_from([32, 64, 128]))
    tf = draw(st.sampled_from([128, 256, 512]))
    rows_first = draw(st.booleans())
    api = draw(st.sampled_from(["nisa", "nl"]))
    engine = draw(st.sampled_from(["vector", "gpsimd"]))
    mid = draw(st.sampled_from(["a.dtype", "a.dtype", "nl.bfloat16"])) if api == "nisa" else "a.dtype"
    stage = STAGE.format(tp=tp, tf=tf) if draw(st.booleans()) else ""
    body = (NISA_BODY if api == "nisa" else NL_BODY).format(tp=tp, tf=tf, mid=mid, engine=engine, stage=stage)
    loops = (("i", f"n // {tp}"), ("j", f"d // {tf}"))
    (outer, outer_n), (inner, inner_n) = loops if rows_first else loops[::-1]
    source = TEMPLATE.format(outer=outer, outer_n=outer_n, inner=inner, inner_n=inner_n, tp=tp, tf=tf, body=body)
    return source, mid != "nl.bfloat16"


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kernels())
def test_random_legal_kernels_get_the_same_verdict_twice_and_never_beat_the_bound(tmp_path: Path, drawn: tuple[str, bool]) -> None:
    source, correct = drawn
    path = tmp_path / "k.py"
    path.write_text(source)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(lambda _: verify(path, TASK, "trn2", OPTS), range(2))
    assert (first.verdict, first.latency_us, first.reasons) == (second.verdict, second.latency_us, second.reasons)
    if not correct:
        assert first.verdict == "fail" and first.reasons[0].startswith("wrong answer"), first.reasons
        return
    assert first.verdict == "pass", first.reasons
    assert first.latency_us >= first.sol_latency_us > 0
