"""The emulator's fast paths, behind one switch.

Fast paths compute what the reference path computes, cheaper: matmul batching and wide
products (:mod:`.matmul`), caches of operand geometry and of passed rule checks, HBM → SBUF
copies left pending until read, whole-tile fills kept pending, ALU results written in place.
``NKIAGENT_EMU_FAST=0`` (or ``run_kernel(..., fast=False)``) turns them all off for a run, so a
kernel can be run both ways and the results compared (``tests/emu/test_fast_switch.py``):
they agree bit for bit, except that a matmul batch sums its K tiles in one GEMM where the
reference adds one instruction's product at a time (the same fp32 accumulation, in another
rounding order; exact for data that fp32 sums exactly).
"""

from __future__ import annotations

import os

__all__ = ["ENV", "enabled"]

ENV = "NKIAGENT_EMU_FAST"


def enabled(option: bool | None = None) -> bool:
    """Whether a run uses the fast paths: ``option`` when given, else ``NKIAGENT_EMU_FAST`` (default ``1``)."""
    if option is not None:
        return bool(option)
    value = os.environ.get(ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{ENV}={value!r}: set it to 1 (fast paths, the default) or 0 (the reference path, for comparison)")
    return value == "1"
