"""Dependency-head scoring on hand-made trees with synthetic attention whose answers are known."""

import numpy as np
import pytest
from synthetic_trees import random_heads

from bertology_utils.analyses.syntax import (
    ALL,
    DIRECTIONS,
    OFFSETS,
    PAPER_TABLE1,
    STANFORD_TO_UD,
    example_sentence,
    paper_comparison,
    prediction_credit,
    score_syntax,
)
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.heads import all_heads
from bertology_utils.data import Corpus, Sentence, read_conllu
from bertology_utils.papers.claims import Verdict
from bertology_utils.papers.clark import head_beats_offset, table1_claims

L, H = 2, 3  # not 12 x 12: nothing may assume BERT-base's shape

DOG = Sentence(
    "dog",
    ("The", "old", "dog", "chased", "a", "cat", "."),
    heads=(3, 3, 4, 0, 6, 4, 4),
    relations=("det", "amod", "nsubj", "root", "det", "obj", "punct"),
)
POSS = Sentence(
    "poss",
    ("John", "'s", "sister", "likes", "it", "."),
    heads=(3, 1, 4, 0, 4, 4),
    relations=("nmod:poss", "case", "nsubj", "root", "obj", "punct"),
)


def item(sentence: Sentence, maps: np.ndarray, index: int) -> ItemAttention:
    """[CLS] words [SEP] with ``maps`` of shape (L, H, n + 2, n + 2)."""
    n = len(sentence.words) + 2
    kinds = np.array([LEADING_SPECIAL] + [WORD] * (n - 2) + [SEPARATOR], dtype=np.int8)
    return ItemAttention(
        index=index,
        item_id=sentence.id,
        words=("[CLS]", *sentence.words, "[SEP]"),
        word_kinds=kinds,
        segments=np.zeros(n, dtype=np.int8),
        attention=maps.astype(np.float32),
        n_tokens=n,
    )


def noise(sentence: Sentence, seed: int) -> np.ndarray:
    """Random attention rows (softmax of noise) for every head."""
    n = len(sentence.words) + 2
    logits = np.random.default_rng(seed).normal(size=(L, H, n, n))
    return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)


def pointing(sentence: Sentence, target) -> np.ndarray:
    """(n + 2, n + 2) map whose row for word i is one-hot at word ``target(i)`` (0-based), or at [SEP] for None."""
    n = len(sentence.words)
    m = np.zeros((n + 2, n + 2))
    m[0, 0] = m[n + 1, n + 1] = 1.0
    for i in range(n):
        t = target(i)
        m[i + 1, t + 1 if t is not None and 0 <= t < n else n + 1] = 1.0
    return m


def gold_head(sentence):
    return lambda i: sentence.heads[i] - 1 if sentence.heads[i] > 0 else None


def random_tree(rng, n: int, index: int) -> Sentence:
    """A random (possibly non-projective) tree with distinct words."""
    heads, relations = random_heads(rng, n)
    return Sentence(f"r{index}", tuple(f"w{index}_{i}" for i in range(n)), heads, relations)


def test_attention_on_the_gold_head_scores_one_and_the_best_head_is_named_from_one():
    corpus = Corpus.from_items([DOG, POSS], "toy")
    items = []
    for i, s in enumerate(corpus):
        maps = noise(s, i)
        maps[1, 2] = pointing(s, gold_head(s))  # layer 2, head 3
        items.append(item(s, maps, i))
    result = score_syntax(corpus, items, poss_via_clitic=False)
    np.testing.assert_array_equal(result.accuracy[0, :, 1, 2], 1.0)
    best = result.best(ALL)
    assert (best["best_head"], best["layer"], best["head"], best["direction"]) == ("2-3", 2, 3, "dep->head")
    assert best["accuracy"] == 1.0 and best["held_out_accuracy"] == 1.0
    # Root words and punctuation are left out and counted.
    assert result.excluded == {"root": 2, "punct": 2}
    assert result.counts[result.index(ALL)] == 13 - 4
    assert dict(zip(result.relations, result.counts)) == {
        ALL: 9,
        "det": 2,
        "nsubj": 2,
        "obj": 2,
        "amod": 1,
        "case": 1,
        "nmod:poss": 1,
    }
    assert result.head_accuracy.shape == (len(result.relations), L, H)


def test_the_transpose_direction_reads_who_attends_to_the_dependent():
    corpus = Corpus.from_items([DOG], "toy")
    n = len(DOG.words)
    maps = noise(DOG, 0)
    m = np.zeros((n + 2, n + 2))
    for i, head in enumerate(DOG.heads):  # the head word attends to each of its dependents
        if head > 0:
            m[head, i + 1] = 1.0
    maps[0, 1] = m
    result = score_syntax(corpus, [item(DOG, maps, 0)])
    head_to_dep = DIRECTIONS.index("head->dep")
    np.testing.assert_array_equal(result.accuracy[head_to_dep, :, 0, 1], 1.0)
    assert result.best(ALL)["direction"] == "head->dep"
    # Read the other way, the same map says little: leaves attend to nothing but [SEP].
    assert result.accuracy[1 - head_to_dep, 0, 0, 1] < 0.5


def test_self_and_special_words_are_never_predictions():
    n = len(DOG.words)
    maps = noise(DOG, 1)
    m = np.zeros((n + 2, n + 2))
    for i, head in enumerate(DOG.heads):
        m[i + 1, 0], m[i + 1, n + 1], m[i + 1, i + 1] = 0.3, 0.3, 0.3  # [CLS], [SEP], self outweigh the head
        if head > 0:
            m[i + 1, head] = 0.1
    maps[0, 0] = m
    credit = prediction_credit(m[None, None, 1:-1, 1:-1])
    assert not credit[0, 0, 0, 3].any()  # the root's row holds nothing but itself: no prediction
    result = score_syntax(Corpus.from_items([DOG], "toy"), [item(DOG, maps, 0)])
    assert result.best(ALL)["best_head"] == "1-1"
    np.testing.assert_array_equal(result.accuracy[0, :, 0, 0], 1.0)


def test_near_ties_share_the_prediction_in_both_directions():
    m = np.array([[0.0, 0.45, 0.45 - 2.0**-13], [0.3, 0.0, 0.2], [0.3, 0.1, 0.0]])  # 0.45 ties within 2**-12
    credit = prediction_credit(m[None, None])[:, 0, 0]  # (directions, dependent, head)
    np.testing.assert_array_equal(credit[0], [[0, 0.5, 0.5], [1, 0, 0], [1, 0, 0]])
    # head->dep: column 0's maximum is 0.3 on rows 1 and 2 (an exact tie), columns 1's and 2's are on row 0
    np.testing.assert_array_equal(credit[1], [[0, 0.5, 0.5], [1, 0, 0], [1, 0, 0]])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_fixed_offset_head_equals_the_offset_baseline(seed):
    rng = np.random.default_rng(seed)
    corpus = Corpus.from_items([random_tree(rng, int(rng.integers(2, 15)), i) for i in range(30)], "random")
    assert len(OFFSETS) == L * H
    items = []
    for i, s in enumerate(corpus):
        n = len(s.words) + 2
        maps = np.stack([pointing(s, lambda w, o=o: w + o) for o in OFFSETS]).reshape(L, H, n, n)
        items.append(item(s, maps, i))
    result = score_syntax(corpus, items)
    accuracy = result.accuracy[0].reshape(len(result.relations), -1)  # (relations, offsets) in OFFSETS order
    np.testing.assert_allclose(accuracy, result.baseline_accuracy)
    table = result.best_heads()
    assert table.loc[ALL, "baseline_accuracy"] == pytest.approx(table.loc[ALL, "accuracy"])


def test_possessors_are_scored_through_their_clitic_as_clark_did():
    m = pointing(POSS, gold_head(POSS))
    m[2] = 0
    m[2, 3] = 1.0  # "'s" attends to "sister", the possessed noun
    maps = noise(POSS, 2)
    maps[0, 0] = m
    corpus = Corpus.from_items([POSS], "poss")
    clark = score_syntax(corpus, [item(POSS, maps, 0)])
    plain = score_syntax(corpus, [item(POSS, maps, 0)], poss_via_clitic=False)
    assert clark.accuracy[0, clark.index("nmod:poss"), 0, 0] == 1.0
    assert plain.accuracy[0, plain.index("nmod:poss"), 0, 0] == 1.0  # John -> sister directly
    assert clark.accuracy[0, clark.index("case"), 0, 0] == 0.0


def test_attention_of_another_sentence_is_refused_or_counted():
    corpus = Corpus.from_items([DOG, POSS], "toy")
    wrong = item(POSS, noise(POSS, 0), 0)  # POSS's words under DOG's index
    right = item(POSS, noise(POSS, 1), 1)
    with pytest.raises(BertologyError, match="word"):
        score_syntax(corpus, [wrong, right])
    result = score_syntax(corpus, [wrong, right], on_mismatch="skip")
    assert result.skipped["words differ from the treebank"] == 1
    assert result.n_sentences == 1
    only_one = score_syntax(corpus, [right])
    assert only_one.skipped["not in the attention given"] == 1


def test_tables_and_the_paper_side_by_side():
    corpus = Corpus.from_items([DOG, POSS], "toy")
    items = [item(s, noise(s, i), i) for i, s in enumerate(corpus)]
    result = score_syntax(corpus, items)
    frame = result.frame()
    assert len(frame) == 2 * len(result.relations) * L * H
    assert set(frame["head_name"]) == {str(h) for h in all_heads(L, H)}
    assert result.grid("det").shape == (L, H)
    assert list(result.baselines().columns) == list(OFFSETS)
    table = result.best_heads(min_count=2)
    assert table.index[0] == ALL and "amod" not in table.index
    comparison = paper_comparison(result)
    assert list(comparison.index) == list(PAPER_TABLE1)
    assert comparison.loc["prep", "UD relation"] == "-" and np.isnan(comparison.loc["prep", "margin"])
    assert comparison.loc["dobj", "UD relation"] == "obj" and comparison.loc["dobj", "count"] == 2
    claims = {c.id: c for c in table1_claims(result)}
    assert [c.verdict for c in claims.values()].count(Verdict.NOT_TESTABLE) >= 3
    assert claims["table1.prep"].verdict is Verdict.NOT_TESTABLE and claims["table1.prep"].ours == "no UD twin"
    assert claims["table1.mark"].ours == "mark: not in the data"
    assert claims["table1.amod"].verdict is Verdict.NOT_TESTABLE  # one dependent, one half: too few to hold out
    held_out, baseline, dependents = claims["table1.dobj"].values.values()
    assert np.isfinite(held_out) and dependents == 2 and claims["table1.prep"].values["dependents"] == 0
    # held out, but two sentences are too few for an interval over sentences
    assert claims["table1.dobj"].verdict is Verdict.NOT_TESTABLE and not claims["table1.dobj"].interval.finite
    assert claims["table1.dobj"].ours.endswith("too few sentences for an interval")
    assert claims["table1.prep"].interval is None
    metrics = result.metrics("syntax")
    assert metrics["syntax.obj.best_head"] == result.best("obj")["best_head"] and "syntax.nmod_poss.count" in metrics
    assert STANFORD_TO_UD["poss"] == "nmod:poss" and STANFORD_TO_UD["prt"] == "compound:prt"
    assert example_sentence(corpus, "nmod:poss", min_words=2) == 1


CONLLU = """\
# sent_id = mwt
# text = I don't like it.
1\tI\tI\tPRON\t_\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\t_\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\t_\t_\t4\tadvmod\t_\t_
4\tlike\tlike\tVERB\t_\t_\t0\troot\t_\t_
5\tit\tit\tPRON\t_\t_\t4\tobj\t_\t_
6\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_

# sent_id = empty
# text = Sam ate rice and Kim beans.
1\tSam\tSam\tPROPN\t_\t_\t2\tnsubj\t_\t_
2\tate\teat\tVERB\t_\t_\t0\troot\t_\t_
3\trice\trice\tNOUN\t_\t_\t2\tobj\t_\t_
4\tand\tand\tCCONJ\t_\t_\t5\tcc\t_\t_
5\tKim\tKim\tPROPN\t_\t_\t2\tconj\t_\t_
5.1\tate\teat\tVERB\t_\t_\t_\t_\t_\t_
6\tbeans\tbean\tNOUN\t_\t_\t5\torphan\t_\t_
7\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_

# sent_id = long
# text = a long one
{long}
"""


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tiny_models import build_tiny_model

    from bertology_utils.core.models import load_model

    return load_model(build_tiny_model("bert", tmp_path_factory.mktemp("tiny") / "bert"), device="cpu")


def test_conllu_multiword_tokens_empty_nodes_and_over_long_sentences_through_a_store(tiny_bert, tmp_path):
    from bertology_utils.attention.extraction import extract_attention

    long = "\n".join(
        f"{i}\tword\tword\tNOUN\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_" for i in range(1, 80)
    )  # more tokens than the tiny model's 64 positions
    path = tmp_path / "edge.conllu"
    path.write_text(CONLLU.format(long=long), encoding="utf-8")
    corpus = read_conllu(path)
    assert corpus[0].words == ("I", "do", "n't", "like", "it", ".")  # syntactic words, not "don't"
    assert corpus[1].words == ("Sam", "ate", "rice", "and", "Kim", "beans", ".")  # no empty node
    store = extract_attention(corpus, tmp_path / "edge.zarr", tiny_bert, progress=False)
    result = score_syntax(corpus, store)
    assert result.n_sentences == 2
    assert result.skipped["too long for the model"] == 1
    assert result.excluded == {"root": 2, "punct": 2}
    assert dict(zip(result.relations, result.counts))[ALL] == 4 + 5
    assert result.accuracy.shape == (2, len(result.relations), tiny_bert.num_layers, tiny_bert.num_heads)
    assert np.isfinite(result.accuracy).all()


def test_head_metrics_give_each_heads_accuracy_and_its_best_relation():
    corpus = Corpus.from_items([DOG], "toy")
    n = len(DOG.words)
    maps = np.zeros((L, H, n + 2, n + 2))
    maps[...] = pointing(DOG, lambda i: None)  # every word on [SEP]: no head scores anything
    maps[0, 0] = pointing(DOG, gold_head(DOG))  # right on every relation
    # right on the subject only; the others point one word to the left of the dependent
    maps[1, 2] = pointing(DOG, lambda i: gold_head(DOG)(i) if DOG.relations[i] == "nsubj" else i - 1)
    result = score_syntax(corpus, [item(DOG, maps, 0)])
    found = result.head_metrics()
    # DOG's scored relations of Table 1: det, nsubj, amod, obj (UD for dobj)
    assert set(found) == {f"syntax.head.{r}" for r in (ALL, "det", "nsubj", "amod", "obj")} | {
        "syntax.head.best_relation",
        "syntax.head.best_relation_accuracy",
    }
    for relation in (ALL, "det", "nsubj", "amod", "obj"):
        np.testing.assert_array_equal(found[f"syntax.head.{relation}"], result.grid(relation))
        assert found[f"syntax.head.{relation}"].shape == (L, H)
    assert found["syntax.head.det"][0, 0] == 1.0 and found["syntax.head.nsubj"][1, 2] == 1.0
    # 'old' -> 'The' (offset -1) is wrong for amod; 'a' -> 'chased' is wrong for det
    assert found["syntax.head.amod"][1, 2] == 0.0 and found["syntax.head.det"][1, 2] < 1.0
    assert found["syntax.head.best_relation"][1, 2] == "nsubj"
    assert found["syntax.head.best_relation_accuracy"][1, 2] == 1.0
    # a tie goes to the first relation in Table 1's order
    assert found["syntax.head.best_relation"][0, 0] == "det"
    assert found["syntax.head.best_relation_accuracy"][0, 0] == 1.0
    assert (
        found[f"syntax.head.{ALL}"][0, 0]
        == result.best(ALL)["accuracy"]
        == result.metrics()["syntax.all.best_accuracy"]
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_per_sentence_counts_add_up_to_the_held_out_margin(seed):
    rng = np.random.default_rng(seed)
    corpus = Corpus.from_items([random_tree(rng, int(rng.integers(2, 15)), i) for i in range(40)], "random")
    items = [item(s, noise(s, i), i) for i, s in enumerate(corpus) if i != 7]  # one sentence not scored
    result = score_syntax(corpus, items)
    assert 7 not in result.sentence_index and len(result.sentence_index) == result.n_sentences == 39
    np.testing.assert_array_equal(result.sentence_counts.sum(0), result.counts)
    np.testing.assert_array_equal(result.sentence_offset_correct.sum(0), result.fold_offset_correct.sum(0))
    for relation in result.relations:
        best, (gain, dependents) = result.best(relation), result.held_out_margins(relation)
        assert dependents.min() > 0 and dependents.sum() == best["count"]
        margin = best["held_out_accuracy"] - best["baseline_accuracy"]
        assert gain.sum() / dependents.sum() == pytest.approx(margin, abs=1e-6)


DET_AT = {  # sentences whose determiner's head is 1, 2 or 3 words to its right
    1: (("The", "dog", "barks", "."), (2, 3, 0, 3), ("det", "nsubj", "root", "punct")),
    2: (("The", "big", "dog", "barks", "."), (3, 3, 4, 0, 4), ("det", "amod", "nsubj", "root", "punct")),
    3: (
        ("The", "very", "big", "dog", "barks", "."),
        (4, 3, 4, 5, 0, 5),
        ("det", "advmod", "amod", "nsubj", "root", "punct"),
    ),
}


def det_result(offsets, head):
    """Sentences with their determiner's head at each of ``offsets``; head 1-1 points each word at ``head(s)``'s
    pick, every other head at nothing."""
    sentences = [Sentence(f"s{i}", *DET_AT[o]) for i, o in enumerate(offsets)]
    corpus = Corpus.from_items(sentences, "det")
    items = []
    for i, s in enumerate(sentences):
        n = len(s.words)
        maps = np.zeros((L, H, n + 2, n + 2))
        maps[...] = pointing(s, lambda w: None)
        maps[0, 0] = pointing(s, head(s))
        items.append(item(s, maps, i))
    return score_syntax(corpus, items)


def test_table1_rows_are_decided_by_an_interval_over_sentences():
    # A head right on every determiner; the best offset (+1) right on 12 of 30 sentences.
    beats = head_beats_offset(det_result([1] * 12 + [2] * 10 + [3] * 8, gold_head), "det")
    assert beats.values["held_out_accuracy"] == 1.0 and beats.values["baseline_accuracy"] == pytest.approx(0.4)
    assert beats.interval.method == "bootstrap over 30 sentences"
    assert 0 < beats.interval.low < 0.6 < beats.interval.high <= 1.0  # the margin, 0.6, inside, all above 0
    assert beats.verdict is Verdict.HOLDS  # the paper's det head beats its offset too
    # A head that is the +1 offset itself: no better than the baseline on any sentence, unlike the paper's.
    offset = head_beats_offset(det_result([1] * 12 + [2] * 10 + [3] * 8, lambda s: lambda w: w + 1), "det")
    assert (offset.interval.low, offset.interval.high) == (0.0, 0.0)
    assert offset.verdict is Verdict.DIFFERS
    # Right on one more determiner than the offset, over six sentences: the interval reaches 0.
    close = head_beats_offset(det_result([1] * 5 + [2], gold_head), "det")
    margin = close.values["held_out_accuracy"] - close.values["baseline_accuracy"]
    assert margin == pytest.approx(1 / 6) and close.interval.low <= 0 < margin <= close.interval.high
    assert close.verdict is Verdict.INCONCLUSIVE and "inconclusive" in close.rule
