"""Registries: things found by name (context-mixing methods, attribution references, architectures), each
registered once by the code that defines it (inseq's pattern).

A :class:`Registry` maps names to objects in registration order, each under its ``key`` (by default its
``name`` attribute); looking up a name it does not hold raises ``ValueError`` listing the names it does. :class:`Names` is a live, read-only
tuple-like view of a registry's names (or of a filtered part of them), and :class:`View` a live mapping
from those names to a property of each item, so a module can export ``METHODS`` once and still see
methods registered after it was imported.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

__all__ = ["Registry", "Names", "View"]

T = TypeVar("T")
V = TypeVar("V")


class Registry(Mapping[str, T], Generic[T]):
    """Objects by name, in registration order.

    :param kind: what the items are, for errors ("context-mixing method").
    :param key: an item's name (default: its ``name`` attribute; an architecture's is its ``model_type``).
    """

    def __init__(self, kind: str, key: Callable[[T], str] = operator.attrgetter("name")):
        self.kind = kind
        self.key = key
        self._items: dict[str, T] = {}

    def register(self, item: T, *, replace: bool = False) -> T:
        """Add ``item`` under its key and return it.

        Registering an item equal to the one of that key again is a no-op (a module imported twice); another
        item of a registered key raises ``ValueError`` unless ``replace``, which overrides it in its place.
        """
        name = self.key(item)
        if name in self._items and not replace and self._items[name] != item:
            raise ValueError(f"a {self.kind} named {name!r} is already registered; pass replace=True to override")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> T:
        """Remove and return the item ``name`` (ValueError naming the known ones when there is none)."""
        item = self[name]
        del self._items[name]
        return item

    @contextlib.contextmanager
    def registered(self, item: T, *, replace: bool = False) -> Iterator[T]:
        """``item`` registered for the ``with`` block only (tests, experiments): afterwards it is unregistered,
        and an item it replaced is registered again in its place."""
        name = self.key(item)
        previous = self._items.get(name)
        self.register(item, replace=replace)
        try:
            yield item
        finally:
            if previous is None:
                self._items.pop(name, None)
            else:
                self._items[name] = previous

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; choose from {', '.join(self._items)}") from None

    # Mapping's own read a missing name as a KeyError, which __getitem__ turns into a ValueError.
    def __contains__(self, name: object) -> bool:
        return name in self._items

    @overload
    def get(self, name: str, /) -> T | None: ...
    @overload
    def get(self, name: str, /, default: T | V) -> T | V: ...
    def get(self, name: str, /, default: object = None) -> object:
        return self._items.get(name, default)

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
