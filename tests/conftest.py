"""Test-wide setup: ``import nki`` resolves to the embedded emulator in every test."""

from __future__ import annotations

import nkiagent.emu as emu

emu.install(force=True)
