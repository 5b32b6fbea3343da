"""verl's multi-turn tool interface over :class:`~.env.KernelEnv` (``examples/verl/nkiagent_tools.yaml``).

verl (≥ 0.5) loads the tools named in ``actor_rollout_ref.rollout.multi_turn.tool_config_path``
by ``class_name`` and, for each tool call of a rollout, ``create``\\ s an instance with the
row's ``extra_info.tools_kwargs[NAME].create_kwargs`` (the verl export writes ``task``,
``target``, ``kernel`` and ``kernel_path`` there), ``execute``\\ s the call and ``release``\\ s it.
Each instance is one workspace holding the kernel in force; its calls are nkiagent's tools run
through :class:`~.env.KernelEnv`, so a malformed call is an error message back to the model,
never an exception in the rollout worker, and every change is verified in the sandbox.

The rollout's reward is :func:`~.env.compute_score` over the whole response (it applies every
``<tool_call>`` of the response to the row's kernel); ``execute``'s step reward follows the
same rules (0 for a call that changes nothing), for verl's tool-reward logging.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from .env import KernelEnv
from .rewards import DEFAULT_SPEC

try:  # subclass verl's BaseTool when verl is installed, so isinstance checks and its registry accept the class
    from verl.tools.base_tool import BaseTool as _Base  # type: ignore[import-not-found]
except ImportError:  # without verl the class is still usable (and tested) on its own
    _Base = object

__all__ = ["NkiKernelTool"]


def _response(text: str) -> Any:
    try:
        from verl.tools.schemas import ToolResponse  # type: ignore[import-not-found]
    except ImportError:
        return text
    return ToolResponse(text=text)


def _get(schema: Any, *keys: str) -> Any:
    for k in keys:
        schema = schema.get(k) if isinstance(schema, dict) else getattr(schema, k, None)
    return schema


class NkiKernelTool(_Base):  # type: ignore[misc,valid-type]
    """One nkiagent tool (``write_file``, ``edit_file``, ``read_file``, ``evaluate`` …) as a verl tool.

    ``config`` may set ``reward_spec`` (default ``gated-speedup``), ``seeds`` (1) and ``hidden`` (false: fast rollouts).
    """

    def __init__(self, config: dict[str, Any] | None = None, tool_schema: Any = None) -> None:
        self.config = dict(config or {})
        self.tool_schema = tool_schema
        self.name = str(_get(tool_schema, "function", "name") or self.config.get("name") or "write_file")
        self._envs: dict[str, KernelEnv] = {}

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        """A workspace on the row's task holding the row's kernel (``create_kwargs``: task, target, kernel, kernel_path)."""
        iid = instance_id or uuid.uuid4().hex
        ck = kwargs.get("create_kwargs", kwargs) or {}
        env = KernelEnv(
            str(ck.get("task") or "vector_add"),
            str(ck.get("target") or "trn2"),
            str(self.config.get("reward_spec") or DEFAULT_SPEC),
            max_turns=10**6,
            seeds=int(self.config.get("seeds", 1)),
            hidden=bool(self.config.get("hidden", False)),
        )
        await asyncio.to_thread(env.reset, None, ck.get("kernel"), ck.get("kernel_path"))
        self._envs[iid] = env
        return iid, _response("")

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict[str, Any]]:
        """Run the call; (response, step reward, metrics). An unknown instance or bad parameters are an error message."""
        env = self._envs.get(instance_id)
        if env is None:
            return (
                _response(f"error: no {self.name} instance {instance_id!r}; it was released or never created"),
                0.0,
                {"outcome": "tool_error"},
            )
        args = parameters if isinstance(parameters, (dict, str)) else {}
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "verl",
                    "type": "function",
                    "function": {"name": self.name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
            ],
        }
        obs, reward, _, info = await asyncio.to_thread(env.step, call)
        return _response("\n".join(m["content"] for m in obs["messages"])), reward, {"outcome": info["outcome"], "errors": info["errors"]}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The instance's :meth:`~.env.KernelEnv.episode_reward` (0 for an unknown instance)."""
        env = self._envs.get(instance_id)
        return env.episode_reward() if env is not None else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        env = self._envs.pop(instance_id, None)
        if env is not None:
            env.close()
