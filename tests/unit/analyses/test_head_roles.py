"""Voita et al.'s head roles on synthetic maps whose roles are known by construction."""

import collections
import dataclasses
import math

import numpy as np
import pytest

from bertology_utils.analyses.head_roles import (
    ROLES,
    head_confidence,
    head_roles,
    plot_roles,
    positional_heads,
    rare_word_heads,
    syntactic_heads,
    word_frequencies,
)
from bertology_utils.analyses.syntax import SyntaxResult, score_syntax
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.data import Corpus, Sentence, SentencePair

L, H = 2, 3  # not 12 x 12: nothing may assume BERT-base's shape

# Targets of a real-word row: (rank r, the item's real words) -> real-word rank, "cls" or "sep"; None: a uniform head.
prev = lambda r, w: r - 1 if r > 0 else r + 1  # the first word looks at the next one
next_ = lambda r, w: r + 1 if r < len(w) - 1 else "sep"
two_back = lambda r, w: r - 2 if r >= 2 else "cls"
on_sep = lambda r, w: "sep"
itself = lambda r, w: r

FREQ = collections.Counter({"the": 10, "cat": 3, "dog": 3, "sat": 5, "ran": 7})
rarest = lambda r, w: int(np.argmin([FREQ[x.lower()] for x in w]))


def make_item(words, targets, index=0, second=(), peak=0.95) -> ItemAttention:
    """[CLS] words [SEP] (second [SEP]); each real row puts ``peak`` on its target, the rest spread evenly."""
    texts = ["[CLS]", *words, "[SEP]"] + ([*second, "[SEP]"] if second else [])
    kinds = (
        [LEADING_SPECIAL] + [WORD] * len(words) + [SEPARATOR] + ([WORD] * len(second) + [SEPARATOR] if second else [])
    )
    kinds = np.array(kinds, dtype=np.int8)
    n = len(texts)
    real = np.flatnonzero(kinds == WORD)
    real_words = [texts[i] for i in real]
    column = {"cls": 0, "sep": n - 1}
    att = np.full((len(targets), len(targets[0]), n, n), (1 - peak) / (n - 1))
    for l, row in enumerate(targets):
        for h, target in enumerate(row):
            if target is None:
                att[l, h] = 1 / n
                continue
            att[l, h, np.arange(n), np.arange(n)] = peak  # special rows: on themselves
            for r, i in enumerate(real):
                t = target(r, real_words)
                t = "sep" if not isinstance(t, str) and not 0 <= t < len(real) else t  # nothing there: [SEP]
                att[l, h, i, i] = (1 - peak) / (n - 1)
                att[l, h, i, column[t] if isinstance(t, str) else real[t]] = peak
    segments = np.array([0] * (len(words) + 2) + [1] * (n - len(words) - 2), dtype=np.int8)
    return ItemAttention(index, f"s{index}", tuple(texts), kinds, segments, att.astype(np.float32), n)


def make_store(path, items) -> AttentionStore:
    metadata = {"model": {"name": "m", "num_layers": L, "num_heads": H}, "corpus": {"name": "toy", "sha256": "c"}}
    store = AttentionStore.open_or_create(path, metadata, len(items))
    store.writer(0, len(items), keep_tokens=False).append(items)
    store.refresh()
    return store


# --------------------------------------------------------------------------- positional

POSITIONAL = [[prev, next_, on_sep], [None, itself, two_back]]


def positional_items():
    words = [f"w{i}" for i in range(10)]
    return [
        make_item(["alone"], POSITIONAL, 0),  # one word: skipped
        make_item(words[:3], POSITIONAL, 1),
        make_item(words[:2], POSITIONAL, 2, second=words[2:4]),  # a pair: offsets step over the middle [SEP]
        make_item(words, POSITIONAL, 3),
    ]


@pytest.mark.parametrize(("gap", "share", "offset"), [(2.0**-13, 1.5 / 3, 0), (2.0**-11, 2 / 3, -1)])
def test_a_near_tie_splits_a_row_between_offsets(gap, share, offset):
    """Each row: 0.45 on its previous word (the next for the first), 0.45 - gap on itself, the rest on [SEP]."""
    item = make_item(["a", "b", "c"], [[prev]])
    att = np.zeros_like(item.attention)
    for r in range(3):
        i = r + 1
        att[0, 0, i, i - 1 if r else i + 1], att[0, 0, i, i], att[0, 0, i, -1] = 0.45, 0.45 - gap, 0.1 + gap
    # within one float16 ulp (2**-12 at 0.45): offsets 0, -1, +1 get 1.5, 1, 0.5 rows; beyond it -1 wins twice
    roles = positional_heads([dataclasses.replace(item, attention=att)])
    assert roles.offset[0, 0] == offset and roles.share[0, 0] == pytest.approx(share)


def test_offsets_and_shares_of_known_heads():
    roles = positional_heads(positional_items())
    assert roles.rows == 3 + 4 + 10 and roles.n_items == 3 and roles.skipped == {"fewer than 2 words": 1}
    # prev: -1 on all but each item's first row (+1); next: +1 but the last row, which rests on [SEP];
    # [SEP] head has no offset; two back: -2 from the third word on. A uniform row ties on all its n columns:
    # 1/n of credit on every offset it reaches, offset 0 the most, and its specials' 2/n (3/n in the pair) on none.
    uniform = (3 / 5 + 4 / 7 + 10 / 12) / 17
    np.testing.assert_array_equal(roles.offset, [[-1, 1, 0], [0, 0, -2]])
    np.testing.assert_allclose(roles.share, [[14 / 17, 14 / 17, 0], [uniform, 1, 11 / 17]])
    np.testing.assert_allclose(roles.special, [[0, 3 / 17, 1], [(3 * 2 / 5 + 4 * 3 / 7 + 10 * 2 / 12) / 17, 0, 6 / 17]])
    np.testing.assert_array_equal(roles.is_positional, [[False, False, False], [False, True, False]])
    assert [str(h) for h in roles.heads()] == ["2-2"]
    loose = positional_heads(positional_items(), threshold=14 / 17)  # the threshold itself passes
    np.testing.assert_array_equal(loose.is_positional, [[True, True, False], [False, True, False]])


def test_modal_offset_ties_go_to_the_nearest_zero_then_the_negative():
    # Two words: prev gives +1 and -1 once each; "first on itself, second on the first" gives 0 and -1.
    first = lambda r, w: 0
    roles = positional_heads([make_item(["a", "b"], [[prev, first, on_sep], [on_sep] * 3])])
    np.testing.assert_array_equal(roles.offset[0, :2], [-1, 0])
    np.testing.assert_array_equal(roles.share[0, :2], [0.5, 0.5])


def test_store_gives_what_the_list_gives(tmp_path):
    items = positional_items()
    store = make_store(tmp_path / "s.zarr", items)
    from_store, from_list = positional_heads(store), positional_heads(items)
    np.testing.assert_array_equal(from_store.offset, from_list.offset)
    np.testing.assert_array_equal(from_store.share, from_list.share)
    np.testing.assert_allclose(head_confidence(store), head_confidence(items), atol=1e-3)
    rare_items = [make_item(w, RARE, i) for i, w in enumerate(RARE_SENTENCES)]
    rare_store = make_store(tmp_path / "r.zarr", rare_items)
    np.testing.assert_array_equal(rare_word_heads(rare_store, FREQ).hits, rare_word_heads(rare_items, FREQ).hits)


def test_mismatched_shapes_and_nothing_to_score_raise():
    items = positional_items()
    odd = make_item(["a", "b"], [[prev] * 4] * 2, 9)  # 2 x 4 heads after 2 x 3
    for function in (positional_heads, head_confidence, lambda i: rare_word_heads(i, FREQ)):
        with pytest.raises(BertologyError, match="layers x heads"):
            function([*items, odd])
        with pytest.raises(BertologyError):
            function([])
    with pytest.raises(BertologyError, match="fewer than 2 words: 1"):
        positional_heads(items[:1])
    broken = make_item(["a", "b"], POSITIONAL)
    broken.attention = broken.attention[..., :-1]
    with pytest.raises(BertologyError, match="does not fit"):
        positional_heads([broken])


# --------------------------------------------------------------------------- confidence


def test_confidence_by_hand_with_and_without_specials():
    uniform = lambda n: np.full((n, n), 1 / n)
    first = np.stack([uniform(4)] * H)[None].repeat(L, 0)  # [CLS] a b [SEP]
    first[0, 0] = [
        [1.0, 0.0, 0.0, 0.0],  # [CLS] row: never counted
        [0.1, 0.6, 0.2, 0.1],
        [0.5, 0.1, 0.1, 0.3],
        [0.0, 0.0, 0.0, 1.0],
    ]
    second = np.stack([uniform(3)] * H)[None].repeat(L, 0)  # [CLS] c [SEP]
    second[0, 0, 1] = [0.2, 0.3, 0.5]
    kinds = lambda n: np.array([LEADING_SPECIAL] + [WORD] * (n - 2) + [SEPARATOR], dtype=np.int8)
    items = [
        ItemAttention(0, "a", ("[CLS]", "a", "b", "[SEP]"), kinds(4), np.zeros(4), first, 4),
        # Rows summing to 2 (as if float16 had drifted) are renormalised first.
        ItemAttention(1, "b", ("[CLS]", "c", "[SEP]"), kinds(3), np.zeros(3), 2 * second, 3),
    ]
    excluded, included = head_confidence(items), head_confidence(items, specials="include")
    assert excluded.shape == (L, H)
    assert excluded[0, 0] == pytest.approx((0.6 + 0.1 + 0.3) / 3)
    assert included[0, 0] == pytest.approx((0.6 + 0.5 + 0.5) / 3)
    np.testing.assert_allclose(excluded.ravel()[1:], (0.25 + 0.25 + 1 / 3) / 3)
    np.testing.assert_allclose(included.ravel()[1:], (0.25 + 0.25 + 1 / 3) / 3)
    with pytest.raises(ValueError, match="specials"):
        head_confidence(items, specials="drop")


def test_a_head_resting_on_sep_is_confident_only_with_specials_included():
    items = positional_items()
    excluded, included = head_confidence(items), head_confidence(items, specials="include")
    assert included[0, 2] == pytest.approx(0.95)
    # Excluded, the [SEP] head's largest weight on a word is the even spread of the rest.
    lengths = [1, 3, 4, 10]
    ns = [1 + 2, 3 + 2, 4 + 3, 10 + 2]
    expected = sum(k * 0.05 / (n - 1) for k, n in zip(lengths, ns)) / sum(lengths)
    assert excluded[0, 2] == pytest.approx(expected, rel=1e-6)
    assert excluded[1, 1] == pytest.approx(0.95)


# --------------------------------------------------------------------------- rare words

RARE = [[prev, next_, on_sep], [None, itself, rarest]]
RARE_SENTENCES = [
    ["The", "cat", "sat"],  # 10 3 5: cat, chance 1/3
    ["the", "dog", "zebra", "ran"],  # zebra unseen (0): chance 1/4
    ["cat", "dog", "the"],  # cat and dog tie at 3: both count, chance 2/3
    ["the", "the"],  # equally frequent: skipped
    ["cat"],  # one word: skipped
]


def test_word_frequencies_count_sentences_and_both_texts_of_pairs():
    corpus = Corpus.from_items([Sentence("s", ("The", "cat")), SentencePair("p", ("the", "dog"), ("A", "cat"))], "toy")
    assert word_frequencies(corpus) == collections.Counter({"the": 2, "cat": 2, "dog": 1, "a": 1})
    assert word_frequencies(corpus, lowercase=False) == collections.Counter(
        {"The": 1, "the": 1, "cat": 2, "dog": 1, "A": 1}
    )


def test_rare_word_rates_chance_and_test():
    roles = rare_word_heads([make_item(w, RARE, i) for i, w in enumerate(RARE_SENTENCES)], FREQ)
    assert roles.rows == 10 and roles.n_items == 3
    assert roles.skipped == {"fewer than 2 words": 1, "every word equally frequent": 1}
    # prev: cat, cat (the first row looks ahead); zebra; dog, cat, dog -> 6. next: cat; zebra; dog -> 3.
    # Itself: each rare word's own row -> 1 + 1 + 2. A uniform row ties on its n columns: 1/n per rare word.
    uniform = 3 * 1 / 5 + 4 * 1 / 6 + 3 * 2 / 5
    np.testing.assert_allclose(roles.hits, [[6, 3, 0], [uniform, 4, 10]])
    np.testing.assert_allclose(roles.rate, [[0.6, 0.3, 0.0], [uniform / 10, 0.4, 1.0]])
    np.testing.assert_allclose(roles.chance, 0.4)  # (3 * 1/3 + 4 * 1/4 + 3 * 2/3) / 10
    assert roles.expected == pytest.approx(4.0)
    assert roles.variance == pytest.approx(3 * (1 / 3) * (2 / 3) + 4 * (1 / 4) * (3 / 4) + 3 * (2 / 3) * (1 / 3))
    z = 6 / math.sqrt(25 / 12)
    assert roles.z[1, 2] == pytest.approx(z)
    assert roles.p_value[1, 2] == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)))
    assert roles.p_value[1, 1] == pytest.approx(0.5)  # at chance exactly
    np.testing.assert_array_equal(roles.is_rare, [[False, False, False], [False, False, True]])
    assert [str(h) for h in roles.heads()] == ["2-3"]


def test_rare_word_effect_size_and_bonferroni_over_heads():
    items = [make_item(w, RARE, i) for i, w in enumerate(RARE_SENTENCES)]
    p = rare_word_heads(items, FREQ).p_value[1, 2]
    assert not rare_word_heads(items, FREQ, factor=3.0).is_rare.any()  # 1.0 < 3 x 0.4
    # 6 heads: alpha = 3p is significant uncorrected but not after Bonferroni; 7p is.
    assert not rare_word_heads(items, FREQ, alpha=3 * p).is_rare.any()
    assert rare_word_heads(items, FREQ, alpha=7 * p).is_rare[1, 2]
    # Case kept: "The" is unseen (0) and becomes the first sentence's rarest word.
    kept = rare_word_heads(items, FREQ, lowercase=False)
    assert kept.hits[1, 2] == 0 + 4 + 3 and kept.skipped["every word equally frequent"] == 1


# --------------------------------------------------------------------------- syntactic


def hand_result(relations, counts, offset_correct, correct) -> SyntaxResult:
    """A SyntaxResult with everything in fold 0; ``correct`` is (directions, relations, L, H)."""
    R = len(relations)
    fold_counts = np.zeros((2, R), dtype=np.int64)
    fold_counts[0] = counts
    fold_correct = np.zeros((2, 2, R, L, H), dtype=np.int64)
    fold_correct[0] = correct
    fold_offsets = np.zeros((2, R, 2), dtype=np.int64)
    fold_offsets[0] = offset_correct
    return SyntaxResult(tuple(relations), fold_counts, fold_correct, fold_offsets, (-1, 1), 10, {}, {})


def stanford_result() -> SyntaxResult:
    relations = ("all", "nsubj", "dobj", "amod")
    correct = np.zeros((2, 4, L, H), dtype=np.int64)
    correct[0, 1, 0, 0], correct[0, 1, 0, 1], correct[1, 1, 1, 2] = 60, 59, 80  # nsubj baseline 0.5
    correct[0, 2, 1, 0], correct[1, 2, 0, 0] = 50, 49  # dobj baseline 0.4
    correct[0, 3, 1, 1], correct[0, 3, 1, 2] = 80, 79  # amod baseline 0.7
    correct[:, 0] = correct[:, 1:].sum(1)
    offsets = [[130, 60], [20, 50], [40, 10], [70, 0]]
    return hand_result(relations, [300, 100, 100, 100], offsets, correct)


def test_syntactic_heads_beat_the_best_offset_by_the_margin_in_the_better_direction():
    roles = syntactic_heads(stanford_result())
    assert roles.labels == {"nsubj": "nsubj", "obj": "dobj", "amod": "amod", "advmod": None}
    assert roles.missing == ("advmod",) and roles.testable
    assert roles.baseline == pytest.approx({"nsubj": 0.5, "obj": 0.4, "amod": 0.7, "advmod": math.nan}, nan_ok=True)
    assert roles.baseline_offset == {"nsubj": 1, "obj": -1, "amod": -1, "advmod": None}
    assert roles.counts == {"nsubj": 100, "obj": 100, "amod": 100, "advmod": 0}
    np.testing.assert_array_equal(roles.is_syntactic["nsubj"], [[True, False, False], [False, False, True]])
    np.testing.assert_array_equal(roles.is_syntactic["obj"], [[False, False, False], [True, False, False]])
    np.testing.assert_array_equal(roles.is_syntactic["amod"], [[False, False, False], [False, True, False]])
    assert not roles.is_syntactic["advmod"].any() and np.isnan(roles.accuracy["advmod"]).all()
    np.testing.assert_array_equal(roles.any_syntactic, [[True, False, False], [True, True, True]])
    assert roles.relations_of(1, 2) == ["nsubj"]
    assert roles.table().loc["obj", "best_head"] == "2-1" and roles.table().loc["advmod", "count"] == 0
    stricter = syntactic_heads(stanford_result(), relations=("nsubj", "dobj"), margin=0.2)
    np.testing.assert_array_equal(stricter.is_syntactic["nsubj"], [[False, False, False], [False, False, True]])
    assert stricter.labels["dobj"] == "dobj" and stricter.missing == ()


def test_no_relation_found_is_missing_and_not_testable():
    correct = np.zeros((2, 2, L, H), dtype=np.int64)
    result = hand_result(("all", "det"), [5, 5], [[3, 1], [3, 1]], correct)
    roles = syntactic_heads(result)
    assert roles.missing == ("nsubj", "obj", "amod", "advmod") and not roles.testable
    assert not roles.any_syntactic.any() and roles.any_syntactic.shape == (L, H)
    combined = head_roles(positional_heads(positional_items()), roles, None)
    assert combined.untested == ("syntactic", "rare")
    assert combined.summary()["syntactic"] is None and combined.summary()["syntactic.nsubj"] is None


S1 = Sentence(
    "s1",
    ("The", "old", "dog", "quickly", "chased", "a", "cat", "."),
    heads=(3, 3, 5, 5, 0, 7, 5, 5),
    relations=("det", "amod", "nsubj", "advmod", "root", "det", "obj", "punct"),
)
S2 = Sentence("s2", ("She", "eats", "red", "apples"), heads=(2, 0, 4, 2), relations=("nsubj", "root", "amod", "obj"))


def test_from_score_syntax_on_a_tiny_treebank():
    corpus = Corpus.from_items([S1, S2], "toy")
    items = []
    for i, s in enumerate(corpus):
        gold = lambda r, w, s=s: s.heads[r] - 1 if s.heads[r] > 0 else "sep"
        items.append(make_item(list(s.words), [[on_sep] * H, [on_sep, on_sep, gold]], i, peak=1.0))
    roles = syntactic_heads(score_syntax(corpus, items))
    # nsubj sits at +2 and +1 (best offset 0.5); obj at -2 twice, amod at +1 twice, advmod once: no offset to beat.
    assert roles.missing == () and roles.labels["obj"] == "obj"
    assert roles.baseline == {"nsubj": 0.5, "obj": 1.0, "amod": 1.0, "advmod": 1.0}
    expected = np.zeros((L, H), dtype=bool)
    expected[1, 2] = True
    np.testing.assert_array_equal(roles.is_syntactic["nsubj"], expected)
    np.testing.assert_array_equal(roles.any_syntactic, expected)
    assert roles.accuracy["obj"][1, 2] == 1.0 and roles.accuracy["obj"][0, 0] == 0.0


# --------------------------------------------------------------------------- all roles


def all_roles():
    positional = positional_heads(positional_items())
    rare = rare_word_heads([make_item(w, RARE, i) for i, w in enumerate(RARE_SENTENCES)], FREQ)
    return head_roles(positional, syntactic_heads(stanford_result()), rare)


def test_head_roles_masks_table_and_summary():
    roles = all_roles()
    assert list(roles.masks) == list(ROLES) and roles.untested == ()
    np.testing.assert_array_equal(roles.masks["positional"], [[False, False, False], [False, True, False]])
    np.testing.assert_array_equal(roles.masks["rare"], [[False, False, False], [False, False, True]])
    np.testing.assert_array_equal(roles.specialised, [[True, False, False], [True, True, True]])
    table = roles.table()
    assert list(table.columns) == [
        "head",
        "layer",
        "head_index",
        "positional",
        "offset",
        "share",
        "syntactic",
        "rare",
        "rare_rate",
        "specialised",
    ]
    assert table["head"].tolist() == ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]
    assert table["layer"].tolist() == [1, 1, 1, 2, 2, 2] and table["head_index"].tolist() == [1, 2, 3, 1, 2, 3]
    assert table["syntactic"].tolist() == ["nsubj", "", "", "obj", "amod", "nsubj"]
    assert roles.syntactic.relation_names().tolist() == [["nsubj", "", ""], ["obj", "amod", "nsubj"]]
    assert table.loc[4, "offset"] == 0 and table.loc[4, "share"] == 1.0 and table.loc[4, "positional"]
    assert table.loc[5, "rare"] and table.loc[5, "rare_rate"] == 1.0
    assert roles.summary() == {
        "heads": 6,
        "positional": 1,
        "syntactic": 4,
        "rare": 1,
        "syntactic.nsubj": 2,
        "syntactic.obj": 1,
        "syntactic.amod": 1,
        "syntactic.advmod": None,
        "specialised": 4,
        "several roles": 2,
    }


def test_head_roles_refuses_other_shapes():
    positional = positional_heads(positional_items())
    wide = [make_item(w, [[prev] * 4] * 2, i) for i, w in enumerate(RARE_SENTENCES)]
    with pytest.raises(BertologyError, match="layers x heads"):
        head_roles(positional, None, rare_word_heads(wide, FREQ))


def test_plot_roles_writes_each_role_in_its_cell():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roles = all_roles()
    for confidence in (None, np.full((L, H), 0.5)):
        ax = plot_roles(roles, confidence=confidence)
        cells = {(t.get_position(), t.get_text()) for t in ax.texts}
        assert cells == {((0.5, 0.5), "S"), ((0.5, 1.5), "S"), ((1.5, 1.5), "PS"), ((2.5, 1.5), "SR")}
        plt.close("all")
    with pytest.raises(BertologyError):
        plot_roles(roles, confidence=np.zeros((3, 3)))


def test_find_roles_gathers_the_three_tests_on_the_model_s_cached_store(tiny_model_dirs, tmp_path, monkeypatch):
    from bertology_utils.analyses.head_roles import find_roles
    from bertology_utils.core.models import load_model

    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path))
    corpus = Corpus.from_items([S1, S2], "toy")
    words = [w.lower() for s in corpus for w in s.words]
    frequencies = collections.Counter({w: 1 + i for i, w in enumerate(dict.fromkeys(words))})  # none tie
    model = load_model(tiny_model_dirs["bert"])
    roles, store = find_roles(corpus, model, frequencies, threshold=0.5, margin=0.0, factor=1.5, alpha=0.5)
    assert len(store) == 2 and roles.shape == (model.num_layers, model.num_heads)
    expected = head_roles(
        positional_heads(store, threshold=0.5),
        syntactic_heads(score_syntax(corpus, store, on_mismatch="skip"), margin=0.0),
        rare_word_heads(store, frequencies, factor=1.5, alpha=0.5),
    )
    for role, mask in expected.masks.items():
        np.testing.assert_array_equal(roles.masks[role], mask)
    np.testing.assert_array_equal(roles.positional.offset, expected.positional.offset)
    again, _ = find_roles(corpus, model, frequencies, threshold=0.5, margin=0.0, factor=1.5, alpha=0.5)
    np.testing.assert_array_equal(again.specialised, roles.specialised)  # read back from the cached store


# --------------------------------------------------------------------------- float16 store vs float32 maps

N_EWT = 120  # EWT dev sentences (2,674 rows): numpy argmax differs by 0.022 here, tie_credit by 0.0006


@pytest.mark.slow
def test_positional_shares_from_the_float16_store_match_float32_maps(default_model_dir, tmp_path):
    """Issue #42: ties decided by float16 rounding moved head 1-3's share; tie-aware maxima agree within 0.005."""
    from bertology_utils.attention.extraction import attention_for, extract_attention
    from bertology_utils.core.errors import DataNotFoundError
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_treebank

    try:
        trees = load_treebank("dev")[:N_EWT]
    except DataNotFoundError as missing:
        pytest.skip(f"UD English EWT dev is not available: {missing.short()}")
    loaded = load_model()
    stored = positional_heads(extract_attention(trees, tmp_path / "ewt.zarr", loaded, progress=False))
    exact = positional_heads(attention_for(trees, loaded, too_long="skip", dtype=np.float32))
    assert stored.rows == exact.rows and stored.offset.shape == (loaded.num_layers, loaded.num_heads)
    assert stored.offset[0, 2] == exact.offset[0, 2] == -1  # head 1-3: the previous-word head
    assert abs(stored.share[0, 2] - exact.share[0, 2]) < 0.005
    np.testing.assert_array_less(np.abs(stored.share - exact.share), 0.005)
