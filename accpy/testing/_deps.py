"""hypothesis, imported when a strategy is asked for (the assertions do not need it)."""
from __future__ import annotations


def hypothesis_strategies():
    """`hypothesis.strategies`, or ImportError saying how to install it."""
    try:
        import hypothesis.strategies as st
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("accpy.testing's strategies need hypothesis: pip install hypothesis "
                          "(or pip install 'accpy[test]')") from None
    return st
