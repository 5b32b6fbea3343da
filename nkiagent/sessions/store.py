"""The session store: one folder per session, an append-only event log, every candidate kernel.

``sessions/<id>/events.jsonl`` holds one JSON object per line — ``type``, ``ts``,
``session_id``, ``seq`` plus the event's fields — written with ``fsync`` after every event,
so a session killed at any moment keeps everything it recorded (a torn last line is skipped
on reading). ``kernels/<sha256>.py`` keeps each candidate; ``meta.json`` the task, model,
strategy, configuration and versions. Exporters read only these files.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EVENT_TYPES", "Session", "SessionStore", "new_session_id", "read_events"]

EVENT_TYPES = frozenset(
    {
        "session_start",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "edit_proposed",
        "review_decision",
        "edit_refused",
        "model_retry",
        "edit_applied",
        "evaluation",
        "candidate",
        "note",
        "error",
        "session_end",
    }
)


def new_session_id() -> str:
    """Sortable and unique: ``YYYYmmdd-HHMMSS-xxxxxx``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Every complete event of an ``events.jsonl``; a truncated or corrupt last line is ignored."""
    events: list[dict[str, Any]] = []
    p = Path(path)
    if not p.is_file():
        return events
    with open(p, "rb") as fh:
        lines = fh.read().split(b"\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            if k >= len(lines) - 2:  # the torn tail of a killed writer
                break
            raise ValueError(f"{path}:{k + 1}: corrupt event line (not the last line, so not a torn write)") from None
    return events


class Session:
    """An open session: append events, keep kernels, read back."""

    def __init__(self, directory: Path, session_id: str) -> None:
        self.dir = directory
        self.id = session_id
        self.events_path = directory / "events.jsonl"
        existing = read_events(self.events_path)
        self.seq = (existing[-1]["seq"] + 1) if existing else 0
        self._truncate_torn_tail()
        self._fh = open(self.events_path, "ab")  # noqa: SIM115 — held for the session's appends; close() closes it

    def _truncate_torn_tail(self) -> None:
        """Drop a partial last line left by a crash, so appends start on a clean line."""
        if not self.events_path.is_file():
            return
        data = self.events_path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.events_path, "r+b") as fh:
                fh.truncate(cut)
                fh.flush()
                os.fsync(fh.fileno())

    def append(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one event durably (written and fsynced before this returns)."""
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}; known: {', '.join(sorted(EVENT_TYPES))}")
        event = {"type": type_, "ts": time.time(), "session_id": self.id, "seq": self.seq, **fields}
        line = json.dumps(event, default=str, separators=(",", ":")).encode() + b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.seq += 1
        return event

    def save_kernel(self, source: str) -> str:
        """Store a candidate under its sha256 and return the hash."""
        sha = hashlib.sha256(source.encode()).hexdigest()
        path = self.dir / "kernels" / f"{sha}.py"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        return sha

    def kernel(self, sha: str) -> str:
        return (self.dir / "kernels" / f"{sha}.py").read_text()

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.events_path)

    def meta(self) -> dict[str, Any]:
        p = self.dir / "meta.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    def update_meta(self, **fields: Any) -> None:
        meta = {**self.meta(), **fields}
        tmp = self.dir / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, default=str))
        os.replace(tmp, self.dir / "meta.json")

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


@dataclass
class SessionStore:
    """Where sessions live (default ``<workspace>/sessions``)."""

    root: Path

    def create(self, meta: dict[str, Any], session_id: str | None = None) -> Session:
        sid = session_id or new_session_id()
        directory = Path(self.root) / sid
        directory.mkdir(parents=True, exist_ok=False)
        (directory / "kernels").mkdir()
        session = Session(directory, sid)
        session.update_meta(id=sid, created=time.time(), **meta)
        return session

    def open(self, session_id: str) -> Session:
        directory = Path(self.root) / session_id
        if not (directory / "meta.json").is_file():
            known = ", ".join(s for s, _ in self.list()) or "none"
            raise KeyError(f"no session {session_id!r} in {self.root} (known: {known})")
        return Session(directory, session_id)

    def list(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        root = Path(self.root)
        if not root.is_dir():
            return out
        for d in sorted(root.iterdir()):
            meta_path = d / "meta.json"
            if meta_path.is_file():
                out.append((d.name, json.loads(meta_path.read_text())))
        return out

    def iter_sessions(self) -> Iterator[Session]:
        for sid, _ in self.list():
            yield self.open(sid)
