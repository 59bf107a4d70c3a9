"""accpy.nest."""
