"""Plans: per-target annotations of a schedule (unroll, vectorize, parallelize, cache, ...)."""
from .plan import Plan

__all__ = ["Plan"]
