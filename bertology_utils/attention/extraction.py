"""Batched model forward: items -> token attention -> word attention, in memory or into a store.

Items are processed in fixed blocks of ``block_size`` consecutive corpus items. Inside a
block they are sorted by length and cut into batches of ``batch_size`` (little padding);
results are put back in corpus order and committed to the store block by block. Block
boundaries depend only on the shard's start, so a resumed extraction runs exactly the
batches an uninterrupted one would, and writes identical values.

The maps are the model's attention, or, given a :class:`MapSource` (``maps=``), those of any
other method (context mixing: rollout, norm-weighted attention, ALTI, value zeroing...), so
they share the word conversion, the store and its resumability. Such methods live in higher
layers; this module only calls them, and records their name and settings in the store's
metadata so that a store of other maps is never reused.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from numpy.typing import DTypeLike
from tqdm.auto import tqdm

from bertology_utils.attention.alignment import AlignedItem, align
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention, SkippedItem, WordConversion
from bertology_utils.core import __version__, settings
from bertology_utils.core.architectures import is_registered, self_attention_modules, shares_layers
from bertology_utils.core.batching import Padding, pad_rows, plan_batches, to_device
from bertology_utils.core.cache import cache_lock, entry_name
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel
from bertology_utils.data import Corpus

__all__ = [
    "TOO_LONG_POLICIES",
    "MapSource",
    "MAX_BATCH_WEIGHTS",
    "iter_attention",
    "attention_for",
    "store_metadata",
    "shard_range",
    "extract_attention",
    "ExtractionJob",
    "cached_store_path",
    "extract_cached",
]

TOO_LONG_POLICIES = ("skip", "error")
#: Default cap on attention weights per batch (items x layers x heads x tokens^2): 2^24 float32
#: weights are 64 MiB, so peak memory stays flat however long the longest sentences are.
MAX_BATCH_WEIGHTS = 1 << 24


class MapSource(Protocol):
    """A method computing token-level maps in place of the model's attention (``maps=`` of extraction).

    ``name`` and ``heads`` may be plain attributes or properties.
    """

    @property
    def name(self) -> str:
        """What the maps are, e.g. ``"rollout"``: recorded in the store's metadata and in the name
        of its cache entry."""
        ...

    @property
    def heads(self) -> int | None:
        """Maps per layer: ``None`` for the model's head count (per-head methods), 1 for layer-level ones."""
        ...

    def settings(self) -> dict:
        """The method's settings as JSON values: a store made with other settings is refused
        (and cached apart)."""
        ...

    def __call__(self, loaded: LoadedModel, inputs: dict[str, torch.Tensor]) -> Sequence[torch.Tensor]:
        """One float tensor per layer, ``(B, heads, T, T)``, rows the attending tokens, for a padded
        batch's model inputs (``input_ids``, ``attention_mask``, maybe ``token_type_ids``).

        The source runs its own forward passes, called outside inference mode, so that it may take
        gradients; one that needs none should run under :func:`torch.inference_mode` itself. Rows
        and columns of padding are ignored.
        """
        ...


def _map_heads(loaded: LoadedModel, maps: MapSource | None) -> int:
    """Maps per layer: the model's heads for its attention or a per-head source, else the source's count."""
    if maps is None or maps.heads is None:
        return loaded.num_heads
    heads = maps.heads
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise BertologyError(f"map source {maps.name!r}: heads must be None or a positive int, not {heads!r}")
    return heads


class _AttentionsDone(Exception):
    """Raised by a hook once the last layer's attention is computed: the rest of the forward is skipped."""


class _Forward:
    """Runs batches of aligned items through a model and converts their attention to words.

    The forward pass stops right after the last layer's attention (hooks keep each layer's
    probabilities): what follows, the last feed-forward block and any pooler or head, changes
    no attention map. An architecture where the hooks do not see every layer's probabilities
    gets the whole forward pass instead. With a map source (``maps``), the source computes
    each batch's maps instead, and they are converted the same way.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        from_rule: str,
        keep_tokens: bool,
        maps: MapSource | None = None,
        dtype: DTypeLike = np.float16,
    ):
        self.loaded = loaded
        self.dtype = dtype
        self.from_rule = from_rule
        self.keep_tokens = keep_tokens
        self.maps = maps
        self.heads = _map_heads(loaded, maps)  # maps per layer
        self.padding = Padding.of(loaded)
        self._buffers: dict[str, np.ndarray] = {}
        # Layers sharing one module (ALBERT) cannot be told apart by hooks, and an unregistered model's modules
        # are not known: those models get the whole forward.
        hooks = is_registered(loaded) and not shares_layers(loaded)
        self._layers: list | None = self_attention_modules(loaded) if hooks else None

    @torch.inference_mode()
    def _attentions(self, inputs: dict) -> tuple[torch.Tensor, ...]:
        if self._layers is not None:
            captured: list[torch.Tensor | None] = []
            caller = threading.get_ident()
            layers = self._layers

            def keep(module: torch.nn.Module, _args: object, output: object) -> None:
                if threading.get_ident() != caller:  # another thread's forward through the same model
                    return
                captured.append(output[1] if isinstance(output, tuple) and len(output) > 1 else None)
                if module is layers[-1]:
                    raise _AttentionsDone

            handles = [m.register_forward_hook(keep) for m in layers]
            try:
                self.loaded.model(**inputs, output_attentions=True)
            except _AttentionsDone:
                pass
            finally:
                for h in handles:
                    h.remove()
            n_tok = inputs["input_ids"].shape[1]
            expected = (self.loaded.num_heads, n_tok, n_tok)
            kept = [c for c in captured if isinstance(c, torch.Tensor) and c.shape[1:] == expected]
            if len(captured) == len(layers) and len(kept) == len(captured):
                return tuple(kept)
            self._layers = None  # this architecture hides its probabilities from the hooks
        outputs = self.loaded.model(**inputs, output_attentions=True)
        self.loaded.check_attentions(outputs)
        return outputs.attentions

    def _source_maps(self, inputs: dict) -> list[torch.Tensor]:
        """The map source's maps for a batch, checked: one (B, heads, T, T) float tensor per layer."""
        assert self.maps is not None
        name = self.maps.name
        maps = list(self.maps(self.loaded, inputs))
        n_layers = self.loaded.num_layers
        if len(maps) != n_layers:
            raise BertologyError(f"map source {name!r} returned {len(maps)} maps for a model of {n_layers} layers")
        batch, n_tok = inputs["input_ids"].shape
        expected = (batch, self.heads, n_tok, n_tok)
        for layer, m in enumerate(maps):
            if not (isinstance(m, torch.Tensor) and m.is_floating_point() and tuple(m.shape) == expected):
                got = f"{tuple(m.shape)} {m.dtype}" if isinstance(m, torch.Tensor) else type(m).__name__
                raise BertologyError(
                    f"map source {name!r} returned {got} for layer {layer}, not a float tensor of shape "
                    f"{expected} (batch, heads, tokens, tokens)"
                )
        return [m.detach() for m in maps]

    def _scratch(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A work array of ``shape`` (float16 unless asked), reused across batches: fresh memory costs page faults."""
        size = int(np.prod(shape))
        buf = self._buffers.get(name)
        if buf is None or buf.size < size:
            buf = self._buffers[name] = np.empty(size, dtype=self.dtype)
        return buf[:size].reshape(shape)

    def __call__(self, batch: Sequence[AlignedItem], into: dict[int, tuple] | None = None) -> list[ItemAttention]:
        """Attention of ``batch``; ``into`` maps an item's index to the (word map, token map or None)
        arrays its results are copied into, else each item gets arrays of its own."""
        padded = self.padding.pad([a.input_ids for a in batch], [a.token_type_ids for a in batch])
        inputs = padded.inputs(self.loaded.device)
        # A map source runs outside inference mode (it may need gradients) and sets its own.
        attentions = self._attentions(inputs) if self.maps is None else self._source_maps(inputs)
        return self._items(batch, into, attentions)

    @torch.inference_mode()
    def _items(
        self, batch: Sequence[AlignedItem], into: dict[int, tuple] | None, attentions: Sequence[torch.Tensor]
    ) -> list[ItemAttention]:
        """The batch's items, their token maps converted to words (and kept, with ``keep_tokens``)."""
        n_words = max(a.n_words for a in batch)
        n_tok = attentions[0].shape[-1]
        t2w = pad_rows([a.token_to_word for a in batch], -1, n_tok)
        device = self.loaded.device
        shape = (len(batch), self.loaded.num_layers, self.heads)
        words = torch.from_numpy(self._scratch("words", shape + (n_words, n_words)))
        tokens = torch.from_numpy(self._scratch("tokens", shape + (n_tok, n_tok))) if self.keep_tokens else None
        convert = WordConversion(to_device(t2w, device), self.from_rule, n_words=n_words)
        for layer, att in enumerate(attentions):  # layer by layer: no stacked copy of every map
            words[:, layer].copy_(convert(att))  # float32 -> float16 (unless asked otherwise) in the copy
            if tokens is not None:
                tokens[:, layer].copy_(att)
        word_maps, token_maps = words.numpy(), tokens.numpy() if tokens is not None else None
        out = []
        for b, a in enumerate(batch):
            w, t = a.n_words, a.n_tokens
            word_map, token_map = into[a.index] if into is not None else (None, None)
            item = ItemAttention(
                index=a.index,
                item_id=a.item_id,
                words=a.words,
                word_kinds=a.word_kinds,
                segments=a.segments,
                attention=_copy(word_maps[b, :, :, :w, :w], word_map),
                n_tokens=t,
                replaced=a.replaced,
            )
            if token_maps is not None:
                item.tokens = tuple(self.loaded.tokenizer.convert_ids_to_tokens(a.input_ids.tolist()))
                item.token_to_word = a.token_to_word
                item.token_attention = _copy(token_maps[b, :, :, :t, :t], token_map)
            out.append(item)
        return out


def _copy(values: np.ndarray, into: np.ndarray | None) -> np.ndarray:
    if into is None:
        return values.copy()
    into[...] = values
    return into


def _packed_maps(shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """float16 arrays of ``shapes`` lying end to end in one buffer: a store block's layout, so the
    writer appends the buffer without another copy."""
    sizes = [int(np.prod(shape)) for shape in shapes]
    flat = np.empty(sum(sizes), dtype=np.float16)
    ends = np.cumsum(sizes)
    return [flat[end - size : end].reshape(shape) for end, size, shape in zip(ends, sizes, shapes)]


def _run_block(
    forward: _Forward,
    aligned: list[AlignedItem],
    batch_size: int,
    max_tokens: int,
    too_long: str,
    max_batch_weights: int,
    pack: bool = False,
) -> list[ItemAttention | SkippedItem]:
    """Results for one block of aligned items, in the block's order. With ``pack``, the items' maps
    are views of one buffer per block (see :func:`_packed_maps`), alive as long as any of them is."""
    results: dict[int, ItemAttention | SkippedItem] = {}
    fits = []
    for a in aligned:
        if a.n_tokens <= max_tokens:
            fits.append(a)
        elif too_long == "error":
            raise BertologyError(
                f"item {a.index} ({a.item_id}) has {a.n_tokens} tokens, more than the "
                f"{max_tokens} the model takes; skip such items with too_long='skip' (--too-long skip)"
            )
        else:
            results[a.index] = SkippedItem(a.index, a.item_id, a.n_tokens, f"{a.n_tokens} tokens > {max_tokens}")
    loaded = forward.loaded
    into = None
    if pack:
        maps = (loaded.num_layers, forward.heads)
        word_maps = _packed_maps([maps + (a.n_words, a.n_words) for a in fits])
        token_maps = (
            _packed_maps([maps + (a.n_tokens, a.n_tokens) for a in fits]) if forward.keep_tokens else [None] * len(fits)
        )
        into = {a.index: pair for a, pair in zip(fits, zip(word_maps, token_maps))}
    # Length-sorted, ties in corpus order: batches are the same on every run.
    plan = plan_batches(
        [a.n_tokens for a in fits],
        batch_size,
        max_batch_weights=max_batch_weights,
        maps_per_item=loaded.num_layers * forward.heads,
    )
    for rows in plan:
        for item in forward([fits[i] for i in rows], into):
            results[item.index] = item
    return [results[a.index] for a in aligned]


def _blocks(start: int, stop: int, block_size: int, origin: int) -> Iterator[tuple[int, int]]:
    """Block ranges covering ``[start, stop)``, aligned to ``origin`` (the shard's start)."""
    lo = start
    while lo < stop:
        hi = min(stop, origin + ((lo - origin) // block_size + 1) * block_size)
        yield lo, hi
        lo = hi


def iter_attention(
    items: Iterable,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    batch_size: int = 32,
    block_size: int = 512,
    max_batch_weights: int = MAX_BATCH_WEIGHTS,
    from_rule: str = "mean",
    keep_tokens: bool = False,
    too_long: str = "skip",
    max_tokens: int | None = None,
    progress: bool = True,
    maps: MapSource | None = None,
    dtype: DTypeLike = np.float16,
) -> Iterator[ItemAttention | SkippedItem]:
    """Yield the word-level attention of each item in corpus order (skipped items as :class:`SkippedItem`).

    With ``maps``, the maps are the source's (see :class:`MapSource`) instead of the model's attention.
    The maps are float16, as a store keeps them; ``dtype=np.float32`` keeps the model's own precision
    (to measure what storing them in float16 changes).
    """
    corpus, loaded = Corpus.of(items), LoadedModel.of(model)
    forward = _Forward(loaded, from_rule, keep_tokens, maps, dtype)
    limit = _max_tokens(loaded, max_tokens, too_long)
    desc = "attention" if maps is None else maps.name
    with tqdm(total=len(corpus), desc=desc, unit="item", disable=not progress) as bar:
        for lo, hi in _blocks(0, len(corpus), block_size, 0):
            aligned = align(loaded.tokenizer, corpus.items[lo:hi], lo)
            yield from _run_block(forward, aligned, batch_size, limit, too_long, max_batch_weights)
            bar.update(hi - lo)


def attention_for(
    items: Iterable,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    maps: MapSource | None = None,
    **kwargs: Any,
) -> list[ItemAttention]:
    """Word-level attention (or a map source's maps) of a few items, in memory. Raises if an item is
    too long for the model."""
    kwargs.setdefault("too_long", "error")
    kwargs.setdefault("progress", False)
    return [r for r in iter_attention(items, model, maps=maps, **kwargs) if isinstance(r, ItemAttention)]


def _max_tokens(loaded: LoadedModel, max_tokens: int | None, too_long: str) -> int:
    if too_long not in TOO_LONG_POLICIES:
        raise ValueError(f"too_long must be one of {TOO_LONG_POLICIES}, not {too_long!r}")
    if max_tokens is not None and max_tokens > loaded.max_tokens:
        raise BertologyError(f"max_tokens={max_tokens} is more than {loaded.name} takes ({loaded.max_tokens})")
    return loaded.max_tokens if max_tokens is None else max_tokens


def store_metadata(
    loaded: LoadedModel,
    corpus: Corpus,
    *,
    from_rule: str,
    keep_tokens: bool,
    max_tokens: int,
    too_long: str,
    batch_size: int,
    block_size: int,
    max_batch_weights: int,
    maps: MapSource | None = None,
) -> dict:
    """What a store is checked against when it is reused: any difference refuses the reuse.

    A map source adds ``"maps"``: its name, maps per layer and settings (the model's attention has no
    such entry, so stores made before map sources existed stay valid).
    """
    metadata = {
        "model": loaded.fingerprint(),
        "corpus": {"name": corpus.name, "sha256": corpus.sha256, "items": len(corpus)},
        "conversion": {
            "from_rule": from_rule,
            "token_level": keep_tokens,
            "max_tokens": max_tokens,
            "too_long": too_long,
            "dtype": "float16",
        },
        "extraction": {"batch_size": batch_size, "block_size": block_size, "max_batch_weights": max_batch_weights},
        "library": {"bertology_utils": __version__},
    }
    if maps is not None:
        metadata["maps"] = {"name": maps.name, "heads": _map_heads(loaded, maps), "settings": maps.settings()}
    return metadata


def shard_range(n_items: int, shard: tuple[int, int] | None) -> tuple[int, int]:
    """``[start, stop)`` of shard ``i`` of ``n`` (contiguous, sizes differing by at most one)."""
    if shard is None:
        return 0, n_items
    i, n = shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, not {shard}")
    bounds = np.linspace(0, n_items, n + 1).round().astype(int)
    return int(bounds[i]), int(bounds[i + 1])


def extract_attention(
    items: Iterable,
    store_path: str | os.PathLike,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    batch_size: int = 32,
    block_size: int = 512,
    max_batch_weights: int = MAX_BATCH_WEIGHTS,
    from_rule: str = "mean",
    keep_tokens: bool = False,
    too_long: str = "skip",
    max_tokens: int | None = None,
    shard: tuple[int, int] | None = None,
    overwrite: bool = False,
    progress: bool = True,
    maps: MapSource | None = None,
) -> AttentionStore:
    """Extract word-level attention for ``items`` into the store at ``store_path``; resumable.

    Re-running with the same settings continues where an interrupted run stopped (even
    after ``kill -9``); a store written with other settings is refused unless ``overwrite``.
    ``shard=(i, n)`` extracts only the i-th of n contiguous slices, for parallel workers
    whose stores :func:`bertology_utils.attention.store.merge_stores` joins. With ``maps``, the
    store holds the source's maps (see :class:`MapSource`), resumable and shardable the same way.
    (:func:`bertology_utils.attention.distributed.extract_on_cluster` runs the slices on a Dask cluster.)
    """
    corpus, loaded = Corpus.of(items), LoadedModel.of(model)
    job = ExtractionJob(
        corpus, loaded, batch_size, block_size, max_batch_weights, from_rule, keep_tokens, too_long, maps
    )
    store = job.open_store(store_path, max_tokens, overwrite=overwrite)
    # Said even without a progress bar: a reused store should never be a surprise.
    if store.is_complete:
        tqdm.write(f"reusing the complete store at {store.path} ({store.n_items} items)")
    elif store.done:
        tqdm.write(f"resuming: {store.done} of {store.n_items} items already in the store at {store.path}")
    job.fill(store, *shard_range(len(corpus), shard), progress=progress)
    store.refresh()
    return store


@dataclass(frozen=True)
class ExtractionJob:
    """One extraction's data, model and settings: what opens (or checks) its store and fills a range of it.

    Shared by :func:`extract_attention` and the workers of a cluster extraction, so both write the
    same blocks with the same batches.
    """

    corpus: Corpus
    loaded: LoadedModel
    batch_size: int = 32
    block_size: int = 512
    max_batch_weights: int = MAX_BATCH_WEIGHTS
    from_rule: str = "mean"
    keep_tokens: bool = False
    too_long: str = "skip"
    maps: MapSource | None = None

    def open_store(
        self, store_path: str | os.PathLike, max_tokens: int | None, *, overwrite: bool = False
    ) -> AttentionStore:
        """The store for this job, created or checked against its metadata (:func:`store_metadata`)."""
        metadata = store_metadata(
            self.loaded,
            self.corpus,
            from_rule=self.from_rule,
            keep_tokens=self.keep_tokens,
            max_tokens=_max_tokens(self.loaded, max_tokens, self.too_long),
            too_long=self.too_long,
            batch_size=self.batch_size,
            block_size=self.block_size,
            max_batch_weights=self.max_batch_weights,
            maps=self.maps,
        )
        return AttentionStore.open_or_create(Path(store_path), metadata, len(self.corpus), overwrite=overwrite)

    def fill(self, store: AttentionStore, start: int, stop: int, *, progress: bool = True) -> None:
        """Extract every item of ``[start, stop)`` not yet committed: partly written shards in range are
        resumed, gaps become new shards."""
        corpus, loaded = self.corpus, self.loaded
        limit = int(store.metadata["conversion"]["max_tokens"])
        plan = [(s.start, s.stop) for s in store.shards if s.start < stop and start < s.stop and not s.complete]
        plan += store.missing_ranges(start, stop)
        committed = {(s.start, s.stop): s.committed for s in store.shards}
        forward = _Forward(loaded, self.from_rule, self.keep_tokens, self.maps)
        skipped = 0
        # Two helper threads keep the forward pass busy: one writes (the store's writes stay in block
        # order), one tokenizes and aligns the next block. Neither changes what is computed.
        with (
            tqdm(
                total=sum(hi - lo - committed.get((lo, hi), 0) for lo, hi in plan),
                desc=f"extract {corpus.name}",
                unit="item",
                disable=not progress,
            ) as bar,
            ThreadPoolExecutor(max_workers=1) as writes,
            ThreadPoolExecutor(max_workers=1) as prefetch,
        ):
            for lo_shard, hi_shard in sorted(plan):
                # The writer first: it waits for another writer of this shard and reads its latest commit,
                # which is where this shard resumes.
                with store.writer(lo_shard, hi_shard, self.keep_tokens) as writer:
                    blocks = list(_blocks(writer.next_index, hi_shard, self.block_size, lo_shard))
                    if not blocks:
                        continue
                    aligning = prefetch.submit(
                        align, loaded.tokenizer, corpus.items[blocks[0][0] : blocks[0][1]], blocks[0][0]
                    )
                    pending: Future[Any] | None = None
                    try:
                        for k, (lo, hi) in enumerate(blocks):
                            aligned = aligning.result()
                            if k + 1 < len(blocks):
                                nlo, nhi = blocks[k + 1]
                                aligning = prefetch.submit(align, loaded.tokenizer, corpus.items[nlo:nhi], nlo)
                            results = _run_block(
                                forward,
                                aligned,
                                self.batch_size,
                                limit,
                                self.too_long,
                                self.max_batch_weights,
                                pack=True,
                            )
                            if pending is not None:
                                pending.result()  # the previous block's write overlapped this block's forward
                            pending = writes.submit(writer.append, results)
                            skipped += sum(isinstance(r, SkippedItem) for r in results)
                            bar.update(hi - lo)
                            bar.set_postfix(skipped=skipped, refresh=False)
                    finally:  # the writer's lock is held until its last write has ended, whatever happened
                        if pending is not None:
                            wait([pending])
                    if pending is not None:
                        pending.result()


def cached_store_path(
    items: Iterable,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    maps: MapSource | None = None,
    **settings_kwargs: Any,
) -> Path:
    """Where :func:`extract_cached` keeps the store for these items, model and settings.

    ``<model>-<corpus>-<digest>.zarr``, or ``<model>-<maps name>-<corpus>-<digest>.zarr`` for a map source.
    """
    corpus, loaded = Corpus.of(items), LoadedModel.of(model)
    options: dict[str, Any] = dict(
        from_rule="mean",
        keep_tokens=False,
        too_long="skip",
        batch_size=32,
        block_size=512,
        max_batch_weights=MAX_BATCH_WEIGHTS,
    )
    options.update(settings_kwargs)
    limit = _max_tokens(loaded, options.pop("max_tokens", None), options["too_long"])
    metadata = store_metadata(loaded, corpus, max_tokens=limit, maps=maps, **options)
    root = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "attention"
    # The map name before the corpus's: entry_name cuts long labels at the end.
    label = "-".join([Path(loaded.name).name] + ([maps.name] if maps is not None else []) + [corpus.name])
    return root / f"{entry_name(label, metadata)}.zarr"


def extract_cached(
    items: Iterable,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    maps: MapSource | None = None,
    shard: tuple[int, int] | None = None,
    overwrite: bool = False,
    **kwargs: Any,
) -> AttentionStore:
    """:func:`extract_attention` into a cache folder keyed by model, data and settings.

    Notebooks that study the same corpus with the same model share one extraction; a
    change of model weights, data, conversion rule or map source (``maps``, its settings included)
    gives a new store. The cache lives
    under ``$BERTOLOGY_CACHE_DIR/attention`` unless ``cache_dir`` is given. ``shard`` and
    ``overwrite`` say how to run, not what the store holds, so they do not change its key.
    """
    corpus, loaded = Corpus.of(items), LoadedModel.of(model)
    path = cached_store_path(corpus, loaded, cache_dir=cache_dir, maps=maps, **kwargs)
    with cache_lock(path):  # another process extracting the same store: wait, then reuse it
        return extract_attention(
            corpus, path, loaded, progress=progress, maps=maps, shard=shard, overwrite=overwrite, **kwargs
        )
