"""Scrubbing removes personal data and leaves code and URLs as they were."""

from __future__ import annotations

import json

import pytest

from nkiagent.training.scrub import Scrubber

S = Scrubber(roots=["/srv/work/ws"], names=["alice"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("edit /srv/work/ws/kernels/k.py in /srv/work/ws", "edit kernels/k.py in ."),
        ("/srv/work/ws2/k.py is another project", "<path>/k.py is another project"),
        ("see /home/bob/notes.txt and C:\\Users\\bob\\k.py", "see ~/notes.txt and ~\\k.py"),
        ('File "/usr/lib/python3.11/site-packages/nki/x.py", line 3', 'File "<path>/x.py", line 3'),
        ("key sk-ant-api03-abcdefghijklmnopqrstuv and AKIAABCDEFGHIJKLMNOP", "key <redacted> and <redacted>"),
        ("hf_abcdefghijklmnopqrstuvwxyz0123456789 ghp_abcdefghijklmnopqrstuvwxyz0123456789", "<redacted> <redacted>"),
        ("Authorization: Bearer abcdefghijklmnop1234", "Authorization: <redacted>"),
        ('api_key = "s3cr3t-value-here"', 'api_key = "<redacted>"'),
        ("mail alice.smith@example.com", "mail <email>"),
        ("alice wrote it", "<user> wrote it"),
    ],
)
def test_personal_data_goes(text: str, expected: str) -> None:
    assert S.text(text) == expected
    assert S.text(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "code",
    [
        "for i in nl.affine_range(n // 128):",
        "@nki.jit\ndef kernel(a, b):",
        "x = a[i * 128:(i + 1) * 128, :] / 2",
        "http://127.0.0.1:8000/v1/chat/completions",
        "--- a/kernels/vector_add.py\n+++ b/kernels/vector_add.py",
        "latency 74.78 µs on trn2 (emulator-estimate)",
    ],
)
def test_code_and_urls_stay(code: str) -> None:
    assert S.text(code) == code


def test_json_arguments_are_scrubbed_decoded_and_stay_valid_json() -> None:
    args = json.dumps({"path": "k.py", "content": "import nki\n\n@nki.jit\ndef k():\n    open('/home/alice/x')\n"})
    row = S.row({"tool_calls": [{"function": {"name": "write_file", "arguments": args}}]})
    out = json.loads(row["tool_calls"][0]["function"]["arguments"])
    assert out["content"] == "import nki\n\n@nki.jit\ndef k():\n    open('~/x')\n"
