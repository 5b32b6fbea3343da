"""Diff hunks for review: show an edit as numbered hunks, and apply only the ones a person accepted.

Partial acceptance ("take 2 of these 3 hunks", like ``git add -p``) is the review flow users
ask every coding agent for, and each decision is also a training label. Both sides use the
same alignment: :func:`diff_hunks` numbers the hunks of the old→new diff and
:func:`apply_hunks` recomputes that diff and takes the new side of exactly the accepted
hunks and the old side everywhere else, so the indices a reviewer saw are the ones applied.

The alignment is :class:`difflib.SequenceMatcher` (what :func:`difflib.unified_diff` uses)
with ``autojunk`` off, so frequent lines in long kernels are never ignored. Lines are split
on ``\\n`` only, which keeps ``\\r``, form feeds and other characters Python's
``splitlines`` would split on inside their line, so every text round-trips byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

__all__ = ["Hunk", "apply_hunks", "diff_hunks", "unified_diff"]

NO_NEWLINE = "\\ No newline at end of file"

Opcode = tuple[str, int, int, int, int]


@dataclass
class Hunk:
    """One hunk of a unified diff, numbered from 0 in file order.

    ``old_start``/``old_lines`` and ``new_start``/``new_lines`` are the numbers of the
    ``@@ -old_start,old_lines +new_start,new_lines @@`` header (1-based; an empty range starts
    at the line before it, as in GNU diff). ``lines`` are the body without line terminators,
    each starting with ``" "``, ``"-"`` or ``"+"``, plus git's ``"\\ No newline at end of
    file"`` marker after a last line that has none.
    """

    index: int
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    header: str
    lines: list[str] = field(default_factory=list)
    path: str = ""


def _split(text: str) -> list[str]:
    """Lines with their ``\\n`` kept, split on ``\\n`` only, so ``"".join(_split(t)) == t``."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _groups(a: list[str], b: list[str], context: int) -> tuple[list[Opcode], list[list[Opcode]]]:
    """All opcodes of the a→b alignment, and the hunk groups ``unified_diff`` would print."""
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    opcodes: list[Opcode] = list(matcher.get_opcodes())  # a copy: get_grouped_opcodes trims the cached list in place
    groups: list[list[Opcode]] = list(map(list, matcher.get_grouped_opcodes(context)))
    return opcodes, groups


def _range(start: int, stop: int) -> tuple[int, int]:
    """The ``start,length`` pair of a unified-diff header for the 0-based range ``[start, stop)``."""
    length = stop - start
    return (start if length == 0 else start + 1), length


def _format_range(start: int, length: int) -> str:
    return str(start) if length == 1 else f"{start},{length}"


def _body_line(prefix: str, line: str) -> list[str]:
    if line.endswith("\n"):
        return [prefix + line[:-1]]
    return [prefix + line, NO_NEWLINE]


def diff_hunks(old: str, new: str, path: str, context: int = 3) -> list[Hunk]:
    """The hunks of the unified diff from ``old`` to ``new`` (empty when they are equal).

    ``path`` is carried on each hunk so a review of several files can tell them apart.
    """
    a, b = _split(old), _split(new)
    hunks = []
    for index, group in enumerate(_groups(a, b, context)[1]):
        old_start, old_lines = _range(group[0][1], group[-1][2])
        new_start, new_lines = _range(group[0][3], group[-1][4])
        body: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    body += _body_line(" ", line)
                continue
            for line in a[i1:i2]:
                body += _body_line("-", line)
            for line in b[j1:j2]:
                body += _body_line("+", line)
        header = f"@@ -{_format_range(old_start, old_lines)} +{_format_range(new_start, new_lines)} @@"
        hunks.append(Hunk(index, old_start, old_lines, new_start, new_lines, header, body, path))
    return hunks


def unified_diff(old: str, new: str, path: str, context: int = 3) -> str:
    """The git-style unified diff of ``path`` from ``old`` to ``new`` ("" when they are equal)."""
    hunks = diff_hunks(old, new, path, context)
    if not hunks:
        return ""
    out = [f"--- a/{path}", f"+++ b/{path}"]
    for hunk in hunks:
        out.append(hunk.header)
        out.extend(hunk.lines)
    return "\n".join(out) + "\n"


def apply_hunks(old: str, new: str, accepted: Iterable[int], context: int = 3) -> str:
    """``old`` with exactly the ``accepted`` hunks of the old→new diff applied.

    Hunk indices are those of :func:`diff_hunks` with the same ``context`` (which decides
    how nearby changes merge into one hunk). All indices give ``new``; none gives ``old``.
    """
    a, b = _split(old), _split(new)
    opcodes, groups = _groups(a, b, context)
    chosen = set(accepted)
    unknown = sorted(i for i in chosen if not 0 <= i < len(groups))
    if unknown:
        raise ValueError(f"no hunk {unknown} in this diff: it has {len(groups)} hunk(s), numbered 0..{len(groups) - 1}")
    take_new = {op for index, group in enumerate(groups) if index in chosen for op in group if op[0] != "equal"}
    out: list[str] = []
    for op in opcodes:
        _, i1, i2, j1, j2 = op
        out += b[j1:j2] if op in take_new else a[i1:i2]
    return "".join(out)
