"""Random dependency trees shared by the syntax and probe tests."""

import numpy as np


def random_heads(rng, n: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """UD heads and relations of a random (possibly non-projective) tree over n words.

    Each word's head is a word placed before it in a random order; the first word of that order is the root.
    """
    order = rng.permutation(n)
    heads = np.zeros(n, dtype=int)
    for k, word in enumerate(order[1:], 1):
        heads[word] = order[rng.integers(0, k)] + 1
    relations = rng.choice(["nsubj", "obj", "det", "amod", "punct"], size=n).tolist()
    relations[order[0]] = "root"
    return tuple(heads.tolist()), tuple(relations)
