"""Helpers of the package-layer tests: kernels, numpy oracles, C drivers."""
