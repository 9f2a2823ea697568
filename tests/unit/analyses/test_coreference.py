"""GAP examples as words (offsets, cut words, windows) and pronoun-attention scoring on synthetic maps."""

from types import SimpleNamespace

import numpy as np
import pytest

from bertology_utils.analyses.coreference import (
    BASELINES,
    PAPER_TABLE2,
    CorefResult,
    gap_words,
    paper_comparison,
    prepare_gap,
    score_coreference,
    window,
    word_spans,
)
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.data import Corpus, GapExample
from bertology_utils.papers.claims import Verdict
from bertology_utils.papers.clark import coref_beats_nearest, coref_below_rule_based

L, H = 2, 3


def example(text: str, pronoun: str, a: str, b: str, a_coref=True, b_coref=False, nth=(0, 0, 0), id_="t"):
    """A GapExample whose offsets are those of the nth occurrence of each string."""

    def offset(s, k):
        at = -1
        for _ in range(k + 1):
            at = text.index(s, at + 1)
        return at

    return GapExample(
        id_, text, pronoun, offset(pronoun, nth[0]), a, offset(a, nth[1]), a_coref, b, offset(b, nth[2]), b_coref, ""
    )


def test_word_spans_follow_words_of_and_cut_at_boundaries():
    text = "Co\u00adop  members, Smith's\tfriends."
    words, spans = word_spans(text)
    assert words == ["Coop", "members", ",", "Smith's", "friends", "."]
    assert [text[s:e] for s, e in spans] == ["Co\u00adop", "members", ",", "Smith's", "friends", "."]
    cut = text.index("'s")
    words, spans = word_spans(text, [cut])
    assert words[3:5] == ["Smith", "'s"]
    assert spans[3] == (text.index("Smith"), cut)


def test_mentions_map_to_whole_words_and_are_checked():
    ex = example(
        "Anna Jones met Mary Smith in Rome. Later Smith's friend said she's tired.",
        "she",
        "Anna Jones",
        "Smith",
        a_coref=False,
        b_coref=True,
        nth=(0, 0, 1),
    )
    g = gap_words(ex)
    assert g.words[g.pronoun] == "she"
    assert g.words[g.a[0] : g.a[1]] == ("Anna", "Jones")
    assert g.words[g.b[0] : g.b[1]] == ("Smith",) and g.words[g.b[1]] == "'s"
    assert g.split_words == 2  # "Smith's" and "she's" were cut
    assert g.gold == "B" and g.gender == "feminine"
    assert g.sentences[g.pronoun] == 1 and g.sentences[g.a[0]] == 0
    bad = GapExample(
        "bad", ex.text, "she", ex.pronoun_offset + 1, ex.a, ex.a_offset, False, ex.b, ex.b_offset, True, ""
    )
    with pytest.raises(DataFormatError, match="bad"):
        gap_words(bad)


def test_baselines_on_a_passage_with_known_answers():
    # A comes first and is the subject of the pronoun's sentence; B is nearer the pronoun.
    ex = example(
        "Tom saw that Bill left. Tom said that Bill was wrong because he was late.", "he", "Tom", "Bill", nth=(0, 1, 1)
    )
    choices = gap_words(ex).baseline_choices()
    assert choices == {"nearest name": -1, "first name": 1, "salience rule": 1}
    # A name after the pronoun loses to one before it, whatever the distance.
    ex = example("Bill smiled. Later his friend Tom arrived.", "his", "Bill", "Tom")
    assert gap_words(ex).baseline_choices()["salience rule"] == 1
    assert gap_words(ex).baseline_choices()["nearest name"] == -1


def test_window_keeps_the_mentions_and_stops_at_sentence_boundaries():
    words = " ".join(f"w{i}" + (" ." if i % 5 == 4 else "") for i in range(40))
    ex = example(words, "w21", "w18", "w24", id_="long")  # sentences are 5 words + "."
    g = gap_words(ex)
    per_word = np.ones(len(g.words), dtype=int)
    same = window(g, per_word, len(g.words))
    assert same is g and not g.windowed
    cut = window(g, per_word, 16)
    assert cut.windowed and len(cut.words) <= 16
    assert cut.words[cut.pronoun] == "w21" and cut.words[cut.a[0]] == "w18" and cut.words[cut.b[0]] == "w24"
    assert cut.words[0] == "w15" and cut.words[-1] == "."  # whole sentences: w15..w19 . w20..w24 .
    assert cut.first_word == g.words.index("w15")
    assert window(g, per_word, 4) is None  # w18..w24 alone take 8 tokens


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tiny_models import build_tiny_model

    from bertology_utils.core.models import load_model

    return load_model(build_tiny_model("bert", tmp_path_factory.mktemp("tiny") / "bert"), device="cpu")


def gap_corpus() -> Corpus:
    filler = " ".join(["The weather was fine that day ."] * 8)
    return Corpus.from_items(
        [
            example("John met Paul in Rome. He was happy.", "He", "John", "Paul", id_="m1"),
            example("Mary met Anna in Rome. Later her sister came.", "her", "Mary", "Anna", False, True, id_="f1"),
            example("Mary met Anna. She left.", "She", "Mary", "Anna", True, True, id_="both"),
            example("Mary met Anna. She left.", "She", "Mary", "Anna", False, False, id_="neither"),
            example(f"{filler} Sue met Kim. {filler} She left.", "She", "Sue", "Kim", id_="far"),
            example(f"{filler} {filler} Sue met Kim. She left. {filler}", "She", "Sue", "Kim", id_="windowed"),
        ],
        "gap-toy",
    )


def test_prepare_counts_exclusions_and_windows(tiny_bert):
    prepared = prepare_gap(gap_corpus(), tiny_bert, max_tokens=40)
    counts = prepared.counts
    assert counts["excluded: both names are antecedents"] == 1
    assert counts["excluded: neither name is the antecedent"] == 1
    assert counts["excluded: mentions too far apart for the model"] == 1
    assert counts["kept"] == 3 and counts["windowed"] == 1
    assert [g.example.id for g in prepared.items] == ["m1", "f1", "windowed"]
    assert [s.words for s in prepared.corpus] == [g.words for g in prepared.items]
    for g in prepared.items:
        n_tokens = len(tiny_bert.tokenizer(list(g.words), is_split_into_words=True)["input_ids"])
        assert n_tokens <= 40
        assert g.words[g.pronoun] == g.example.pronoun


def pronoun_item(g, index: int, to_gold: float, to_other: float) -> ItemAttention:
    """[CLS] words [SEP]; head (0, 0) puts ``to_gold`` on the antecedent, head (0, 1) the reverse, (0, 2) ties."""
    n = len(g.words) + 2
    maps = np.full((L, H, n, n), 1.0 / n)
    gold, other = (g.a, g.b) if g.gold == "A" else (g.b, g.a)
    row = g.pronoun + 1
    for h, (x, y) in enumerate([(to_gold, to_other), (to_other, to_gold), (to_gold, to_gold)]):
        maps[0, h, row] = 0.0
        maps[0, h, row, gold[0] + 1 : gold[1] + 1] = x / (gold[1] - gold[0])
        maps[0, h, row, other[0] + 1 : other[1] + 1] = y / (other[1] - other[0])
    kinds = np.array([LEADING_SPECIAL] + [WORD] * len(g.words) + [SEPARATOR], dtype=np.int8)
    return ItemAttention(
        index=index,
        item_id=g.example.id,
        words=("[CLS]", *g.words, "[SEP]"),
        word_kinds=kinds,
        segments=np.zeros(n, dtype=np.int8),
        attention=maps.astype(np.float32),
        n_tokens=n,
    )


def test_scoring_heads_baselines_gender_and_the_paper(tiny_bert):
    prepared = prepare_gap(gap_corpus(), tiny_bert, max_tokens=40)
    items = [pronoun_item(g, i, 0.6, 0.3) for i, g in enumerate(prepared.items)]
    result = score_coreference(prepared, items)
    assert result.correct.shape == (3, L, H)
    np.testing.assert_array_equal(result.correct[:, 0, 0], 1.0)
    np.testing.assert_array_equal(result.correct[:, 0, 1], 0.0)
    np.testing.assert_array_equal(result.correct[:, 0, 2], 0.5)
    assert result.best_head == (0, 0)
    np.testing.assert_array_equal(result.held_out(), 1.0)
    table = result.table()
    assert table.index[0] == "best head 1-1"
    assert list(table.index[2 : 2 + len(BASELINES)]) == list(BASELINES)
    assert table.loc["chance", "all"] == 50.0 and table.loc["chance", "F/M"] == 1.0
    assert table.attrs["examples"] == {"all": 3, "masculine": 1, "feminine": 2}
    # m1 and windowed: A (first) is gold; f1: B is gold. So the first name is right 2 of 3 times.
    assert table.loc["first name", "all"] == pytest.approx(200 / 3)
    assert table.loc["first name", "masculine"] == 100.0 and table.loc["first name", "feminine"] == 50.0
    assert table.loc["first name", "F/M"] == 0.5
    paper = paper_comparison(result)
    assert paper.loc["best attention head", "paper (%)"] == PAPER_TABLE2["best head (5-4)"]
    assert paper.loc["best attention head", "ours (%)"] == 100.0
    beats = coref_beats_nearest(result)
    gain = beats.values["held_out_accuracy"] - beats.values["nearest_accuracy"]
    assert beats.interval.method == "bootstrap over 3 GAP examples"
    assert beats.interval.low <= gain <= beats.interval.high and beats.verdict is Verdict.by_interval(beats.interval)
    assert result.metrics()["coref.best_head"] == str(result.best_head) == table.index[0].split()[-1]
    per_head = result.head_metrics()["coref.head.accuracy"]  # fractions, as best_accuracy
    assert per_head.shape == (L, H)
    np.testing.assert_array_equal(per_head[0], [1.0, 0.0, 0.5])
    assert per_head[result.best_head] == pytest.approx(result.metrics()["coref.best_accuracy"])


def test_attention_of_other_words_is_refused_or_counted(tiny_bert):
    prepared = prepare_gap(gap_corpus(), tiny_bert, max_tokens=40)
    items = [pronoun_item(g, i, 0.6, 0.3) for i, g in enumerate(prepared.items)]
    items[1] = pronoun_item(prepared.items[0], 1, 0.6, 0.3)
    with pytest.raises(BertologyError, match="f1"):
        score_coreference(prepared, items)
    result = score_coreference(prepared, items, on_mismatch="skip")
    assert result.counts["skipped: words differ"] == 1 and result.counts["scored"] == 2
    assert list(result.indices) == [0, 2]


def coref_result(head, nearest, rule) -> CorefResult:
    """Examples on which head 1-1 gives ``head``'s answers (1 right, 0 wrong), every other head half of them."""
    n = len(head)
    correct = np.zeros((n, L, H), dtype=np.float32)
    correct[:, 0, 0] = head
    correct[::2, 1:, :] = 1.0
    baselines = {"nearest name": np.asarray(nearest, float), "first name": np.full(n, 0.5)}
    baselines["salience rule"] = np.asarray(rule, float)
    items = tuple(SimpleNamespace(gender=("masculine", "feminine")[i % 2]) for i in range(n))
    return CorefResult(items, np.arange(n), correct, baselines, {})


def test_coreference_claims_are_decided_by_an_interval_over_examples():
    clear = coref_result([1] * 40, [1, 0] * 20, [1, 0] * 20)  # the head right on all 40, the baselines on 20
    beats, below = coref_beats_nearest(clear), coref_below_rule_based(clear)
    assert beats.values == {"held_out_accuracy": 100.0, "nearest_accuracy": 50.0}
    assert beats.interval.method == "bootstrap over 40 GAP examples"
    assert 0 < beats.interval.low < 50 < beats.interval.high and beats.verdict is Verdict.HOLDS
    assert below.interval.low < -50 < below.interval.high < 0 and below.verdict is Verdict.DIFFERS  # rule - head
    assert "inconclusive" in beats.rule and "inconclusive" in below.rule
    # one example of six more right than nearest name: the interval reaches 0
    close = coref_beats_nearest(coref_result([1] * 6, [1] * 5 + [0], [1] * 6))
    assert close.interval.low <= 0 < 100 / 6 <= close.interval.high and close.verdict is Verdict.INCONCLUSIVE
    assert coref_below_rule_based(coref_result([1] * 6, [1] * 6, [1] * 6)).verdict is Verdict.DIFFERS  # a tie
    two = coref_beats_nearest(coref_result([1, 1], [0, 0], [0, 0]))
    assert two.verdict is Verdict.NOT_TESTABLE and not two.interval.finite  # too few examples to resample
