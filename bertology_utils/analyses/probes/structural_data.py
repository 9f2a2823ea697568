"""The structural probes' data: word-level hidden states of every layer, with each sentence's gold tree.

Hewitt and Manning (2019), `A Structural Probe for Finding Syntax in Word Representations
<https://aclanthology.org/N19-1419/>`_. A word's vector at a layer is the **average** of its word
pieces' hidden states there (layer 0 is the embedding layer's output, layer ``L`` the last layer's).
The average, not the first piece: it reads every piece of a word (a first piece such as ``un`` says
little about ``unbelievably``), as the project's static vectors
(:class:`~bertology_utils.analyses.word_vectors.ModelEmbeddingVectors`) do. Sentences are tokenized one word at a time by
:func:`~bertology_utils.attention.alignment.align`, exactly as the attention probes' maps were, and
batched with :mod:`bertology_utils.core.batching`.

:class:`StructuralData` keeps, per sentence, the vectors of the layers asked for (float16 by default:
half the memory, and far finer than the probe's error) and the gold tree distances and depths; the
model runs over ``block_size`` sentences at a time, so memory is bounded by the layers kept, never by
the ``L + 1`` layers of a forward pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bertology_utils.analyses.syntax.scoring import EXCLUDED_RELATIONS
from bertology_utils.attention.alignment import WORD, align
from bertology_utils.core.batching import Padding, length_grouped_batches, pad_rows, plan_batches, to_device
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel, fast_fp32_products
from bertology_utils.data import Corpus

__all__ = ["tree_distances", "word_hidden_states", "StructuralBatch", "StructuralData"]


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """Path lengths between every two words of a dependency tree.

    The path between words i and j climbs to their lowest common ancestor, so its length is
    ``depth(i) + depth(j) - 2 depth(lca)``. With ``A`` the ancestors-or-self indicator (``A[i, a]`` when ``a``
    is on the way from ``i`` to the root), ``A @ A.T`` counts the common ones, ``depth(lca) + 1``: one matrix
    product instead of a search per word.

    :param heads: UD heads (1-based, 0 for the root) of the sentence's words.
    :returns: ``(W, W)`` int16, edges on the path between words i and j (0 on the diagonal).
    :raises BertologyError: when the heads are not one tree (a head out of range, no root or several, a cycle).
    """
    heads_ = np.asarray(heads, dtype=np.int64).reshape(-1)
    n = len(heads_)
    if n == 0 or heads_.min() < 0 or heads_.max() > n or (heads_ == 0).sum() != 1:
        raise BertologyError(f"the heads {tuple(heads_.tolist())} are not one tree")
    up = np.append(heads_ - 1, n)  # each word's head; the root's is n, "above the tree", which stays there
    up[up < 0] = n
    ancestors = np.zeros((n, n + 1), dtype=np.float32)
    at = np.arange(n)
    for _ in range(n):  # a tree of n words is at most n - 1 edges deep
        ancestors[np.arange(n), at] = 1
        at = up[at]
        if (at == n).all():
            break
    else:
        raise BertologyError(f"the heads {tuple(heads_.tolist())} are not one tree")
    ancestors = ancestors[:, :n]
    levels = ancestors.sum(1)  # depth + 1
    common = ancestors @ ancestors.T  # depth of the lowest common ancestor + 1 (exact: small integers)
    return (levels[:, None] + levels[None, :] - 2 * common).astype(np.int16)


@torch.inference_mode()
def word_hidden_states(
    model: LoadedModel | str | None,
    sentences: Iterable,
    *,
    layers: Sequence[int] | None = None,
    batch_size: int = 32,
    max_batch_tokens: int = 16384,
    precision: str = "fp32",
) -> Iterator[tuple[int, np.ndarray | None]]:
    """Each sentence's word vectors at the layers asked for: its word pieces' hidden states averaged.

    :param model: a :class:`~bertology_utils.core.models.LoadedModel`, a name or a folder (None: the default model).
    :param sentences: sentences (``Sentence``\\ s or lists of words), in order.
    :param layers: hidden-state layers to keep, 0 (the embeddings) to ``L``; all ``L + 1`` by default.
    :param batch_size: sentences per forward pass.
    :param max_batch_tokens: padded tokens per forward pass at most.
    :param precision: the forward passes' matrix products (:func:`~bertology_utils.core.models.fast_fp32_products`:
        bfloat16-rounded inputs under "bf16" or "auto" where the device has the units, every tensor float32).
    :returns: an iterator of ``(position in sentences, vectors)`` in order, ``vectors`` being ``(W, len(layers),
        hidden)`` float32 over the sentence's words, or None for a sentence longer than the model takes.
    """
    loaded = LoadedModel.of(model)
    kept = list(range(loaded.num_layers + 1)) if layers is None else [int(k) for k in layers]
    if not kept or min(kept) < 0 or max(kept) > loaded.num_layers:
        raise ValueError(f"layers must lie in 0..{loaded.num_layers} (0: the embeddings), not {layers}")
    aligned = align(loaded.tokenizer, sentences)
    fits = [a for a in aligned if a.n_tokens <= loaded.max_tokens]
    padding = Padding.of(loaded)
    out: dict[int, np.ndarray] = {}
    for rows in plan_batches([a.n_tokens for a in fits], batch_size, max_batch_tokens=max_batch_tokens):
        batch = [fits[i] for i in rows]
        inputs = padding.pad([a.input_ids for a in batch], [a.token_type_ids for a in batch]).inputs(loaded.device)
        with fast_fp32_products(precision, loaded.device):
            hidden = loaded.model(**inputs, output_hidden_states=True).hidden_states
        # A (B, words, tokens) averaging matrix: word w of item b takes 1/pieces of each of its pieces.
        t2w = torch.from_numpy(pad_rows([a.token_to_word for a in batch], -1, inputs["input_ids"].shape[1]))
        n_words = max(a.n_words for a in batch)
        pool = torch.nn.functional.one_hot(t2w.clamp(min=0), n_words).transpose(1, 2).float()
        pool *= (t2w >= 0)[:, None, :]
        pool /= pool.sum(-1, keepdim=True).clamp(min=1)
        pool = pool.to(loaded.device)
        words = torch.stack([pool @ hidden[k].float() for k in kept], 2).cpu().numpy()  # (B, words, layers, D)
        for b, a in enumerate(batch):
            out[a.index] = words[b, np.flatnonzero(a.word_kinds == WORD)]  # real words, specials dropped
    for a in aligned:
        yield a.index, out.pop(a.index, None)


@dataclass
class StructuralBatch:
    """Padded tensors of ``B`` sentences of at most ``W`` words, on the device they were built on.

    :param vectors: ``(B, W, D)`` float32 word vectors of one layer, or ``(K, B, W, D)`` of ``K`` layers (0 on
        padding).
    :param distances: ``(B, W, W)`` gold tree distances.
    :param depths: ``(B, W)`` gold depths (edges to the root).
    :param lengths: ``(B,)`` words per sentence.
    :param words: ``(B, W)`` bool, real (non-padding) words.
    """

    vectors: torch.Tensor
    distances: torch.Tensor
    depths: torch.Tensor
    lengths: torch.Tensor
    words: torch.Tensor


class StructuralData:
    """A treebank's sentences with their word vectors at some layers and their gold trees: the probes' ``X``.

    Sentences without a tree, and those too long for the model, are left out and counted in
    :attr:`skipped`. Punctuation (relation ``punct``, as in
    :mod:`bertology_utils.analyses.syntax.scoring`) is kept for training, as the paper trained on every
    word, and marked in :attr:`scored` for the metrics to leave out.

    :param corpus: sentences with trees.
    :param vectors: one ``(W, len(layers), D)`` array per sentence of ``corpus`` (None for one to leave out),
        e.g. from :func:`word_hidden_states`.
    :param layers: the layers the arrays hold, in their order.
    :param dtype: the vectors' storage type.
    :param name: what to call the data; the corpus's name by default.
    """

    def __init__(
        self,
        corpus: Corpus | Sequence,
        vectors: Iterable[np.ndarray | None],
        layers: Sequence[int],
        *,
        dtype: np.dtype | type = np.float32,
        name: str | None = None,
    ) -> None:
        self.corpus = corpus
        self.layers = tuple(int(k) for k in layers)
        self.name = name or getattr(corpus, "name", "sentences")
        self.skipped = {"no tree": 0, "too long for the model": 0}
        self.indices: list[int] = []
        self.vectors: dict[int, list[np.ndarray]] = {}  # per layer, views of the packed vectors (below)
        self.distances: list[np.ndarray] = []
        self.scored: list[np.ndarray] = []  # per sentence, (W,) bool: not punctuation
        self.roots: list[int] = []
        given = list(vectors)
        kept: list[np.ndarray] = []
        if len(given) != len(corpus):
            raise BertologyError(f"{len(given)} vector arrays for the {len(corpus)} sentences of {self.name}")
        for i, (sentence, array) in enumerate(zip(corpus, given)):
            if not sentence.has_syntax:
                self.skipped["no tree"] += 1
                continue
            if array is None:
                self.skipped["too long for the model"] += 1
                continue
            if array.ndim != 3 or array.shape[:2] != (len(sentence.words), len(self.layers)):
                raise BertologyError(
                    f"sentence {i} of {self.name} has {len(sentence.words)} words and {len(self.layers)} layers "
                    f"are given, but its vectors have the shape {array.shape}"
                )
            self.indices.append(i)
            kept.append(array)
            self.distances.append(tree_distances(sentence.heads))
            self.roots.append(int(np.flatnonzero(np.asarray(sentence.heads) == 0)[0]))
            self.scored.append(~np.isin(np.asarray(sentence.relations), EXCLUDED_RELATIONS))
        if not self.indices:
            raise BertologyError(f"no sentence of {self.name} can be used ({self.skipped})")
        self.hidden_size = int(kept[0].shape[2])
        self.lengths = np.array([len(d) for d in self.distances], dtype=np.int64)
        # Every sentence's words end to end, one row per layer, and a zero row last for padding to read: a batch
        # of any layers is then one gather (on the device the probes fit on, where it is copied once).
        starts = np.concatenate([[0], np.cumsum(self.lengths)])
        self._packed = np.zeros((len(self.layers), starts[-1] + 1, self.hidden_size), dtype=dtype)
        for array, a, b in zip(kept, starts[:-1], starts[1:]):
            self._packed[:, a:b] = array.transpose(1, 0, 2)
        self._starts = starts[:-1]
        for k, layer in enumerate(self.layers):
            self.vectors[layer] = [self._packed[k, a:b] for a, b in zip(starts[:-1], starts[1:])]
        squares = np.concatenate([[0], np.cumsum(self.lengths**2)])
        self._packed_distances = np.concatenate([*(d.ravel() for d in self.distances), [0]]).astype(np.float32)
        self._distance_starts = squares[:-1]
        self._on_device: dict[str, dict[str, torch.Tensor]] = {}

    @classmethod
    def from_model(
        cls,
        corpus: Corpus,
        model: LoadedModel | str | None,
        *,
        layers: Sequence[int] | None = None,
        block_size: int = 256,
        batch_size: int = 32,
        dtype: np.dtype | type = np.float16,
        precision: str = "fp32",
    ) -> StructuralData:
        """The word vectors of ``corpus`` at ``layers`` of ``model``, read ``block_size`` sentences at a time.

        :param corpus: sentences with trees.
        :param model: a loaded model, a name or a folder (None: the default model).
        :param layers: hidden-state layers to keep (0: the embeddings); all by default.
        :param block_size: sentences tokenized and run at a time: only their ``L + 1`` layers are ever in memory.
        :param batch_size: sentences per forward pass.
        :param dtype: the vectors' storage type.
        :param precision: the forward passes' matrix products (:func:`word_hidden_states`).
        :returns: the data.
        """
        loaded = LoadedModel.of(model)
        kept = list(range(loaded.num_layers + 1)) if layers is None else [int(k) for k in layers]
        sentences = list(corpus)
        vectors: list[np.ndarray | None] = []
        for start in range(0, len(sentences), block_size):
            block = sentences[start : start + block_size]
            treed = [s for s in block if s.has_syntax]  # no forward pass for a sentence without a tree
            found = dict(word_hidden_states(loaded, treed, layers=kept, batch_size=batch_size, precision=precision))
            cast = {k: None if v is None else v.astype(dtype) for k, v in found.items()}
            positions = iter(range(len(treed)))
            vectors += [cast[next(positions)] if s.has_syntax else None for s in block]
        return cls(corpus, vectors, kept, dtype=dtype)

    def __len__(self) -> int:
        return len(self.indices)

    def nbytes(self) -> int:
        """Bytes the kept vectors take."""
        return sum(a.nbytes for arrays in self.vectors.values() for a in arrays)

    def check_layer(self, layer: int | None) -> int:
        """The layer a probe reads: ``layer``, or the only one kept when None.

        :param layer: a hidden-state layer, or None.
        :returns: the layer, checked to be kept.
        """
        if layer is None:
            if len(self.layers) != 1:
                raise BertologyError(f"{self.name} keeps layers {self.layers}: say which one the probe reads (layer=)")
            return self.layers[0]
        if int(layer) not in self.vectors:
            raise BertologyError(f"{self.name} keeps layers {self.layers}, not layer {layer}")
        return int(layer)

    def _tensors(self, device: torch.device) -> dict[str, torch.Tensor]:
        """The packed vectors, distances and offsets as tensors on ``device`` (copied there once)."""
        key = str(device)
        if key not in self._on_device:
            arrays = {
                "vectors": self._packed,
                "distances": self._packed_distances,
                "starts": self._starts,
                "distance_starts": self._distance_starts,
                "lengths": self.lengths,
                "roots": np.asarray(self.roots, dtype=np.int64),
            }
            self._on_device[key] = {name: to_device(a, device) for name, a in arrays.items()}
        return self._on_device[key]

    def batches(
        self,
        layer: int | Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = False,
        seed: int = 0,
        device: str | torch.device | None = None,
    ) -> Iterator[tuple[np.ndarray, StructuralBatch]]:
        """Padded batches of some layers' vectors with their gold trees, gathered on ``device``.

        :param layer: the layer to read; or several, stacked along a first axis of the vectors.
        :param batch_size: sentences per batch.
        :param shuffle: random batches of similar length (:func:`~bertology_utils.core.batching.length_grouped_batches`,
            drawn from ``seed`` on the CPU); else every sentence in order.
        :param seed: the order's seed.
        :param device: where the batches are built (None: the CPU); the data is copied there on first use.
        :returns: an iterator of (positions of the batch's sentences in this data, the batch).
        """
        several = isinstance(layer, Sequence)
        wanted = [self.check_layer(k) for k in (layer if isinstance(layer, Sequence) else [layer])]
        on = self._tensors(torch.device("cpu") if device is None else torch.device(device))
        index = torch.tensor([self.layers.index(k) for k in wanted], device=on["vectors"].device)[:, None, None]
        padding_row, padding_pair = len(on["vectors"][0]) - 1, len(on["distances"]) - 1
        if shuffle:
            generator = torch.Generator().manual_seed(int(seed))
            order = [b.numpy() for b in length_grouped_batches(self.lengths.tolist(), batch_size, generator)]
        else:
            order = [np.arange(k, min(k + batch_size, len(self))) for k in range(0, len(self), batch_size)]
        # every batch's rows go to the device in one copy: a copy per batch would wait for the device at every step
        on_device = to_device(np.concatenate(order), on["lengths"].device)
        for rows, end in zip(order, np.cumsum([len(rows) for rows in order])):
            width = int(self.lengths[rows].max())
            at = on_device[end - len(rows) : end]
            n = on["lengths"][at]
            positions = torch.arange(width, device=n.device)
            words = positions[None, :] < n[:, None]
            gather = torch.where(words, on["starts"][at, None] + positions, padding_row)
            vectors = on["vectors"][index, gather]  # (layers, B, W, D): one gather, whatever the layers
            pairs = words[:, :, None] & words[:, None, :]
            flat = on["distance_starts"][at, None, None] + positions[:, None] * n[:, None, None] + positions
            distances = on["distances"][torch.where(pairs, flat, padding_pair)]
            depths = distances[torch.arange(len(rows), device=n.device), on["roots"][at]]  # distance to the root
            yield (
                rows,
                StructuralBatch(
                    vectors.float() if several else vectors[0].float(),
                    distances,
                    depths,
                    n.float(),
                    words,
                ),
            )
