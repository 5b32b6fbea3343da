"""Kernels written here in the public NKI 0.3+ style, one module per kernel family.

They exist to prove the emulator runs real-looking kernels end to end (``tests/emu/test_kernels.py``)
and to give the benchmark (``benchmarks/bench_emulator.py``) realistic instruction streams. Each
module imports ``nki`` like a kernel file written for AWS's toolchain would, so the emulator must
already be installed (``nkiagent.emu.install()``) when one of them is imported.
"""
