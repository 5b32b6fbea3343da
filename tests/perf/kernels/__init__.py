"""Kernels that reproduce published measurement points, for calibrating the cost model.

Each module writes, in the NKI 0.3+ style, the steps of one published optimization ladder
(``nki-reference.md`` §4.5): the trn2 2048³ matmul MFU ladder (:mod:`.matmul_trn2`), the fused
Mamba tutorial (:mod:`.mamba`) and the LayerNorm tutorial (:mod:`.layernorm`). Every kernel's
docstring names the published step it reproduces. ``tests/perf/test_calibration.py`` and
``benchmarks/calibrate.py`` compare our estimates with the published numbers;
``tests/perf/test_calibration_kernels.py`` checks each kernel against NumPy. Like
``tests/emu/kernels``, the modules import ``nki``, so the emulator must be installed first.
"""
