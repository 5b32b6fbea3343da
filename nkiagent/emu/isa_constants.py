"""``nki.isa.constants``: the ``nisa`` enums, importable as a submodule as in AWS's package.

AWS's NKI Library writes ``from nki.isa.constants import oob_mode, dge_mode``; these are the
same enum objects ``nki.isa`` shows.
"""

from __future__ import annotations

from .instructions.common import (  # noqa: F401  (the submodule's contents)
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
