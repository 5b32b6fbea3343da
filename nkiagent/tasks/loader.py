"""Finding tasks: builtin ones by name, and task files anywhere on disk."""

from __future__ import annotations

import importlib.util
import traceback
from functools import lru_cache
from pathlib import Path

from .spec import Task

__all__ = ["BUILTIN_DIR", "builtin_tasks", "get_task", "load_task_file"]

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def load_task_file(path: str | Path) -> Task:
    """Import a task file and return its ``TASK``; the file's path is remembered for its baseline."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"task file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"nkiagent_task_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import task file {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ValueError(f"{path}:{exc.lineno}: the task file does not parse ({exc.msg}); fix the syntax") from None
    except (ImportError, NameError, AttributeError, TypeError, ValueError) as exc:
        line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == str(file)), None)
        raise ValueError(f"{path}{f':{line}' if line else ''}: importing the task file failed: {type(exc).__name__}: {exc}") from None
    task = getattr(module, "TASK", None)
    if not isinstance(task, Task):
        raise ValueError(f"{path}: a task file must define TASK = Task(...)")  # noqa: TRY004 — every bad task file is a ValueError to callers
    task.source_path = file
    return task


@lru_cache(maxsize=1)
def builtin_tasks() -> dict[str, Task]:
    """Every builtin task by name, in level then name order."""
    tasks = [load_task_file(p) for p in sorted(BUILTIN_DIR.glob("*.py")) if not p.name.startswith("_")]
    return {t.name: t for t in sorted(tasks, key=lambda t: (t.level, t.name))}


def get_task(name_or_path: str) -> Task:
    """A builtin task by name, or a task file by path."""
    if name_or_path.endswith(".py") or "/" in name_or_path:
        return load_task_file(name_or_path)
    tasks = builtin_tasks()
    if name_or_path not in tasks:
        import difflib

        close = difflib.get_close_matches(name_or_path, list(tasks), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; available: {', '.join(tasks)}"
        raise KeyError(f"unknown task {name_or_path!r}{hint}")
    return tasks[name_or_path]
