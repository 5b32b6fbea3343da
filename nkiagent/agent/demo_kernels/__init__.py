"""Starting kernels for demos: correct but untuned, with their knobs declared as ``# nkiagent: tune`` constants.

``nkiagent demo`` copies one into a fresh workspace and lets ``builtin/tuner`` make it faster.
The files are kernels, not modules of this package: they are read as text, never imported here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["demo_kernel_path"]


def demo_kernel_path(task: str) -> Path | None:
    """The demo starting kernel for builtin ``task``, if there is one."""
    path = Path(__file__).resolve().parent / f"{task}.py"
    return path if path.is_file() else None
