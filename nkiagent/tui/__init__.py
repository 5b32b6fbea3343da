"""The Textual terminal UI: ``nkiagent`` opens it, :func:`run_app` is its entry point.

Importing this package is cheap; Textual is imported by :func:`run_app`, and the agent's heavy
dependencies (LangGraph, litellm, the verifier) only when a session starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import Launch

__all__ = ["run_app"]


def run_app(launch: Launch) -> int:
    """Run the app until the person quits; the exit code is 0."""
    from .app import NkiAgentApp

    NkiAgentApp(launch).run()
    return 0
