"""The session store: one folder per session, an append-only event log, every candidate kernel.

Below the agent and the search, which write sessions; above them, :mod:`nkiagent.training` reads
them back into training data, and the UI replays them. It imports nothing else of nkiagent.
"""
