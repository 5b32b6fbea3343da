"""One configuration model for sessions: typed, validated, layered, and stored whole in each session.

A value comes from the first of these that sets it, read in this order and each overriding the
one before: the defaults below, the user's ``~/.config/nkiagent/config.toml`` (``$XDG_CONFIG_HOME``
is honoured), the repository's ``.nkiagent/config.toml``, ``NKIAGENT_<KEY>`` environment
variables, then command-line flags. :func:`load_settings` returns the result and where each value
came from (``nkiagent config show`` prints both). Every value is checked against its field's type
and choices wherever it came from, and a bad one is reported with its place and the fix, because a
typo in a config file that silently falls back to a default is worse than no config file.

A session stores ``Settings.to_dict()`` in its ``meta.json``; resuming reads it back with
:meth:`Settings.from_dict`, so budgets, seeds, timeouts and the rest survive a resume exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

from .verify.protocol import VISIBLE_SEEDS

__all__ = [
    "ENV_PREFIX",
    "ConfigError",
    "Settings",
    "Sourced",
    "load_settings",
    "render_settings",
    "repo_config_path",
    "setting_help",
    "user_config_path",
]

ENV_PREFIX = "NKIAGENT_"
DEFAULT = "default"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the value, where it came from and the fix."""


@dataclass
class Settings:
    """What a person configures about a session. Field names are the config-file keys."""

    model: str = field(
        default="builtin/tuner",
        metadata={"help": "model: a litellm string (anthropic/…, openai/…, hosted_vllm/…, ollama_chat/…), scripted:PATH or builtin/tuner"},
    )
    api_base: str | None = field(
        default=None, metadata={"help": "endpoint of an OpenAI-compatible server (vLLM, Ollama's /v1, llama.cpp, a proxy)"}
    )
    api_key_env: str | None = field(
        default=None, metadata={"help": "environment variable holding the API key (default: the provider's own, e.g. ANTHROPIC_API_KEY)"}
    )
    timeout_s: float = field(default=60.0, metadata={"help": "seconds one model request may take", "minimum": 0.1})
    retries: int = field(
        default=3, metadata={"help": "retries of a request after rate limits, 5xx, timeouts or a server that is down", "minimum": 0}
    )
    temperature: float | None = field(default=None, metadata={"help": "sampling temperature (default: the provider's)", "minimum": 0})
    max_tokens: int | None = field(default=None, metadata={"help": "most tokens per answer (default: the provider's)", "minimum": 1})
    target: str = field(default="trn2", metadata={"help": "Trainium generation", "choices": ("trn1", "trn2", "trn3")})
    approve: str = field(
        default="ask", metadata={"help": "review each edit (ask), apply all (auto) or dry run (never)", "choices": ("ask", "auto", "never")}
    )
    approve_without_terminal: str = field(
        default="refuse",
        metadata={
            "help": "what --approve ask does without a terminal: refuse, or fall back to auto or never",
            "choices": ("refuse", "auto", "never"),
        },
    )
    max_turns: int = field(default=30, metadata={"help": "most model turns of a session", "minimum": 1})
    budget_usd: float | None = field(default=None, metadata={"help": "stop when the model cost reaches this", "minimum": 0})
    max_seconds: float | None = field(default=None, metadata={"help": "stop after this many seconds", "minimum": 0})
    verify_seeds: int = field(
        default=VISIBLE_SEEDS, metadata={"help": "seeds of the visible shape in the correctness protocol", "minimum": 1}
    )

    def to_dict(self) -> dict[str, Any]:
        """Every field with its typed value (JSON-able): what a session stores."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "the session's meta.json") -> Settings:
        """The settings ``data`` holds (unknown keys are an error, missing ones take their defaults)."""
        out = cls()
        for key, raw in data.items():
            setattr(out, _field(key, where).name, coerce(key, raw, where))
        return out


@dataclass
class Sourced:
    """Settings and, for each field, where its value came from (``default``, a file path, ``$NKIAGENT_…``, ``--flag``)."""

    settings: Settings
    sources: dict[str, str]


_FIELDS = {f.name: f for f in fields(Settings)}


def _field(key: str, where: str) -> Any:
    if key not in _FIELDS:
        raise ConfigError(f"{where}: unknown setting {key!r}; the settings are {', '.join(_FIELDS)}")
    return _FIELDS[key]


def _kind(key: str) -> tuple[type, bool]:
    """(base type, optional) of a field, from its annotation string (``from __future__ import annotations``)."""
    ann = str(_FIELDS[key].type).replace(" ", "")
    optional = ann.endswith("|None")
    return {"str": str, "int": int, "float": float}[ann.removesuffix("|None")], optional


def coerce(key: str, raw: Any, where: str) -> Any:
    """``raw`` (from TOML, an environment string or a flag) as the field's type, or a :class:`ConfigError` saying why not."""
    f = _field(key, where)
    base, optional = _kind(key)
    if isinstance(raw, str) and base is not str:
        text = raw.strip()
        if optional and text.lower() in ("", "none", "null"):
            return None
        try:
            raw = int(text) if base is int else float(text)
        except ValueError:
            raise ConfigError(f"{where}: {key} must be {'an integer' if base is int else 'a number'}, not {raw!r}") from None
    if raw is None:
        if optional:
            return None
        raise ConfigError(f"{where}: {key} cannot be empty; remove it to use the default ({getattr(Settings(), key)!r})")
    if base is float and isinstance(raw, int) and not isinstance(raw, bool):
        raw = float(raw)
    if not isinstance(raw, base) or isinstance(raw, bool):
        raise ConfigError(f"{where}: {key} must be {base.__name__}, not {type(raw).__name__} {raw!r}")
    choices, minimum = f.metadata.get("choices", ()), f.metadata.get("minimum")
    if choices and raw not in choices:
        raise ConfigError(f"{where}: {key} must be one of {', '.join(choices)}, not {raw!r}")
    if minimum is not None and raw < minimum:
        raise ConfigError(f"{where}: {key} must be at least {minimum:g}, not {raw!r}")
    return raw


def setting_help(key: str) -> tuple[str, tuple[str, ...], str]:
    """(help text, choices, base type name) of a setting, for the command-line flags."""
    f = _field(key, "setting_help")
    return f.metadata["help"], tuple(f.metadata.get("choices", ())), _kind(key)[0].__name__


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/nkiagent/config.toml``, by default ``~/.config/nkiagent/config.toml``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "nkiagent" / "config.toml"


def repo_config_path(workspace: Path) -> Path:
    return workspace / ".nkiagent" / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from None


def load_settings(workspace: Path, flags: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Sourced:
    """Defaults ← user file ← repository file ← ``NKIAGENT_*`` ← ``flags`` (None values in ``flags`` are not set)."""
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = Settings().to_dict()
    sources = dict.fromkeys(values, DEFAULT)
    for path in (user_config_path(env), repo_config_path(workspace)):
        if path.is_file():
            for key, raw in _read_toml(path).items():
                values[key] = coerce(key, raw, str(path))
                sources[key] = str(path)
    for key in _FIELDS:
        name = ENV_PREFIX + key.upper()
        if name in env:
            values[key] = coerce(key, env[name], f"${name}")
            sources[key] = f"${name}"
    for key, raw in (flags or {}).items():
        if raw is not None:
            flag = "--" + key.replace("_", "-")
            values[key] = coerce(key, raw, flag)
            sources[key] = flag
    return Sourced(Settings(**values), sources)


def render_settings(sourced: Sourced) -> list[str]:
    """``key = value  # source`` lines, TOML that can be pasted into a config file."""
    rows = []
    for key, value in sourced.settings.to_dict().items():
        left = f"# {key} = (not set)" if value is None else f"{key} = {value!r}" if not isinstance(value, str) else f'{key} = "{value}"'
        rows.append((left, sourced.sources[key], _FIELDS[key].metadata["help"]))
    width = max(len(r[0]) for r in rows)
    return [f"{left:{width}s}  # {src}: {help_}" for left, src, help_ in rows]
