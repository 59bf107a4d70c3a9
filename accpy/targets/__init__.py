"""Targets: the host CPU, known CPU models and (later) accelerators, as data."""
from .target import Architecture, Category, Target, host_target

# `acc.Target.HOST`: this machine, read once at import
Target.HOST = host_target()  # type: ignore[attr-defined]

__all__ = ["Architecture", "Category", "Target", "host_target"]
