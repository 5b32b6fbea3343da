"""Tasks: the format (:mod:`.spec`), the builtin suite and loaders for user and NKIBench tasks."""

from __future__ import annotations

from .loader import builtin_tasks, get_task, load_task_file
from .spec import InputSpec, OutputSpec, Task, Tolerance

__all__ = ["InputSpec", "OutputSpec", "Task", "Tolerance", "builtin_tasks", "get_task", "load_task_file"]
