"""The package version and the versions of the libraries results depend on.

Apart from ``bertology_utils/__init__`` so that any layer can read them (through ``bertology_utils.core``).
"""

from __future__ import annotations

__all__ = ["__version__", "LIBRARIES", "library_versions"]

__version__ = "0.1.0"

#: The distributions whose versions a run records and ``bertology info`` shows.
LIBRARIES = ("torch", "transformers", "zarr", "papermill")


def library_versions() -> dict[str, str | None]:
    """Python, this package and :data:`LIBRARIES` (None when not installed).

    Read from the installed metadata, not by importing the libraries: importing torch takes seconds.
    """
    import importlib.metadata
    import platform

    versions: dict[str, str | None] = {"python": platform.python_version(), "bertology_utils": __version__}
    for dist in LIBRARIES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions
