import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bertology_utils.attention.word_attention import FROM_RULES, WordConversion, word_attention, word_attention_single


def reference(att: np.ndarray, t2w: np.ndarray, rule: str) -> np.ndarray:
    """Clark et al.'s conversion written out with loops, one (T, T) map at a time."""
    n_words = t2w.max() + 1
    to_words = np.zeros((att.shape[0], n_words))
    for t in range(att.shape[0]):
        for s in range(att.shape[1]):
            to_words[t, t2w[s]] += att[t, s]
    out = np.zeros((n_words, n_words))
    for w in range(n_words):
        rows = to_words[t2w == w]
        if rule == "mean":
            out[w] = rows.mean(0)
        elif rule == "first":
            out[w] = rows[0]
        else:
            out[w] = rows.max(0) / rows.max(0).sum()
    return out


def random_maps(rng, shape):
    logits = rng.normal(size=shape) * 3
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@st.composite
def split_maps(draw):
    """A random token map and a random split of its tokens into contiguous words."""
    n_tokens = draw(st.integers(1, 24))
    starts = draw(st.lists(st.booleans(), min_size=n_tokens - 1, max_size=n_tokens - 1))
    t2w = np.concatenate([[0], np.cumsum(starts)]).astype(int)
    seed = draw(st.integers(0, 2**31 - 1))
    att = random_maps(np.random.default_rng(seed), (2, 3, n_tokens, n_tokens))
    return att, t2w


@settings(max_examples=60, deadline=None)
@given(split_maps(), st.sampled_from(FROM_RULES))
def test_rows_sum_to_one_and_match_reference(maps, rule):
    att, t2w = maps
    got = word_attention_single(att, t2w, rule)
    n_words = t2w.max() + 1
    assert got.shape == (2, 3, n_words, n_words)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
    for layer in range(2):
        for head in range(3):
            np.testing.assert_allclose(got[layer, head], reference(att[layer, head], t2w, rule), atol=1e-5)


def test_hand_computed_example():
    # Tokens: [CLS] straw ##berries [SEP] -> words [CLS] strawberries [SEP]
    att = np.array(
        [
            [0.5, 0.2, 0.2, 0.1],
            [0.1, 0.3, 0.4, 0.2],
            [0.2, 0.6, 0.0, 0.2],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )[None, None]
    t2w = np.array([0, 1, 1, 2])
    mean = word_attention_single(att, t2w, "mean")[0, 0]
    np.testing.assert_allclose(mean, [[0.5, 0.4, 0.1], [0.15, 0.65, 0.2], [0.0, 0.0, 1.0]], atol=1e-6)
    first = word_attention_single(att, t2w, "first")[0, 0]
    np.testing.assert_allclose(first[1], [0.1, 0.7, 0.2], atol=1e-6)
    mx = word_attention_single(att, t2w, "max")[0, 0]
    np.testing.assert_allclose(mx[1], np.array([0.2, 0.7, 0.2]) / 1.1, atol=1e-6)


@pytest.mark.parametrize("rule", FROM_RULES)
def test_padded_batch_equals_items_alone(rule):
    rng = np.random.default_rng(0)
    lengths, splits = [7, 4], [np.array([0, 1, 1, 2, 3, 3, 4]), np.array([0, 1, 2, 2])]
    batch = np.zeros((2, 2, 3, 7, 7), dtype=np.float32)
    t2w = np.full((2, 7), -1)
    alone = []
    for b, (n, split) in enumerate(zip(lengths, splits)):
        maps = random_maps(rng, (2, 3, n, n)).astype(np.float32)
        batch[b, :, :, :n, :n] = maps  # padded keys get exactly 0, as an attention mask gives
        t2w[b, :n] = split
        alone.append(word_attention_single(maps, split, rule))
    got = word_attention(torch.from_numpy(batch), torch.from_numpy(t2w), rule).numpy()
    assert got.shape == (2, 2, 3, 5, 5)
    np.testing.assert_allclose(got[0], alone[0], atol=1e-6)
    np.testing.assert_allclose(got[1, :, :, :3, :3], alone[1], atol=1e-6)
    assert np.all(got[1, :, :, 3:, :] == 0) and np.all(got[1, :, :, :, 3:] == 0)


def test_bad_arguments():
    att = torch.rand(1, 1, 1, 3, 3)
    with pytest.raises(ValueError, match="from_rule"):
        word_attention(att, torch.tensor([[0, 1, 2]]), "median")
    with pytest.raises(ValueError, match="does not match"):
        word_attention(att, torch.tensor([[0, 1]]))


@pytest.mark.parametrize("rule", FROM_RULES)
def test_one_prepared_conversion_serves_every_layer(rule):
    """Extraction prepares the conversion once per batch and applies it to each layer's maps."""
    rng = np.random.default_rng(1)
    t2w = torch.tensor([[0, 1, 1, 2, 3, 3], [0, 1, 2, 2, -1, -1]])
    layers = [torch.from_numpy(random_maps(rng, (2, 3, 6, 6)).astype(np.float32)) for _ in range(2)]
    for layer in layers:
        layer[1, :, :, 4:] = 0  # padded keys get no attention, as an attention mask gives
    convert = WordConversion(t2w, rule, n_words=5)  # one more word than either item has
    for layer in layers:
        got = convert(layer)
        assert got.shape == (2, 3, 5, 5)
        torch.testing.assert_close(got, word_attention(layer, t2w, rule, n_words=5))
        torch.testing.assert_close(got[0, :, :4, :4], torch.from_numpy(word_attention_single(layer[0], t2w[0], rule)))
        assert torch.all(got[0, :, 4:] == 0) and torch.all(got[:, :, :, 4:] == 0)
