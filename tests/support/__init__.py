"""Shared helpers for accpy's tests (random schedule generation: see `schedgen`)."""
