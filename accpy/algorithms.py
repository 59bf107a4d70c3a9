"""Accera's `accera.algorithms`: heuristics for `Plan.auto` (see accpy/plan/auto.py)."""
from .plan.auto import NoneCacheHeuristics

__all__ = ["NoneCacheHeuristics"]
