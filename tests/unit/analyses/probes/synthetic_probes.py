"""Synthetic probe data whose answers are known, shared by the probe tests: random trees, and attention
with one head pointing at each word's gold head."""

import numpy as np
from synthetic_trees import random_heads

from bertology_utils.analyses.probes import ProbeData
from bertology_utils.analyses.word_vectors import StaticVectors
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.data import Corpus, Sentence

L, H = 2, 3  # not 12 x 12: nothing may assume BERT-base's shape
POINTING = (1, 2)  # layer 2, head 3 (0-based) points at the gold head

DOG = Sentence(
    "dog",
    ("The", "old", "dog", "chased", "a", "cat", "."),
    heads=(3, 3, 4, 0, 6, 4, 4),
    relations=("det", "amod", "nsubj", "root", "det", "obj", "punct"),
)


def random_tree(rng, n: int, index: int) -> Sentence:
    """A random tree over n words, with words drawn from a small vocabulary."""
    heads, relations = random_heads(rng, n)
    return Sentence(f"s{index}", tuple(f"w{rng.integers(0, 30)}" for _ in range(n)), heads, relations)


def item(
    sentence: Sentence, index: int, rng, pointing=POINTING, root_to=LEADING_SPECIAL, shape=(L, H)
) -> ItemAttention:
    """[CLS] words [SEP]: noisy rows everywhere, one head whose word rows are one-hot on the gold head.

    The root word's row in the pointing head is one-hot on [CLS] (or [SEP] with ``root_to``).
    """
    n = len(sentence.words)
    m = n + 2
    logits = rng.normal(size=(*shape, m, m))
    maps = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    if pointing is not None:
        layer, head = pointing
        maps[layer, head] = 0.0
        maps[layer, head, 0, 0] = maps[layer, head, m - 1, m - 1] = 1.0
        for j, gold in enumerate(sentence.heads):
            target = gold if gold > 0 else (0 if root_to == LEADING_SPECIAL else m - 1)
            maps[layer, head, j + 1, target] = 1.0
    kinds = np.array([LEADING_SPECIAL] + [WORD] * n + [SEPARATOR], dtype=np.int8)
    return ItemAttention(
        index=index,
        item_id=sentence.id,
        words=("[CLS]", *sentence.words, "[SEP]"),
        word_kinds=kinds,
        segments=np.zeros(m, dtype=np.int8),
        attention=maps.astype(np.float32),
        n_tokens=m,
    )


def synthetic(n_sentences: int, seed: int, vectors=None, **item_kwargs) -> ProbeData:
    rng = np.random.default_rng(seed)
    sentences = [random_tree(rng, int(rng.integers(2, 12)), i) for i in range(n_sentences)]
    corpus = Corpus.from_items(sentences, f"synthetic-{seed}")
    items = [item(s, i, rng, **item_kwargs) for i, s in enumerate(sentences)]
    return ProbeData(corpus, items, vectors, block_size=16)


def vectors(dim: int = 5) -> StaticVectors:
    rng = np.random.default_rng(0)
    vocabulary = [f"w{k}" for k in range(30)]
    return StaticVectors(vocabulary, rng.normal(size=(30, dim)), description="random test vectors")
