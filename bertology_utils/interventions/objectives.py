"""What the gradients and ablations of :mod:`~bertology_utils.interventions.gradients` (and the attributions of
:mod:`~bertology_utils.interventions.attribution`) run on: token kinds, batches of aligned items, word masking, and
the objectives whose loss they differentiate (Clark et al. 2019, `What Does BERT Look At?
<https://arxiv.org/abs/1906.04341>`_, took the gradient of BERT's masked-LM loss).

Token kinds come from the alignment layer, not from hard-coded ids: ``sep`` = separators
([SEP], ``</s>``), ``cls`` = the leading special token ([CLS], ``<s>``), ``punct`` = tokens
of words made only of Unicode punctuation (Clark's "." and "," are the commonest), ``other``
= every other token (including [MASK] tokens the objective put in).

Objectives (pluggable, each with a ``name``)
    * :class:`MaskedLMObjective` — masked-LM cross-entropy for models with a trained MLM head:
      15% of the real words of each item (at least one; all tokens of a chosen word) are
      replaced by the mask token, chosen by a generator seeded with (seed, item index), so a
      run is deterministic and independent of batching;
    * :class:`ClassifierObjective` — cross-entropy (MSE for STS-B) of a fine-tuned sequence
      classifier on labelled items (see :mod:`bertology_utils.interventions.finetuning`);
    * :class:`MaskedEmbeddingObjective` — for encoders with neither head (the default
      sentence-embedding MiniLM): the same word masking, and the loss 1 - cos(e(masked),
      e(clean)) between the mean-pooled sentence embedding of the masked copy and that of the
      clean sentence (held fixed). It is the masked-LM idea carried to the output the model
      was trained to produce: how far does hiding words move the sentence embedding, and
      which attention would move it back.
"""

from __future__ import annotations

import functools
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD, AlignedItem, align
from bertology_utils.core.batching import Padding, pad_rows, plan_batches, to_device
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.models import LoadedModel, load_model
from bertology_utils.core.typing import ItemValues, TokenIds, TokenMask, TokenToWord, TokenValues, TokenVectors
from bertology_utils.data import Corpus, is_punctuation

__all__ = [
    "KINDS",
    "KIND_LABELS",
    "KIND_COLORS",
    "OBJECTIVE_LABELS",
    "objective_label",
    "readable_name",
    "SEP",
    "CLS",
    "PUNCT",
    "OTHER",
    "DEFAULT_MAX_TOKENS",
    "token_kinds",
    "TokenBatch",
    "make_batch",
    "token_batches",
    "mask_token_id",
    "Objective",
    "ObjectiveOutput",
    "MaskedLMObjective",
    "ClassifierObjective",
    "MaskedEmbeddingObjective",
    "has_mlm_head",
]

#: Token kinds, in the order of their codes.
KINDS = ("sep", "cls", "punct", "other")
#: How a reader names each kind of token (the names metrics and columns carry).
KIND_LABELS = {"sep": "[SEP]", "cls": "[CLS]", "punct": "punctuation", "other": "other tokens"}
#: The colour of each kind of token in the gradient and ablation figures.
KIND_COLORS = {"sep": "tab:red", "cls": "tab:blue", "punct": "tab:green", "other": "tab:grey"}
#: How a reader names each objective key that is not a classifier's (see :func:`objective_label`).
OBJECTIVE_LABELS = {"mlm": "masked LM", "masked_embedding": "masked-word embedding"}
#: A layer as claim ids and metric keys name it (``layer6``, ``layer_6``).
_LAYER_PART = re.compile(r"layer_?(\d+)")
SEP, CLS, PUNCT, OTHER = range(4)
#: Inputs longer than this are skipped by default (Clark et al. used segments of at most 128 tokens).
DEFAULT_MAX_TOKENS = 128


def token_kinds(item: AlignedItem) -> TokenValues:
    """Kind code (:data:`KINDS`) of every token of an aligned item.

    :param item: a sentence or pair aligned to the model's tokens.
    :returns: ``(T,)`` int64 codes: :data:`SEP`, :data:`CLS`, :data:`PUNCT` or :data:`OTHER`.
    """
    word_kind = np.full(item.n_words, OTHER, dtype=np.int64)
    word_kind[item.word_kinds == SEPARATOR] = SEP
    word_kind[item.word_kinds == LEADING_SPECIAL] = CLS
    words = np.asarray(item.words, dtype=object)
    punct = np.fromiter((is_punctuation(w) for w in words), dtype=bool, count=item.n_words)
    word_kind[(item.word_kinds == WORD) & punct] = PUNCT
    return word_kind[item.token_to_word]


# --------------------------------------------------------------------------- batches


@dataclass
class TokenBatch:
    """Aligned items padded into tensors, with each token's kind; objectives add their own ``extras``.

    :param items: the aligned items, in batch order.
    :param input_ids: ``(B, T)`` token ids.
    :param attention_mask: ``(B, T)`` 1 on real tokens.
    :param token_type_ids: ``(B, T)`` segment ids, or None where the model takes none.
    :param kinds: ``(B, T)`` kind codes (:data:`KINDS`), -1 on padding.
    :param token_to_word: ``(B, T)`` word index of each token, -1 on padding.
    :param extras: what an objective's ``prepare`` adds (masked positions, clean targets).
    """

    items: list
    input_ids: TokenIds  #: (B, T) int64
    attention_mask: TokenMask  #: (B, T) int64, 1 on real tokens
    token_type_ids: TokenIds | None
    kinds: TokenIds  #: (B, T) int64 kind codes, -1 on padding
    token_to_word: TokenToWord  #: (B, T) int64, -1 on padding
    extras: dict = field(default_factory=dict)

    @property
    def real(self) -> TokenMask:
        """``(B, T)`` bool: the real tokens (not padding)."""
        return self.attention_mask.bool()

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """What the model's forward takes: ids, attention mask and, where there are any, token types."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs


def make_batch(loaded: LoadedModel, items: Sequence[AlignedItem]) -> TokenBatch:
    """Pad aligned items into a :class:`TokenBatch` on the model's device.

    :param loaded: the model (its padding token and device).
    :param items: aligned items.
    :returns: the batch, ``(B, T)`` with T the longest item.
    """
    padded = Padding.of(loaded).pad([a.input_ids for a in items], [a.token_type_ids for a in items])
    inputs, width, device = padded.inputs(loaded.device), padded.input_ids.shape[1], loaded.device
    return TokenBatch(
        items=list(items),
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        token_type_ids=inputs.get("token_type_ids"),
        kinds=to_device(pad_rows([token_kinds(a) for a in items], -1, width), device),
        token_to_word=to_device(pad_rows([a.token_to_word for a in items], -1, width), device),
    )


def token_batches(
    loaded: LoadedModel, items: Iterable, *, batch_size: int = 8, max_tokens: int | None = DEFAULT_MAX_TOKENS
) -> tuple[list[TokenBatch], list[AlignedItem]]:
    """Align ``items``, drop those longer than ``max_tokens`` (and than the model takes), batch by length.

    Returns the batches and the skipped items. Batches are deterministic for given items.

    :param loaded: the model.
    :param items: sentences or sentence pairs (anything :meth:`~bertology_utils.data.Corpus.of` takes).
    :param batch_size: items per batch.
    :param max_tokens: longer items are skipped (None: what the model takes).
    :returns: the batches, and the aligned items skipped.
    """
    corpus = Corpus.of(items)
    aligned = align(loaded.tokenizer, corpus)
    limit = loaded.max_tokens if max_tokens is None else min(int(max_tokens), loaded.max_tokens)
    kept = [a for a in aligned if a.n_tokens <= limit]
    skipped = [a for a in aligned if a.n_tokens > limit]
    plan = plan_batches([a.n_tokens for a in kept], batch_size)  # ties keep corpus order
    return [make_batch(loaded, [kept[i] for i in rows]) for rows in plan], skipped


# --------------------------------------------------------------------------- word masking


def _masked_positions(batch: TokenBatch, fraction: float, seed: int) -> np.ndarray:
    """(B, T) bool, on the host: all tokens of ``fraction`` of each item's real words (at least one), seeded per
    item."""
    chosen = np.zeros(tuple(batch.input_ids.shape), dtype=bool)
    for b, item in enumerate(batch.items):  # each item's own token-to-word map, on the host: no read of the batch
        words = np.flatnonzero(item.word_kinds == WORD)
        if len(words) == 0:
            continue
        k = min(len(words), max(1, int(round(fraction * len(words)))))
        picked = np.random.default_rng([seed, item.index]).choice(words, size=k, replace=False)
        t2w = np.asarray(item.token_to_word)
        chosen[b, : len(t2w)] = np.isin(t2w, picked) & (t2w >= 0)
    return chosen


def _mask_words(batch: TokenBatch, mask_id: int, fraction: float, seed: int) -> TokenBatch:
    chosen = _masked_positions(batch, fraction, seed)
    positions = to_device(chosen, batch.input_ids.device)
    masked_ids = batch.input_ids.masked_fill(positions, mask_id)
    # A masked punctuation mark is no longer punctuation: it is a [MASK] token, kind "other".
    kinds = batch.kinds.masked_fill(positions, OTHER)
    # (2, N) item and position of each masked token, found on the host: nonzero() on the device would wait for it
    at = to_device(np.stack(np.nonzero(chosen)), batch.input_ids.device)
    extras = {**batch.extras, "masked": positions, "masked_at": at, "original_ids": batch.input_ids}
    return replace(batch, input_ids=masked_ids, kinds=kinds, extras=extras)


def mask_token_id(loaded: LoadedModel) -> int:
    """The token that hides a word: the mask token, else the unknown token.

    :param loaded: the model whose tokenizer is asked.
    :returns: the token id; BertologyError when the tokenizer has neither.
    """
    tok = loaded.tokenizer
    if tok.mask_token_id is not None:
        return tok.mask_token_id
    if tok.unk_token_id is not None:
        return tok.unk_token_id
    raise BertologyError(f"{loaded.name}: the tokenizer has neither a mask nor an unknown token to hide words with")


# --------------------------------------------------------------------------- objectives


@dataclass
class ObjectiveOutput:
    """What one forward pass of an objective gives.

    :param losses: ``(B,)`` one loss per item.
    :param hidden: ``(B, T, E)`` the encoder's final hidden states.
    :param prediction: the objective's own output, compared by :meth:`Objective.output_change`.
    """

    losses: ItemValues  #: (B,) one loss per item
    hidden: TokenVectors  #: (B, T, E) the encoder's final hidden states
    prediction: torch.Tensor  #: the objective's own output, compared by ``Objective.output_change``


class Objective(ABC):
    """A differentiable loss of a model on a batch: the thing whose gradient is taken.

    ``prepare`` runs outside any attention edit (an objective may compute clean targets
    there); ``forward`` runs inside, with gradients on, and returns one loss per item.
    """

    #: Human-readable name, shown in the notebook and recorded with the results.
    name: str = ""
    #: Short key for metric names.
    key: str = ""
    #: What :meth:`output_change` measures.
    output_change_name: str = ""

    def __init__(self, loaded: LoadedModel):
        """:param loaded: the model whose loss this is."""
        self.loaded = loaded

    def prepare(self, batch: TokenBatch) -> TokenBatch:
        """The batch as the loss reads it (words masked, clean targets computed), outside any edit.

        :param batch: a batch of :func:`token_batches`.
        :returns: the prepared batch (this base class: ``batch`` itself).
        """
        return batch

    @abstractmethod
    def forward(self, batch: TokenBatch) -> ObjectiveOutput:
        """One forward pass, gradients on: each item's loss.

        :param batch: a prepared batch.
        :returns: the losses, hidden states and prediction.
        """

    @abstractmethod
    def output_change(self, base: ObjectiveOutput, new: ObjectiveOutput, batch: TokenBatch) -> ItemValues:
        """How much the prediction changed, per item (:attr:`output_change_name` says what is measured).

        :param base: the output without the intervention.
        :param new: the output with it.
        :param batch: the prepared batch both came from.
        :returns: ``(B,)``.
        """

    def cache_key(self) -> dict | None:
        """What the loss depends on besides the model's weights, for the results cache (``cache=`` of
        :func:`ablation_curves`); None: results of this objective are never stored. The class's
        qualified name is part of it, so a subclass never reads its parent's entries.

        :returns: the settings that decide the loss, or None.
        """
        return None

    def _key(self, **settings: object) -> dict:
        return {"objective": f"{type(self).__module__}.{type(self).__qualname__}", **settings}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} on {self.loaded.name})"


def has_mlm_head(loaded: LoadedModel) -> bool:
    """Whether the checkpoint behind ``loaded`` was saved with a trained masked-LM head.

    Its ``config.architectures`` must name one (``BertForMaskedLM``, ``RobertaForMaskedLM``,
    ``BertForPreTraining``...; ELECTRA discriminators, ``ElectraForPreTraining``, have none), and the
    checkpoint must hold the head's weights: all-mpnet-base-v2's config says ``MPNetForMaskedLM`` but its
    checkpoint has no ``lm_head``, and loading a head-less checkpoint with ``head="masked-lm"`` succeeds
    with a random head, whose loss means nothing. For a model loaded without its head, the checkpoint is
    loaded once more with it to see (once per source).

    :param loaded: the model.
    :returns: whether its masked-LM loss means something.
    """
    architectures = getattr(loaded.config, "architectures", None) or []
    if not any(a.endswith("ForMaskedLM") or a in ("BertForPreTraining", "AlbertForPreTraining") for a in architectures):
        return False
    if type(loaded.model).__name__.endswith("ForMaskedLM"):
        return not loaded.random_weights
    return _checkpoint_has_mlm_head(loaded.source)


@functools.lru_cache(maxsize=8)
def _checkpoint_has_mlm_head(source: str) -> bool:
    return not load_model(source, head="masked-lm", device="cpu").random_weights


def _full(x: torch.Tensor) -> torch.Tensor:
    """float32 for half-precision tensors; float32 and float64 stay as they are."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _per_item_mean(values: torch.Tensor, item_index: torch.Tensor, n_items: int) -> torch.Tensor:
    sums = torch.zeros(n_items, dtype=values.dtype, device=values.device).index_add(0, item_index, values)
    counts = torch.zeros(n_items, dtype=values.dtype, device=values.device).index_add(
        0, item_index, torch.ones_like(values)
    )
    return sums / counts.clamp_min(1)


class MaskedLMObjective(Objective):
    """Masked-LM cross-entropy of a model with a trained MLM head (Clark et al.'s objective).

    A share ``mask_fraction`` of each item's real words (at least one) is replaced by the mask
    token, all tokens of a word together (no 80/10/10 mixing), chosen with a generator seeded by
    ``(seed, item index)``; the loss of an item is the mean cross-entropy over its masked tokens.

    :param loaded: a masked-LM model (``head="masked-lm"``) whose checkpoint has a trained head.
    :param mask_fraction: the share of each item's words masked.
    :param seed: the masking's seed.
    """

    key = "mlm"
    output_change_name = "KL divergence of the masked-token predictions"

    def __init__(self, loaded: LoadedModel, mask_fraction: float = 0.15, seed: int = 0):
        super().__init__(loaded)
        model = loaded.model
        if not isinstance(model, PreTrainedModel) or model.get_output_embeddings() is None:
            masked_lm = False
        else:
            masked_lm = type(model).__name__.endswith("ForMaskedLM")
        if not masked_lm:
            raise ModelNotAvailableError(
                f'{loaded.name} ({loaded.architecture}) is not a masked-LM model; load it with head="masked-lm"'
            )
        if not has_mlm_head(loaded):
            raise ModelNotAvailableError(
                f"{loaded.name}: its checkpoint has no trained masked-LM head (architectures: "
                f"{getattr(loaded.config, 'architectures', None)}); the head would be random. "
                "Use MaskedEmbeddingObjective or a ClassifierObjective instead."
            )
        self.mask_fraction, self.seed = mask_fraction, seed
        self.name = f"masked-LM loss ({mask_fraction:.0%} of words masked, seed {seed})"

    def cache_key(self) -> dict:
        """The mask fraction and seed (see :meth:`Objective.cache_key`)."""
        return self._key(mask_fraction=self.mask_fraction, seed=self.seed)

    def prepare(self, batch: TokenBatch) -> TokenBatch:
        """The batch with its words masked; the original ids and masked positions kept in ``extras``."""
        return _mask_words(batch, mask_token_id(self.loaded), self.mask_fraction, self.seed)

    def forward(self, batch: TokenBatch) -> ObjectiveOutput:
        """Each item's mean cross-entropy over its masked tokens (see :meth:`Objective.forward`)."""
        out = self.loaded.model(**batch.model_inputs(), output_hidden_states=True)
        item, position = batch.extras["masked_at"]
        log_probs = F.log_softmax(_full(out.logits[item, position]), dim=-1)  # (N, V)
        targets = batch.extras["original_ids"][item, position]
        nll = -log_probs.gather(1, targets[:, None])[:, 0]
        losses = _per_item_mean(nll, item, len(batch.items))
        return ObjectiveOutput(losses, out.hidden_states[-1], log_probs)

    def output_change(self, base: ObjectiveOutput, new: ObjectiveOutput, batch: TokenBatch) -> ItemValues:
        """Per item, the mean KL divergence of the masked tokens' predicted distributions: ``(B,)``."""
        item = batch.extras["masked_at"][0]
        kl = (base.prediction.exp() * (base.prediction - new.prediction)).sum(-1)
        return _per_item_mean(kl, item, len(batch.items))


class ClassifierObjective(Objective):
    """The loss of a sequence classifier on labelled items (cross-entropy; MSE for regression tasks).

    ``labels`` run parallel to the corpus the items come from (``Corpus.labels``); an item's
    label is found by its corpus index. ``task`` names the GLUE task (label mapping).

    :param loaded: a sequence classifier.
    :param labels: the corpus's labels, as the data layer gives them.
    :param task: the task the labels are of.
    :param description: the objective's name (None: one made of the task and the model).
    """

    key = "classifier"
    output_change_name = "KL divergence of the class distribution (|change| of the score for regression)"

    def __init__(self, loaded: LoadedModel, labels: Sequence, task: str = "SST-2", description: str | None = None):
        from bertology_utils.interventions.scoring import label_ids, task_spec

        super().__init__(loaded)
        if not type(loaded.model).__name__.endswith("ForSequenceClassification"):
            raise ModelNotAvailableError(f"{loaded.name} ({loaded.architecture}) is not a sequence classifier")
        self.spec = task_spec(task)
        self.targets = label_ids(self.spec.name, labels)
        self.key = self.spec.name.lower().replace("-", "")
        self.name = description or f"{self.spec.name} classifier loss ({loaded.name})"

    def cache_key(self) -> dict:
        """The task and a digest of the targets (see :meth:`Objective.cache_key`)."""
        targets = np.ascontiguousarray(np.asarray(self.targets, dtype=np.float64))
        return self._key(task=self.spec.name, targets=hashlib.sha256(targets.tobytes()).hexdigest())

    def forward(self, batch: TokenBatch) -> ObjectiveOutput:
        """Each item's cross-entropy for its label (squared error for a regression)."""
        out = self.loaded.model(**batch.model_inputs(), output_hidden_states=True)
        y = to_device(np.asarray(self.targets)[[a.index for a in batch.items]], out.logits.device)
        if self.spec.is_regression:
            y = y.to(_full(out.logits).dtype)
        logits = _full(out.logits)
        if self.spec.is_regression:
            prediction = logits[:, 0]
            losses = (prediction - y) ** 2
        else:
            prediction = F.log_softmax(logits, dim=-1)
            losses = -prediction.gather(1, y[:, None])[:, 0]
        return ObjectiveOutput(losses, out.hidden_states[-1], prediction)

    def output_change(self, base: ObjectiveOutput, new: ObjectiveOutput, batch: TokenBatch) -> ItemValues:
        """Per item, the KL divergence of the class distribution (the score's absolute change for a regression):
        ``(B,)``."""
        if self.spec.is_regression:
            return (base.prediction - new.prediction).abs()
        return (base.prediction.exp() * (base.prediction - new.prediction)).sum(-1)


def _mean_pool(hidden: TokenVectors, mask: TokenMask) -> torch.Tensor:
    weights = mask.to(hidden.dtype)[..., None]
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1)


def objective_label(key: str) -> str:
    """An objective's key as a reader names it: ``sst2`` (a classifier's key: its task, lower case, no dash) reads
    "SST-2 classifier", ``masked_embedding`` "masked-word embedding"; an unknown key is itself.

    :param key: an objective's :attr:`~Objective.key`.
    :returns: its readable name.
    """
    from bertology_utils.data import GLUE_TASKS

    if key in OBJECTIVE_LABELS:
        return OBJECTIVE_LABELS[key]
    task = next((t for t in GLUE_TASKS if t.lower().replace("-", "") == key), None)
    return f"{task} classifier" if task else key


def readable_name(part: str) -> str:
    """A part of a metric key or claim id as a reader names it: a kind of token (:data:`KIND_LABELS`), a layer
    (``layer6``: "layer 6") or an objective (:func:`objective_label`); anything else is itself.

    :param part: one part of a metric key or claim id.
    :returns: its readable name.
    """
    if layer := _LAYER_PART.fullmatch(part):
        return f"layer {layer[1]}"
    return KIND_LABELS.get(part) or objective_label(part)


class MaskedEmbeddingObjective(Objective):
    """For encoders without MLM or classifier head: 1 - cos(e(masked copy), e(clean item)).

    ``e`` is the mean-pooled final hidden state over real tokens (special tokens included),
    the sentence embedding of sentence-transformers models such as the default MiniLM. Words
    are masked as in :class:`MaskedLMObjective`; the clean embedding is computed once in
    ``prepare`` (no gradient, no edits) and held fixed.

    :param loaded: any encoder.
    :param mask_fraction: the share of each item's words masked.
    :param seed: the masking's seed.
    """

    key = "masked_embedding"
    output_change_name = "1 - cosine of the sentence embedding"

    def __init__(self, loaded: LoadedModel, mask_fraction: float = 0.15, seed: int = 0):
        super().__init__(loaded)
        self.mask_fraction, self.seed = mask_fraction, seed
        self.name = f"masked sentence-embedding loss, 1 - cos ({mask_fraction:.0%} of words masked, seed {seed})"

    def cache_key(self) -> dict:
        """The mask fraction and seed (see :meth:`Objective.cache_key`)."""
        return self._key(mask_fraction=self.mask_fraction, seed=self.seed)

    def _hidden(self, batch: TokenBatch) -> TokenVectors:
        out = self.loaded.model(**batch.model_inputs(), output_hidden_states=True)
        return out.hidden_states[-1]

    def prepare(self, batch: TokenBatch) -> TokenBatch:
        """The clean sentence embedding (no gradient, no edits), then the words masked."""
        with torch.no_grad():
            clean = F.normalize(_full(_mean_pool(self._hidden(batch), batch.attention_mask)), dim=-1)
        masked = _mask_words(batch, mask_token_id(self.loaded), self.mask_fraction, self.seed)
        return replace(masked, extras={**masked.extras, "clean_embedding": clean})

    def forward(self, batch: TokenBatch) -> ObjectiveOutput:
        """Each item's 1 - cos(e(masked), e(clean))."""
        hidden = self._hidden(batch)
        embedding = F.normalize(_full(_mean_pool(hidden, batch.attention_mask)), dim=-1)
        losses = 1 - (embedding * batch.extras["clean_embedding"]).sum(-1)
        return ObjectiveOutput(losses, hidden, embedding)

    def output_change(self, base: ObjectiveOutput, new: ObjectiveOutput, batch: TokenBatch) -> ItemValues:
        """Per item, 1 - the cosine of the two embeddings: ``(B,)``."""
        return 1 - (base.prediction * new.prediction).sum(-1)
