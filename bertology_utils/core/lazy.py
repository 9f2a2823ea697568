"""Lazy re-exports for the package's ``__init__`` files (PEP 562).

Most layers import torch, transformers or matplotlib (seconds). A package ``__init__`` that
imported its modules eagerly would make ``import bertology_utils`` (and ``bertology info
--no-model``) pay for them; with :func:`lazy_exports` a name's module is imported on first use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, which re-exports ``exports``.

    ``exports`` maps a module (relative to the package, e.g. ``"extraction"``, or absolute) to the
    names it provides. Use as ``__all__, __getattr__, __dir__ = lazy_exports(__name__, {...})``.
    """
    where = {
        name: module if "." in module else f"{package}.{module}" for module, names in exports.items() for name in names
    }

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return list(where), __getattr__, __dir__
