"""Packages: build functions into native libraries (.so/.a), headers, HAT files, Python modules."""
from .loader import BuiltPackage, load
from .package import Format, Mode, Package, Platform

__all__ = ["BuiltPackage", "Format", "Mode", "Package", "Platform", "load"]
