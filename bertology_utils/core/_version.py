"""The package version, apart from ``bertology_utils/__init__`` so that any layer can read it."""

__version__ = "0.1.0"
