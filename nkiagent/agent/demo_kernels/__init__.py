"""Starting kernels: correct but untuned, with their knobs declared as ``# nkiagent: tune`` constants.

Sessions (``nkiagent demo``, ``run``) and searches start from ``<task>.py`` here when it exists,
before the task's baseline, so ``builtin/tuner`` has a real search space. Every setting of every
knob is correct on every shape the task allows. The files are kernels, not modules of this
package: they are read as text, never imported here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["demo_kernel_path"]


def demo_kernel_path(task: str) -> Path | None:
    """The demo starting kernel for builtin ``task``, if there is one."""
    path = Path(__file__).resolve().parent / f"{task}.py"
    return path if path.is_file() else None
