"""accpy.schedule."""
