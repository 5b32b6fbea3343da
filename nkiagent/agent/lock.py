"""One session per repository at a time: a lock that names its holder, and dies with it.

Two sessions editing one repository would refuse each other's edits (each protects the files the
other wrote) or race on them, so the second one to start is told who holds the repository
instead. The lock is ``flock`` on a file in the repository's git directory (``.git/nkiagent.lock``,
never seen by ``git status``; outside git, in the sessions directory): the kernel releases it when
the holding process ends, however it ends, so a crash never leaves a stale lock behind. A process
keeps the locks it took until it exits, so the UI can run one session after another.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

__all__ = ["RepositoryBusy", "lock_path", "lock_repository"]

_HELD: dict[Path, int] = {}  #: lock file → open descriptor, for the locks this process holds
_GUARD = threading.Lock()


class RepositoryBusy(RuntimeError):
    """Another process has a session open in this repository."""


def lock_path(workspace: Path, sessions_dir: Path) -> Path:
    """Where the repository's lock lives: its git directory, else the sessions directory."""
    from .workspace import _open_repo

    repo, _ = _open_repo(workspace)
    return (Path(repo.git_dir) if repo is not None else sessions_dir) / "nkiagent.lock"


def lock_repository(workspace: Path, sessions_dir: Path, session_id: str) -> None:
    """Hold the repository for this process (again is fine); :class:`RepositoryBusy` names the other holder."""
    path = lock_path(workspace, sessions_dir).resolve()
    with _GUARD:
        if path in _HELD:
            fd = _HELD[path]
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RepositoryBusy(
                    f"another nkiagent session ({holder.get('session', '?')}, process {holder.get('pid', '?')}) is working in "
                    f"{workspace}; wait for it to end or stop it (ctrl+c there): two sessions in one repository would "
                    f"overwrite each other's edits. The lock is {path}."
                ) from None
            _HELD[path] = fd
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "session": session_id}).encode(), 0)


def _holder(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
