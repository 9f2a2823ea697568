"""On-disk store of word-level (and optionally token-level) attention maps.

The maps are the model's raw attention, or those of any other method given to extraction as a
map source (context mixing: rollout, ALTI, value zeroing...), which then share this store, its
resumability and its sharding; ``metadata["maps"]`` names the method, and its ``heads`` (maps
per layer, 1 for layer-level methods) replaces the model's head count.

Layout (a Zarr v3 group; see docs/guide/store.md for why Zarr)::

    store.zarr/
      zarr.json             root attributes: format, metadata (model, data, conversion rule, ...)
      shards/<start>-<stop>/  one group per contiguous range of corpus indices
        item_ids, status, n_words, n_tokens, replaced       one entry per item
        words, word_kinds, segments                         ragged: one entry per word
        attention                                           ragged float16: layers*heads*words*words per item
                                                            (heads: maps per layer, see map_shape)
        tokens, token_to_word, token_attention              ragged, only with keep_tokens
      .staging/             scratch: a new shard group is built here, then renamed into shards/ whole
      .locks/<start>-<stop>.lock  the lock its one writer holds (see the commit protocol below)

Ragged arrays are flat and chunked; an item's slice is found from the cumulative sums
of ``n_words``/``n_tokens``, so nothing is padded and any item can be read alone.

The commit protocol (every write goes through :class:`ShardWriter` or :meth:`AttentionStore.add_shard`;
Zarr's local store writes every file to a temporary name and renames it into place, so a file is
always read whole, old or new):

1. *Creating a store*: the root group, its attributes and an empty ``shards/`` are built in a scratch
   folder beside the store and renamed to the store's path in one step, so a store whose
   ``zarr.json`` exists always has ``shards/``.
2. *Adding a shard*: its group, attributes (``committed`` 0) and empty arrays are built in
   ``.staging/`` and renamed into ``shards/`` whole.
3. *Writing a shard*: one writer at a time, fenced by an OS lock on ``.locks/<shard>.lock`` that
   it holds from opening to closing (a second writer, in this process or another, waits for it;
   the lock dies with its process, so ``kill -9`` frees it). After taking the lock, the writer
   reads the shard's commit record afresh and cuts every array back to its committed length
   (a killed writer's tail). Then, per block: (a) append the data to every array (each array's
   shape, then its chunks); (b) *commit*: replace the shard's attributes ``committed`` and
   ``lengths`` (entries per array) in one write. Arrays only grow past a commit; nothing at or
   before a committed length is ever rewritten with other values.
4. *Reading*: a reader reads a shard's commit record first and takes every array's length from it,
   never from the array's own shape (which may already include an uncommitted tail); it checks
   that each array holds at least that much. A :class:`Shard` is an immutable snapshot of one
   commit record, so readers in other threads of the writing process never see a half-updated
   one; :meth:`AttentionStore.refresh` takes new snapshots.

A writer killed at any point therefore leaves the last commit and at most an uncommitted tail,
which readers ignore and the next writer cuts off. Shards never overlap, so separate processes or
machines can write separate shards of the same corpus and :func:`merge_stores` joins them (it
copies a shard's commit record before its arrays, so a copy is consistent even while the source
is being written).
"""

from __future__ import annotations

import bisect
import errno
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import zarr
from zarr.core.group import GroupMetadata

from bertology_utils.attention.shard import OK, SKIPPED, Shard, ShardLock, ShardWriter, stage_shard, write_group
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import StoreCorruptError, StoreError, StoreMismatchError
from bertology_utils.core.files import remove_leftovers, scratch_path

__all__ = ["FORMAT", "FORMAT_VERSION", "AttentionStore", "map_shape", "merge_stores"]

FORMAT = "bertology-attention-store"
FORMAT_VERSION = 1

# Where new shard groups are built before one rename moves them into shards/ (see AttentionStore._publish),
# and where each shard's writer lock lives.
_STAGING = ".staging"
_LOCKS = ".locks"


def map_shape(metadata: dict) -> tuple[int, int]:
    """(layers, maps per layer) of a store's maps, from its metadata: the model's heads, unless the
    maps came from a map source (``metadata["maps"]``, e.g. one map per layer), whose count wins."""
    heads = metadata["maps"]["heads"] if "maps" in metadata else metadata["model"]["num_heads"]
    return int(metadata["model"]["num_layers"]), int(heads)


#: Metadata that names things without changing the numbers: a model given as "./bert" or as an
#: absolute path is the same model when its weights and tokenizer hash the same.
_NOT_COMPARED = {"metadata.model.name", "metadata.model.source"}


def _diff(stored: Any, wanted: Any, prefix: str = "") -> list[str]:
    """Human-readable differences between two nested metadata dicts."""
    if isinstance(stored, dict) and isinstance(wanted, dict):
        out = []
        for key in sorted(set(stored) | set(wanted)):
            if f"{prefix}{key}" not in _NOT_COMPARED:
                out += _diff(stored.get(key, "<missing>"), wanted.get(key, "<missing>"), f"{prefix}{key}.")
        return out
    return [] if stored == wanted else [f"{prefix[:-1]}: store has {stored!r}, asked for {wanted!r}"]


def _group(parent: zarr.Group, name: str) -> zarr.Group:
    """The subgroup ``name`` of ``parent`` (a store's ``shards`` and each shard are groups)."""
    group = parent[name]
    assert isinstance(group, zarr.Group), f"{name} is not a group"
    return group


#: zarr's modes of opening a group.
_Mode = Literal["r", "r+", "a", "w", "w-"]


class AttentionStore:
    """A store of attention maps for the items of one corpus under one model and settings.

    Open an existing store with :meth:`open`; extraction creates stores through
    :meth:`open_or_create`. Index it like a list of corpus items: ``store[i]`` is an
    :class:`ItemAttention` (float32 maps by default), skipped items raise ``KeyError``
    with the reason.
    """

    def __init__(self, path: Path, group: zarr.Group):
        self.path = Path(path)
        self.group = group
        attrs: dict[str, Any] = dict(group.attrs)
        self.metadata: dict = attrs["metadata"]
        self.n_items: int = int(attrs["n_items"])
        self.num_layers, self.num_heads = map_shape(self.metadata)
        self._shards: list[Shard] | None = None

    # -- opening and creating -------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, mode: _Mode = "r") -> AttentionStore:
        path = Path(path)
        if not (path / "zarr.json").is_file():
            raise StoreError(f"no attention store at {path}")
        try:
            group = zarr.open_group(str(path), mode=mode)
            attrs = dict(group.attrs)
        except Exception as exc:  # zarr raises many types for a damaged zarr.json
            raise StoreCorruptError(f"cannot read the attention store at {path}: {exc}") from exc
        if attrs.get("format") != FORMAT:
            raise StoreError(f"{path} is a Zarr group but not a bertology attention store")
        if attrs.get("format_version") != FORMAT_VERSION:
            raise StoreMismatchError(
                f"{path} has store format {attrs.get('format_version')}, this version reads {FORMAT_VERSION}; "
                "extract again into a new path"
            )
        if "metadata" not in attrs or "n_items" not in attrs:
            raise StoreCorruptError(f"{path}: store attributes are incomplete")
        try:
            store = cls(path, group)
        except (KeyError, TypeError, ValueError) as exc:  # metadata without the maps' shape, counts not numbers
            raise StoreCorruptError(f"{path}: store attributes are damaged: {exc!r}") from exc
        if store.n_items < 0:
            raise StoreCorruptError(f"{path}: store attributes are damaged: n_items is {store.n_items}")
        return store

    @classmethod
    def open_or_create(
        cls, path: str | os.PathLike, metadata: dict, n_items: int, *, overwrite: bool = False
    ) -> AttentionStore:
        """Open ``path`` for appending if it holds a store with the same metadata, else create it.

        A store written with other settings is refused (``StoreMismatchError``) unless
        ``overwrite`` is set, in which case it is deleted first.
        """
        path = Path(path)
        remove_leftovers(path)  # of a creation killed half way
        if path.exists() and overwrite:
            shutil.rmtree(path)
        if (path / "zarr.json").is_file():
            store = cls.open(path, mode="r+")
            wanted = {"metadata": metadata, "n_items": n_items}
            have = {"metadata": store.metadata, "n_items": store.n_items}
            problems = _diff(have, _jsonable(wanted))
            if problems:
                raise StoreMismatchError(
                    f"the attention store at {path} was written with other settings:\n  "
                    + "\n  ".join(problems)
                    + "\nUse another path, or overwrite it (--overwrite / overwrite=True)."
                )
            return store
        if path.exists() and any(path.iterdir()):
            raise StoreError(f"{path} exists and is not an attention store; refusing to write into it")
        # Built beside its path and renamed into place whole: a reader never finds a root without shards/.
        with scratch_path(path) as scratch:
            attributes = {"format": FORMAT, "format_version": FORMAT_VERSION, "metadata": metadata, "n_items": n_items}
            write_group(scratch, _jsonable(attributes), {"shards": GroupMetadata()})
            try:
                os.rename(scratch, path)  # replaces an empty folder; fails on a non-empty one
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (path / "zarr.json").is_file():
                    raise StoreError(f"cannot create the attention store at {path}: {exc}") from exc
                # Another process created it first: use theirs, if it was made with these settings.
                return cls.open_or_create(path, metadata, n_items)
        return cls.open(path, mode="r+")

    # -- shards ---------------------------------------------------------------------------------

    @property
    def shards(self) -> list[Shard]:
        if self._shards is None:
            try:
                groups = [g for _, g in _group(self.group, "shards").groups()]
            except Exception as exc:  # zarr raises many types for a missing or damaged zarr.json
                raise StoreCorruptError(f"{self.path}: cannot list its shards: {exc!r}") from exc
            self._shards = sorted((self._load_shard(g) for g in groups), key=lambda s: s.start)
            for a, b in zip(self._shards, self._shards[1:]):
                if b.start < a.stop:
                    raise StoreCorruptError(f"{self.path}: shards {a.name} and {b.name} overlap")
        return self._shards

    def _load_shard(self, group: zarr.Group) -> Shard:
        try:
            return Shard.load(group, self.num_layers, self.num_heads)
        except StoreCorruptError as exc:
            raise StoreCorruptError(f"{self.path}: shard {group.basename}: {exc}") from exc
        except Exception as exc:  # attributes that are not numbers, arrays whose zarr.json zarr cannot read
            raise StoreCorruptError(f"{self.path}: shard {group.basename} is damaged: {exc!r}") from exc

    def refresh(self) -> None:
        """Forget cached shard state (another process may have written)."""
        self._shards = None

    def missing_ranges(self, start: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
        """Ranges of ``[start, stop)`` covered by no shard at all."""
        stop = self.n_items if stop is None else stop
        gaps, cursor = [], start
        for s in self.shards:
            if s.stop <= cursor or s.start >= stop:
                continue
            if s.start > cursor:
                gaps.append((cursor, s.start))
            cursor = max(cursor, s.stop)
        if cursor < stop:
            gaps.append((cursor, stop))
        return gaps

    def writer(self, start: int, stop: int, keep_tokens: bool, *, wait: bool = True) -> ShardWriter:
        """The writer of the shard ``[start, stop)``, created if missing: it resumes the shard from its
        last commit once it holds the shard's lock (``wait=False``: a :class:`StoreError` instead of
        waiting for another writer). Close it (or use it in a ``with``) to let the next writer in."""
        shard = self.add_shard(start, stop, keep_tokens)
        remove_leftovers(self.path / _STAGING / shard.name)  # of a shard's creation or merge killed half way
        lock = ShardLock(self.path / _LOCKS / f"{shard.name}.lock", wait=wait)
        try:
            fresh = self._load_shard(_group(_group(self.group, "shards"), shard.name))  # its commit, now ours
            writer = ShardWriter(fresh, lock)
        except BaseException:
            lock.release()
            raise
        self.refresh()
        return writer

    def add_shard(self, start: int, stop: int, keep_tokens: bool) -> Shard:
        """The shard ``[start, stop)``, made (empty) if the store has none there; a range overlapping
        another shard is refused."""
        for s in self.shards:
            if (s.start, s.stop) == (start, stop):
                return s
            if s.start < stop and start < s.stop:
                raise StoreError(f"range [{start}, {stop}) overlaps shard {s.name}")
        name = f"{start:09d}-{stop:09d}"
        with scratch_path(self.path / _STAGING / name) as staging:
            stage_shard(staging, start, stop, keep_tokens)
            self._publish(staging, name)
        self.refresh()
        return self._load_shard(_group(_group(self.group, "shards"), name))

    def _publish(self, staging: Path, name: str) -> None:
        """Move a finished shard group into ``shards/`` in one rename: readers (other processes listing the
        shards while workers start theirs) never see a group without its attributes or arrays."""
        target = self.path / "shards" / name
        try:
            os.rename(staging, target)
        except OSError as exc:
            if (target / "zarr.json").is_file():  # another process added the same shard first: one is enough
                return
            raise StoreError(f"cannot add shard {name} to {self.path}: {exc}") from exc

    # -- reading --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.n_items

    @property
    def done(self) -> int:
        """Items committed (extracted or skipped)."""
        return sum(s.committed for s in self.shards)

    @property
    def is_complete(self) -> bool:
        return self.done == self.n_items and not self.missing_ranges()

    def _locate(self, index: int) -> tuple[Shard, int]:
        if not 0 <= index < self.n_items:
            raise IndexError(f"item {index} out of range for a store of {self.n_items} items")
        shards = self.shards
        pos = bisect.bisect_right([s.start for s in shards], index) - 1
        if pos < 0 or index >= shards[pos].start + shards[pos].committed:
            raise KeyError(f"item {index} has not been extracted into {self.path} yet")
        return shards[pos], index - shards[pos].start

    def status(self) -> np.ndarray:
        """Per item: OK, SKIPPED, or -1 for not yet extracted."""
        out = np.full(self.n_items, -1, dtype=np.int8)
        for s in self.shards:
            with self._reading(s):
                out[s.start : s.start + s.committed] = s.values("status", 0, s.committed)
        return out

    def skipped(self) -> dict[int, int]:
        """Skipped item index -> its token count."""
        out = {}
        for s in self.shards:
            with self._reading(s):
                st = s.values("status", 0, s.committed)
                n_tok = s.values("n_tokens", 0, s.committed)
            idx = np.flatnonzero(st == SKIPPED)
            out.update({int(s.start + i): int(n_tok[i]) for i in idx})
        return out

    @contextmanager
    def _reading(self, shard: Shard) -> Iterator[None]:
        """Reading ``shard``'s arrays: any failure (a damaged chunk or zarr.json, a short array) is a
        StoreCorruptError naming the store and the shard."""
        try:
            yield
        except Exception as exc:
            raise StoreCorruptError(f"{self.path}: cannot read shard {shard.name}: {exc!r}") from exc

    def __getitem__(self, index: int) -> ItemAttention:
        return self.get(index)

    def get(self, index: int, dtype: npt.DTypeLike = np.float32) -> ItemAttention:
        shard, j = self._locate(int(index))
        item = self._read(shard, j, j + 1, dtype)[0]
        if item is None:
            with self._reading(shard):
                n_tokens = shard.values("n_tokens", j, j + 1)[0]
                max_tokens = self.metadata["conversion"]["max_tokens"]
            raise KeyError(
                f"item {shard.start + j} was skipped: {n_tokens} tokens, more than the model takes ({max_tokens})"
            )
        return item

    def __iter__(self) -> Iterator[ItemAttention]:
        return self.iter_items()

    def iter_items(
        self, indices: Sequence[int] | None = None, dtype: npt.DTypeLike = np.float32, span: int = 256
    ) -> Iterator[ItemAttention]:
        """Extracted items in index order (skipped and missing ones left out), read ``span`` at a time."""
        wanted = None if indices is None else set(int(i) for i in indices)
        for shard in self.shards:
            for lo in range(0, shard.committed, span):
                hi = min(lo + span, shard.committed)
                if wanted is not None and not any(shard.start + j in wanted for j in range(lo, hi)):
                    continue
                for item in self._read(shard, lo, hi, dtype):
                    if item is not None and (wanted is None or item.index in wanted):
                        yield item

    def _read(self, shard: Shard, lo: int, hi: int, dtype: npt.DTypeLike) -> list[ItemAttention | None]:
        """Items ``lo:hi`` of a shard (None for skipped ones), a damaged one named with the store's path."""
        try:
            return shard.read(lo, hi, dtype)
        except StoreCorruptError as exc:
            raise StoreCorruptError(f"{self.path}: {exc}") from exc

    def summary(self) -> dict:
        st = self.status()
        return {
            "path": str(self.path),
            "items": self.n_items,
            "extracted": int((st == OK).sum()),
            "skipped": int((st == SKIPPED).sum()),
            "missing": int((st == -1).sum()),
            "shards": len(self.shards),
            "model": self.metadata["model"].get("name"),
            "corpus": self.metadata["corpus"].get("name"),
            "from_rule": self.metadata["conversion"].get("from_rule"),
        }


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON types so stored and requested metadata compare equal."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def merge_stores(
    target: str | os.PathLike, sources: Iterable[str | os.PathLike], *, overwrite: bool = False
) -> AttentionStore:
    """Join stores written in parallel (same metadata, disjoint shards) into ``target``.

    Each source shard is copied whole; a shard already in the target with the same range
    and commit count is left as is. Works for local paths.
    """
    stores = [AttentionStore.open(s) for s in sources]
    if not stores:
        raise StoreError("merge needs at least one source store")
    first = stores[0]
    for other in stores[1:]:
        problems = _diff(
            {"metadata": first.metadata, "n_items": first.n_items},
            {"metadata": other.metadata, "n_items": other.n_items},
        )
        if problems:
            raise StoreMismatchError(
                f"cannot merge {other.path} into {first.path}'s settings:\n  " + "\n  ".join(problems)
            )
    merged = AttentionStore.open_or_create(target, first.metadata, first.n_items, overwrite=overwrite)
    for src in stores:
        for shard in src.shards:
            existing = [s for s in merged.shards if s.start < shard.stop and shard.start < s.stop]
            if existing:
                if [(s.start, s.stop, s.committed) for s in existing] == [(shard.start, shard.stop, shard.committed)]:
                    continue
                raise StoreError(
                    f"shard {shard.name} of {src.path} overlaps shard(s) "
                    f"{[s.name for s in existing]} already in {merged.path}"
                )
            with scratch_path(merged.path / _STAGING / shard.name) as staging:
                shutil.copytree(src.path / "shards" / shard.name, staging)
                # The commit record read before the arrays were copied: they hold at least that much
                # (a writer of the source may have committed more since, with arrays copied before it).
                copy = zarr.open_group(str(staging), mode="r+")
                copy.update_attributes(
                    {**copy.attrs.asdict(), "committed": shard.committed, "lengths": dict(shard.lengths)}
                )
                merged._publish(staging, shard.name)
            merged.refresh()
    return merged
