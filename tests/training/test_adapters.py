"""KernelEnv never raises on model output; the verl tool adapter and its example config work without verl installed."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from nkiagent.training.env import KernelEnv
from nkiagent.training.verl_tool import NkiKernelTool

from .conftest import KERNEL, cheat_kernel, honest_kernel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "verl" / "nkiagent_tools.yaml"


def _call(name: str, raw: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": raw}}],
    }


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (_call("write_file", json.dumps([KERNEL, "x"])), "must be a JSON object, got list"),
        (_call("write_file", "{truncated"), "are not valid JSON"),
        (_call("edit_file", {"path": KERNEL, "old": ["a"], "new": "b"}), "missing or not text: old"),
        (_call("write_file", {"path": "../../etc/x.py", "content": "x"}), "is outside the workspace"),
        (_call("read_file", {"path": "/etc/passwd"}), "is outside the workspace"),
        (_call("rm_rf", {}), "unknown tool 'rm_rf'"),
        ({"role": "assistant", "tool_calls": {"not": "a list"}}, "tool_calls must be a list"),
    ],
)
def test_kernel_env_answers_malformed_calls_with_tool_messages(action: dict[str, Any], error: str) -> None:
    with KernelEnv("vector_add", max_turns=4, seeds=1, hidden=False) as env:
        env.reset()
        obs, reward, done, info = env.step(action)
        assert error in obs["messages"][0]["content"] and info["outcome"] == "tool_error" and reward == -0.5 and not done
        obs, reward, _, info = env.step(42)  # not even text: a nudge, scored as a compile failure
        assert "No kernel and no tool call found" in obs["messages"][0]["content"] and reward == -0.5
        _, reward, _, info = env.step(_call("read_file", {"path": KERNEL}))  # and the episode goes on
        assert info["outcome"] == "unchanged" and reward == 0.0 and env.episode_reward() == -0.5


def test_verl_tool_runs_the_tools_and_a_cheat_is_never_washed_out() -> None:
    tool = NkiKernelTool({"seeds": 1, "hidden": False}, {"type": "function", "function": {"name": "write_file"}})

    async def rollout() -> tuple[list[Any], float, float]:
        iid, _ = await tool.create(create_kwargs={"task": "vector_add", "target": "trn2", "kernel_path": KERNEL})
        cheat = await tool.execute(iid, {"path": KERNEL, "content": cheat_kernel()})
        honest = await tool.execute(iid, {"path": KERNEL, "content": honest_kernel()})
        reward = await tool.calc_reward(iid)
        await tool.release(iid)
        missing = await tool.execute(iid, {"path": KERNEL, "content": "x"})
        return [cheat, honest, missing], reward, await tool.calc_reward(iid)

    (cheat, honest, missing), reward, after = asyncio.run(rollout())
    assert cheat[1] == -1.0 and cheat[2]["outcome"] == "rejected" and "verdict: rejected" in cheat[0]
    assert honest[1] > 1.0 and "verdict: pass" in honest[0]
    assert reward == -1.0  # the later pass does not lift the rollout above its cheat
    assert "was released or never created" in missing[0] and after == 0.0


def test_the_example_verl_config_names_nkiagents_tools() -> None:
    config = yaml.safe_load(EXAMPLE.read_text())
    names = []
    for entry in config["tools"]:
        module, _, cls = entry["class_name"].rpartition(".")
        tool = getattr(importlib.import_module(module), cls)(entry["config"], entry["tool_schema"])
        names.append(tool.name)
        assert tool.get_openai_tool_schema()["function"]["parameters"]["type"] == "object"
    assert names == ["read_file", "edit_file", "write_file", "evaluate"]
