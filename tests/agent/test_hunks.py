"""Hunk numbering and partial acceptance: the indices a reviewer accepts are exactly what lands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkiagent.agent.hunks import Hunk, apply_hunks, diff_hunks, unified_diff

OLD = "".join(f"line {i}\n" for i in range(30))
# Three changes far enough apart (> 2 * 3 context lines) to make three hunks.
NEW = OLD.replace("line 2\n", "LINE TWO\n").replace("line 15\n", "").replace("line 27\n", "line 27\nextra\n")


def test_three_separate_changes_make_three_numbered_hunks() -> None:
    hunks = diff_hunks(OLD, NEW, "kernels/k.py")
    assert [h.index for h in hunks] == [0, 1, 2]
    assert [h.header for h in hunks] == ["@@ -1,6 +1,6 @@", "@@ -13,7 +13,6 @@", "@@ -26,5 +25,6 @@"]
    assert hunks[0].lines == [" line 0", " line 1", "-line 2", "+LINE TWO", " line 3", " line 4", " line 5"]
    assert (hunks[1].old_start, hunks[1].old_lines, hunks[1].new_start, hunks[1].new_lines) == (13, 7, 13, 6)
    assert all(h.path == "kernels/k.py" for h in hunks)


def test_partial_acceptance_applies_exactly_the_chosen_hunks() -> None:
    two_of_three = apply_hunks(OLD, NEW, {0, 2})
    assert "LINE TWO\n" in two_of_three and "extra\n" in two_of_three
    assert "line 15\n" in two_of_three  # hunk 1 (the deletion) was rejected
    assert two_of_three == OLD.replace("line 2\n", "LINE TWO\n").replace("line 27\n", "line 27\nextra\n")
    assert apply_hunks(OLD, NEW, [1]) == OLD.replace("line 15\n", "")
    assert apply_hunks(OLD, NEW, range(3)) == NEW
    assert apply_hunks(OLD, NEW, []) == OLD


def test_unknown_hunk_index_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"no hunk \[3\] in this diff: it has 3 hunk\(s\), numbered 0..2"):
        apply_hunks(OLD, NEW, [0, 3])


def test_headers_of_empty_ranges_follow_gnu_diff() -> None:
    assert [h.header for h in diff_hunks("", "a\nb\n", "new.py")] == ["@@ -0,0 +1,2 @@"]
    assert [h.header for h in diff_hunks("a\n", "", "gone.py")] == ["@@ -1 +0,0 @@"]
    assert diff_hunks("same\n", "same\n", "x.py") == [] and unified_diff("same\n", "same\n", "x.py") == ""


def test_unified_diff_is_accepted_by_git_apply(tmp_path: Path) -> None:
    """The text shown to reviewers is a real patch, including a last line without a newline and CRLF lines."""
    old = OLD + "crlf\r\nend"
    new = NEW + "crlf changed\r\nend\nnow with newline\n"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "k.py").write_bytes(old.encode())
    (tmp_path / "p.diff").write_bytes(unified_diff(old, new, "k.py").encode())
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "k.py").read_bytes() == new.encode()
    assert "\\ No newline at end of file" in unified_diff(old, new, "k.py")


# -- properties ------------------------------------------------------------------------

LINES = st.sampled_from(["a", "b", "c", "def f():", "    return x", "", "\r", "\x0c"])


@st.composite
def edits(draw: st.DrawFn) -> tuple[str, str]:
    """An old text and a new one made from it by scattered line edits (so diffs have several hunks)."""
    old_lines = draw(st.lists(LINES, max_size=40))
    new_lines: list[str] = []
    for line in old_lines:
        action = draw(st.sampled_from(["keep"] * 6 + ["delete", "replace", "insert"]))
        if action == "keep":
            new_lines.append(line)
        elif action == "replace":
            new_lines.append(draw(LINES))
        elif action == "insert":
            new_lines += [line, draw(LINES)]
    old = "\n".join(old_lines) + draw(st.sampled_from(["", "\n"]))
    new = "\n".join(new_lines) + draw(st.sampled_from(["", "\n"]))
    return old, new


def _changes(hunks: list[Hunk]) -> list[tuple[int, int, list[str]]]:
    """What a hunk does to the old text; new-side line numbers shift when earlier hunks are left out."""
    return [(h.old_start, h.old_lines, h.lines) for h in hunks]


@settings(max_examples=200, deadline=None)
@given(edits(), st.data())
def test_apply_hunks_properties(pair: tuple[str, str], data: st.DataObject) -> None:
    old, new = pair
    hunks = diff_hunks(old, new, "k.py")
    assert apply_hunks(old, new, range(len(hunks))) == new
    assert apply_hunks(old, new, []) == old
    chosen = data.draw(st.sets(st.sampled_from(range(len(hunks)))) if hunks else st.just(set()))
    result = apply_hunks(old, new, chosen)
    assert _changes(diff_hunks(old, result, "k.py")) == _changes([h for h in hunks if h.index in chosen])
