"""Rendering the model's prompts from ``prompts/*.j2`` (Jinja2, StrictUndefined: a missing value is an error)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from .assets import asset_dirs

__all__ = ["render", "system_prompt", "task_prompt"]


def _env(workspace: Path | None) -> Any:
    import jinja2

    loader = jinja2.FileSystemLoader([str(d) for d in reversed(asset_dirs("prompts", workspace))])
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


def render(name: str, workspace: Path | None = None, **values: Any) -> str:
    """Render ``prompts/<name>`` (a workspace's ``.nkiagent/prompts/<name>`` wins)."""
    return _env(workspace).get_template(name).render(**values)


def system_prompt(target: str, workspace: Path | None = None) -> str:
    cheat = next((d / "nki_cheatsheet.md" for d in reversed(asset_dirs("prompts", workspace)) if (d / "nki_cheatsheet.md").is_file()), None)
    return render(
        "system.md.j2",
        workspace,
        target=target,
        timing_source="the nkiagent emulator's cost model (emulator-estimate)",
        cheatsheet=cheat.read_text() if cheat else "",
    )


def task_prompt(task: Any, kernel_path: str, target: str, best: str = "", workspace: Path | None = None, turns: int | None = None) -> str:
    """The task as the model reads it; ``turns``: the session's budget of model turns, said when there is one."""
    try:
        reference = inspect.getsource(task.reference)
    except (OSError, TypeError):
        reference = f"# {task.reference!r} (source unavailable)"
    desc = task.describe()
    view = {
        "name": task.name,
        "level": task.level,
        "description": task.description,
        "constraints": task.constraints,
        "inputs": desc["inputs"],
        "output": desc["output"],
        "tolerance": task.tolerance,
    }
    return render(
        "task.md.j2", workspace, task=view, kernel_path=kernel_path, reference=reference.strip(), target=target, best=best, turns=turns
    )
