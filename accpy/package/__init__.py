"""accpy.package."""
