"""Exceptions raised by bertology_utils; all derive from BertologyError so callers can catch one type."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = [
    "BertologyError",
    "DataFormatError",
    "DataNotFoundError",
    "ModelNotAvailableError",
    "UnsupportedArchitectureError",
    "StoreError",
    "StoreMismatchError",
    "StoreCorruptError",
    "AssetMissingError",
    "UnregisteredArchitectureWarning",
]


class BertologyError(Exception):
    """Base class for every error this package raises on purpose."""


class DataFormatError(BertologyError, ValueError):
    """An input file is malformed. The message names the file and, where known, the line."""

    def __init__(self, message: str, path: str | os.PathLike | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}" + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line


class DataNotFoundError(BertologyError, FileNotFoundError):
    """A data set could not be found locally and could not (or may not) be downloaded.

    ``what`` names it (``"ud-english-ewt/dev"``) and ``how_to_get`` says in a sentence how to get
    it, when known: a notebook that skips a section prints the two as its one line.
    """

    def __init__(self, message: str, what: str | None = None, how_to_get: str | None = None):
        super().__init__(message)
        self.what = what
        self.how_to_get = how_to_get

    def short(self) -> str:
        """One line: what is missing and how to get it (the whole message when neither is known)."""
        if self.what is None:
            return str(self)
        return f"{self.what} not found" + (f"; to get it: {self.how_to_get}" if self.how_to_get else "")


class ModelNotAvailableError(BertologyError, OSError):
    """A model could not be loaded: unknown name, missing offline, or attentions unavailable."""


class UnsupportedArchitectureError(ModelNotAvailableError):
    """A model's type has no registered ArchSpec, or its modules are not where the spec says.

    ``model_type`` is the model's type (None without a config); ``missing`` names the spec
    fields that could not be found.
    """

    def __init__(self, message: str, model_type: str | None = None, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.model_type = model_type
        self.missing = tuple(missing)


class StoreError(BertologyError):
    """An attention store cannot be used as asked."""


class StoreMismatchError(StoreError):
    """An existing store was written with other settings (model, data, conversion rule...)."""


class StoreCorruptError(StoreError):
    """An attention store is damaged or inconsistent."""


class AssetMissingError(BertologyError, FileNotFoundError):
    """Third-party JavaScript for an offline view is not installed (and the CDN may not be used)."""


class UnregisteredArchitectureWarning(UserWarning):
    """A model type without an ArchSpec was loaded: what reads its attention maps works, what needs its parts
    (gates, pruning, norms, ALTI, value zeroing, queries and keys) raises UnsupportedArchitectureError."""
