"""Models behind the :class:`~nkiagent.agent.types.Model` seam, chosen by a spec string.

- ``scripted:PATH`` — :class:`ScriptedModel`, replays a JSONL of assistant turns (tests, reproducible demos);
- ``builtin/tuner`` — ``nkiagent.agent.tuner.TunerModel``, no LLM: sweeps the kernel's declared tunables;
- anything else — :class:`LiteLLMModel`, a litellm provider string such as ``anthropic/…``, ``openai/…``,
  ``hosted_vllm/…`` (with ``api_base``) or ``ollama_chat/…``.

Importing this package is cheap: litellm is imported on first use, or early in the background by
:func:`prewarm`.
"""

from __future__ import annotations

from typing import Any

from ..types import Model
from .base import ModelError
from .litellm_model import LiteLLMModel, prewarm
from .scripted import ScriptedModel

__all__ = ["LiteLLMModel", "ModelError", "ScriptedModel", "get_model", "prewarm"]


def get_model(spec: str, **opts: Any) -> Model:
    """The model ``spec`` names; ``opts`` go to its constructor (``api_base``, ``temperature``, … for litellm)."""
    if spec.startswith("scripted:"):
        if opts:
            raise ValueError(f"scripted models take no options (got {', '.join(sorted(opts))})")
        return ScriptedModel(spec)
    if spec == "builtin/tuner":
        from ..tuner import TunerModel  # imports the cost model; only when asked for

        return TunerModel(**opts)
    if spec.startswith("builtin/"):
        raise ValueError(f"unknown builtin model {spec!r}; the builtin models are builtin/tuner and scripted:PATH")
    return LiteLLMModel(spec, **opts)
