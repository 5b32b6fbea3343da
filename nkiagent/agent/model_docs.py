"""``nki_docs`` pages on how the cost model times DMAs and schedules instructions, generated from its own constants.

Models asked these questions in every trial ("how are DMAs costed?", "does instruction order
matter?") and the cheat-sheet does not answer them; the numbers here are read from
:mod:`nkiagent.perf.specs` and the DMA efficiency curve, so they are the ones the cost model uses.
"""

from __future__ import annotations

__all__ = ["cost_model_pages"]


def cost_model_pages() -> list[tuple[str, str]]:
    """(title, body) pages: the DMA cost curve per target, the scheduling model, and what a view of a tensor costs."""
    from ..perf.cost import dma_efficiency
    from ..perf.specs import get_spec
    from ..perf.timeline import LOOKAHEAD

    specs = [get_spec(t) for t in ("trn1", "trn2", "trn3")]
    rows = "\n".join(
        f"- {s.name}: {s.dma_queues} queues × {s.dma_bytes_per_ns_per_queue:g} B/ns = {s.dma_bytes_per_ns:g} B/ns peak; HBM {s.hbm_gbps:g} GB/s "
        f"per NeuronCore; fixed latency {s.dma_fixed_ns:g} ns per DMA ({s.dma_hwdge_fixed_ns:g} ns for hardware-DGE DMAs); each DMA also "
        f"occupies its queues {s.dma_issue_ns:g} ns to issue"
        for s in specs
    )
    trn2 = get_spec("trn2")
    curve = ", ".join(f"{c} B → {100 * dma_efficiency(c, trn2):.0f}%" for c in (64, 128, 256, 512, 1024, 2048, 4096, 8192))
    dma = f"""How the cost model times a DMA (dma_copy, spills, transposes; `emulator-estimate`):
{rows}
- Efficiency by the shortest contiguous run of bytes per partition on either side (the chunk): {curve}.
  Below {trn2.dma_small_chunk} B a DMA is overhead-bound; from {trn2.dma_full_chunk} B it runs at full rate.
- Queues: a DMA spreads over one queue per 8 partitions of its on-chip side (128 partitions → all 16), else one per 32 KiB.
- Time on its queues = issue + bytes / (queues × B/ns per queue × efficiency); it ends (its result is visible) after the
  fixed latency plus that transfer time. An HBM → HBM copy moves its bytes twice (read and write).
- Several DMAs in flight share the queues: independent DMAs overlap as far as free queues allow, so a DMA issued
  early hides under compute; a chain of dependent DMAs pays the fixed latency each time.
- dma_transpose: trn1 at the element size's efficiency; trn2/trn3 at 90% (from HBM) or 50% (on chip) of a copy's."""
    sched = f"""How the cost model schedules instructions (`emulator-estimate`):
- Each engine (TensorE, VectorE, ScalarE, GpSimd, and Sync for registers) runs its instructions one at a time; DMAs run
  on the queues above. An instruction starts when its engine is free and every instruction it depends on has ended.
- Dependences are true memory overlaps: read-after-write, write-after-read and write-after-write on overlapping
  addresses. On-chip memory is tracked by physical address, so a buffer the allocator reuses carries its dependences
  (allocate tiles inside the loop to double-buffer); HBM by tensor and byte range; registers and the VectorE
  accumulators are memories of their own.
- Order is not source order, as the compiler's scheduler reorders independent instructions: within a window of
  {LOOKAHEAD} instructions the one whose operands are ready first issues first (ties: source order), and it may run
  in an idle gap an earlier one left. Moving an independent line earlier or later changes nothing.
- `with nl.no_reorder():` issues its instructions in program order on each engine and queue (no gap filling) and
  fences them: nothing written before the block issues after it, nothing after it before it; engines still overlap.
- A consumer woken by another engine's semaphore pays {trn2.dependency_overhead_cycles} cycles; back-to-back matmuls into one PSUM
  bank are pipelined by TensorE without it.
- The profile's critical path is this chain: each step starts after its operands or after its engine; idle engines
  say which instruction they waited for. The latency is when the last instruction ends."""
    views = f"""Views of a tensor (HBM or on-chip): reshape, slice, permute, broadcast, bit-cast — no data moves:
- `x.reshape((a, b, ...))` views a tensor with a new shape of the same element count, e.g. an HBM input [N, D] as
  [N // 128, 128, D] to index 128-row tiles as `x3[i]`; it is refused (`err_reshape_not_view`) when the view's strides
  cannot express the new shape without a copy (a reshape of a transposed or strided slice). `reshape_dim(dim, shape)`
  and `flatten_dims(start, end)` reshape one run of dims.
- Indexing and slicing (`x[i]`, `x[a:b, c:d]`, `x.slice(dim, start, end, step)`, `x.select(dim, i)`) and
  `x.permute(dims)`, `x.broadcast(dim, size)` (a size-1 dim, stride 0), `x.expand_dim(dim)`, `x.squeeze_dim(dim)`
  are views too; `x.view(dtype)` reinterprets the bits (the last dim rescales by the size ratio); `x.ap(pattern,
  offset)` is an explicit [[stride, count], ...] access pattern over the underlying storage.
- A view costs nothing itself; the DMA that reads or writes it is priced by its contiguous run per partition (see the
  DMA timing page): a permuted or column-sliced HBM view gives short runs, e.g. a 4-byte element per run is
  {100 * dma_efficiency(4, trn2):.0f}% efficient on trn2, while whole rows of ≥ {trn2.dma_full_chunk} B run at full rate.
- `x.astype(dtype)` is not a view: it is a recorded copy into a new tile."""
    return [
        ("cost model: DMA timing, queues and bandwidth", dma),
        ("cost model: scheduling, dependences and instruction order", sched),
        ("tensor views: reshape, slice, permute, broadcast and bit-cast of HBM tensors", views),
    ]
