"""Finding the agent's data folders: ``prompts/`` and ``tools/``.

They live at the top of the repository (and in ``share/nkiagent/`` of an installed wheel);
a workspace may override or extend them in ``.nkiagent/prompts/`` and ``.nkiagent/tools/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["asset_dirs"]


def asset_dirs(kind: str, workspace: Path | None = None) -> list[Path]:
    """Folders holding ``kind`` (``prompts`` or ``tools``), lowest priority first."""
    dirs = []
    source = Path(__file__).resolve().parents[2] / kind
    installed = Path(sys.prefix) / "share" / "nkiagent" / kind
    for d in (source, installed):
        if d.is_dir():
            dirs.append(d)
            break
    if workspace is not None and (workspace / ".nkiagent" / kind).is_dir():
        dirs.append(workspace / ".nkiagent" / kind)
    if not dirs:
        raise FileNotFoundError(f"nkiagent's {kind}/ folder is missing (looked in {source} and {installed})")
    return dirs
