"""One shard of an attention store: its arrays' layout, its commit record and its one writer.

A shard holds the items of one contiguous range of corpus indices (see
:mod:`bertology_utils.attention.store` for the store's layout and the commit protocol this module
implements): :func:`stage_shard` builds a new, empty one; :class:`Shard` is one snapshot of its
commit record and reads its committed items; :class:`ShardWriter`, holding the shard's
:class:`ShardLock`, appends and commits blocks of results.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import zarr
from tqdm.auto import tqdm
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.core.group import GroupMetadata
from zarr.core.sync import sync
from zarr.errors import ZarrUserWarning
from zarr.storage import LocalStore, MemoryStore

from bertology_utils.attention.word_attention import ItemAttention, SkippedItem
from bertology_utils.core.errors import StoreCorruptError, StoreError

try:  # POSIX; without it (Windows) one writer per shard is up to the caller
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from zarr.core.array_spec import ArrayConfigParams
    from zarr.core.metadata import ArrayV3Metadata

__all__ = ["OK", "SKIPPED", "Shard", "ShardLock", "ShardWriter", "stage_shard", "write_group"]

#: An item's status in a shard: its maps were extracted, or it was skipped (too long for the model).
OK, SKIPPED = 0, 1

# Checksummed chunks turn silent bit rot into a read error. Attention maps in float16 barely
# compress (zstd saves about 9%), so they are only checksummed: cheaper to write and to read.
_COMPRESSORS = (ZstdCodec(level=3, checksum=True),)
_MAP_CODECS = (Crc32cCodec(),)
# Every chunk is written, even an all-zero one: zarr then skips scanning each chunk for the
# fill value, a third of the write's time for attention maps.
# (zarr marks its keys typing.NotRequired, which mypy's Python 3.10 typeshed lacks, so it calls "order" required.)
_ARRAY_CONFIG: ArrayConfigParams = {"write_empty_chunks": True}  # type: ignore[typeddict-item]

#: name -> (dtype, chunk length, what one item contributes: "item", "word", "map", "token", "token_map")
#: Strings have short chunks: zarr encodes a partly filled chunk whole, padding included, so appending a block's
#: words to a long chunk costs many times the words themselves (a small extraction's largest write).
_ARRAYS: dict[str, tuple[type[str] | str, int, str]] = {
    "item_ids": (str, 4096, "item"),
    "status": ("int8", 4096, "item"),
    "n_words": ("int32", 4096, "item"),
    "n_tokens": ("int32", 4096, "item"),
    "replaced": ("int16", 4096, "item"),
    "words": (str, 4096, "word"),
    "word_kinds": ("int8", 65536, "word"),
    "segments": ("int8", 65536, "word"),
    "attention": ("float16", 1 << 18, "map"),
}
_TOKEN_ARRAYS: dict[str, tuple[type[str] | str, int, str]] = {
    "tokens": (str, 4096, "token"),
    "token_to_word": ("int32", 65536, "token"),
    "token_attention": ("float16", 1 << 18, "token_map"),
}


@cache
def _array_metadata(keep_tokens: bool) -> dict[str, ArrayV3Metadata]:
    """A new shard's arrays (empty) as zarr metadata. zarr resolves an array's codecs only when it creates one,
    so they are created once, in memory; each new shard then writes all its nodes in one concurrent call
    (:func:`write_group`) instead of one trip to zarr's event loop per array."""
    group = zarr.open_group(MemoryStore(), mode="w")
    specs = dict(_ARRAYS, **(_TOKEN_ARRAYS if keep_tokens else {}))
    for array, (dtype, chunk, _) in specs.items():
        group.create_array(
            array,
            shape=(0,),
            chunks=(chunk,),
            dtype=dtype,
            compressors="auto" if dtype is str else _MAP_CODECS if dtype == "float16" else _COMPRESSORS,
            config=_ARRAY_CONFIG,
        )
    return {name: array.metadata for name, array in group.arrays()}  # type: ignore[misc]


def write_group(path: Path, attributes: dict, nodes: Mapping[str, Any]) -> None:
    """A new group at ``path`` with ``attributes`` and the child ``nodes`` (zarr metadata), written at once."""
    for _ in zarr.create_hierarchy(
        store=LocalStore(str(path)), nodes={"": GroupMetadata(attributes=attributes), **nodes}
    ):
        pass


def _arrays_of(group: zarr.Group) -> dict[str, zarr.Array]:
    """A group's arrays, their metadata read concurrently. One whose zarr.json is gone is left out without
    zarr's warning: the shard's commit record names it, and reading it says it is missing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZarrUserWarning)
        return dict(group.arrays())


def stage_shard(staging: Path, start: int, stop: int, keep_tokens: bool) -> None:
    """A new, empty shard ``[start, stop)`` (nothing committed) built at ``staging``, to be renamed into a store."""
    arrays = _array_metadata(keep_tokens)
    write_group(staging, {"start": start, "stop": stop, "committed": 0, "lengths": dict.fromkeys(arrays, 0)}, arrays)


@dataclass(frozen=True)
class Shard:
    """One contiguous range ``[start, stop)`` of corpus indices, its arrays, and one commit record of it:
    ``committed`` items and ``lengths`` (entries per array). Immutable: a commit makes a new snapshot.

    ``arrays`` are the shard's arrays as opened with the snapshot (one read of their metadata, not one per
    use); their shapes may run ahead of the commit record, never behind it."""

    group: zarr.Group
    start: int
    stop: int
    layers: int
    heads: int
    committed: int = 0
    lengths: Mapping[str, int] = field(default_factory=dict)
    arrays: Mapping[str, zarr.Array] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.group.basename

    @property
    def complete(self) -> bool:
        return self.committed == self.stop - self.start

    def array(self, name: str) -> zarr.Array:
        try:
            return self.arrays[name]
        except KeyError:
            raise StoreCorruptError(f"shard {self.name} has no array {name}") from None

    def values(self, name: str, start: int, stop: int) -> np.ndarray:
        """Entries ``start:stop`` of the 1-D array ``name``, all of them committed (zarr reads them as a numpy
        array; an array shorter than its commit record says is damage, never a shorter answer)."""
        if stop > self.lengths.get(name, 0):
            raise StoreCorruptError(f"shard {self.name}: {name}[{start}:{stop}] is past its committed length")
        values = np.asarray(self.array(name)[start:stop])
        if len(values) != stop - start:
            raise StoreCorruptError(
                f"shard {self.name}: array {name} holds {start + len(values)} entries, "
                f"its commit record {self.lengths[name]}"
            )
        return values

    @cached_property
    def offsets(self) -> dict[str, np.ndarray]:
        """Start offsets (length committed + 1) of each ragged kind, from the per-item counts."""
        k = self.committed
        ok = self.values("status", 0, k) == OK
        words = self.values("n_words", 0, k).astype(np.int64) * ok
        tokens = self.values("n_tokens", 0, k).astype(np.int64) * ok
        per_map = self.layers * self.heads
        sizes = {"word": words, "map": per_map * words**2, "token": tokens, "token_map": per_map * tokens**2}
        return {kind: np.concatenate([[0], np.cumsum(v)]) for kind, v in sizes.items()}

    def has_tokens(self) -> bool:
        return "token_attention" in self.arrays

    @classmethod
    def load(cls, group: zarr.Group, layers: int, heads: int) -> Shard:
        """A snapshot of the commit record ``group`` holds now, its arrays opened; a record that does not fit
        its arrays is a :class:`StoreCorruptError`. ``layers`` and ``heads``: the store's map shape."""
        attrs: dict[str, Any] = dict(group.attrs)
        shard = cls(
            group,
            int(attrs["start"]),
            int(attrs["stop"]),
            layers,
            heads,
            int(attrs.get("committed", 0)),
            dict(attrs.get("lengths", {})),
            _arrays_of(group),
        )
        if not 0 <= shard.start <= shard.stop or not 0 <= shard.committed <= shard.stop - shard.start:
            raise StoreCorruptError(
                f"start {shard.start}, stop {shard.stop} and committed {shard.committed} do not fit"
            )
        for name, length in shard.lengths.items():
            if shard.array(name).shape[0] < length:
                raise StoreCorruptError(
                    f"array {name} is shorter ({shard.array(name).shape[0]}) than committed ({length})"
                )
        return shard

    def read(self, lo: int, hi: int, dtype: npt.DTypeLike) -> list[ItemAttention | None]:
        """Committed items ``lo:hi`` (positions in the shard) with one read per array, maps as ``dtype``;
        None for a skipped item."""
        try:
            off = self.offsets
            per_item = {n: self.values(n, lo, hi) for n in ("item_ids", "status", "n_words", "n_tokens", "replaced")}
            spans = {kind: (int(off[kind][lo]), int(off[kind][hi])) for kind in off}
            names = ["words", "word_kinds", "segments", "attention"]
            if self.has_tokens():
                names += ["tokens", "token_to_word", "token_attention"]
            ragged = {}
            for name in names:
                kind = (_ARRAYS.get(name) or _TOKEN_ARRAYS[name])[2]
                a, b = spans[kind]
                ragged[name] = (self.values(name, a, b), a)
        except Exception as exc:
            raise StoreCorruptError(
                f"cannot read items {self.start + lo}..{self.start + hi - 1} of shard {self.name}: {exc}"
            ) from exc

        def piece(name: str, j: int) -> np.ndarray:
            kind = (_ARRAYS.get(name) or _TOKEN_ARRAYS[name])[2]
            data, base = ragged[name]
            return data[off[kind][j] - base : off[kind][j + 1] - base]

        out: list[ItemAttention | None] = []
        L, H = self.layers, self.heads
        for k, j in enumerate(range(lo, hi)):
            if per_item["status"][k] != OK:
                out.append(None)
                continue
            n = int(per_item["n_words"][k])
            item = ItemAttention(
                index=self.start + j,
                item_id=str(per_item["item_ids"][k]),
                words=tuple(str(w) for w in piece("words", j)),
                word_kinds=piece("word_kinds", j),
                segments=piece("segments", j),
                attention=piece("attention", j).reshape(L, H, n, n).astype(dtype, copy=False),
                n_tokens=int(per_item["n_tokens"][k]),
                replaced=int(per_item["replaced"][k]),
            )
            if "token_attention" in ragged:
                t = item.n_tokens
                item.tokens = tuple(str(w) for w in piece("tokens", j))
                item.token_to_word = piece("token_to_word", j)
                item.token_attention = piece("token_attention", j).reshape(L, H, t, t).astype(dtype, copy=False)
            out.append(item)
        return out


class ShardWriter:
    """The one writer of a shard: appends blocks of results and commits them (the store's only writes
    to a shard's arrays; see the commit protocol of :mod:`bertology_utils.attention.store`)."""

    def __init__(self, shard: Shard, lock: ShardLock):
        self.shard, self._lock = shard, lock
        # Cut off anything written after the last commit (a killed writer's tail).
        for name, length in shard.lengths.items():
            arr = shard.array(name)
            if arr.shape[0] != length:
                arr.resize((length,))

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let the next writer of this shard in (also done when the process ends, however it ends)."""
        self._lock.release()

    @property
    def next_index(self) -> int:
        return self.shard.start + self.shard.committed

    @property
    def remaining(self) -> tuple[int, int]:
        return self.next_index, self.shard.stop

    def append(self, results: Sequence[ItemAttention | SkippedItem]) -> None:
        """Write ``results`` (consecutive items starting at :attr:`next_index`) and commit them."""
        if not results:
            return
        if not self._lock.held:
            raise StoreError(f"shard {self.shard.name}: this writer was closed")
        expected = list(range(self.next_index, self.next_index + len(results)))
        if [r.index for r in results] != expected or expected[-1] >= self.shard.stop:
            raise StoreError(f"shard {self.shard.name}: results must be items {expected[0]}..{expected[-1]} in order")
        data = _block_arrays(results, self.shard.has_tokens())
        lengths = {name: self.shard.lengths[name] + len(values) for name, values in data.items()}
        try:
            sync(_append_all([(self.shard.array(name), values) for name, values in data.items() if len(values)]))
            committed = self.shard.committed + len(results)
            # The commit point, one write of the shard's zarr.json: only now do readers and resumed writers
            # see the block. (``attrs.update`` would write it once per key, a torn commit between them.)
            group = self.shard.group.update_attributes(
                {**self.shard.group.attrs.asdict(), "committed": committed, "lengths": lengths}
            )
        except OSError as exc:  # a full disk, a lost mount: the last commit stands, the tail is cut on resume
            raise StoreError(
                f"cannot write items {expected[0]}..{expected[-1]} to shard {self.shard.name} of "
                f"{self.shard.group.store_path}: {exc}. Everything committed before them is kept; "
                "free space (or fix the disk) and run the same extraction again to resume."
            ) from exc
        self.shard = dataclasses.replace(self.shard, group=group, committed=committed, lengths=lengths)


async def _append_all(appends: Sequence[tuple[zarr.Array, np.ndarray]]) -> None:
    """Append to several arrays at once (each array's shape, then its chunks): one trip to zarr's event loop."""
    await asyncio.gather(*(array.async_array.append(values) for array, values in appends))


def _block_arrays(results: Sequence[ItemAttention | SkippedItem], keep_tokens: bool) -> dict[str, np.ndarray]:
    """What a block of results adds to each of a shard's arrays."""
    ok = [r for r in results if isinstance(r, ItemAttention)]
    data = {
        "item_ids": np.array([r.item_id for r in results], dtype=object),
        "status": np.array([OK if isinstance(r, ItemAttention) else SKIPPED for r in results], dtype=np.int8),
        "n_words": np.array([r.n_words if isinstance(r, ItemAttention) else 0 for r in results], dtype=np.int32),
        "n_tokens": np.array([r.n_tokens for r in results], dtype=np.int32),
        "replaced": np.array([getattr(r, "replaced", 0) for r in results], dtype=np.int16),
        "words": np.array([w for r in ok for w in r.words], dtype=object),
        "word_kinds": _concat([r.word_kinds for r in ok], np.int8),
        "segments": _concat([r.segments for r in ok], np.int8),
        "attention": _concat([r.attention.reshape(-1) for r in ok], np.float16),
    }
    if keep_tokens:
        tokens: list[str] = []
        token_to_word: list[np.ndarray] = []
        token_maps: list[np.ndarray] = []
        for r in ok:
            if r.tokens is None or r.token_to_word is None or r.token_attention is None:
                raise StoreError("this store keeps token-level attention, but results came without it")
            tokens += r.tokens
            token_to_word.append(r.token_to_word)
            token_maps.append(r.token_attention.reshape(-1))
        data["tokens"] = np.array(tokens, dtype=object)
        data["token_to_word"] = _concat(token_to_word, np.int32)
        data["token_attention"] = _concat(token_maps, np.float16)
    return data


class ShardLock:
    """An exclusive OS lock (``flock``) on a shard's lock file: held by one writer at a time, freed when it
    is released or its process dies. The file records the holder, for the message a waiting writer prints."""

    def __init__(self, path: Path, *, wait: bool):
        path.parent.mkdir(exist_ok=True)
        self.path = path
        self._fd: int | None = None  # set before opening: __del__ runs even when the open fails
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:  # pragma: no cover
            return
        told = False
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = path.read_text(errors="replace").strip() or "another writer"
                if not wait:
                    self.release()
                    raise StoreError(
                        f"shard {path.stem} of {path.parent.parent} is being written by {holder}"
                    ) from None
                if not told:
                    tqdm.write(f"waiting for {holder}, which is writing shard {path.stem} of {path.parent.parent}")
                    told = True
                time.sleep(0.2)
            except BaseException:
                self.release()
                raise
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{socket.gethostname()}-{os.getpid()}".encode(), 0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __del__(self) -> None:
        self.release()


def _concat(parts: list[np.ndarray], dtype: npt.DTypeLike) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=dtype)
    joined = _back_to_back(parts)
    return joined if joined is not None and joined.dtype == dtype else np.concatenate(parts).astype(dtype, copy=False)


def _back_to_back(parts: list[np.ndarray]) -> np.ndarray | None:
    """One view spanning ``parts`` when they lie end to end in one buffer (extraction packs a
    block's maps that way), so a block is written without another copy; else None."""
    base = parts[0].base
    if not (isinstance(base, np.ndarray) and base.ndim == 1 and base.flags.c_contiguous):
        return None

    def address(a: np.ndarray) -> int:
        return a.__array_interface__["data"][0]

    first = expected = address(parts[0])
    for p in parts:
        if p.base is not base or address(p) != expected or not p.flags.c_contiguous:
            return None
        expected += p.nbytes
    start = (first - address(base)) // base.itemsize
    return base[start : start + (expected - first) // base.itemsize]
