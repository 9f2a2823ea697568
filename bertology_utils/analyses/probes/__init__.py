"""Probing classifiers: how much dependency syntax the attention maps hold *together*.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_), Section 5 and Table 3. Each probe is a small graph-based parser: for every
word j it gives a distribution over the candidate heads of j, ``ROOT`` and the other words of
the sentence, and predicts the most probable one (each word independently, no tree decoding, as
in the paper). Scores are unlabeled attachment scores (UAS) with punctuation left out.

The probes
----------
For a dependent j and a candidate head i, head k of the model (every layer and head, ``K =
layers x heads``) gives two features: ``a_k[j, i]`` (the dependent attends to the candidate) and
``a_k[i, j]`` (the candidate attends to the dependent), read from the word-level maps of
:mod:`bertology_utils.attention.word_attention`.

* :class:`AttentionProbe` (Table 3 "Attn"):
  ``p(i | j) ∝ exp(Σ_k w_k a_k[j, i] + u_k a_k[i, j])``.
* :class:`AttentionWordsProbe` ("Attn + GloVe"): ``w_k`` and ``u_k`` become linear functions of the
  two words' vectors, ``w_k = W_k · (v_j ⊕ v_i) + b_k`` (and ``U`` for ``u``); the vectors are fixed
  (:mod:`bertology_utils.analyses.word_vectors`).
* :class:`DistanceWordsProbe` (baseline "Distances + GloVe"): one hidden layer (tanh) over
  ``v_j ⊕ v_i`` and distance features, no attention.
* :class:`RightBranching` (baseline): every word's head is the next word, the last word is the
  root; the same as Clark's best fixed offset (+1) for all words.
* The random-init baseline is :class:`AttentionWordsProbe` on the maps of a copy of the model with
  its pre-trained embeddings and every other weight random
  (:func:`bertology_utils.core.models.random_init_keeping_embeddings`, as in the paper), with the same word vectors.

ROOT, exactly
-------------
Candidates for the head of word j are ROOT and every word of the sentence except j itself (a
word is never its own head; Clark's code left j among the candidates). ROOT has no word of its
own; as in Clark et al.'s code, its attention features come from the special pseudo-words:
``[CLS]`` (``word_kinds`` 1, the leading special token) and ``[SEP]`` (``word_kinds`` 2, every
separator summed)::

    a_k[j, ROOT] = r_cls * a_k[j, [CLS]] + r_sep * a_k[j, [SEP]]
    a_k[ROOT, j] = r_cls * a_k[[CLS], j] + r_sep * a_k[[SEP], j]

with two learned scalars ``r_cls`` and ``r_sep`` shared by every head and both directions
(Clark's ``root_start``/``root_end``), then weighted by the same ``w_k``/``u_k`` as any word. In
the words probes ROOT's word vector is the zero vector, so ROOT's head weights depend on the
dependent's vector and the biases. Here every candidate is paired with its own vector (a public
PyTorch port of Clark et al.'s TF code documents that the original put the zero column last while
the attention features put ROOT first, pairing each candidate with the next word's vector). A
model without a leading special token has ``a_k[j, [CLS]] = 0``.

Training and scoring
--------------------
Softmax cross-entropy over the candidates of every word (punctuation included, as Clark trained),
Adam, mini-batches of sentences (padding masked), several epochs with early stopping on the dev
UAS; the weights of the best dev epoch are kept. Everything is deterministic for a ``seed``
(initialisation and the order of the data). UAS leaves out punctuation, defined as in
:mod:`bertology_utils.analyses.syntax.scoring` (relation ``punct``); root words are scored (ROOT must be predicted).

Data are streamed: :class:`ProbeData` pairs a treebank with its attention (an
:class:`~bertology_utils.attention.store.AttentionStore`, or ItemAttention records for small in-memory
uses) and reads ``block_size`` sentences at a time. The features it prepares from a block (each
sentence's maps among its real words, ROOT's features, word vectors) are fixed, so they are kept
in memory up to ``cache_size`` MB and every later epoch and dev evaluation reuses them; beyond
that budget blocks are read again each pass, so memory stays bounded by the budget, the block
and the batch, never the data set. The estimators follow scikit-learn's conventions (``fit``,
``predict``, ``score``, ``get_params``/``set_params``; fitted attributes end in ``_``); ``X`` is a
:class:`ProbeData`, and the gold trees come from its corpus (``y`` is ignored).

Devices
-------
The trained probes take a ``device`` (None: the CPU; ``"cuda"``, a model's ``device``); so does
:func:`fit_probes`, for all of them, as notebook 04 passes its model's. The initial weights and the
order of the data are drawn on the CPU from ``seed`` and the weights then moved, so a seed gives the
same start everywhere; a CPU fit is the same to the last bit with or without the parameter, and a
GPU's equals it to rounding (``tests/unit/analyses/probes/test_probe_devices.py`` states the
tolerance). Batches are built on the host and sent to the device; inside an epoch nothing is read
back (the loss is summed there and read once an epoch, predictions once a pass), and on a GPU a
thread builds and sends the next batch while the device computes (not on the CPU, where it took a
core from the fit). Fitted weights are stored as CPU tensors: the disk cache is the same for every
device, and a CPU fit's cache key names none.

Modules, lowest first: ``data`` (:class:`ProbeData`, batches), ``scorers`` (the torch modules and
their fused autograd functions), ``evaluation`` (:class:`ProbeEvaluation`), ``estimators`` (the
probes), ``fitting`` (:func:`fit_probes` and its disk cache), ``report`` (Table 3 and pictures).

Hewitt and Manning's structural probes (`N19-1419 <https://aclanthology.org/N19-1419/>`_), which read the
hidden states instead of the attention, live beside them: ``structural_data`` (word vectors per layer
with the gold trees), ``structural`` (:class:`DistanceProbe`, :class:`DepthProbe`, their metrics,
:func:`fit_jointly` and :func:`structural_probe_layers`) and ``structural_fit`` (the training loop of many
probes in one pass).
"""

from bertology_utils.analyses.probes.data import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
from bertology_utils.analyses.probes.data import Batch, ProbeData
from bertology_utils.analyses.probes.estimators import (
    AttentionProbe,
    AttentionWordsProbe,
    DistanceWordsProbe,
    RightBranching,
)
from bertology_utils.analyses.probes.evaluation import ProbeEvaluation
from bertology_utils.analyses.probes.fitting import PROBE_VERSION, fit_probes
from bertology_utils.analyses.probes.report import PAPER_STRUCTURAL_PROBE_UUAS as PAPER_STRUCTURAL_PROBE_UUAS
from bertology_utils.analyses.probes.report import (
    PAPER_TABLE3,
    TABLE3_ROWS,
    plot_probe_weights,
    plot_structural_layers,
    plot_tree_comparison,
    table3,
)
from bertology_utils.analyses.probes.scorers import N_DISTANCE_FEATURES, distance_features
from bertology_utils.analyses.probes.structural import (
    STRUCTURAL_VERSION,
    DepthProbe,
    DistanceProbe,
    StructuralLayers,
    fit_jointly,
    rank_grid,
    spanning_tree_edges,
    spanning_trees,
    structural_metrics,
    structural_probe_layers,
    uuas_by_sentence,
)
from bertology_utils.analyses.probes.structural_data import StructuralData, tree_distances, word_hidden_states

__all__ = [
    "ProbeData",
    "Batch",
    "ProbeEvaluation",
    "AttentionProbe",
    "AttentionWordsProbe",
    "DistanceWordsProbe",
    "RightBranching",
    "fit_probes",
    "PROBE_VERSION",
    "PAPER_TABLE3",
    "TABLE3_ROWS",
    "table3",
    "plot_probe_weights",
    "plot_tree_comparison",
    "plot_structural_layers",
    "N_DISTANCE_FEATURES",
    "distance_features",
    "StructuralData",
    "word_hidden_states",
    "tree_distances",
    "DistanceProbe",
    "DepthProbe",
    "rank_grid",
    "spanning_tree_edges",
    "spanning_trees",
    "structural_metrics",
    "structural_probe_layers",
    "fit_jointly",
    "StructuralLayers",
    "STRUCTURAL_VERSION",
    "uuas_by_sentence",
]
