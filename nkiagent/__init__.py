"""nkiagent: a terminal coding agent for AWS Trainium NKI kernels, with an embedded emulator."""

__version__ = "0.1.0"
__all__ = ["__version__"]
