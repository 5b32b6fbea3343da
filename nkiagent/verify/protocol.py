"""How many runs the correctness protocol makes: light, so configuration defaults can name it."""

from __future__ import annotations

__all__ = ["HIDDEN_SEEDS", "VISIBLE_SEEDS"]

#: Seeds of the visible shape, each drawn from every distribution. The verifier's invariant (one
#: instruction stream per shape) needs two different inputs of a shape, which the distributions
#: already give; two draws of each distribution on the shape a kernel is tuned for is what the data
#: needs, and every further seed would cost a full run without testing anything new.
VISIBLE_SEEDS = 2

#: Seeds per hidden shape: a hidden shape tests that the kernel handles other sizes, which needs
#: every distribution but not every seed. One instruction stream per shape needs two different
#: inputs of each shape: the distributions give them, or (one distribution) a second seed.
HIDDEN_SEEDS = 1
