"""The package version and the versions of the libraries results depend on.

Apart from ``bertology_utils/__init__`` so that any layer can read them (through ``bertology_utils.core``).
"""

from __future__ import annotations

__all__ = ["__version__", "LIBRARIES", "library_versions"]

__version__ = "0.1.0"

#: The distributions whose versions a run records, its references keep and ``bertology info`` shows:
#: those that compute or store the numbers (requirements/lock-linux-py311-cpu.txt pins them all).
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "scipy", "scikit-learn", "zarr", "papermill")


def library_versions() -> dict[str, str | None]:
    """Python, the platform (``linux-x86_64``), this package and :data:`LIBRARIES` (None when not installed).

    Read from the installed metadata, not by importing the libraries: importing torch takes seconds.
    """
    import importlib.metadata
    import platform
    import sysconfig

    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "platform": sysconfig.get_platform(),
        "bertology_utils": __version__,
    }
    for dist in LIBRARIES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions
