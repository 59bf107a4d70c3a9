"""accpy's version: a leaf module, so any layer may stamp what it writes with it."""
__version__ = "0.1.0"
