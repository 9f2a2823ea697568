import numpy as np
import pytest

from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD, align
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.data import Sentence, SentencePair


@pytest.fixture(scope="module")
def tokenizers(tiny_model_dirs):
    return {arch: load_model(folder).tokenizer for arch, folder in tiny_model_dirs.items()}


def check_consistent(item, words_in):
    """Every token belongs to one word, words are contiguous runs, real words keep their text."""
    assert len(item.token_to_word) == item.n_tokens
    assert np.all(np.diff(item.token_to_word) >= 0)
    assert set(item.token_to_word) == set(range(item.n_words))
    assert [w for w, k in zip(item.words, item.word_kinds) if k == WORD] == list(words_in)


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_single_sentence(tokenizers, arch):
    words = ["The", "strawberries", "weren't", "ripe", "."]
    (item,) = align(tokenizers[arch], [Sentence("s1", words)])
    check_consistent(item, words)
    assert item.item_id == "s1" and item.index == 0
    assert item.word_kinds[0] == LEADING_SPECIAL and item.word_kinds[-1] == SEPARATOR
    assert item.n_words == len(words) + 2
    assert np.all(item.segments == 0)


@pytest.mark.parametrize("arch", ["bert", "roberta", "mpnet"])
def test_pair_segments(tokenizers, arch):
    pair = SentencePair("p", ("a", "cat", "sat"), ("it", "slept"))
    (item,) = align(tokenizers[arch], [pair], start_index=7)
    check_consistent(item, ["a", "cat", "sat", "it", "slept"])
    assert item.index == 7
    kinds, seg = item.word_kinds, item.segments
    first_b = item.words.index("it")
    # Everything up to the separator(s) after the first text is segment 0, the rest segment 1.
    assert np.all(seg[:first_b] == 0) and np.all(seg[first_b:] == 1)
    n_sep = int((kinds == SEPARATOR).sum())
    assert n_sep == (3 if arch in ("roberta", "mpnet") else 2)  # RoBERTa-style pairs use </s></s>
    if item.token_type_ids is not None and arch == "bert":
        assert item.token_type_ids[-1] == 1 and item.token_type_ids[0] == 0


def test_wordpieces_map_to_their_word(tokenizers):
    tok = tokenizers["bert"]
    (item,) = align(tok, [["unbelievably", "strawberries"]])
    tokens = tok.convert_ids_to_tokens(item.input_ids.tolist())
    for w in (1, 2):
        pieces = [t for t, i in zip(tokens, item.token_to_word) if i == w]
        assert "".join(p.removeprefix("##") for p in pieces) == item.words[w].lower()
    assert item.tokens_per_word[1] > 1


def test_dropped_words_are_replaced_and_counted(tokenizers):
    words = ["a", "\u200b", "b", "\x07", "", "c"]
    (item,) = align(tokenizers["bert"], [words])
    assert item.replaced == 3
    check_consistent(item, words)  # the original strings stay in `words`
    assert np.all(item.tokens_per_word >= 1)


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_odd_unicode_keeps_alignment(tokenizers, arch):
    words = ["12345678901234567890", "naïve", "e\u0301", "日本語", "🙂", "Ω", "\u00a0x", "tab\tbed"]
    (item,) = align(tokenizers[arch], [words])
    check_consistent(item, words)


def test_batch_matches_one_at_a_time(tokenizers):
    items = [["one"], ["two", "words"], SentencePair("p", ("x",), ("y", "z")), ["a", "\u200b"]]
    together = align(tokenizers["bert"], items)
    for i, it in enumerate(items):
        (alone,) = align(tokenizers["bert"], [it], start_index=i)
        assert together[i].words == alone.words
        np.testing.assert_array_equal(together[i].input_ids, alone.input_ids)
        np.testing.assert_array_equal(together[i].token_to_word, alone.token_to_word)


def test_plain_string_is_refused(tokenizers):
    with pytest.raises(BertologyError, match="split it into words"):
        align(tokenizers["bert"], ["a whole sentence"])
