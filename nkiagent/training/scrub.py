"""Personal data out of exported rows: absolute paths, user names, API-key-like strings.

Sessions record what the model saw, which includes the workspace's absolute path, home
directories and whatever a person pasted. Datasets get shared, so every string of an
exported row goes through :class:`Scrubber`: the workspace root becomes relative, other
absolute paths keep only their file name (``<path>/kernel.py``), home directories ``~`` and user
names ``<user>``, e-mail addresses ``<email>``, and anything shaped like a credential
``<redacted>``. Rewriting is idempotent, so scrubbing twice changes nothing.
"""

from __future__ import annotations

import getpass
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

__all__ = ["KEY_PATTERNS", "Scrubber"]

#: Credential shapes (provider prefixes, cloud key ids, bearer tokens, ``key = value`` assignments).
KEY_PATTERNS = (
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"(?i:bearer)\s+[A-Za-z0-9_\-\.=]{16,}",
)
_ASSIGNED = re.compile(r"(?i)\b((?:api[_-]?key|secret|token|password|passwd|aws_secret_access_key)[\"']?\s*[:=]\s*[\"']?)([^\s\"',;]{8,})")
_KEYS = re.compile("|".join(f"(?:{p})" for p in KEY_PATTERNS))
_EMAIL_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_EMAIL_DOMAIN = re.compile(r"@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b")
_HOME = re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\Users\\)([^/\\\s\"'`]+)")
#: An absolute POSIX path of at least two components not glued to a word, URL or number before it.
_ABS = re.compile(r"/(?:[\w.@+\-]+/)+([\w.@+\-]*)")  # starts with a literal: the regex engine skips to each "/"
_NOT_BEFORE_PATH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/~<>-")
_KEY_HINTS = ("sk-", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "xox", "AIza", "earer", "EARER")
_ASSIGNED_HINTS = ("key", "secret", "token", "passw")
#: Login names too generic to replace wherever they appear as words.
_COMMON_NAMES = frozenset({"root", "user", "admin", "ubuntu", "runner", "ec2-user", "nobody", "test", "dev", "app"})


@lru_cache(maxsize=1)
def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


@lru_cache(maxsize=64)
def _names_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b") if words else None


def _emails(s: str) -> str:
    """Replace e-mail addresses, scanning only around each ``@`` (a regex starting with the local part tries every position)."""
    out, last = [], 0
    for m in _EMAIL_DOMAIN.finditer(s):
        start = m.start()
        while start > last and s[start - 1] in _EMAIL_LOCAL:
            start -= 1
        if start == m.start() or (start > 0 and s[start - 1] == "\\"):  # no local part, or an escape such as "\n@nki.jit"
            continue
        out += [s[last:start], "<email>"]
        last = m.end()
    return "".join(out) + s[last:] if out else s


def _path(m: re.Match[str]) -> str:
    s, i = m.string, m.start()
    if i > 0 and s[i - 1] in _NOT_BEFORE_PATH:  # glued to a word, URL, number or placeholder: not an absolute path
        return m.group(0)
    return "<path>/" + m.group(1)


@lru_cache(maxsize=256)
def _bare_root(root: str) -> re.Pattern[str]:
    """``root`` itself, not a longer name that starts with it (``/ws`` but not ``/ws2``)."""
    return re.compile(re.escape(root) + r"(?![\w.\-])")


@lru_cache(maxsize=1 << 16)
def _generic(s: str) -> str:
    """Keys, e-mail addresses, home directories and absolute paths (cached: exports repeat the same prompts a lot).

    Every regex is gated by a plain substring test: most strings hold none of these, and the
    tests cost a fraction of a scan.
    """
    if any(h in s for h in _KEY_HINTS):
        s = _KEYS.sub("<redacted>", s)
    if ("=" in s or ":" in s) and any(h in s.lower() for h in _ASSIGNED_HINTS):
        s = _ASSIGNED.sub(lambda m: m.group(1) + "<redacted>", s)
    if "@" in s:
        s = _emails(s)
    if "/home/" in s or "/Users/" in s or ":\\Users\\" in s:
        s = _HOME.sub("~", s)
    if "/" in s:
        s = _ABS.sub(_path, s)
    return s


class Scrubber:
    """Rewrites strings (or whole JSON-able rows) without personal data.

    ``roots`` are directories to make relative (the session's workspace, its session folder);
    ``names`` extra words to replace by ``<user>`` (the current login name is added unless it
    is too generic, such as ``root``).
    """

    def __init__(self, roots: Iterable[str] = (), names: Iterable[str] = ()) -> None:
        self.roots = sorted({r.rstrip("/") for r in roots if r and r.startswith("/") and len(r) > 1}, key=len, reverse=True)
        words = {n for n in names if n and len(n) >= 3}
        login = _login()
        if login and len(login) >= 3 and login.lower() not in _COMMON_NAMES:
            words.add(login)
        self._names = _names_pattern(tuple(sorted(words, key=len, reverse=True)))

    def text(self, s: str) -> str:
        if not s:
            return s
        for r in self.roots:  # the session's own folders become relative
            if r in s:
                s = s.replace(r + "/", "")
                if r in s:
                    s = _bare_root(r).sub(".", s)
        s = _generic(s)
        if self._names is not None:
            s = self._names.sub("<user>", s)
        return s

    def row(self, value: Any) -> Any:
        """A copy of a JSON-able value with every string scrubbed (keys too).

        Tool-call ``arguments`` held as JSON text are scrubbed decoded and encoded again, so
        escapes (``\\n``) neither hide data nor get broken by a replacement.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(k) if isinstance(k, str) else k: self._json_text(v) if k == "arguments" else self.row(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.row(v) for v in value]
        return value

    def _json_text(self, value: Any) -> Any:
        if not isinstance(value, str):
            return self.row(value)
        try:
            decoded = json.loads(value)
        except ValueError:
            return self.text(value)
        return json.dumps(self.row(decoded), ensure_ascii=False)
