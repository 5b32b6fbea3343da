"""Workspace and git safety, on real git repositories in tmp_path (no mocks).

The promise under test: the user's index, HEAD, branch, stash and other files are
byte-identical after agent writes and undos; snapshots land under refs/nkiagent/<session>;
files with changes the session did not make are never overwritten.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nkiagent.agent.workspace import (
    NothingToUndo,
    PathError,
    RefusedEdit,
    Workspace,
    WorkspaceError,
    kernel_path,
)

KERNEL = kernel_path("vector_add")
BASELINE = "import nki\n\n\ndef vector_add(a, b):\n    return a + b\n"
V1 = BASELINE.replace("a + b", "nl.add(a, b)")
V2 = V1 + "\n# tiled\n"


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No global or system git config: the tests also prove snapshots need no configured identity."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)


def git(repo: Path, *args: str) -> str:
    """Run git as the user would (their identity passed on the command line, nothing global)."""
    cmd = ["git", "-c", "user.name=User", "-c", "user.email=user@example.com", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repo on branch ``feature`` with a stash, staged, unstaged, staged+unstaged and untracked changes."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root / "README.md", "# project\n")
    write(root / "model.py", "x = 1\n")
    write(root / "util.py", "def f():\n    return 1\n")
    write(root / KERNEL, BASELINE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    git(root, "checkout", "-q", "-b", "feature")
    write(root / "util.py", "def f():\n    return 'stashed'\n")
    git(root, "stash", "-q")
    write(root / "model.py", "x = 2  # staged\n")
    git(root, "add", "model.py")
    write(root / "README.md", "# project\n\nunstaged notes\n")
    write(root / "util.py", "def f():\n    return 2  # staged\n")
    git(root, "add", "util.py")
    write(root / "util.py", "def f():\n    return 3  # staged, then edited again\n")
    write(root / "notes.txt", "untracked\n")
    return root


def user_state(root: Path, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """Everything the user can see of their git state (``exclude`` drops paths the agent edited)."""
    pathspec = ["--", ".", *(f":!{p}" for p in exclude)]
    return {
        "status": git(root, "status", *pathspec),
        "porcelain": git(root, "status", "--porcelain=v1", "--branch", "--untracked-files=all", *pathspec),
        "diff --cached": git(root, "diff", "--cached", *pathspec),
        "diff": git(root, "diff", *pathspec),
        "ls-files -s": git(root, "ls-files", "-s"),
        "HEAD": git(root, "rev-parse", "HEAD"),
        "branch": git(root, "symbolic-ref", "HEAD"),
        "stash": git(root, "stash", "list") + git(root, "rev-parse", "refs/stash"),
        "branches": git(root, "for-each-ref", "refs/heads", "refs/tags"),
        "other files": "".join(f"{p}:{(root / p).read_text()}" for p in ("README.md", "model.py", "util.py", "notes.txt")),
    }


def index_fingerprint(root: Path) -> tuple[bytes, int]:
    index = root / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def test_user_git_state_is_untouched_by_writes_and_undo(repo: Path) -> None:
    before = user_state(repo)
    before_without_kernels = user_state(repo, exclude=("kernels",))
    index_before = index_fingerprint(repo)  # taken after `git status`, which may refresh the index itself

    ws = Workspace(repo)
    assert ws.is_git and ws.warning is None
    ws.write(KERNEL, V1, "s1", "first")
    ws.write(KERNEL, V2, "s1", "second")  # the session keeps editing its own file
    ws.write("kernels/new_kernel.py", "new\n", "s1", "third")
    ws.undo("s1")
    assert index_fingerprint(repo) == index_before  # not even rewritten, before any git porcelain runs again
    assert user_state(repo, exclude=("kernels",)) == before_without_kernels
    assert (repo / KERNEL).read_text() == V2

    index_before = index_fingerprint(repo)  # `git status` just ran and may have refreshed stat data
    ws.write(KERNEL, V1, "s1", "fourth")
    for _ in range(3):
        ws.undo("s1")
    assert index_fingerprint(repo) == index_before
    assert (repo / KERNEL).read_text() == BASELINE and not (repo / "kernels/new_kernel.py").exists()
    assert user_state(repo) == before  # with every edit undone, even `git status` is byte-identical
    assert sorted(os.listdir(repo / "kernels")) == ["vector_add.py"]  # no temporary files left behind


def test_snapshots_are_commits_under_the_session_ref(repo: Path) -> None:
    ws = Workspace(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    sha1 = ws.write(KERNEL, V1, "s1", "first")
    sha2 = ws.write(KERNEL, V2, "s1", "second")
    assert git(repo, "rev-parse", "refs/nkiagent/s1").strip() == sha2
    assert git(repo, "show", f"refs/nkiagent/s1:{KERNEL}") == V2
    assert git(repo, "show", f"{sha1}:{KERNEL}") == V1
    assert git(repo, "rev-parse", f"{sha1}^").strip() == head and git(repo, "rev-parse", f"{sha2}^").strip() == sha1
    # The tree is HEAD's plus the session's file: none of the user's staged or unstaged work is captured.
    assert git(repo, "show", "refs/nkiagent/s1:model.py") == "x = 1\n"
    assert git(repo, "show", "refs/nkiagent/s1:README.md") == "# project\n"
    assert git(repo, "diff", "--name-only", "HEAD", "refs/nkiagent/s1") == f"{KERNEL}\n"
    assert git(repo, "log", "-1", "--format=%an <%ae>", sha2) == "nkiagent <nkiagent@localhost>\n"
    assert ws.snapshots("s1") == [(sha2, "second"), (sha1, "first")]
    assert ws.snapshots("other") == []


def test_sessions_have_separate_refs_and_cannot_overwrite_each_other(repo: Path) -> None:
    ws = Workspace(repo)
    ws.write("kernels/a.py", "a\n", "s1", "a")
    ws.write("kernels/b.py", "b\n", "s2", "b")
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/nkiagent/") == "refs/nkiagent/s1\nrefs/nkiagent/s2\n"
    with pytest.raises(RefusedEdit):
        ws.write("kernels/a.py", "mine now\n", "s2", "steal")
    assert (repo / "kernels/a.py").read_text() == "a\n"


def test_undo_restores_the_previous_snapshot_and_moves_the_ref(repo: Path) -> None:
    ws = Workspace(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    sha1 = ws.write(KERNEL, V1, "s1", "first")
    ws.write(KERNEL, V2, "s1", "second")

    undone = ws.undo("s1")
    path, sha = undone
    assert (path, sha) == (KERNEL, sha1)
    assert undone.summary.endswith(f"restored {KERNEL} to snapshot {sha1[:12]}") and "(second)" in undone.summary
    assert (repo / KERNEL).read_text() == V1
    assert git(repo, "rev-parse", "refs/nkiagent/s1").strip() == sha1

    path, sha = ws.undo("s1")
    assert (path, sha) == (KERNEL, head)
    assert (repo / KERNEL).read_text() == BASELINE
    assert git(repo, "for-each-ref", "refs/nkiagent/") == ""

    with pytest.raises(NothingToUndo, match=r"^nothing to undo: session s1 has no snapshots \(refs/nkiagent/s1 does not exist\)$"):
        ws.undo("s1")


def test_undo_of_a_created_file_deletes_it(repo: Path) -> None:
    ws = Workspace(repo)
    ws.write("kernels/fresh/new.py", "new\n", "s1", "create")
    undone = ws.undo("s1")
    assert undone.path == "kernels/fresh/new.py" and not (repo / "kernels/fresh/new.py").exists()
    assert "removed kernels/fresh/new.py, which did not exist before this session created it" in undone.summary


def test_a_new_workspace_object_continues_the_session(repo: Path) -> None:
    """The session's state lives in git, so `nkiagent undo` in a new process sees it."""
    Workspace(repo).write(KERNEL, V1, "s1", "first")
    Workspace(repo).write(KERNEL, V2, "s1", "second")
    assert Workspace(repo).undo("s1").path == KERNEL
    assert (repo / KERNEL).read_text() == V1


REFUSAL = (
    f"refusing to edit {KERNEL}: it has uncommitted changes that this session did not make. "
    "Commit or stash them first, or have the agent write to another file."
)


def test_refuses_to_edit_a_kernel_the_user_changed(repo: Path) -> None:
    ws = Workspace(repo)
    write(repo / KERNEL, BASELINE + "# my own tweak\n")
    with pytest.raises(RefusedEdit) as info:
        ws.write(KERNEL, V1, "s1", "first")
    assert str(info.value) == REFUSAL
    assert (repo / KERNEL).read_text() == BASELINE + "# my own tweak\n"
    assert ws.snapshots("s1") == []

    git(repo, "commit", "-q", "-am", "my tweak")  # once committed, the agent may edit it
    assert ws.write(KERNEL, V1, "s1", "first")


def test_refuses_when_the_user_edits_after_the_agent(repo: Path) -> None:
    ws = Workspace(repo)
    ws.write(KERNEL, V1, "s1", "first")
    write(repo / KERNEL, V1 + "# user edit after the agent\n")
    with pytest.raises(RefusedEdit) as info:
        ws.write(KERNEL, V2, "s1", "second")
    assert str(info.value) == REFUSAL
    with pytest.raises(RefusedEdit, match=rf"^refusing to undo {KERNEL}: it changed after this session's snapshot [0-9a-f]{{12}}\."):
        ws.undo("s1")
    assert (repo / KERNEL).read_text() == V1 + "# user edit after the agent\n"


def test_refuses_untracked_and_deleted_user_files(repo: Path) -> None:
    ws = Workspace(repo)
    with pytest.raises(RefusedEdit, match="refusing to edit notes.txt"):
        ws.write("notes.txt", "agent\n", "s1")
    (repo / KERNEL).unlink()  # an uncommitted deletion is a user change too
    with pytest.raises(RefusedEdit):
        ws.write(KERNEL, V1, "s1")


def test_mode_is_kept_and_recorded(repo: Path) -> None:
    script = repo / "kernels" / "run.sh"
    write(script, "#!/bin/sh\n")
    script.chmod(0o755)
    git(repo, "add", "-f", "--", "kernels/run.sh")
    git(repo, "commit", "-q", "-m", "script", "--", "kernels/run.sh")
    ws = Workspace(repo)
    ws.write("kernels/run.sh", "#!/bin/sh\necho hi\n", "s1")
    assert script.stat().st_mode & 0o777 == 0o755
    assert git(repo, "ls-tree", "refs/nkiagent/s1", "kernels/run.sh").startswith("100755 blob")


def test_workspace_in_a_subdirectory_of_the_repo(repo: Path) -> None:
    ws = Workspace(repo / "kernels")
    sha = ws.write("sub_kernel.py", "k\n", "s1", "in a subdirectory")
    assert git(repo, "show", f"{sha}:kernels/sub_kernel.py") == "k\n"
    assert ws.undo("s1").path == "sub_kernel.py"
    with pytest.raises(PathError):
        ws.read("../model.py")


def test_repo_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    ws = Workspace(root)
    sha = ws.write(KERNEL, V1, "s1", "first")
    assert git(root, "rev-list", "--parents", "-n1", sha).split() == [sha]
    assert ws.undo("s1").sha is None and not (root / KERNEL).exists()


def test_non_git_directory_works_without_snapshots(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    ws = Workspace(root)
    assert not ws.is_git
    assert ws.warning is not None
    assert ws.warning.startswith(f"{root} is not inside a git repository: edits are written without snapshots")
    assert ws.write(KERNEL, V1, "s1", "first") is None
    assert ws.write(KERNEL, V2, "s1", "second") is None
    assert ws.read(KERNEL) == V2 and ws.exists(KERNEL) and list(ws.list()) == [KERNEL]
    assert ws.snapshots("s1") == []
    with pytest.raises(NothingToUndo, match="is not inside a git repository, so edits have no snapshots"):
        ws.undo("s1")


def test_path_confinement(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "secret"
    outside.mkdir()
    write(outside / "key.txt", "secret\n")
    write(root / "kernels" / "k.py", "k\n")
    (root / "escape").symlink_to(outside)
    (root / "kernels" / "alias.py").symlink_to(root / "kernels" / "k.py")
    ws = Workspace(root)

    for bad, why in [
        ("../secret/key.txt", "is outside the workspace"),
        ("kernels/../../secret/key.txt", "is outside the workspace"),
        (str(outside / "key.txt"), "is outside the workspace"),
        ("escape/key.txt", "leads outside the workspace"),
    ]:
        with pytest.raises(PathError, match=f"refusing path '{bad}': it {why}"):
            ws.read(bad)
        with pytest.raises(PathError):
            ws.write(bad, "x", "s1")
    with pytest.raises(PathError, match="git's own files are off limits"):
        ws.resolve(".git/config")
    assert (outside / "key.txt").read_text() == "secret\n"

    assert ws.read(str(root / "kernels" / "k.py")) == "k\n"  # an absolute path inside is fine
    assert ws.resolve("kernels/alias.py") == (root / "kernels" / "k.py").resolve()
    assert ws.exists("kernels/./k.py") and not ws.exists("kernels/missing.py")
    with pytest.raises(WorkspaceError, match="no file kernels/missing.py"):
        ws.read("kernels/missing.py")


def test_list_skips_git_sessions_and_caches(repo: Path) -> None:
    write(repo / "sessions" / "s1" / "events.jsonl", "{}\n")
    write(repo / "kernels" / "__pycache__" / "k.cpython-311.pyc", "")
    write(repo / "pkg" / "sessions" / "keep.py", "")  # only the top-level sessions/ is the agent's
    assert list(Workspace(repo).list()) == ["README.md", "model.py", "notes.txt", "util.py", KERNEL, "pkg/sessions/keep.py"]
    assert list(Workspace(repo).list("kernels")) == [KERNEL]


def test_invalid_session_ids_and_kernel_paths(repo: Path) -> None:
    ws = Workspace(repo)
    for bad in ("", "../x", "a b", "x.lock", "-x", "a..b"):
        with pytest.raises(WorkspaceError, match="invalid session id"):
            ws.write(KERNEL, V1, bad)
    assert kernel_path("softmax") == "kernels/softmax.py"
    with pytest.raises(ValueError):
        kernel_path("../evil")
