"""Test-wide setup: ``import nki`` resolves to the embedded emulator in every test."""

from __future__ import annotations

import os
import shutil
import tempfile

import nkiagent.emu as emu

emu.install(force=True)

# The verifier's input cache lives on tmpfs (RAM): give the test session its own, removed at exit.
_CACHE = tempfile.mkdtemp(prefix="nkiagent-test-inputs-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
os.environ["NKIAGENT_INPUT_CACHE"] = _CACHE


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    shutil.rmtree(_CACHE, ignore_errors=True)
