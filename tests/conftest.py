"""Test-wide setup: ``import nki`` (and ``neuronxcc.nki``) resolves to the embedded emulator in every test."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from nkiagent import shim
from nkiagent.config import ENV_PREFIX, Settings

shim.install(force=True)  # the emulator's faces, the legacy one with benchmark/profile on the cost model

# The verifier's input cache lives on tmpfs (RAM): one per test run, removed at exit. Under
# pytest-xdist the controller makes it before its workers start and they inherit it (the cache
# is safe to share: entries are published by atomic rename), so inputs exist once, not per worker.
_SHM = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
_INHERITED = os.environ.get("NKIAGENT_TEST_INPUT_CACHE") if os.environ.get("PYTEST_XDIST_WORKER") else None


def _remove_orphans() -> None:
    """Caches of earlier runs that were killed before they could clean up (tmpfs is RAM)."""
    for old in Path(_SHM).glob("nkiagent-test-inputs-*-*"):
        pid = old.name.split("-")[3]
        try:
            os.kill(int(pid), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(old, ignore_errors=True)
        except PermissionError:
            pass  # another user's live run


if _INHERITED is None:
    _remove_orphans()
_CACHE = _INHERITED or tempfile.mkdtemp(prefix=f"nkiagent-test-inputs-{os.getpid()}-", dir=_SHM)
os.environ["NKIAGENT_INPUT_CACHE"] = os.environ["NKIAGENT_TEST_INPUT_CACHE"] = _CACHE
# the person's own ~/.config/nkiagent/config.toml and NKIAGENT_* settings must not change what tests run
os.environ["XDG_CONFIG_HOME"] = os.path.join(_CACHE, "no-user-config")
for _key in Settings().to_dict():
    os.environ.pop(ENV_PREFIX + _key.upper(), None)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    if _INHERITED is None:
        shutil.rmtree(_CACHE, ignore_errors=True)
