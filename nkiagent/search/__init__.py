"""Inference-time search over kernels: best-of-N, refine, beam and evolve over one candidate database.

See :mod:`.engine` for the loop, :mod:`.strategies` for the four strategies, :mod:`.mutate` for
the operators (``builtin/tuner`` offline, any model), :mod:`.evaluate` for the cascade and the
executors (local pool, Ray), :mod:`.db` for the database and :mod:`.report` for the report.
Importing this package is cheap (no verifier, model or Ray import until a search runs).
"""

from __future__ import annotations

from .db import Candidate, CandidateDB
from .engine import SearchConfig, SearchOutcome, resume_search, run_search
from .strategies import STRATEGIES

__all__ = ["STRATEGIES", "Candidate", "CandidateDB", "SearchConfig", "SearchOutcome", "resume_search", "run_search"]
