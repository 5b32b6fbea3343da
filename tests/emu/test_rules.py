"""One test per hardware / language rule the emulator enforces: exact code, exact message, location.

Each kernel marks the line that must fail with a ``# <- error`` comment; :func:`expect_error`
checks that the error's ``.location`` is exactly that ``file:line`` of this test file, so an
error that points into the emulator (or at the wrong line) fails the test.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import NkiError

MARK = "# <- error"


def run(fn: Callable[..., Any], *args: Any, target: str = "trn2", trace: emu.Trace | None = None) -> emu.RunResult:
    return emu.run_kernel(nki.jit(fn), args, target=target, trace=trace)


def marked_line(fn: Callable[..., Any]) -> str:
    """``file:line`` of the single line of ``fn`` carrying the error marker."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if MARK in text]
    assert len(hits) == 1, f"kernel {fn.__name__} must mark exactly one line"
    return f"{fn.__code__.co_filename}:{hits[0]}"


def expect_error(
    fn: Callable[..., Any], *args: Any, code: str, message: str, kind: type[NkiError] = NkiError, target: str = "trn2"
) -> NkiError:
    """Run ``fn`` and check the error's type, code, exact message and location (the marked line)."""
    with pytest.raises(kind) as info:
        run(fn, *args, target=target)
    err = info.value
    assert (err.code, err.message) == (code, message)
    assert err.location == marked_line(fn)
    assert err.location.startswith(__file__ + ":")
    assert str(err) == f"{err.location}: {message} [{code}]"
    return err


# --------------------------------------------------------------------------------------------
# Partitions and start partitions
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_allocation_with_more_than_128_partitions(buffer: str) -> None:
    def k() -> None:
        nl.ndarray((129, 4), nl.float32, buffer=getattr(nl, buffer))  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_num_partition_exceed_arch_limit",
        message="number of partitions 129 exceed architecture limitation of 128.",
    )  # fmt: skip


def test_operand_with_more_than_128_partitions() -> None:
    def k() -> None:
        a = nl.zeros((128, 4), nl.float32)
        wide = a.reshape((256, 2))  # a legal view of the same storage
        nisa.tensor_tensor(dst=wide, data1=wide, data2=wide, op=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_num_partition_exceed_arch_limit",
        message="tensor_tensor data1 partition dimension 256 exceeds maximum 128",
    )  # fmt: skip


def test_dma_operand_with_more_than_128_partitions() -> None:
    def k(x: Any) -> None:
        a = nl.ndarray((128, 4), nl.float32)
        nisa.dma_copy(dst=a.reshape((256, 2)), src=x)  # <- error

    expect_error(
        k, np.zeros((256, 2), np.float32), kind=emu.NkiValidationError, code="err_num_partition_exceed_arch_limit",
        message="dma_copy dst partition dimension 256 exceeds maximum 128",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (slice(1, 65), "tensor_tensor data1 starts at partition 1; an access of 64 partitions must start at partition 0 or 64"),
        (slice(1, 128), "tensor_tensor data1 starts at partition 1; an access of 127 partitions must start at partition 0"),
        (slice(32, 96), "tensor_tensor data1 starts at partition 32; an access of 64 partitions must start at partition 0 or 64"),
        (
            slice(16, 32),
            "tensor_tensor data1 starts at partition 16; an access of 16 partitions must start at partition 0 or 32 or 64 or 96",
        ),
        (
            slice(97, 98),
            "tensor_tensor data1 starts at partition 97; an access of 1 partitions must start at partition 0 or 32 or 64 or 96",
        ),
    ],
)
def test_start_partition_rules(rows: slice, message: str) -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        nisa.tensor_tensor(dst=a[rows], data1=a[rows], data2=a[rows], op=nl.add)  # <- error

    expect_error(k, kind=emu.NkiValidationError, code="err_start_partition", message=message)


def test_legal_start_partitions_pass() -> None:
    def k() -> Any:
        a = nl.zeros((128, 8), nl.float32)
        for rows in (slice(0, 128), slice(64, 128), slice(0, 64), slice(96, 128), slice(32, 64), slice(96, 97), slice(64, 65)):
            nisa.tensor_scalar(dst=a[rows], data=a[rows], op0=nl.add, operand0=1.0)
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, a)
        return out

    counts = np.zeros(128)
    for lo, hi in ((0, 128), (64, 128), (0, 64), (96, 128), (32, 64), (96, 97), (64, 65)):
        counts[lo:hi] += 1
    np.testing.assert_array_equal(run(k).outputs, np.broadcast_to(counts[:, None], (128, 8)))


def test_partition_striding_is_refused() -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        nisa.tensor_tensor(dst=a[::2], data1=a[::2], data2=a[::2], op=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_partition_dim_not_first",
        message="tensor_tensor data1: dimension 0 of the access must step one partition at a time (stride 16 elements, partition size 8)",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# SBUF and PSUM capacity (a tensor occupies memory from its first to its last use)
# --------------------------------------------------------------------------------------------
SBUF = {"trn1": 180224, "trn2": 212984, "trn3": 245752}


def line_of(fn: Callable[..., Any], text: str) -> str:
    """``file:line`` of the first line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return f"{fn.__code__.co_filename}:{next(start + i for i, line in enumerate(lines) if text in line)}"


def _two_live_tiles(a_bytes: int, b_bytes: int) -> Callable[[], None]:
    def k() -> None:
        a = nl.ndarray((128, a_bytes), nl.uint8, name="a")
        b = nl.ndarray((128, b_bytes), nl.uint8, name="b")  # <- error
        nisa.memset(a[:, 0:1], 0)
        nisa.memset(b[:, 0:1], 0)
        nisa.tensor_copy(dst=b[:, 0:1], src=a[:, 0:1])  # both are live here

    return k


@pytest.mark.parametrize("target", sorted(SBUF))
def test_sbuf_filled_exactly_to_capacity_is_fine(target: str) -> None:
    assert run(_two_live_tiles(SBUF[target] - 1000, 1000), target=target).sbuf_peak_bytes == SBUF[target]


@pytest.mark.parametrize("target", sorted(SBUF))
def test_sbuf_one_byte_over_capacity(target: str) -> None:
    usable = SBUF[target]
    k = _two_live_tiles(usable - 1000, 1001)
    a_loc = line_of(k, 'name="a"')
    expect_error(
        k, target=target, kind=emu.NkiCapacityError, code="err_sbuf_capacity_exceeded",
        message=(f"SBUF overflow: `b` [128, 1001] uint8 (1001 B/partition, {marked_line(k)}) is live together with 1 other tensors, "
                 f"needing {usable + 1} B per partition, but {target} has {usable} B of SBUF per partition. "
                 f"Largest other live tensors: `a` [128, {usable - 1000}] uint8 ({usable - 1000} B/partition, {a_loc})"),
    )  # fmt: skip


def test_sbuf_single_tensor_larger_than_capacity() -> None:
    def k() -> None:
        nl.ndarray((128, 212985), nl.uint8, name="huge")  # <- error

    expect_error(
        k, kind=emu.NkiCapacityError, code="err_sbuf_capacity_exceeded",
        message="SBUF overflow: `huge` [128, 212985] uint8 needs 212985 B per partition, but trn2 has 212984 B of SBUF per partition",
    )  # fmt: skip


def test_sbuf_capacity_counts_bytes_per_partition_not_partitions() -> None:
    def k() -> None:
        narrow = nl.ndarray((1, 200000), nl.uint8, name="narrow")
        full = nl.ndarray((128, 12984), nl.uint8, name="full")
        nisa.memset(narrow[:, 0:1], 0)
        nisa.memset(full[:, 0:1], 0)
        nisa.tensor_copy(dst=full[0:1, 0:1], src=narrow[:, 0:1])

    assert run(k).sbuf_peak_bytes == 212984


def test_sbuf_tiles_no_longer_referenced_are_not_counted() -> None:
    def k() -> None:
        for _ in nl.affine_range(4):
            tmp = nl.ndarray((128, 150000), nl.uint8, name="tmp")  # the previous iteration's tile is dead
            nisa.memset(tmp[:, 0:100], 0)

    assert run(k).sbuf_peak_bytes == 150000


def test_sbuf_tiles_count_only_between_first_and_last_use() -> None:
    def k() -> None:
        early = nl.ndarray((128, 150000), nl.uint8, name="early")
        late = nl.ndarray((128, 150000), nl.uint8, name="late")  # allocated while `early` is referenced …
        nisa.memset(early[:, 0:1], 0)
        nisa.memset(late[:, 0:1], 0)  # … but first used after early's last use
        assert early.shape == late.shape

    assert run(k).sbuf_peak_bytes == 150000


def test_sbuf_manual_address_beyond_capacity() -> None:
    def k() -> None:
        nl.ndarray((128, 16), nl.float32, name="late", address=(0, 180224 - 63))  # <- error

    expect_error(
        k, target="trn1", kind=emu.NkiCapacityError, code="err_sbuf_out_of_bound",
        message="Allocated memory out of bound: `late` at byte 180161 with 64 B per partition exceeds the 180224 B of SBUF usable per partition on trn1",
    )  # fmt: skip


def test_psum_holds_eight_banks_of_2kib() -> None:
    def k() -> None:
        banks = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum, name=f"bank{i}") for i in range(8)]
        for b in banks:
            nisa.memset(b[:, 0:1], 0.0)
        extra = nl.ndarray((128, 1), nl.float32, buffer=nl.psum, name="extra")  # <- error
        nisa.memset(extra, 0.0)
        for b in banks:
            nisa.memset(b[:, 0:1], 1.0)

    bank_loc = line_of(k, "banks = [")
    others = "; ".join(f"`bank{i}` [128, 512] float32 (2048 B/partition, {bank_loc})" for i in range(3))
    expect_error(
        k, kind=emu.NkiCapacityError, code="err_psum_capacity_exceeded",
        message=(f"PSUM overflow: `extra` [128, 1] float32 (4 B/partition, {marked_line(k)}) is live together with 8 other tensors, "
                 f"needing 16388 B per partition, but trn2 has 16384 B of PSUM (8 banks of 2048 B) per partition. "
                 f"Largest other live tensors: {others}"),
    )  # fmt: skip


def test_psum_eight_full_banks_fit() -> None:
    def k() -> None:
        banks = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
        for b in banks + banks:
            nisa.memset(b[:, 0:1], 0.0)

    run(k)


def test_psum_tiles_do_not_straddle_banks() -> None:
    trace = emu.Trace()

    def k() -> None:
        tiles = [nl.ndarray((128, 384), nl.float32, buffer=nl.psum, name=f"p{i}") for i in range(5)]  # 1536 B each
        wide = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum, name="wide")  # 4096 B: two whole banks
        for t in [*tiles, wide, *tiles, wide]:
            nisa.memset(t[:, 0:1], 0.0)

    run(k, trace=trace)
    spans = {x["name"]: (x["address"], x["address"] + x["bytes_per_partition"]) for x in trace.allocations}
    for name, (lo, hi) in spans.items():
        if name.startswith("p"):
            assert lo // 2048 == (hi - 1) // 2048, f"{name} straddles a bank: [{lo}, {hi})"
    assert spans["wide"][0] % 2048 == 0
    ordered = sorted(spans.values())
    assert all(a_hi <= b_lo for (_, a_hi), (b_lo, _) in itertools.pairwise(ordered)), "live PSUM tiles overlap"


def test_psum_manual_address_must_be_bank_aligned() -> None:
    def k() -> None:
        nl.ndarray((128, 16), nl.float32, buffer=nl.psum, name="acc", address=(0, 100))  # <- error

    expect_error(
        k, kind=emu.NkiCapacityError, code="err_psum_bank_alignment",
        message="PSUM tensor `acc` at byte 100: PSUM allocations must start at the beginning of a bank (2048 B boundary)",
    )  # fmt: skip


def test_psum_manual_address_past_the_end() -> None:
    def k() -> None:
        nl.ndarray((128, 16), nl.float32, buffer=nl.psum, name="acc", address=(0, 16384))  # <- error

    expect_error(
        k, kind=emu.NkiCapacityError, code="err_psum_out_of_bound",
        message="Allocated memory out of bound: `acc` at byte 16384 with 64 B per partition exceeds the 16384 B of PSUM usable per partition on trn2",
    )  # fmt: skip


def test_psum_manual_bank_aligned_addresses_are_accepted() -> None:
    trace = emu.Trace()

    def k() -> None:
        for bank in range(8):
            nl.ndarray((128, 512), nl.float32, buffer=nl.psum, name=f"b{bank}", address=(0, bank * 2048))

    run(k, trace=trace)
    assert [x["address"] for x in trace.allocations] == [b * 2048 for b in range(8)]


def test_matmul_dst_crossing_a_psum_bank() -> None:
    def k() -> None:
        st, mv = nl.zeros((128, 128), nl.bfloat16), nl.zeros((128, 512), nl.bfloat16)
        acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum, name="acc")
        nisa.nc_matmul(acc[:, 256:768], st, mv)  # <- error

    expect_error(
        k, kind=emu.NkiCapacityError, code="err_psum_bank_crossing",
        message=("nc_matmul dst `acc` spans PSUM bytes [1024, 3072) per partition, crossing a 2048-byte bank boundary; "
                 "a matmul result must lie within one PSUM bank on trn2"),
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Matmul
# --------------------------------------------------------------------------------------------
def _matmul(
    m: int,
    n: int,
    dst_shape: tuple[int, int],
    *,
    dst_dtype: Any = nl.float32,
    st_buf: Any = nl.sbuf,
    mv_buf: Any = nl.sbuf,
    dst_buf: Any = nl.psum,
    st_dtype: Any = nl.bfloat16,
) -> Callable[[], None]:
    def k() -> None:
        st = nl.ndarray((128, m), st_dtype, buffer=st_buf)
        mv = nl.ndarray((128, n), nl.bfloat16, buffer=mv_buf)
        dst = nl.ndarray(dst_shape, dst_dtype, buffer=dst_buf)
        nisa.nc_matmul(dst, st, mv)  # <- error

    return k


def test_matmul_stationary_free_size_over_128() -> None:
    expect_error(
        _matmul(129, 512, (128, 512)), kind=emu.NkiValidationError, code="err_matmul_stationary_size",
        message="nc_matmul stationary free size 129 exceeds maximum 128 (gemm_stationary_fmax)",
    )  # fmt: skip


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_matmul_moving_free_size_over_512(target: str) -> None:
    expect_error(
        _matmul(128, 513, (128, 513)), target=target, kind=emu.NkiValidationError, code="err_matmul_moving_size",
        message=f"nc_matmul moving free size 513 exceeds maximum 512 on {target} (gemm_moving_fmax)",
    )  # fmt: skip


def test_matmul_trn3_moving_limit_is_the_whole_psum() -> None:
    run(_matmul(128, 4096, (128, 4096)), target="trn3")  # fp32 dst: 4096 × 4 B = all of PSUM
    run(_matmul(128, 8192, (128, 8192), dst_dtype=nl.bfloat16), target="trn3")
    expect_error(
        _matmul(128, 4097, (128, 512)), target="trn3", kind=emu.NkiValidationError, code="err_matmul_moving_size",
        message="nc_matmul moving free size 4097 exceeds maximum 4096 on trn3 (gemm_moving_fmax)",
    )  # fmt: skip
    expect_error(
        _matmul(128, 8193, (128, 512), dst_dtype=nl.bfloat16), target="trn3", kind=emu.NkiValidationError,
        code="err_matmul_moving_size", message="nc_matmul moving free size 8193 exceeds maximum 8192 on trn3 (gemm_moving_fmax)",
    )  # fmt: skip


@pytest.mark.parametrize(("role", "memory"), [("stationary", "psum"), ("stationary", "hbm"), ("moving", "psum"), ("moving", "hbm")])
def test_matmul_operands_must_be_in_sbuf(role: str, memory: str) -> None:
    bufs = {"st_buf": nl.sbuf, "mv_buf": nl.sbuf, ("st_buf" if role == "stationary" else "mv_buf"): getattr(nl, memory)}
    expect_error(
        _matmul(128, 512, (128, 512), **bufs), kind=emu.NkiValidationError, code="err_unsupported_memory",
        message=f"Expected operand '{role}' of 'nc_matmul' to be in address space 'sbuf', but got a tile in '{memory}' instead.",
    )  # fmt: skip


def test_matmul_checks_passed_by_one_geometry_do_not_excuse_another() -> None:
    """Operand and matmul checks are remembered per view geometry across allocations; a view of
    the same shape in another memory, or at a bank-crossing offset, is still refused."""

    def k() -> None:
        mv = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
        for _ in nl.sequential_range(2):  # a fresh, legal stationary and dst each time
            st = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
            nisa.nc_matmul(nl.ndarray((128, 256), nl.float32, buffer=nl.psum), st, mv)
        wide = nl.ndarray((128, 768), nl.float32, buffer=nl.psum, name="wide")
        nisa.nc_matmul(wide[:, 0:256], st, mv)
        nisa.nc_matmul(wide[:, 384:640], st, mv)  # <- error

    expect_error(
        k, kind=emu.NkiCapacityError, code="err_psum_bank_crossing",
        message="nc_matmul dst `wide` spans PSUM bytes [1536, 2560) per partition, crossing a 2048-byte bank boundary; "
        "a matmul result must lie within one PSUM bank on trn2",
    )  # fmt: skip

    def k2() -> None:
        mv = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
        dst = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst, nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf), mv)
        nisa.nc_matmul(dst, nl.ndarray((128, 128), nl.bfloat16, buffer=nl.psum), mv)  # <- error

    expect_error(
        k2, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'stationary' of 'nc_matmul' to be in address space 'sbuf', but got a tile in 'psum' instead.",
    )  # fmt: skip


def test_matmul_dst_must_be_in_psum() -> None:
    err = expect_error(
        _matmul(128, 512, (128, 512), dst_buf=nl.sbuf), kind=emu.NkiValidationError, code="err_matmul_dst_not_psum",
        message="Matmult dst tensor is not psum: nc_matmul must write its result to a PSUM tensor",
    )  # fmt: skip
    assert err.message.startswith("Matmult dst tensor is not psum")  # AWS's text (aws-neuron-sdk #1054)


@pytest.mark.parametrize(("target", "gen"), [("trn1", 2), ("trn2", 3)])
def test_matmul_dst_must_be_fp32_on_gen2_and_gen3(target: str, gen: int) -> None:
    expect_error(
        _matmul(128, 512, (128, 512), dst_dtype=nl.bfloat16), target=target, kind=emu.NkiValidationError, code="err_matmul_dst_dtype",
        message=f"nc_matmul dst dtype must be float32 on gen{gen}, got bfloat16",
    )  # fmt: skip


def test_matmul_fp32_operands_must_pair_with_fp32() -> None:
    expect_error(
        _matmul(128, 512, (128, 512), st_dtype=nl.float32), kind=emu.NkiValidationError, code="err_matmul_dtype_mix",
        message="nc_matmul fp32/tf32 operands must pair with fp32/tf32: stationary float32, moving bfloat16",
    )  # fmt: skip


def test_nl_matmul_needs_transpose_x() -> None:
    def k() -> None:
        a = nl.zeros((128, 64), nl.float32)
        nl.matmul(a, a)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_matmul_transpose_x",
        message="nl.matmul(x, y) requires transpose_x=True in NKI 0.3+: pass x already transposed as [K, M]",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Engine ↔ memory
# --------------------------------------------------------------------------------------------
def test_gpsimd_cannot_write_psum() -> None:
    def k() -> None:
        p = nl.ndarray((128, 8), nl.int32, buffer=nl.psum)
        nisa.iota(p, [[1, 8]])  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'dst' of 'iota' to be in address space 'sbuf', but got a tile in 'psum' instead.",
    )  # fmt: skip


def test_gpsimd_cannot_read_psum() -> None:
    def k() -> None:
        p = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
        s = nl.ndarray((128, 8), nl.float32)
        nisa.tensor_copy(dst=s, src=p, engine=nisa.engine.gpsimd)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'src' of 'tensor_copy' to be in address space 'sbuf', but got a tile in 'psum' instead.",
    )  # fmt: skip


def test_tensor_engine_reads_sbuf_only() -> None:
    def k() -> None:
        p = nl.zeros((32, 32), nl.float32, buffer=nl.psum)
        d = nl.ndarray((32, 32), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(d, p, engine=nisa.engine.tensor)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'data' of 'nc_transpose' to be in address space 'sbuf', but got a tile in 'psum' instead.",
    )  # fmt: skip


def test_tensor_engine_transpose_writes_psum_only() -> None:
    def k() -> None:
        a = nl.zeros((128, 4), nl.float32)
        d = nl.ndarray((4, 128), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(d, a, engine=nisa.engine.tensor)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_transpose_dst",
        message="nc_transpose on the tensor engine writes PSUM: dst must be a PSUM tensor",
    )  # fmt: skip


@pytest.mark.parametrize("role", ["src", "dst"])
def test_dma_copy_cannot_touch_psum(role: str) -> None:
    def k() -> None:
        p = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
        s = nl.zeros((128, 8), nl.float32)
        nisa.dma_copy(dst=s if role == "src" else p, src=p if role == "src" else s)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message=f"Expected operand '{role}' of 'dma_copy' to be in address space 'sbuf|hbm', but got a tile in 'psum' instead.",
    )  # fmt: skip


def test_compute_engines_cannot_touch_hbm() -> None:
    def k(x: Any) -> None:
        t = nl.ndarray((4, 8), nl.float32)
        nisa.tensor_tensor(dst=t, data1=x, data2=t, op=nl.add)  # <- error

    expect_error(
        k, np.zeros((4, 8), np.float32), kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'data1' of 'tensor_tensor' to be in address space 'sbuf|psum', but got a tile in 'hbm' instead.",
    )  # fmt: skip


def test_load_source_must_be_hbm() -> None:
    def k() -> None:
        t = nl.zeros((4, 8), nl.float32)
        nl.load(t)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_unsupported_memory",
        message="Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf' instead.",
    )  # fmt: skip


def test_tensor_copy_on_scalar_engine_refused_on_trn1() -> None:
    def k() -> None:
        a = nl.zeros((4, 8), nl.float32)
        nisa.tensor_copy(dst=a, src=a, engine=nisa.engine.scalar)  # <- error

    expect_error(
        k, target="trn1", kind=emu.NkiValidationError, code="err_unsupported_engine",
        message="Expected 'tensor_copy' to run on engine 'vector|gpsimd' on trn1 (NeuronCore-v2), but got engine 'scalar' instead; "
        "pass engine=nisa.engine.vector or engine=nisa.engine.gpsimd, or leave engine unset; on trn1 copy on ScalarE with nisa.activation(op=nl.copy)",
    )  # fmt: skip


def test_vector_engine_free_size_cap_from_psum() -> None:
    def k() -> None:
        p = nl.ndarray((1, 5000), nl.bfloat16, buffer=nl.psum)
        nisa.memset(p, 0.0)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_free_size_exceed_arch_limit",
        message="memset dst has 5000 elements per partition; vector engine instructions allow at most 4096 from PSUM",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# tensor_tensor / tensor_scalar / activation operands
# --------------------------------------------------------------------------------------------
def test_tensor_tensor_does_not_broadcast_free_dims() -> None:
    def k() -> None:
        a = nl.zeros((128, 512), nl.float32)
        col = nl.zeros((128, 1), nl.float32)
        nisa.tensor_tensor(dst=a, data1=a, data2=col, op=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_free_size_mismatch",
        message=("number of elements per partition mismatch in parameters (data1[128, 512], data2[128, 1], dst[128, 512]) "
                 "of 'tensor_tensor': 512 vs 1; tensor_tensor does not broadcast"),
    )  # fmt: skip


def test_tensor_tensor_partition_counts_must_match() -> None:
    def k() -> None:
        a = nl.zeros((128, 512), nl.float32)
        b = nl.zeros((1, 512), nl.float32)
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_num_partition_mismatch",
        message="number of partitions (dimension 0 size of a tile) mismatch in parameters (data1[128, 512], data2[1, 512], dst[128, 512]) of 'tensor_tensor'",
    )  # fmt: skip


def test_nl_binary_ops_do_not_broadcast_either() -> None:
    def k() -> None:
        a = nl.zeros((128, 512), nl.float32)
        col = nl.zeros((128, 1), nl.float32)
        nl.add(a, col)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_free_size_mismatch",
        message=("number of elements per partition mismatch in parameters (data1[128, 512], data2[128, 1], dst[128, 512]) "
                 "of 'tensor_tensor': 512 vs 1; tensor_tensor does not broadcast"),
    )  # fmt: skip


def test_tensor_tensor_inputs_cannot_both_be_in_psum() -> None:
    def k() -> None:
        a = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        b = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        c = nl.ndarray((128, 512), nl.float32)
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_tensor_tensor_both_psum", message="tensor_tensor data1 and data2 cannot both be in PSUM"
    )


def test_bitwise_ops_need_integer_tiles() -> None:
    def k() -> None:
        a = nl.zeros((8, 8), nl.float32, name="f")
        nisa.tensor_tensor(dst=a, data1=a, data2=a, op=nl.bitwise_and)  # <- error

    expect_error(k, kind=emu.NkiTypeError, code="err_bitvec_dtype", message="bitwise operations need integer tensors, `f` is float32")


def test_tensor_scalar_operand_must_be_fp32() -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        c = nl.zeros((128, 1), nl.bfloat16)
        nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=c)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_operand_dtype",
        message="tensor_scalar operand0 must be float32 (hardware requires fp32 scalar operands), got bfloat16",
    )  # fmt: skip


@pytest.mark.parametrize("shape", [(128, 2), (1, 128), (64, 1)])
def test_tensor_scalar_operand_must_be_a_column(shape: tuple[int, int]) -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        c = nl.zeros(shape, nl.float32)
        nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1.0, op1=nl.multiply, operand1=c)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_operand_not_column",
        message=f"tensor_scalar operand1 must be a scalar or a [128, 1] vector spanning the partition dimension, got {list(shape)}",
    )  # fmt: skip


def test_tensor_scalar_op1_and_operand1_go_together() -> None:
    def k() -> None:
        a = nl.zeros((8, 8), nl.float32)
        nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1.0, op1=nl.add)  # <- error

    expect_error(
        k, kind=emu.NkiTypeError, code="err_tensor_scalar_op1",
        message="tensor_scalar op1 and operand1 must be given together (op1=None goes with operand1=None)",
    )  # fmt: skip


def test_tensor_scalar_ops_must_be_the_same_class() -> None:
    def k() -> None:
        a = nl.zeros((8, 8), nl.int32)
        nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1, op1=nl.bitwise_and, operand1=3)  # <- error

    expect_error(
        k, kind=emu.NkiTypeError, code="err_tensor_scalar_op_class",
        message="tensor_scalar op0 (add) and op1 (bitwise_and) must both be arithmetic or both bitvec",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("op0", "op1", "allowed"),
    [("multiply", "add", True), ("multiply", None, True), ("add", None, True), ("subtract", None, False), ("add", "multiply", False),
     ("maximum", "add", False)],
)  # fmt: skip
def test_trn2_scalar_engine_tensor_scalar_op_pairs(op0: str, op1: str | None, allowed: bool) -> None:
    def k() -> Any:
        a = nl.full((128, 8), 2.0, nl.float32)
        nisa.tensor_scalar(  # <- error
            dst=a,
            data=a,
            op0=getattr(nl, op0),
            operand0=3.0,
            op1=None if op1 is None else getattr(nl, op1),
            operand1=None if op1 is None else 4.0,
            engine=nisa.engine.scalar,
        )
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, a)
        return out

    run(k, target="trn3")  # trn3's ScalarE takes any pair
    if allowed:
        run(k, target="trn2")
        return
    expect_error(
        k, kind=emu.NkiValidationError, code="err_tensor_scalar_scalar_engine",
        message=f"tensor_scalar on the scalar engine of trn2 supports only (multiply, add), (multiply, None) and (add, None), got ({op0}, {op1})",
    )  # fmt: skip


_SCALE_TYPE = "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32."
_SCALE_SHAPE = "Scale parameter of activation must be either a scalar value or a 1D vector spanning the partition dimension."
_BIAS_TYPE = "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16."


def _activation(scale: Any = 1.0, bias: Any = None, fn: Any = None) -> Callable[[], None]:
    """A kernel calling ``fn`` (activation by default) with scale/bias built by the given callables."""

    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        s = scale() if callable(scale) else scale
        b = bias() if callable(bias) else bias
        if fn is None:
            nisa.activation(dst=a, op=nl.exp, data=a, bias=b, scale=s)  # <- error
        else:
            r = nl.ndarray((128, 1), nl.float32)
            fn(dst=a, op=nl.exp, data=a, reduce_op=nl.add, reduce_res=r, bias=b, scale=s)  # <- error

    return k


@pytest.mark.parametrize("fn", [None, "activation_reduce"])
@pytest.mark.parametrize(
    ("scale", "code", "message"),
    [
        (lambda: nl.zeros((128, 1), nl.bfloat16), "err_activation_scale_invalid_type", _SCALE_TYPE),
        (lambda: nl.zeros((128, 1), nl.int32), "err_activation_scale_invalid_type", _SCALE_TYPE),
        ("2.0", "err_activation_scale_invalid_type", _SCALE_TYPE),
        (lambda: nl.zeros((1, 128), nl.float32), "err_activation_scale_scalar_or_vector", _SCALE_SHAPE),
        (lambda: nl.zeros((128, 128), nl.float32), "err_activation_scale_scalar_or_vector", _SCALE_SHAPE),
    ],
)
def test_activation_scale_rules(scale: Any, code: str, message: str, fn: str | None) -> None:
    k = _activation(scale=scale, fn=None if fn is None else getattr(nisa, fn))
    with pytest.raises(emu.NkiValidationError) as info:
        run(k)
    assert (info.value.code, info.value.message) == (code, message)
    lines, start = inspect.getsourcelines(_activation)
    marks = [start + i for i, text in enumerate(lines) if MARK in text]
    assert info.value.location == f"{__file__}:{marks[0 if fn is None else 1]}"


@pytest.mark.parametrize(
    ("bias", "code", "message"),
    [
        (lambda: nl.zeros((128, 1), nl.int32), "err_activation_bias_invalid_type", _BIAS_TYPE),
        (lambda: nl.zeros((128, 1), nl.float8_e4m3), "err_activation_bias_invalid_type", _BIAS_TYPE),
        ("0.5", "err_activation_bias_invalid_type", _BIAS_TYPE),
        (lambda: nl.zeros((128, 2), nl.float32), "err_activation_bias_shape", "bias shape (128x2) must be Nx1 with N = 128 partitions"),
    ],
)
def test_activation_bias_rules(bias: Any, code: str, message: str) -> None:
    with pytest.raises(emu.NkiValidationError) as info:
        run(_activation(bias=bias))
    assert (info.value.code, info.value.message) == (code, message)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_activation_bias_vector_dtypes_are_accepted(dtype: str) -> None:
    run(_activation(bias=lambda: nl.zeros((128, 1), getattr(nl, dtype)), scale=lambda: nl.ones((128, 1), nl.float32)), target="trn1")


def test_activation_scalar_bias_refused_on_trn1_accepted_later() -> None:
    with pytest.raises(emu.NkiValidationError) as info:
        run(_activation(bias=0.5), target="trn1")
    assert (info.value.code, info.value.message) == (
        "err_activation_bias_invalid_type",
        "a scalar bias is only supported on trn2 and later; on trn1 pass a [128, 1] vector",
    )

    def k() -> Any:
        a = nl.zeros((4, 8), nl.float32)
        nisa.activation(dst=a, op=nl.exp, data=a, bias=0.5)
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, a)
        return out

    for target in ("trn2", "trn3"):
        np.testing.assert_allclose(run(k, target=target).outputs, np.full((4, 8), np.exp(np.float32(0.5))), rtol=1e-6)


def test_activation_reduce_op_must_be_add() -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        r = nl.ndarray((128, 1), nl.float32)
        nisa.activation(dst=a, op=nl.exp, data=a, reduce_op=nl.maximum, reduce_res=r)  # <- error

    expect_error(k, kind=emu.NkiValidationError, code="err_activation_reduce_op", message="activation reduce_op must be nl.add")


def test_activation_reduce_res_must_be_a_column() -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        r = nl.ndarray((128, 2), nl.float32)
        nisa.activation(dst=a, op=nl.exp, data=a, reduce_op=nl.add, reduce_res=r)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_activation_reduce_res", message="activation reduce_res must be [128, 1], got [128, 2]"
    )


def test_activation_input_outside_valid_range_warns() -> None:
    def k() -> Any:
        a = nl.full((4, 8), -1.0, nl.float32)
        nisa.activation(dst=a, op=nl.log, data=a)  # <- error
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, a)
        return out

    loc = marked_line(k)
    with pytest.warns(emu.NkiWarning) as record:
        result = run(k)
    (w,) = [w for w in record if issubclass(w.category, emu.NkiWarning)]
    assert str(w.message) == (
        f"{loc}: activation: input to log outside its valid range [5.42101e-20, 1.84467e+19] (min -1, max -1); hardware output is undefined there"
    )
    assert f"{w.filename}:{w.lineno}" == loc
    assert result.warnings == [str(w.message)]
    assert np.isnan(result.outputs).all()


@pytest.mark.parametrize(
    ("name", "value"), [("sqrt", 2.0**-120), ("rsqrt", 2.0**98), ("reciprocal", 2.0**43), ("sin", 4.0), ("arctan", -2.0)]
)
def test_activation_range_warning_per_function(name: str, value: float) -> None:
    def k() -> None:
        a = nl.full((4, 8), value, nl.float32)
        nisa.activation(dst=a, op=getattr(nl, name), data=a)

    with pytest.warns(emu.NkiWarning, match=f"input to {name} outside its valid range"):
        run(k)


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("axis", "message"),
    [
        (0, "tensor_reduce axis 0 must name free dimensions 1..2 of data[128, 4, 8]; the partition dim 0 cannot be reduced"),
        (3, "tensor_reduce axis 3 must name free dimensions 1..2 of data[128, 4, 8]; the partition dim 0 cannot be reduced"),
        (
            (0, 1, 2),
            "tensor_reduce axis (0, 1, 2) must name free dimensions 1..2 of data[128, 4, 8]; the partition dim 0 cannot be reduced",
        ),
        ((1,), "tensor_reduce axis (1,) must be the last contiguous dimensions of data[128, 4, 8], e.g. (2,) or (1, 2)"),
    ],
)
def test_reduce_axis_rules(axis: Any, message: str) -> None:
    def k() -> None:
        a = nl.zeros((128, 4, 8), nl.float32)
        d = nl.ndarray((128, 4), nl.float32)
        nisa.tensor_reduce(dst=d, op=nl.add, data=a, axis=axis)  # <- error

    expect_error(k, kind=emu.NkiValidationError, code="err_reduce_axis", message=message)


def test_reduce_dst_shape_must_match() -> None:
    def k() -> None:
        a = nl.zeros((128, 4, 8), nl.float32)
        d = nl.ndarray((128, 8), nl.float32)
        nisa.tensor_reduce(dst=d, op=nl.add, data=a, axis=2)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_reduce_dst_shape",
        message="tensor_reduce dst[128, 8] must hold 512 elements over 128 partitions for data[128, 4, 8] reduced over (2,)",
    )  # fmt: skip


def test_reduce_op_must_be_a_legal_reduction() -> None:
    def k() -> None:
        a = nl.zeros((128, 8), nl.float32)
        d = nl.ndarray((128, 1), nl.float32)
        nisa.tensor_reduce(dst=d, op=nl.subtract, data=a, axis=1)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_reduce_op",
        message="subtract is not a legal reduction op; use add, multiply, maximum, minimum or a bitwise/logical op",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# DMA and access rules
# --------------------------------------------------------------------------------------------
def test_dma_copy_element_counts_must_match() -> None:
    def k(x: Any) -> None:
        t = nl.ndarray((4, 5), nl.float32)
        nisa.dma_copy(dst=t, src=x)  # <- error

    expect_error(
        k, np.zeros((4, 6), np.float32), kind=emu.NkiValidationError, code="err_dma_element_count",
        message="dma_copy src and dst element counts differ: src[4, 6] has 24, dst[4, 5] has 20",
    )  # fmt: skip


def test_dma_copy_hwdge_needs_equal_dtypes() -> None:
    def k(x: Any) -> None:
        t = nl.ndarray((4, 8), nl.bfloat16)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)  # <- error

    expect_error(
        k, np.zeros((4, 8), np.float32), kind=emu.NkiValidationError, code="err_dma_hwdge_dtype",
        message="dma_copy with dge_mode=hwdge requires src.dtype == dst.dtype, got float32 and bfloat16; "
        "cast in a software-DGE dma_copy (leave dge_mode unset) or on chip with tensor_copy",
    )  # fmt: skip


def test_dma_transpose_rank_and_shape() -> None:
    def rank(x: Any) -> None:
        t = nl.ndarray((8, 4, 1), nl.float32)
        nisa.dma_transpose(dst=t, src=x)  # <- error

    def shape(x: Any) -> None:
        t = nl.ndarray((4, 8), nl.float32)
        nisa.dma_transpose(dst=t, src=x)  # <- error

    x = np.zeros((4, 8), np.float32)
    expect_error(
        rank,
        x,
        kind=emu.NkiValidationError,
        code="err_dma_transpose_rank",
        message="dma_transpose requires dst rank == src rank, got 3 and 2",
    )
    expect_error(
        shape, x, kind=emu.NkiValidationError, code="err_dma_transpose_shape",
        message="dma_transpose dst shape [4, 8] must be [8, 4] for src [4, 8] and axes (1, 0)",
    )  # fmt: skip


def test_vector_engine_transpose_is_limited_to_32x32() -> None:
    def k() -> None:
        a = nl.zeros((32, 33), nl.float32)
        d = nl.ndarray((33, 32), nl.float32)
        nisa.nc_transpose(d, a, engine=nisa.engine.vector)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_size_of_dimension_exceed_arch_limit",
        message="size of dimension 1 in 'data[32, 33]' of 'transpose' exceed architecture limitation of 32.",
    )  # fmt: skip


def test_static_slice_out_of_bounds_uses_aws_text() -> None:
    def k(x: Any) -> None:
        nl.load(x[:, 0:4096])  # <- error

    expect_error(
        k, np.zeros((128, 4000), np.float32), kind=emu.NkiOutOfBoundsError, code="err_tensor_access_out_of_bound",
        message="Out-of-bound access for tensor `x` on dimension 1: index range [0, 4095] exceed dimension size of 4000",
    )  # fmt: skip


def test_static_integer_index_out_of_bounds() -> None:
    def k() -> None:
        t = nl.zeros((8, 16), nl.float32, name="tile")
        t[8, 0]  # <- error

    expect_error(
        k, kind=emu.NkiOutOfBoundsError, code="err_tensor_access_out_of_bound",
        message="Out-of-bound access for tensor `tile` on dimension 0: index 8 exceed dimension size of 8",
    )  # fmt: skip


def test_memset_value_must_match_an_int_dst() -> None:
    def k() -> None:
        t = nl.ndarray((4, 8), nl.int32)
        nisa.memset(t, 7.5)  # <- error

    expect_error(
        k, kind=emu.NkiTypeError, code="err_memset_value_type", message="memset value 7.5 does not match dst dtype int32; pass an int"
    )


def test_hbm_tensor_with_init_value() -> None:
    def k() -> None:
        nl.zeros((4, 8), nl.float32, buffer=nl.shared_hbm)  # <- error

    expect_error(
        k, kind=emu.NkiValidationError, code="err_hbm_tensor_with_init_value_not_supported",
        message="Creating HBM tensor with init value is not supported.",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Kernel-level rules
# --------------------------------------------------------------------------------------------
def test_output_never_written() -> None:
    def k(x: Any) -> Any:  # <- error
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm, name="result")
        return out

    expect_error(
        k, np.zeros((4, 8), np.float32), kind=emu.NkiRuntimeError, code="err_tensor_output_not_written_to",
        message="output tensor `result` is returned but never written by the kernel",
    )  # fmt: skip


def test_output_partially_written_is_accepted() -> None:
    def k(x: Any) -> Any:
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0:2, :], nl.load(x[0:2, :]))
        return out

    got = run(k, np.ones((4, 8), np.float32)).outputs
    np.testing.assert_array_equal(got[:2], np.ones((2, 8)))
    assert np.isnan(got[2:]).all()  # the unwritten half shows as NaN


@pytest.mark.parametrize(
    "call",
    [
        lambda: nl.ndarray((4, 4), nl.float32),
        lambda: nl.zeros((4, 4), nl.float32),
        lambda: nl.program_id(0),
        lambda: nl.num_programs(),
        lambda: nisa.get_nc_version(),
    ],
)
def test_nki_api_outside_a_kernel(call: Callable[[], Any]) -> None:
    with pytest.raises(emu.NkiRuntimeError) as info:
        call()
    err = info.value
    assert (err.code, err.message) == ("err_nki_api_outside_of_nki_kernel", "Calling NKI API outside of NKI kernels is not supported.")
    lines, start = inspect.getsourcelines(test_nki_api_outside_a_kernel)
    call_lines = {start + i for i, text in enumerate(lines) if "lambda: n" in text}
    file, _, line = err.location.rpartition(":")
    assert file == __file__ and int(line) in call_lines


def test_jit_platform_target_is_an_error() -> None:
    with pytest.raises(emu.NkiTypeError) as info:

        @nki.jit(platform_target="trn2")  # <- error
        def k() -> None:
            pass

    err = info.value
    assert (err.code, err.message) == (
        "err_jit_platform_target",
        "nki.jit(platform_target=...) is not supported in NKI 0.3+; set NEURON_PLATFORM_TARGET_OVERRIDE",
    )
    assert err.location == marked_line(test_jit_platform_target_is_an_error)


def test_nested_kernel_with_spmd_grid() -> None:
    @nki.jit
    def inner() -> None:
        pass

    def k() -> None:
        inner[2]()  # <- error

    expect_error(
        k, kind=emu.NkiRuntimeError, code="err_nested_kernel_with_spmd_grid",
        message="Calling kernel with spmd grid (inner[2]) inside another kernel is not supported",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Unsupported API names and ops
# --------------------------------------------------------------------------------------------
def _suggestions(message: str, prefix: str) -> list[str]:
    """The names after "closest supported: " in an unsupported-name message (others add ops, so the tail may grow)."""
    assert message.startswith(prefix)
    rest = message[len(prefix) :]
    return rest.removeprefix("; closest supported: ").split(", ") if rest else []


@pytest.mark.parametrize(
    ("module", "name", "closest"),
    [
        ("isa", "nc_matmull", "nc_matmul"),
        ("isa", "tensor_tensor_foo", "tensor_tensor"),
        ("isa", "dma_cpy", "dma_copy"),
        ("language", "sofmax", "softmax"),
        ("language", "identity", "shared_identity_matrix"),  # the emulator's internal `identity` alias is no API
        ("language", "zzzz", None),
    ],
)
def test_unknown_api_name_is_unsupported_not_attribute_error(module: str, name: str, closest: str | None) -> None:
    mod = {"isa": nisa, "language": nl}[module]

    def k() -> None:
        getattr(mod, name)  # <- error

    with pytest.raises(emu.NkiUnsupportedError) as info:
        run(k)
    err = info.value
    assert not isinstance(err, AttributeError)
    assert err.code == "err_not_emulated"
    assert err.location == marked_line(k)
    names = _suggestions(err.message, f"nki.{module}.{name} is not supported by the nkiagent emulator")
    assert names[:1] == ([closest] if closest else [])
    assert all(callable(getattr(mod, n)) or n in dir(mod) for n in names)  # every suggestion is real API
    with pytest.raises(emu.NkiUnsupportedError):
        getattr(mod, name)  # outside a kernel too


def test_emulator_helpers_are_not_suggested_as_api() -> None:
    with pytest.raises(emu.NkiUnsupportedError) as info:
        nisa.writ  # noqa: B018
    assert re.search(r"\bwrite\b", info.value.message) is None


@pytest.mark.parametrize(
    ("op", "code", "message"),
    [
        (lambda: nl.softmax, "err_invalid_op", None),
        (lambda: np.sinh, "err_invalid_op", "<ufunc 'sinh'> is not an NKI operation (pass e.g. nl.add, nl.multiply, nl.exp, np.add)"),
        (lambda: "hypot", "err_unsupported_alu_op", "'hypot' is not a binary ALU operation usable in tensor_tensor"),
        (lambda: "maximun", "err_unsupported_alu_op", "'maximun' is not a binary ALU operation usable in tensor_tensor; closest supported: maximum, minimum"),
    ],
)  # fmt: skip
def test_unknown_alu_op(op: Callable[[], Any], code: str, message: str | None) -> None:
    def k() -> None:
        a = nl.zeros((4, 8), nl.float32)
        nisa.tensor_tensor(dst=a, data1=a, data2=a, op=op())  # <- error

    with pytest.raises(NkiError) as info:
        run(k)
    assert info.value.code == code
    assert info.value.location == marked_line(k)
    if message is None:
        assert re.fullmatch(r"<function softmax at 0x[0-9a-f]+> is not an NKI operation \(pass e\.g\. nl\.add, nl\.multiply, nl\.exp, np\.add\)",
                            info.value.message)  # fmt: skip
    else:
        assert info.value.message == message


def test_unknown_activation_function() -> None:
    def k() -> None:
        a = nl.zeros((4, 8), nl.float32)
        nisa.activation(dst=a, op="sigmoidd", data=a)  # <- error

    with pytest.raises(emu.NkiUnsupportedError) as info:
        run(k)
    assert info.value.code == "err_unsupported_activation"
    assert info.value.location == marked_line(k)
    names = _suggestions(info.value.message, "'sigmoidd' is not an activation function usable in activation")
    assert names[0] == "sigmoid"
    assert all(callable(getattr(nl, n)) for n in names)


def test_enum_integer_literals_are_refused() -> None:
    def k() -> None:
        a = nl.zeros((4, 8), nl.float32)
        nisa.tensor_tensor(dst=a, data1=a, data2=a, op=nl.add, engine=5)  # <- error

    expect_error(k, kind=emu.NkiTypeError, code="err_enum_int_literal", message="engine must be an nisa.engine member, not the integer 5")
