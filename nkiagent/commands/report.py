"""``nkiagent report SESSION…``: write a search report (Markdown + PNG) from stored sessions."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["run_report"]


def run_report(args: argparse.Namespace) -> int:
    from ..search.report import write_report

    dirs = [Path(s) if Path(s).is_dir() else Path(args.sessions_dir) / s for s in args.sessions]
    missing = [str(d) for d in dirs if not (d / "meta.json").is_file()]
    if missing:
        print(f"error: not a session: {', '.join(missing)}")
        return 2
    out = Path(args.out) if args.out else dirs[0] / "report.md"
    path = write_report(dirs, out)
    print(f"wrote {path} and {path.with_suffix('.png')}")
    return 0
