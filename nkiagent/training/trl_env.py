"""TRL's environment API over :class:`~.env.KernelEnv`: ``GRPOTrainer(environment_factory=TRLKernelEnv)``.

TRL (≥ 1.0, ``environment_factory``) makes one instance per rollout, calls ``reset(**row)``
with the dataset row, exposes the public methods as tools the model may call during
generation (their docstrings are the tool schemas), and scores the finished rollout with
``get_reward()``. The row's ``task``/``target``/``kernel``/``kernel_path`` columns (what the
``trl-grpo`` export writes) choose the task and the kernel in force; the tools are nkiagent's
own, run through :class:`~.env.KernelEnv`, so a malformed call comes back as an error message,
never an exception in the trainer.

The rollout's reward follows the same rules as every other reward here: the score of the kernel
the rollout leaves in force (0 when it changed nothing), and a cheat anywhere in the rollout
scores as a cheat — a later honest edit does not wash it out. Use it beside
:func:`~.env.reward_fn` (which scores the final text answer) or alone.
"""

from __future__ import annotations

import json
from typing import Any

from .env import KernelEnv
from .rewards import DEFAULT_SPEC

__all__ = ["TRLKernelEnv"]


class TRLKernelEnv:
    """One rollout's workspace and tools; see the module docstring."""

    #: Defaults for every instance TRL creates (it calls the factory without arguments): set them on a subclass.
    reward_spec = DEFAULT_SPEC
    seeds = 1
    hidden = False
    max_calls = 16

    def __init__(self) -> None:
        self._env = KernelEnv(reward=self.reward_spec, max_turns=self.max_calls, seeds=self.seeds, hidden=self.hidden)

    def reset(self, **row: Any) -> str | None:
        """Start a rollout on the row's task from the row's kernel; the row's prompt already says what to do."""
        self._env.reset(str(row.get("task") or "vector_add"), kernel=row.get("kernel"), kernel_path=row.get("kernel_path"))
        return None

    def _call(self, name: str, args: dict[str, Any]) -> str:
        if self._env.done:
            return f"error: this rollout has used its {self.max_calls} tool calls; answer without calling {name}"
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "t", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
        }
        obs, _, _, _ = self._env.step(call)
        return "\n".join(m["content"] for m in obs["messages"])

    def read_file(self, path: str) -> str:
        """Read a file of the workspace, with line numbers.

        Args:
            path: The file's path relative to the workspace, e.g. kernels/vector_add.py.
        """
        return self._call("read_file", {"path": path})

    def write_file(self, path: str, content: str) -> str:
        """Replace the kernel file with new content; the new kernel is verified at once.

        Args:
            path: The kernel's path relative to the workspace.
            content: The whole new file.
        """
        return self._call("write_file", {"path": path, "content": content})

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace one exact, unique snippet of the kernel file; the new kernel is verified at once.

        Args:
            path: The kernel's path relative to the workspace.
            old: Exact text of the file to replace (whole lines).
            new: The replacement text.
        """
        return self._call("edit_file", {"path": path, "old": old, "new": new})

    def evaluate(self, path: str) -> str:
        """Verify the kernel file and report its verdict, latency and speedup.

        Args:
            path: The kernel's path relative to the workspace.
        """
        return self._call("evaluate", {"path": path})

    def get_reward(self) -> float:
        """The rollout's reward (:meth:`~.env.KernelEnv.episode_reward`): a cheat's if it cheated, else the last change's."""
        return self._env.episode_reward()
