"""The fused Mamba tutorial (nki-reference §4.5b): the selective scan, three versions.

``delta, u [batch, channels, seq_len]``, ``A [channels, state]``, ``B, C [batch, state, seq_len]``,
all fp32; for every batch ``b``, channel ``c`` and time ``t``::

    h[s, t] = exp(delta[c, t] · A[c, s]) · h[s, t-1] + delta[c, t] · u[c, t] · B[s, t]   (h[s, -1] = 0)
    out[c, t] = Σ_s C[s, t] · h[s, t]

Channels go on partitions (128 per tile), time on the free axis. Per (channel tile, state)
the tutorial's six steps are: ``deltaA = exp(delta · A_s)`` in one ScalarE ``activation``
(A's column as the per-partition scale); ``deltaU = delta · u`` and ``deltaBu = deltaU · B_s``
on VectorE, with ``B_s`` broadcast across the partitions; the recurrence in one
``tensor_tensor_scan`` (multiply, then add); ``scanC = scan · C_s``; and ``scanC`` summed over
the states into an fp32 accumulator.

The partition broadcast of a ``B``/``C`` row is a TensorE instruction, as the tutorial says
(``onesᵀ · row``, fp32, into PSUM), and a row of up to 512 columns is read by VectorE straight
from PSUM (a PSUM operand halves ``tensor_tensor``'s cost, §4.3). That is what the published
profiles imply: VectorE busy time per (channel tile, state) at seq_len 512 is 4.2 µs in v1
and 3.1 µs in v2 on trn1, i.e. 8N and 6N cycles — two of the four/five ops at N. Wider rows
(v1/v2 at seq_len > 512) do not fit one matmul, so they are built 512 columns at a time and
copied to SBUF, and their products cost 2N (the published v2 at seq_len 8192: 8N).

* :func:`mamba_v1` — the initial kernel: loop order ``batch → state → channel tile``, so the
  ``delta`` and ``u`` tiles are loaded again for every state; one accumulator for all channel
  tiles, stored after the last state (2.34 ms at 4096 channels, seq_len 512).
* :func:`mamba_v2` — loop reordering: ``batch → channel tile → state``. ``delta``/``u`` are
  loaded once per channel tile and reused by every state, their product ``deltaU`` is
  state-invariant and computed once per tile (the compiler removed the 16 identical
  per-state copies of the tutorial's v2: VectorE busy time fell by a quarter while the
  per-state instructions were otherwise unchanged), and the accumulator shrinks to one
  channel tile (loop fusion). 1.61 ms (−31%) at 4096 channels, seq_len 512.
* :func:`mamba_v3` — seq_len tiling: inside the state loop, time goes in tiles of
  ``SEQ_TILE`` = 512 with the scan carried from tile to tile through ``initial`` (the last
  column of the previous tile), so every per-state intermediate is a ``[128, 512]`` tile;
  ``scanC`` goes to PSUM, so the accumulation reads one PSUM operand. 27.8 ms vs v2's
  53.3 ms (−48%) at 4096 channels, seq_len 8192.

``delta``/``deltaU``/``scanC_accum`` stay whole-``seq_len`` tiles in every version (as in the
tutorial), so SBUF holds 3 × seq_len × 4 B per partition for them; at seq_len 8192 that is
96 KiB of trn1's 176, which leaves v2 room for only two more full-width intermediates per
state (it overwrites in place where it can) and none for the next state's: v2's states run
one after another, which is this emulator's version of the spilling the tutorial profiles.
"""

import nki
import nki.isa as nisa
import nki.language as nl

#: seq_len tile of :func:`mamba_v3` (the tutorial's ``seq_len_fsize``).
SEQ_TILE = 512


def _setup(delta, A):
    """The output tensor, the ones row for broadcasts, and ``(batch, channel tiles, state, seq_len, 128)``."""
    batch, channels, seq_len = delta.shape
    pmax = nl.tile_size.pmax
    assert channels % pmax == 0, f"channels={channels} must be a multiple of {pmax}"
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    return out, _ones_row(pmax), (batch, channels // pmax, A.shape[1], seq_len, pmax)


def _load_rows(src, b, c, pmax):
    """``src[b, c*128:(c+1)*128, :]`` of a ``[batch, channels, seq_len]`` tensor into SBUF."""
    t = nl.ndarray((pmax, src.shape[2]), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[b, c * pmax : (c + 1) * pmax, :])
    return t


def _load_A_column(A, c, s, pmax):
    """``A[c*128:(c+1)*128, s]`` as a ``[128, 1]`` per-partition scale."""
    t = nl.ndarray((pmax, 1), dtype=A.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=A[c * pmax : (c + 1) * pmax, s : s + 1])
    return t


def _ones_row(pmax):
    """``[1, 128]`` fp32 ones: the stationary operand of the TensorE partition broadcast."""
    ones = nl.ndarray((1, pmax), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    return ones


def _load_row(src, b, s, t0, width):
    """``src[b, s, t0:t0+width]`` of a ``[batch, state, seq_len]`` tensor as a ``[1, width]`` SBUF tile."""
    row = nl.ndarray((1, width), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=src[b, s : s + 1, nl.ds(t0, width)])
    return row


def _broadcast_row(src, b, s, t0, width, ones):
    """``src[b, s, t0:t0+width]`` on every partition, broadcast by TensorE (``onesᵀ · row``).

    A row of at most one matmul's moving size (512) stays in its PSUM tile, where VectorE reads
    it; a wider one is broadcast 512 columns at a time and copied (ScalarE) into an SBUF tile.
    """
    pmax = ones.shape[1]
    fmax = nl.tile_size.gemm_moving_fmax
    if width <= fmax:
        bc = nl.ndarray((pmax, width), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=bc, stationary=ones, moving=_load_row(src, b, s, t0, width), is_stationary_onezero=True)
        return bc
    assert width % fmax == 0, f"a broadcast row of {width} columns must be a multiple of {fmax}"
    bc = nl.ndarray((pmax, width), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(width // fmax):
        chunk = nl.ndarray((pmax, fmax), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=chunk, stationary=ones, moving=_load_row(src, b, s, t0 + j * fmax, fmax), is_stationary_onezero=True)
        nisa.activation(dst=bc[:, nl.ds(j * fmax, fmax)], op=nl.copy, data=chunk)
    return bc


def _tt(dst_buffer, a, b, op, pmax, width):
    """``a op b`` (VectorE ``tensor_tensor``) into a new ``[128, width]`` fp32 tile of ``dst_buffer``."""
    out = nl.ndarray((pmax, width), dtype=nl.float32, buffer=dst_buffer)
    nisa.tensor_tensor(dst=out, data1=a, data2=b, op=op)
    return out


def _state_step(acc, delta_t, A_col, deltaU, B, C, b, s, t0, ones, initial, scanC_buffer=nl.sbuf):
    """Steps 1–6 for state ``s`` over the time steps ``t0 …`` of the tile; returns the scan.

    The ``B`` row is broadcast just before step 3 and the ``C`` row just before step 5, as in
    the tutorial. The scan overwrites ``deltaA`` in place (it reads each element before
    writing it); a broadcast ``C`` too wide for PSUM is overwritten in place by ``scanC``. So
    at most two full-width intermediates are live per state, besides ``delta``/``deltaU``/the
    accumulator.
    """
    pmax, width = deltaU.shape
    B_bc = _broadcast_row(B, b, s, t0, width, ones)
    deltaBu = _tt(nl.sbuf, deltaU, B_bc, nl.multiply, pmax, width)
    scan = nl.ndarray((pmax, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=scan, op=nl.exp, data=delta_t, scale=A_col)  # deltaA
    nisa.tensor_tensor_scan(dst=scan, data0=scan, data1=deltaBu, initial=initial, op0=nl.multiply, op1=nl.add)
    C_bc = _broadcast_row(C, b, s, t0, width, ones)
    if width > nl.tile_size.gemm_moving_fmax:  # C_bc is an SBUF tile: reuse it
        scanC = C_bc
    else:
        scanC = nl.ndarray((pmax, width), dtype=nl.float32, buffer=scanC_buffer)
    nisa.tensor_tensor(dst=scanC, data1=scan, data2=C_bc, op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=scanC, op=nl.add)
    return scan


def _channel_tile(delta, u, b, c, pmax):
    """v2/v3: a zeroed accumulator, and the ``delta`` tile and ``deltaU = delta · u`` of one channel tile."""
    seq_len = delta.shape[2]
    acc = nl.ndarray((pmax, seq_len), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    delta_t = _load_rows(delta, b, c, pmax)
    u_t = _load_rows(u, b, c, pmax)
    return acc, delta_t, _tt(nl.sbuf, delta_t, u_t, nl.multiply, pmax, seq_len)


@nki.jit
def mamba_v1(delta, u, A, B, C):
    """Tutorial ``mamba_v1``: ``batch → state → channel tile``; ``delta``/``u`` reloaded per state."""
    out, ones, (batch, n_tiles, state, seq_len, pmax) = _setup(delta, A)
    for b in nl.affine_range(batch):
        acc = nl.ndarray((pmax, n_tiles, seq_len), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for s in nl.sequential_range(state):  # the accumulator carries over states
            for c in nl.affine_range(n_tiles):
                delta_t = _load_rows(delta, b, c, pmax)
                A_col = _load_A_column(A, c, s, pmax)
                u_t = _load_rows(u, b, c, pmax)
                deltaU = _tt(nl.sbuf, delta_t, u_t, nl.multiply, pmax, seq_len)
                _state_step(acc[:, c, :], delta_t, A_col, deltaU, B, C, b, s, 0, ones, 0.0)
        for c in nl.affine_range(n_tiles):
            nisa.dma_copy(dst=out[b, c * pmax : (c + 1) * pmax, :], src=acc[:, c, :])
    return out


@nki.jit
def mamba_v2(delta, u, A, B, C):
    """Tutorial ``mamba_v2``: ``batch → channel tile → state``; ``delta``/``u``/``deltaU`` once per tile."""
    out, ones, (batch, n_tiles, state, _, pmax) = _setup(delta, A)
    for b in nl.affine_range(batch):
        for c in nl.affine_range(n_tiles):
            acc, delta_t, deltaU = _channel_tile(delta, u, b, c, pmax)
            for s in nl.sequential_range(state):
                A_col = _load_A_column(A, c, s, pmax)
                _state_step(acc, delta_t, A_col, deltaU, B, C, b, s, 0, ones, 0.0)
            nisa.dma_copy(dst=out[b, c * pmax : (c + 1) * pmax, :], src=acc)
    return out


@nki.jit
def mamba_v3(delta, u, A, B, C):
    """Tutorial ``mamba_v3``: v2 with seq_len tiled by :data:`SEQ_TILE` inside the state loop."""
    out, ones, (batch, n_tiles, state, seq_len, pmax) = _setup(delta, A)
    width = min(SEQ_TILE, seq_len)
    assert seq_len % width == 0, f"seq_len={seq_len} must be a multiple of {width}"
    for b in nl.affine_range(batch):
        for c in nl.affine_range(n_tiles):
            acc, delta_t, deltaU = _channel_tile(delta, u, b, c, pmax)
            for s in nl.sequential_range(state):
                A_col = _load_A_column(A, c, s, pmax)
                carry = 0.0
                for i in nl.sequential_range(seq_len // width):  # the scan carries from tile to tile
                    cols = nl.ds(i * width, width)
                    scan = _state_step(acc[:, cols], delta_t[:, cols], A_col, deltaU[:, cols], B, C, b, s, i * width, ones, carry, nl.psum)
                    carry = scan[:, width - 1 : width]
            nisa.dma_copy(dst=out[b, c * pmax : (c + 1) * pmax, :], src=acc)
    return out
