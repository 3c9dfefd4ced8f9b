"""The package version (one place; the lab and the root read it from here)."""

__version__ = "0.2.0"
