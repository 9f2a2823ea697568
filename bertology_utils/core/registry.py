"""Registries: methods found by name, each registered once by the file that defines it (inseq's pattern).

A :class:`Registry` maps names to objects with a ``name`` attribute in registration order; looking up a
name it does not hold raises ``ValueError`` listing the names it does. :class:`Names` is a live, read-only
tuple-like view of a registry's names (or of a filtered part of them), and :class:`View` a live mapping
from those names to a property of each item, so a module can export ``METHODS`` once and still see
methods registered after it was imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

__all__ = ["Named", "Registry", "Names", "View"]


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)
V = TypeVar("V")


class Registry(Mapping[str, T], Generic[T]):
    """Objects by name, in registration order. ``kind`` names them in errors ("context-mixing method")."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, item: T, *, replace: bool = False) -> T:
        """Add ``item`` under ``item.name`` (``replace`` to override one of that name); returns it."""
        if item.name in self._items and not replace:
            raise ValueError(f"a {self.kind} named {item.name!r} is already registered; pass replace=True to override")
        self._items[item.name] = item
        return item

    def unregister(self, name: str) -> T:
        """Remove and return the item ``name``."""
        item = self[name]
        del self._items[name]
        return item

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; choose from {', '.join(self._items)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._items)})"


class Names(Sequence[str]):
    """The names of a registry's items that ``keep`` accepts, read afresh on every use; compares equal to
    the tuple of those names."""

    def __init__(self, registry: Registry, keep: Callable[[Any], bool] = lambda item: True):
        self._registry = registry
        self._keep = keep

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, item in self._registry.items() if self._keep(item))

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other: object) -> bool:
        return self._names() == (tuple(other) if isinstance(other, (Names, tuple, list)) else other)

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


class View(Mapping[str, V]):
    """A live mapping from the names of a registry's items that ``keep`` accepts to ``value(item)``."""

    def __init__(self, registry: Registry, keep: Callable[[Any], bool], value: Callable[[Any], V]):
        self._names = Names(registry, keep)
        self._registry = registry
        self._value = value

    def __getitem__(self, name: str) -> V:
        if name not in self._names:
            raise KeyError(name)
        return self._value(self._registry[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self))
