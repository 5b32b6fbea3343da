"""The user's repository as the agent sees it: confined paths, safe writes, git snapshots and undo.

The kernel lives in the user's own repo (by default ``kernels/<task>.py``), so every write
has to be safe for work the user has not committed. The rules:

- **Confinement.** Every path is resolved against the workspace root. Absolute paths
  outside it, ``..`` escapes, symbolic links that lead outside, and git's own files are
  refused with an error that names the path.
- **Never overwrite the user's uncommitted work.** A write is refused
  (:class:`RefusedEdit`) when the file differs from ``HEAD`` and is not what this session
  last wrote there, so the agent can keep editing its own file but never clobbers yours.
- **Snapshots that never touch your git state.** After each write the session's state is
  recorded as a commit under ``refs/nkiagent/<session>``. The commit is built through a
  temporary index (``GIT_INDEX_FILE``) with plumbing commands (``read-tree``,
  ``update-index``, ``write-tree``, ``commit-tree``, ``update-ref``), so your index, ``HEAD``,
  branch, stash and other files are never written. Codex's "ghost commit" undo was
  withdrawn after its restore clobbered staged changes; this design keeps the user's index
  out of the path entirely. The snapshot commit is made before the file is replaced
  (atomically), so an edit never lands without one.
- **Undo** restores the file of the newest snapshot to its content in the snapshot's parent
  (the previous snapshot, or for the first one the commit that was ``HEAD`` when the session
  started) and moves the ref back. It refuses when the file changed after the snapshot.

Snapshot ``k`` is the previous snapshot's tree (for the first, the ``HEAD`` the session
started from) plus the file written. Each snapshot names its session and the file in
trailers (``Nkiagent-Session``, ``Nkiagent-Path``), which is how the session's chain is told
apart from the user's history it grows from. If the user commits a file in the middle of a
session and the agent then edits it, undoing that edit restores the version the session
started from; the user's commit itself stays in their history.

Snapshots use a fixed identity (``nkiagent <nkiagent@localhost>``) and ``--no-gpg-sign``,
so they work in a repo with no configured user and never prompt for a signing key.

A directory outside any git repository works as well: writes are atomic and confined, but
there are no snapshots, no undo and no protection of uncommitted changes (see
:attr:`Workspace.warning`).
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # GitPython costs ~0.3 s to import; it is loaded when a Workspace opens.
    from git import Commit, Repo

__all__ = [
    "REF_PREFIX",
    "NothingToUndo",
    "PathError",
    "RefusedEdit",
    "UndoResult",
    "Workspace",
    "WorkspaceError",
    "kernel_path",
]

REF_PREFIX = "refs/nkiagent/"
SESSION_TRAILER = "Nkiagent-Session"
PATH_TRAILER = "Nkiagent-Path"

_IDENTITY = {
    "GIT_AUTHOR_NAME": "nkiagent",
    "GIT_AUTHOR_EMAIL": "nkiagent@localhost",
    "GIT_COMMITTER_NAME": "nkiagent",
    "GIT_COMMITTER_EMAIL": "nkiagent@localhost",
}
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TRAILER = re.compile(r"^(Nkiagent-[A-Za-z]+): (.*)$", re.MULTILINE)
_SKIP_ANYWHERE = frozenset({".git", "__pycache__"})
_SKIP_AT_ROOT = frozenset({"sessions"})


class WorkspaceError(Exception):
    """Something the workspace will not or cannot do; the message is meant for the user and the model."""


class PathError(WorkspaceError):
    """A path that escapes the workspace or points into git's own files."""


class RefusedEdit(WorkspaceError):
    """A write or undo that would destroy changes this session did not make."""


class NothingToUndo(WorkspaceError):
    """The session has no snapshot left (or the workspace has no git)."""


@dataclass(frozen=True)
class UndoResult:
    """What :meth:`Workspace.undo` changed. Unpacks as ``path, sha = ws.undo(session)``.

    ``path`` is workspace-relative; ``sha`` is the commit whose version of the file is now
    on disk (the previous snapshot, or the commit the session started from), or ``None``
    when the session started in a repo without commits; ``summary`` says it in words.
    """

    path: str
    sha: str | None
    summary: str

    def __iter__(self) -> Iterator[str | None]:
        return iter((self.path, self.sha))


def kernel_path(task_name: str) -> str:
    """Where a task's kernel lives in the user's repo unless they choose otherwise."""
    if not task_name or "/" in task_name or "\\" in task_name or task_name.startswith("."):
        raise ValueError(f"task name {task_name!r} cannot name a kernel file")
    return f"kernels/{task_name}.py"


def _temp_beside(target: Path, data: bytes) -> Path:
    """``data`` in a new, fsynced file next to ``target`` (same filesystem, so ``os.replace`` is atomic).

    It carries the permission bits ``target`` has, or the umask's for a new file, as ``open`` would.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    tmp = target.with_name(f".{target.name}.nkiagent-{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _atomic_write(target: Path, data: bytes) -> None:
    """Replace ``target`` in one step, so a crash leaves the old file or the new one, never half of either."""
    tmp = _temp_beside(target, data)
    try:
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _message(commit: Commit) -> str:
    """A commit's message as text (GitPython hands back bytes when it is not valid in its encoding)."""
    message = commit.message
    return message if isinstance(message, str) else message.decode("utf-8", "replace")


def _trailers(commit: Commit) -> dict[str, str]:
    return dict(_TRAILER.findall(_message(commit)))


def _subject(commit: Commit) -> str:
    """The message a snapshot was written with, without its trailers."""
    return _message(commit).split(f"\n\n{SESSION_TRAILER}: ", 1)[0].strip()


def _open_repo(root: Path) -> tuple[Repo | None, str]:
    """The git repository whose work tree holds ``root``, or ``None`` and the reason why not."""
    try:
        import git
    except ImportError as exc:  # GitPython refuses to import when no git executable is found
        return None, f"git is not available ({str(exc).splitlines()[0]})"
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None, f"{root} is not inside a git repository"
    if repo.bare or repo.working_tree_dir is None:
        return None, f"{root} belongs to a bare git repository"
    return repo, ""


class Workspace:
    """The user's directory (usually a git repo) that the agent reads and edits."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._given_root = Path(os.path.abspath(root))
        self.root = self._given_root.resolve()
        if not self.root.is_dir():
            raise WorkspaceError(f"workspace {self._given_root} is not a directory")
        self._repo, self._no_git_reason = _open_repo(self.root)
        self._worktree = Path(self._repo.working_tree_dir or self.root).resolve() if self._repo is not None else None

    # -- git status of the workspace -------------------------------------------------

    @property
    def is_git(self) -> bool:
        """Whether edits are snapshotted and undoable (the root is inside a git work tree)."""
        return self._repo is not None

    @property
    def warning(self) -> str | None:
        """What the user loses without git, to show once at start; ``None`` inside a git repo."""
        if self._repo is not None:
            return None
        return (
            f"{self._no_git_reason}: edits are written without snapshots, so they cannot be undone and "
            "files you changed are not protected from the agent's edits. Run `git init` and commit to get both."
        )

    # -- paths -----------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real absolute path of ``path`` (relative to the root), refusing anything outside the workspace."""
        raw = os.fspath(path)
        if any(c in raw for c in "\n\r\0"):
            raise PathError(f"refusing path {raw!r}: it contains a line break or NUL character")
        lexical = Path(os.path.normpath(self._given_root / raw))
        if not (lexical.is_relative_to(self._given_root) or lexical.is_relative_to(self.root)):
            raise PathError(f"refusing path {raw!r}: it is outside the workspace {self._given_root}")
        real = lexical.resolve()
        if not real.is_relative_to(self.root):
            raise PathError(f"refusing path {raw!r}: it leads outside the workspace {self._given_root} through a symbolic link")
        if ".git" in real.relative_to(self.root).parts:
            raise PathError(f"refusing path {raw!r}: git's own files are off limits")
        return real

    def _rel(self, real: Path) -> str:
        """Workspace-relative POSIX form of a resolved path, as shown to users and models."""
        return real.relative_to(self.root).as_posix() or "."

    def _gitpath(self, real: Path) -> str:
        assert self._worktree is not None
        return real.relative_to(self._worktree).as_posix()

    # -- reading ---------------------------------------------------------------------

    def read(self, path: str | os.PathLike[str]) -> str:
        """The text of a file, byte-exact (no newline translation), so an edit round-trips."""
        real = self.resolve(path)
        if not real.is_file():
            raise WorkspaceError(f"no file {self._rel(real)} in the workspace")
        try:
            return real.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkspaceError(f"{self._rel(real)} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` exists in the workspace (refusing paths outside it, like every other call)."""
        return self.resolve(path).exists()

    def list(self, path: str | os.PathLike[str] = ".") -> Iterator[str]:
        """Files under ``path``, workspace-relative and sorted per directory.

        Skips ``.git``, ``__pycache__`` and the top-level ``sessions/`` (the agent's own
        records), and any symbolic link that leads outside the workspace.
        """
        base = self.resolve(path)
        if base.is_file():
            yield self._rel(base)
            return
        if not base.is_dir():
            raise WorkspaceError(f"no directory {self._rel(base)} in the workspace")
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            dirnames[:] = sorted(n for n in dirnames if n not in _SKIP_ANYWHERE and not (here == self.root and n in _SKIP_AT_ROOT))
            for name in sorted(filenames):
                real = (here / name).resolve()
                if real.is_relative_to(self.root):
                    yield (here / name).relative_to(self.root).as_posix()

    # -- writing, snapshots, undo ----------------------------------------------------

    def write(self, path: str | os.PathLike[str], content: str, session_id: str, message: str | None = None) -> str | None:
        """Write ``content`` to ``path`` for ``session_id`` and snapshot it; return the snapshot sha (``None`` without git).

        Raises :class:`RefusedEdit` when the file holds changes this session did not make.
        """
        _check_session_id(session_id)
        real = self.resolve(path)
        rel = self._rel(real)
        if real.is_dir():
            raise WorkspaceError(f"cannot write {rel}: it is a directory")
        if self._repo is None:
            _atomic_write(real, content.encode("utf-8"))
            return None
        message = message or f"write {rel}"
        gpath = self._gitpath(real)
        chain = self._chain(session_id)
        disk = self._disk_blob(gpath)
        ours = bool(chain) and gpath in self._session_paths(chain) and disk == _tree_blob(chain[0], gpath)
        if disk != _tree_blob(self._head(), gpath) and not ours:
            raise RefusedEdit(
                f"refusing to edit {rel}: it has uncommitted changes that this session did not make. "
                "Commit or stash them first, or have the agent write to another file."
            )
        # The snapshot commit is made before the file lands, so an edit never reaches the disk
        # without one; the ref moves once it has.
        tmp = _temp_beside(real, content.encode("utf-8"))
        try:
            sha = self._snapshot_commit(session_id, gpath, tmp, chain, message)
            os.replace(tmp, real)
        finally:
            tmp.unlink(missing_ok=True)
        self._repo.git.update_ref("-m", f"nkiagent: {message}", REF_PREFIX + session_id, sha, chain[0].hexsha if chain else "")
        return sha

    def undo(self, session_id: str) -> UndoResult:
        """Undo the session's newest snapshot: restore its file to the parent's version and move the ref back."""
        _check_session_id(session_id)
        if self._repo is None:
            raise NothingToUndo(f"nothing to undo: {self._no_git_reason}, so edits have no snapshots")
        chain = self._chain(session_id)
        if not chain:
            raise NothingToUndo(f"nothing to undo: session {session_id} has no snapshots ({REF_PREFIX}{session_id} does not exist)")
        tip = chain[0]
        gpath = _trailers(tip)[PATH_TRAILER]
        assert self._worktree is not None
        real = self.resolve(self._worktree / gpath)
        rel = self._rel(real)
        if self._disk_blob(gpath) != _tree_blob(tip, gpath):
            raise RefusedEdit(
                f"refusing to undo {rel}: it changed after this session's snapshot {tip.hexsha[:12]}. "
                "Commit, stash or revert those changes first."
            )
        parent = tip.parents[0] if tip.parents else None
        what = f"undid {tip.hexsha[:12]} ({_subject(tip)})"
        if _tree_blob(parent, gpath) is None:
            real.unlink()
            summary = f"{what}: removed {rel}, which did not exist before this session created it"
        else:
            assert parent is not None
            data = self._repo.git.cat_file("--filters", f"{parent.hexsha}:{gpath}", stdout_as_string=False, strip_newline_in_stdout=False)
            _atomic_write(real, data)
            where = (
                f"snapshot {parent.hexsha[:12]}" if len(chain) > 1 else f"commit {parent.hexsha[:12]}, as before this session's first edit"
            )
            summary = f"{what}: restored {rel} to {where}"
        ref = REF_PREFIX + session_id
        if len(chain) > 1:
            self._repo.git.update_ref("-m", f"nkiagent undo {tip.hexsha}", ref, chain[1].hexsha, tip.hexsha)
        else:
            self._repo.git.update_ref("-d", ref, tip.hexsha)
            summary += "; the session has no snapshots left"
        return UndoResult(rel, parent.hexsha if parent is not None else None, summary)

    def snapshots(self, session_id: str) -> builtins.list[tuple[str, str]]:
        """The session's snapshots as ``(sha, message)``, newest first (empty without git)."""
        _check_session_id(session_id)
        if self._repo is None:
            return []
        return [(c.hexsha, _subject(c)) for c in self._chain(session_id)]

    # -- git helpers -----------------------------------------------------------------

    def _head(self) -> Commit | None:
        assert self._repo is not None
        return self._repo.head.commit if self._repo.head.is_valid() else None

    def _chain(self, session_id: str) -> builtins.list[Commit]:
        """The session's snapshots, newest first: first parents from the ref while they carry the session's trailer."""
        assert self._repo is not None
        tip = self._repo.git.rev_parse("--verify", "--quiet", f"{REF_PREFIX}{session_id}^{{commit}}", with_exceptions=False)
        chain: builtins.list[Commit] = []
        commit = self._repo.commit(tip) if tip else None
        while commit is not None and _trailers(commit).get(SESSION_TRAILER) == session_id:
            chain.append(commit)
            commit = commit.parents[0] if commit.parents else None
        return chain

    @staticmethod
    def _session_paths(chain: builtins.list[Commit]) -> set[str]:
        return {_trailers(c)[PATH_TRAILER] for c in chain}

    def _disk_blob(self, gpath: str) -> str | None:
        """The blob id git would give the file on disk (clean filters applied), or ``None`` when it is absent."""
        assert self._repo is not None and self._worktree is not None
        if not (self._worktree / gpath).is_file():
            return None
        return str(self._repo.git.hash_object("--", gpath))

    def _snapshot_commit(self, session_id: str, gpath: str, source: Path, chain: builtins.list[Commit], message: str) -> str:
        """A commit of the previous snapshot (or HEAD) with ``gpath`` set to ``source``'s content, built in a throwaway index."""
        assert self._repo is not None
        git = self._repo.git
        head = self._head()
        parent = chain[0].hexsha if chain else (head.hexsha if head is not None else None)
        mode = "100755" if source.stat().st_mode & 0o100 else "100644"
        with tempfile.TemporaryDirectory(prefix="nkiagent-index-") as tmp:
            env = {**_IDENTITY, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
            git.read_tree(parent or "--empty", env=env)
            blob = git.hash_object("-w", f"--path={gpath}", "--", str(source))  # --path: the filters of gpath apply
            git.update_index("--add", "--cacheinfo", f"{mode},{blob},{gpath}", env=env)
            tree = git.write_tree(env=env)
        full = f"{message}\n\n{SESSION_TRAILER}: {session_id}\n{PATH_TRAILER}: {gpath}\n"
        return str(git.commit_tree(tree, *(["-p", parent] if parent else []), "--no-gpg-sign", "-m", full, env=_IDENTITY))


def _tree_blob(commit: Commit | None, gpath: str) -> str | None:
    """The object id at ``gpath`` in ``commit``'s tree, or ``None`` when absent (or no commit)."""
    if commit is None:
        return None
    try:
        return (commit.tree / gpath).hexsha
    except KeyError:
        return None


def _check_session_id(session_id: str) -> None:
    """Session ids name a git ref, so they must be one valid ref component."""
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id or session_id.endswith((".", ".lock")):
        raise WorkspaceError(f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-'")
