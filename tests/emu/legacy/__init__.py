"""Kernels written in the NKI 0.1 (``neuronxcc.nki``) style, run on the emulator's legacy front-end."""
