"""``nkiagent task new``: write a task file for the user's own function or module."""

from __future__ import annotations

import argparse
import sys

__all__ = ["run_task_new"]


def run_task_new(args: argparse.Namespace) -> int:
    from ..tasks.user import write_task_file

    name = args.name or args.source.rsplit(":", 1)[-1].lower()
    out = args.out or f"tasks/{name}.py"
    try:
        path = write_task_file(args.source, args.inputs, out, args.name)
    except (ValueError, FileNotFoundError, AttributeError, ImportError, TypeError) as exc:
        print(f"nkiagent task new: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    print(f"next: nkiagent eval KERNEL.py --task {path}")
    return 0
