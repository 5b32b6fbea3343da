"""Async UI tests run on asyncio through anyio's pytest plugin (anyio is already installed with httpx)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
