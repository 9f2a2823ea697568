"""Gradient-based and behavioural token attributions: the references context-mixing maps are judged against.

Attention rollout and flow (Abnar & Zuidema 2020, `Quantifying Attention Flow in Transformers
<https://arxiv.org/abs/2005.00928>`_) claim to say how much each input token
contributes to a prediction; they are judged by how well they agree with methods that look at
the prediction itself. This module gives those references for a sequence classifier (or
regression head, see :mod:`bertology_utils.interventions.finetuning`), per token or per word:

* :func:`target_scores` — the scalar every attribution explains: the logit of a given class, or
  of the class predicted on the clean input (:func:`predicted_labels`, fixed once so that every
  perturbed copy explains the same class); the single output of a regression head;
* :func:`input_x_gradient` — ``sum_d e_td * d score / d e_td``, with ``e`` the word-piece
  embedding (the output of ``model.get_input_embeddings()``, before position/segment embeddings
  and the embedding LayerNorm; Shrikumar et al. 2016, `Not Just a Black Box
  <https://arxiv.org/abs/1605.01713>`_). One forward and one backward pass per batch;
* :func:`integrated_gradients` — Sundararajan et al. (2017, `Axiomatic Attribution for Deep Networks
  <https://arxiv.org/abs/1703.01365>`_) on the same embedding: the gradient
  averaged along the straight path from a baseline ``e'`` (zero vector, or the mask token's
  embedding) to ``e``, times ``e - e'``. Only content tokens move along the path: special tokens
  ([CLS], [SEP], ``<s>``, ``</s>``) keep their real embedding at every point, so they get zero
  attribution and the attributions of the words add up to ``f(x) - f(x')`` (completeness), where
  ``x'`` keeps the special tokens. The path integral is a Gauss-Legendre quadrature on [0, 1],
  which converges fast for smooth integrands: where every activation is smooth (GELU, tanh:
  BERT, RoBERTa, ELECTRA, MPNet classifiers) the default 32 nodes leave
  ``|delta| <= 1e-3 * max(1, |f(x) - f(x')|)`` (tested). A ReLU (DistilBERT's pre-classifier)
  makes the gradient jump where a unit switches, and the error then shrinks only like
  1/steps (about 500 nodes for that bound in the tests), and a large model's path can have narrow
  features (MPNet-base: 32 nodes leave gaps of several times ``f(x) - f(x')``): check ``delta``,
  or pass ``tolerance`` for an adaptive rule, panels halved where the rule disagrees with its
  halves (:func:`~bertology_utils.interventions.quadrature.adaptive_integral`, shared with head
  attribution by gates). All path points run in chunks of rows;
* :func:`blank_out` — leave-one-word-out (the behavioural reference of Abnar & Zuidema): every
  token of one word is replaced by the mask token and the drop of the target class's probability
  (or logit, or regression output) is the word's importance. All blanked copies of a batch go
  through the model in chunks;
* :func:`token_to_word_scores` — token attributions summed onto words, to compare with blank-out;
* what judges context-mixing maps by these methods, by name and for a corpus, is in
  :mod:`~bertology_utils.interventions.references`.

Models are run in eval mode (the previous mode is restored) and hooks are always removed. Every reference runs
in float32 whatever the classifier's precision (a bf16 classifier's weights are float32; only its passes that
read its outputs, such as dev scores, take bf16): bfloat16's rounding is the size of a small word's effect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import torch
import torch.nn.functional as F

from bertology_utils.attention.alignment import WORD
from bertology_utils.attention.word_attention import WordConversion
from bertology_utils.core.batching import pad_rows, to_device
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import ItemValues, Logits, TokenMask, TokenScores, TokenVectors, WordScores
from bertology_utils.interventions.editing import classifier_inference
from bertology_utils.interventions.objectives import TokenBatch, mask_token_id
from bertology_utils.interventions.quadrature import adaptive_integral, check_adaptive, gauss_legendre

__all__ = [
    "Labels",
    "BASELINES",
    "MEASURES",
    "classifier_logits",
    "target_scores",
    "explained_labels",
    "predicted_labels",
    "input_x_gradient",
    "IntegratedGradientsResult",
    "integrated_gradients",
    "blank_out",
    "token_to_word_scores",
]

#: Integrated-gradients baselines: the zero vector, or the mask token's word-piece embedding.
BASELINES = ("zero", "mask")
#: What :func:`blank_out` measures the drop of.
MEASURES = ("probability", "logit")
#: The classes to explain, one id per item: a tensor, an array or a sequence; None for the predicted ones.
Labels: TypeAlias = "torch.Tensor | np.ndarray | Sequence[int] | None"


# --------------------------------------------------------------------------- the explained scalar


def classifier_logits(loaded: LoadedModel, output: Any) -> Logits:
    """The logits of a sequence-classification output, in float32 or wider.

    :param loaded: the classifier.
    :param output: the model's output, or its logits tensor.
    :returns: (B, C); BertologyError for a model without a sequence-classification head.
    """
    logits = output if torch.is_tensor(output) else getattr(output, "logits", None)
    num_labels = getattr(loaded.config, "num_labels", None)
    if logits is None or logits.dim() != 2 or logits.shape[-1] != num_labels:
        shape = None if logits is None else tuple(logits.shape)
        raise BertologyError(
            f"{loaded.name} ({loaded.architecture}) has no sequence-classification head (its output has "
            f"{'no logits' if shape is None else f'logits of shape {shape}'}, not (batch, {num_labels})): attributions "
            "explain a classifier's prediction. Fine-tune one first (bertology_utils.interventions.finetuning."
            'fine_tune), or load one with load_model(..., head="sequence-classification").'
        )
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


def _is_regression(loaded: LoadedModel) -> bool:
    return getattr(loaded.config, "num_labels", None) == 1


def _label_tensor(loaded: LoadedModel, labels: Labels, rows: int, device: torch.device | str) -> ItemValues:
    labels = torch.as_tensor(labels, dtype=torch.long).reshape(-1)
    if labels.shape[0] != rows:
        raise ValueError(f"{labels.shape[0]} labels for {rows} items")
    classes = loaded.config.num_labels
    if not _is_regression(loaded) and rows and classes:
        if labels.device.type != "cpu":  # checked where they are, without waiting for the device to read them
            torch._assert_async(((labels >= 0) & (labels < classes)).all(), "labels must be class ids")
        elif labels.min() < 0 or labels.max() >= classes:
            raise ValueError(f"labels must be class ids in [0, {classes}), got {labels.tolist()}")
    return to_device(labels, device)


def target_scores(loaded: LoadedModel, logits: Any, labels: Labels = None) -> ItemValues:
    """The scalar an attribution explains, from a classifier's output.

    Classifier: the logit of class ``labels[b]`` (class ids), or, with ``labels=None``, of the
    class with the largest of these logits (pass the clean input's :func:`predicted_labels` when
    the logits are those of perturbed copies). Regression head (``num_labels == 1``): the output;
    ``labels`` are ignored. Raises BertologyError for a model without a classification head.

    :param loaded: the classifier.
    :param logits: its output, or its (B, C) logits.
    :param labels: (B,) class ids, or None.
    :returns: (B,).
    """
    values = classifier_logits(loaded, logits)
    if _is_regression(loaded):
        return values[:, 0]
    if labels is None:
        index = values.detach().argmax(-1)
    else:
        index = _label_tensor(loaded, labels, values.shape[0], values.device)
    return values.gather(1, index[:, None])[:, 0]


def _attributing(loaded: LoadedModel) -> contextlib.AbstractContextManager[bool]:
    """:func:`classifier_inference` in float32 whatever the classifier's precision: every attribution here, and the
    labels it explains, as head relevance's scores (bfloat16's rounding is the size of a small word's effect)."""
    return classifier_inference(loaded, precision="fp32")


def _inputs(batch: TokenBatch, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    inputs = batch.model_inputs()
    return inputs if rows is None else {k: v[rows] for k, v in inputs.items()}


def explained_labels(loaded: LoadedModel, clean_logits: torch.Tensor, labels: Labels) -> ItemValues:
    """The classes to explain: ``labels``, or the prediction on the clean input (zeros for regression).

    :param loaded: the classifier.
    :param clean_logits: its (B, C) logits (or output) on the clean input.
    :param labels: (B,) class ids, or None.
    :returns: (B,) class ids.
    """
    logits = classifier_logits(loaded, clean_logits).detach()
    if labels is not None:
        return _label_tensor(loaded, labels, logits.shape[0], logits.device)
    if _is_regression(loaded):
        return torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    return logits.argmax(-1)


def predicted_labels(loaded: LoadedModel, batch: TokenBatch) -> ItemValues:
    """The class each item's clean input is predicted to be (zeros for a regression head).

    Fixed once on the clean input, so that every perturbed copy of an item explains the same class.

    :param loaded: the classifier.
    :param batch: the items.
    :returns: (B,) class ids.
    """
    with torch.no_grad(), _attributing(loaded):
        return explained_labels(loaded, loaded.model(**_inputs(batch)), None)


# --------------------------------------------------------------------------- the word-piece embedding


def _input_embedding(loaded: LoadedModel) -> torch.nn.Module:
    """The word-piece embedding module (a PreTrainedModel method, unknown to nn.Module's typing)."""
    model: Any = loaded.model
    return model.get_input_embeddings()


@contextlib.contextmanager
def _word_embeddings_replaced(loaded: LoadedModel, embeddings: TokenVectors) -> Iterator[None]:
    """The model's input-embedding module returns ``embeddings`` instead of its own output.

    Position and segment embeddings, the embedding LayerNorm and (RoBERTa, MPNet) the position
    ids still come from the real ``input_ids``, which ``inputs_embeds`` arguments would not give.
    """
    module = _input_embedding(loaded)

    def hook(_module: torch.nn.Module, _args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor:
        if output.shape != embeddings.shape:
            raise BertologyError(
                f"{loaded.architecture}: the input embedding returned {tuple(output.shape)}, the replacement "
                f"has {tuple(embeddings.shape)}"
            )
        return embeddings

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _word_embeddings(loaded: LoadedModel, input_ids: torch.Tensor) -> TokenVectors:
    with torch.no_grad():
        return _input_embedding(loaded)(input_ids)


def _content_tokens(batch: TokenBatch) -> TokenMask:
    """(B, T) bool: tokens of real words (not special pseudo-words, not padding)."""
    rows = [a.word_kinds[a.token_to_word] == WORD for a in batch.items]
    width = batch.input_ids.shape[1]
    return torch.from_numpy(pad_rows(rows, 0, width, dtype=bool)).to(batch.input_ids.device)


def _scores_and_gradients(
    loaded: LoadedModel, inputs: dict[str, torch.Tensor], embeddings: TokenVectors, labels: Labels
) -> tuple[ItemValues, TokenVectors, ItemValues]:
    """(scores, d scores / d embeddings, labels used) with ``embeddings`` as the word-piece embedding.

    Rows are independent (eval mode), so the gradient of the summed scores is each row's own.
    """
    with torch.enable_grad():
        x = embeddings.detach().requires_grad_(True)
        with _word_embeddings_replaced(loaded, x):
            logits = classifier_logits(loaded, loaded.model(**inputs))
        labels = explained_labels(loaded, logits, labels)
        scores = target_scores(loaded, logits, labels)
        (grad,) = torch.autograd.grad(scores.sum(), x)
    return scores.detach(), grad, labels


def input_x_gradient(loaded: LoadedModel, batch: TokenBatch, labels: Labels = None) -> TokenScores:
    """Gradient x input per token: ``sum_d e_td * d score / d e_td``, ``e`` the word-piece embedding
    (Shrikumar et al. 2016, `Not Just a Black Box <https://arxiv.org/abs/1605.01713>`_; one of Abnar &
    Zuidema's references, `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    ``score`` is :func:`target_scores` (``labels=None``: the predicted class, read from this same
    forward pass on the clean input). Special tokens get their value too (their embedding is an input).

    :param loaded: the classifier.
    :param batch: the items.
    :param labels: (B,) the classes to explain, or None for the predicted ones.
    :returns: (B, T), zero on padding.
    """
    with _attributing(loaded):
        embeddings = _word_embeddings(loaded, batch.input_ids)
        _, grad, _ = _scores_and_gradients(loaded, _inputs(batch), embeddings, labels)
    values = (embeddings * grad).sum(-1)
    return torch.where(batch.real, values, torch.zeros_like(values))


# --------------------------------------------------------------------------- integrated gradients


@dataclass(frozen=True)
class IntegratedGradientsResult:
    """What :func:`integrated_gradients` gives for a batch; ``delta`` is the completeness error (Sundararajan
    et al. 2017, `Axiomatic Attribution for Deep Networks <https://arxiv.org/abs/1703.01365>`_)."""

    attributions: TokenScores  #: (B, T) per token; zero on special tokens and padding
    score: ItemValues  #: (B,) f(x), the target score of the clean input
    baseline_score: ItemValues  #: (B,) f(x'), content tokens at the baseline, special tokens real
    delta: ItemValues  #: (B,) attributions.sum(-1) - (score - baseline_score)
    steps: int  #: quadrature nodes (per panel)
    labels: ItemValues  #: (B,) the class explained (zeros for a regression head)
    panels: ItemValues  #: (B,) panels each item's path was cut into (1: the fixed rule; see ``tolerance``)


def _baseline_embedding(loaded: LoadedModel, embeddings: TokenVectors, baseline: str) -> TokenVectors:
    if baseline == "zero":
        return torch.zeros_like(embeddings)
    tok = loaded.tokenizer
    try:
        token = mask_token_id(loaded)  # mask, else unknown token
    except BertologyError:
        if tok.pad_token_id is None:
            raise BertologyError(f"{loaded.name}: no mask, unknown or padding token for the baseline") from None
        token = tok.pad_token_id
    ids = torch.tensor([token], device=embeddings.device)
    return _word_embeddings(loaded, ids).to(embeddings.dtype).expand_as(embeddings)


def integrated_gradients(
    loaded: LoadedModel,
    batch: TokenBatch,
    labels: Labels = None,
    *,
    steps: int = 32,
    baseline: str = "zero",
    tolerance: float | None = None,
    max_panels: int = 64,
    internal_batch_size: int = 64,
) -> IntegratedGradientsResult:
    """Integrated gradients (Sundararajan et al. 2017, `Axiomatic Attribution for Deep Networks
    <https://arxiv.org/abs/1703.01365>`_) on the word-piece embedding of content tokens (see the module
    docstring).

    ``attributions[b, t] = (e - e')_t . sum_k w_k grad f(e' + a_k (e - e'))_t`` with Gauss-Legendre
    nodes ``a_k`` and weights ``w_k`` on [0, 1]. Special tokens and padding stay at their real embedding
    (attribution 0). With the default ``steps`` the completeness error ``|delta|`` is at most
    ``1e-3 * max(1, |score - baseline_score|)`` on the tested smooth models; a ReLU in the model (DistilBERT's
    head) needs many more steps, and a large model's path can have narrow features a fixed rule misses
    (MPNet-base: 32 nodes leave gaps of several times the output change).

    :param loaded: the classifier.
    :param batch: the items.
    :param labels: (B,) the classes to explain, or None for the predicted ones.
    :param steps: quadrature nodes (per panel).
    :param baseline: "zero" (the zero vector) or "mask" (the mask token's embedding; the unknown or padding
        token's when there is no mask token).
    :param tolerance: makes the rule adaptive per item, as :func:`~bertology_utils.interventions.head_relevance.
        head_attribution`'s: the panel whose rule disagrees most with its halves (token by token) is halved,
        ``steps`` nodes on each half, until the estimated error is within ``tolerance`` x
        max(1, |score - baseline_score|) or the item has ``max_panels`` panels. ``None``: the fixed rule alone.
    :param max_panels: the most panels an item's path is cut into.
    :param internal_batch_size: path points run at once.
    :returns: the attributions (B, T), the scores, the completeness error and the panels.
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, not {baseline!r}")
    if steps < 1 or internal_batch_size < 1:
        raise ValueError("steps and internal_batch_size must be at least 1")
    check_adaptive(tolerance, max_panels)
    device, n = loaded.device, len(batch.items)
    with _attributing(loaded):
        with torch.no_grad():
            clean = classifier_logits(loaded, loaded.model(**_inputs(batch)))
        labels = explained_labels(loaded, clean, labels)
        score = target_scores(loaded, clean, labels)
        real = _word_embeddings(loaded, batch.input_ids)  # (B, T, E)
        content = _content_tokens(batch)[..., None]
        start = torch.where(content, _baseline_embedding(loaded, real, baseline), real)
        difference = real - start  # zero on special tokens and padding
        with torch.no_grad(), _word_embeddings_replaced(loaded, start):
            baseline_score = target_scores(loaded, loaded.model(**_inputs(batch)), labels)

        def evaluate(item: torch.Tensor, alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            """(e - e') . grad f per token (r, T), and f, at path point ``alphas[r]`` of item ``item[r]``."""
            values, scores = [], []
            for lo in range(0, len(item), internal_batch_size):
                rows, a = item[lo : lo + internal_batch_size], alphas[lo : lo + internal_batch_size].to(real.dtype)
                points = start[rows] + a[:, None, None] * difference[rows]
                f, grad, _ = _scores_and_gradients(loaded, _inputs(batch, rows), points, labels[rows])
                values.append((difference[rows] * grad).sum(-1))
                scores.append(f)
            return torch.cat(values), torch.cat(scores)

        nodes, weights = (torch.as_tensor(v, dtype=real.dtype, device=device) for v in gauss_legendre(steps))
        # Row r of the flattened (items x nodes) grid: item r // steps at node r % steps.
        values, _ = evaluate(torch.arange(n, device=device).repeat_interleave(steps), nodes.repeat(n))
        attributions = torch.einsum("k,nkt->nt", weights, values.reshape(n, steps, -1))
        panels = torch.ones(n, dtype=torch.long, device=device)
        if tolerance is not None:
            refined, counts = adaptive_integral(
                evaluate, attributions, baseline_score, score, nodes, weights.double(), tolerance, max_panels
            )
            attributions = refined.to(attributions.dtype)
            panels = torch.as_tensor(counts, device=device)
    delta = attributions.sum(-1) - (score - baseline_score)
    return IntegratedGradientsResult(attributions, score, baseline_score, delta, steps, labels, panels)


# --------------------------------------------------------------------------- blank-out


def _replacement_id(loaded: LoadedModel, replacement: int | str) -> int:
    if isinstance(replacement, (int, np.integer)) and not isinstance(replacement, bool):
        return int(replacement)
    if replacement == "mask":
        return mask_token_id(loaded)
    if replacement == "unk" and loaded.tokenizer.unk_token_id is not None:
        return int(loaded.tokenizer.unk_token_id)
    raise ValueError(
        f'replacement must be "mask", "unk" (when the tokenizer has one) or a token id, not {replacement!r}'
    )


def _target_values(loaded: LoadedModel, output: Any, labels: ItemValues, measure: str) -> ItemValues:
    logits = classifier_logits(loaded, output)
    if measure == "logit" or _is_regression(loaded):
        return target_scores(loaded, logits, labels)
    return F.softmax(logits, dim=-1).gather(1, labels[:, None])[:, 0]


def blank_out(
    loaded: LoadedModel,
    batch: TokenBatch,
    labels: Labels = None,
    *,
    replacement: int | str = "mask",
    measure: str = "probability",
    internal_batch_size: int = 64,
) -> WordScores:
    """Leave-one-word-out importance: the score's drop when all tokens of one word are hidden (the blank-out
    reference of Abnar & Zuidema 2020, `Quantifying Attention Flow in Transformers
    <https://arxiv.org/abs/2005.00928>`_).

    For every real word (not the special pseudo-words) of every item, a copy of the item with each token of
    that word replaced by ``replacement``, same length, positions and segments.

    :param loaded: the classifier.
    :param batch: the items.
    :param labels: (B,) the classes to explain, or None for the predicted ones.
    :param replacement: "mask" (the mask token, else the unknown token), "unk", or a token id (not the padding
        id, from which RoBERTa and MPNet number positions).
    :param measure: "probability": the target class's probability on the clean input minus that on the copy;
        "logit": the same for the target logit; for a regression head, the output difference either way.
    :param internal_batch_size: copies run at once.
    :returns: (B, W), W the largest word count in the batch; NaN for special and absent (padding) words.
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, not {measure!r}")
    token = _replacement_id(loaded, replacement)
    device, n = loaded.device, len(batch.items)
    width = max((a.n_words for a in batch.items), default=0)
    # One (item, word) pair per copy.
    pairs = [(b, w) for b, a in enumerate(batch.items) for w in np.flatnonzero(a.word_kinds == WORD)]
    item = torch.tensor([b for b, _ in pairs], dtype=torch.long, device=device)
    word = torch.tensor([w for _, w in pairs], dtype=torch.long, device=device)
    with torch.no_grad(), _attributing(loaded):
        clean_output = loaded.model(**_inputs(batch))
        labels = explained_labels(loaded, clean_output, labels)
        clean = _target_values(loaded, clean_output, labels, measure)
        out = torch.full((n, width), float("nan"), dtype=clean.dtype, device=device)
        for lo in range(0, len(pairs), internal_batch_size):
            rows, words = item[lo : lo + internal_batch_size], word[lo : lo + internal_batch_size]
            inputs = _inputs(batch, rows)
            hidden = batch.token_to_word[rows] == words[:, None]
            inputs["input_ids"] = inputs["input_ids"].masked_fill(hidden, token)
            values = _target_values(loaded, loaded.model(**inputs), labels[rows], measure)
            out[rows, words] = clean[rows] - values
    return out


# --------------------------------------------------------------------------- words


def token_to_word_scores(scores: TokenScores, batch: TokenBatch) -> WordScores:
    """Token scores onto words: each word's tokens summed.

    W is the largest word count in the batch (as :func:`blank_out` gives); absent (padding)
    words are NaN. Special pseudo-words keep their sum (zero for integrated gradients).

    :param scores: (B, T) token scores.
    :param batch: the items, with their token-to-word maps.
    :returns: (B, W).
    """
    width = max((a.n_words for a in batch.items), default=0)
    members = WordConversion(batch.token_to_word, n_words=width).members.to(scores.device, scores.dtype)
    words = torch.einsum("bt,btw->bw", scores, members)
    present = torch.from_numpy(pad_rows([np.ones(a.n_words, dtype=bool) for a in batch.items], 0, width, dtype=bool))
    return torch.where(present.to(words.device), words, torch.full_like(words, float("nan")))
