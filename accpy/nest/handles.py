"""Base classes of what iteration logic computes with (logic.Value, logic.Index), so that the
modules logic builds on (parameters.py) recognize them without importing logic."""
from __future__ import annotations


class LogicValue:
    """Base of a value in iteration logic (`logic.Value`)."""

    __slots__ = ()


class LogicIndex(LogicValue):
    """Base of an index handle of a nest (`logic.Index`)."""

    __slots__ = ()
