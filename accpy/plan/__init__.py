"""Plans: per-target annotations of a schedule (unroll, vectorize, parallelize, cache, ...)."""
from .plan import Plan
from .erase import _erase, erase_loops

# Accera's private Plan._erase_loops (plan/erase.py), recorded and replayed like the plan's other calls
Plan._erase_loops, Plan._erase = erase_loops, _erase

__all__ = ["Plan"]
