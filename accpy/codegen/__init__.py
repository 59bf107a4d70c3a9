"""accpy.codegen."""
