"""GloVe-format files and the model-embedding default vectors."""

import gzip

import numpy as np
import pytest

from bertology_utils.analyses.word_vectors import ModelEmbeddingVectors, StaticVectors, default_word_vectors, load_glove
from bertology_utils.core.errors import DataFormatError, DataNotFoundError

GLOVE = """\
the 0.1 0.2 0.3
cat 1 2 3
. -1 -2 -3.5e-1
New York 4 5 6
"""


def write(tmp_path, text, name="vectors.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_glove_text_file(tmp_path):
    vectors = load_glove(write(tmp_path, GLOVE))
    assert vectors.dim == 3 and len(vectors) == 4
    out = vectors(["cat", "The", "New York", "dog", "."])
    assert out.dtype == np.float32 and out.shape == (5, 3)
    np.testing.assert_allclose(out[0], [1, 2, 3])
    np.testing.assert_allclose(out[1], [0.1, 0.2, 0.3])  # lowercase fallback
    np.testing.assert_allclose(out[2], [4, 5, 6])  # a word with a space, as in glove.840B
    np.testing.assert_array_equal(out[3], 0)  # unknown: zero vector, counted
    np.testing.assert_allclose(out[4], [-1, -2, -0.35])
    assert vectors.unknown == 1 and vectors.lookups == 5 and vectors.unknown_rate == pytest.approx(0.2)
    assert "vectors.txt" in vectors.description and "dimension 3" in vectors.description
    strict = load_glove(write(tmp_path, GLOVE), lowercase_fallback=False)
    np.testing.assert_array_equal(strict(["The"]), 0)


def test_glove_header_vocabulary_limit_and_gzip(tmp_path):
    with_header = write(tmp_path, "4 3\n" + GLOVE, "w2v.txt")
    assert len(load_glove(with_header)) == 4
    assert len(load_glove(with_header, max_words=2)) == 2
    kept = load_glove(with_header, vocabulary=["Cat", "dog"])
    assert len(kept) == 1 and "restricted" in kept.description
    np.testing.assert_allclose(kept(["Cat"])[0], [1, 2, 3])
    packed = tmp_path / "vectors.txt.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write(GLOVE)
    np.testing.assert_allclose(load_glove(packed)(["cat"])[0], [1, 2, 3])


def test_malformed_glove_files_name_the_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: expected a word and 3 numbers, found 3 fields"):
        load_glove(write(tmp_path, "a 1 2 3\nb 1 2\n", "bad.txt"))
    with pytest.raises(DataFormatError, match=r":2: a vector value of 'b' is not a number"):
        load_glove(write(tmp_path, "a 1 2 3\nb 1 x 3\n", "nan.txt"))
    with pytest.raises(DataFormatError, match="no vectors"):
        load_glove(write(tmp_path, "\n", "empty.txt"))
    with pytest.raises(DataNotFoundError, match="no such GloVe file"):
        load_glove(tmp_path / "missing.txt")
    with pytest.raises(TypeError, match="not one string"):
        load_glove(write(tmp_path, GLOVE))("cat")


def test_static_vectors_check_their_table():
    with pytest.raises(ValueError, match="needs a \\(2, dim\\) matrix"):
        StaticVectors(["a", "b"], np.zeros((3, 4)))


def test_model_embeddings_average_the_word_pieces(tiny_model_dirs):
    from bertology_utils.attention.alignment import WORD, align
    from bertology_utils.core.models import load_model

    loaded = load_model(tiny_model_dirs["bert"])
    vectors = default_word_vectors(loaded)
    assert isinstance(vectors, ModelEmbeddingVectors) and "averaged over word pieces" in vectors.description
    table = loaded.model.get_input_embeddings().weight.detach().numpy()
    assert vectors.dim == table.shape[1]
    words = ["the", "unbelievably", "the", "\u200b"]  # the last one is dropped by the tokenizer: [UNK] stands in
    out = vectors(words)
    for word, vector in zip(words, out):
        [aligned] = align(loaded.tokenizer, [[word]])
        pieces = aligned.input_ids[aligned.token_to_word == int(np.flatnonzero(aligned.word_kinds == WORD)[0])]
        np.testing.assert_allclose(vector, table[pieces].mean(0), rtol=1e-6)
    assert len(align(loaded.tokenizer, [["unbelievably"]])[0].input_ids) > 3  # really split into pieces
    np.testing.assert_array_equal(out[0], out[2])
    assert vectors.unknown == 0
    np.testing.assert_array_equal(vectors(["unbelievably"])[0], out[1])  # cached: the same vector again
