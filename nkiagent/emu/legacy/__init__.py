"""The NKI 0.1 (``neuronxcc.nki``) front-end of the emulator.

Most public NKI code (AWS's tutorials and samples before 2026, the NKIBench kernels) is
written against the first API generation. This package runs it unmodified on the same core
as 0.3 kernels, producing the same instruction trace for the cost model:

* :mod:`.grid` — ``nl.arange`` / ``nl.mgrid`` index expressions and ``mask=`` predicates;
* :mod:`.runtime` — launch rules (immutable parameters), ``affine_range`` independence,
  results written straight into their assignment target, block tensors;
* :mod:`.isa`, :mod:`.language` — ``nisa`` / ``nl`` calls that return their result tile;
* :mod:`.compiler` — ``ncc`` directives and direct allocation;
* :mod:`.frontend` — ``jit``, ``simulate_kernel``, ``baremetal``, ``benchmark``, ``profile``.

``nkiagent.emu.install()`` makes ``import neuronxcc.nki`` resolve to it, and the kernel
launcher selects it with ``run_kernel(..., api="0.1")``. Documented differences from the real
toolchain: float64 kernel arguments are stored as float32 (the legacy simulator computed in
fp32 too); instances of an SPMD grid, and iterations of every loop, run one after another.

Importing this package changes nothing elsewhere: a 0.1 launch gives its run the legacy
:mod:`.dialect` (``ctx.dialect``), which the tensor code consults, so the import order of the
two front-ends does not matter.
"""

from __future__ import annotations

from . import compiler, dialect, frontend, grid, isa, language, runtime

__all__ = ["compiler", "dialect", "frontend", "grid", "isa", "language", "runtime"]
