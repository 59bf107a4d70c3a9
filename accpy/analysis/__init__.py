"""accpy.analysis."""
