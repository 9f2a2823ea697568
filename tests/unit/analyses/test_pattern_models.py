"""The trained pattern-type classifiers: features, images, planted patterns, determinism, saving, evaluation."""

import json

import numpy as np
import pytest
import torch

from bertology_utils.analyses import pattern_models
from bertology_utils.analyses.pattern_cnn import CNNClassifier, map_images
from bertology_utils.analyses.pattern_maps import FEATURES, map_features, planted_layout, planted_map, planted_maps
from bertology_utils.analyses.pattern_models import (
    FeatureClassifier,
    TemplateClassifier,
    classify_items,
    classify_map,
    cross_validate,
    fit_classifiers,
    load_classifier,
)
from bertology_utils.analyses.pattern_types import TYPES
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError

SHIPPED = (pattern_models.MODELS_DIR / "best.json").is_file()


@pytest.fixture(scope="module")
def planted():
    return planted_maps(30, seed=0), planted_maps(20, seed=1)


def feature(values, name):
    return values[..., FEATURES.index(name)]


def test_features_of_known_maps():
    kinds, seg = planted_layout(6)
    n = len(kinds)
    identity = map_features(np.eye(n), kinds, seg)
    assert feature(identity, "offset_self") == pytest.approx(1.0)
    assert feature(identity, "row_entropy") == pytest.approx(0.0, abs=1e-9)
    assert feature(identity, "top_column") == pytest.approx(1 / n)
    assert feature(identity, "pair") == 0 and feature(identity, "block") == 0.5
    cls = np.zeros((n, n))
    cls[:, 0] = 3.0  # rows are renormalised
    values = map_features(cls, kinds, seg)
    assert feature(values, "cls") == pytest.approx(1.0) and feature(values, "vertical") == pytest.approx(1.0)
    assert feature(values, "top_column") == pytest.approx(1.0) and feature(values, "sep") == 0
    assert feature(values, "column_gini") == pytest.approx((n - 1) / n)
    word = np.zeros((n, n))
    word[:, 3] = 1.0  # a stripe on an ordinary word
    assert feature(map_features(word, kinds, seg), "top_word_column") == pytest.approx(1.0)
    uniform = map_features(np.full((n, n), 1 / n), kinds, seg)
    assert feature(uniform, "row_entropy") == pytest.approx(1.0)
    # an uneven pair attended uniformly keeps most attention "inside" its long segment, but lifts nothing
    kinds2, seg2 = planted_layout(30, 2)
    n2 = len(kinds2)
    uneven = map_features(np.full((n2, n2), 1 / n2), kinds2, seg2)
    assert feature(uneven, "block") > 0.85 and feature(uneven, "block_lift") == pytest.approx(0.0, abs=1e-12)
    inside = (seg2[:, None] == seg2[None, :]) * (kinds2 == 0)[None, :]
    assert feature(map_features(inside + 1e-12, kinds2, seg2), "block_lift") == pytest.approx(1.0, abs=1e-6)
    # many maps at once give the same numbers as one at a time
    stack = np.stack([np.eye(n), cls, word])
    assert np.allclose(map_features(stack, kinds, seg)[1], values)


def test_offset_shares_are_the_mean_over_word_rows_with_a_word_at_that_offset():
    rng = np.random.default_rng(0)
    kinds, seg = planted_layout(9, 6)
    kinds = kinds.copy()
    kinds[[4, 11]] = 2  # separators inside the pair too: their rows and columns never count
    n = len(kinds)
    maps = rng.random((3, n, n))
    values = map_features(maps, kinds, seg)
    p = maps / maps.sum(-1, keepdims=True)
    word = kinds == 0
    i, j = np.indices((n, n))
    for k, name in ((-1, "offset_prev"), (0, "offset_self"), (1, "offset_next")):
        band = ((j - i) == k) & word[None, :] & word[:, None]  # the cells at offset k between two words
        expected = (p * band).sum(-1)[:, band.any(-1)].mean(-1)
        assert np.allclose(feature(values, name), expected, rtol=0, atol=1e-15)
    shifted = np.roll(np.eye(n), 2, axis=1)  # every row on the word two to its right
    assert feature(map_features(shifted, kinds, seg), "offset_best") == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -0.1])
def test_broken_maps_are_refused(bad):
    kinds, seg = planted_layout(3)
    att = np.full((5, 5), 0.2)
    att[2, 3] = bad
    for encode in (map_features, map_images):
        with pytest.raises(ValueError, match="finite and non-negative"):
            encode(att, kinds, seg)


def test_images_shape_and_resizing():
    kinds, seg = planted_layout(2)  # 4 positions
    images = map_images(np.eye(4)[None, None].repeat(2, 1), kinds, seg, size=8)
    assert images.shape == (1, 2, 4, 8, 8) and images.dtype == np.float32
    expected = np.kron(np.eye(4), np.ones((2, 2)))  # a short map is repeated cell by cell
    assert np.allclose(images[0, 0, 0], expected)
    assert np.allclose(images[0, 0, 1][:, :2], 1.0) and np.allclose(images[0, 0, 1][:, 2:6], 0.0)
    long = map_images(np.full((64, 64), 1 / 64), *planted_layout(62), size=32)
    assert long.shape == (4, 32, 32) and np.allclose(long[0], 1 / 8)


@pytest.mark.parametrize(
    "estimator", [FeatureClassifier(anchors=0), CNNClassifier(epochs=30, anchors=0)], ids=["features", "cnn"]
)
def test_planted_patterns_are_learned(planted, estimator):
    (X, y), (Xt, yt) = planted
    predicted = estimator.fit(X, y).predict(Xt)
    assert (predicted == yt).mean() >= 0.95
    probabilities = estimator.predict_proba(Xt[:5])
    assert probabilities.shape == (5, len(TYPES)) and np.allclose(probabilities.sum(1), 1)


def test_template_misses_stripes_on_words_that_the_trained_ones_see(planted):
    (X, y), _ = planted
    rng = np.random.default_rng(5)
    stripes = []
    for _ in range(20):
        att, kinds, seg = planted_map("heterogeneous", rng)
        column = int(np.flatnonzero(kinds == 0)[len(kinds) // 3])
        att = 0.2 * att
        att[:, column] += 0.8
        stripes.append((att, kinds, seg))
    assert (TemplateClassifier().fit(X, y).predict(stripes) == "vertical").mean() == 0
    assert (FeatureClassifier(anchors=0).fit(X, y).predict(stripes) == "vertical").mean() >= 0.9


def test_anchors_are_planted_maps_added_to_the_fit():
    maps, labels = planted_maps(3, seed=4)
    assert len(maps) == 3 * len(TYPES) and sorted(set(labels)) == sorted(TYPES)
    again, _ = planted_maps(3, seed=4)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(maps, again))
    for kind in TYPES:
        att, kinds, seg = planted_map(kind, np.random.default_rng(1))
        assert np.allclose(att.sum(-1), 1) and att.shape == (len(kinds), len(kinds)) == (len(seg), len(seg))
    few = maps[:5], labels[:5]
    assert set(FeatureClassifier(anchors=2).fit(*few).classes_) == set(TYPES)
    assert set(FeatureClassifier(anchors=0).fit(*few).classes_) == set(labels[:5])
    with pytest.raises(ValueError, match="kind must be"):
        planted_map("stripes", np.random.default_rng(0))


def test_fitting_is_deterministic_and_saving_round_trips(planted, tmp_path):
    (X, y), (Xt, _) = planted
    a, b = CNNClassifier(epochs=3, seed=1).fit(X, y), CNNClassifier(epochs=3, seed=1).fit(X, y)
    for (name, p), q in zip(a.net_.state_dict().items(), b.net_.state_dict().values()):
        assert torch.equal(p, q), name
    a.save(tmp_path / "cnn")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cnn.json", "cnn.safetensors"]
    loaded = CNNClassifier.load(tmp_path / "cnn")
    assert np.array_equal(loaded.predict(Xt), a.predict(Xt)) and loaded.get_params() == a.get_params()
    f = FeatureClassifier().fit(X, y)
    f.save(tmp_path / "features.json")
    again = FeatureClassifier.from_json(json.loads((tmp_path / "features.json").read_text()))
    assert np.allclose(again.predict_proba(Xt), f.predict_proba(Xt))
    assert np.array_equal(FeatureClassifier().fit(X, y).coef_, f.coef_)


def test_cross_validation(planted):
    (X, y), _ = planted
    cv = cross_validate(FeatureClassifier(anchors=0), X, y, folds=3, n_boot=200)
    assert cv.macro_f1 >= 0.95 and cv.interval[0] <= cv.macro_f1 <= cv.interval[1] + 1e-12
    confusion = cv.confusion()
    assert confusion.to_numpy().sum() == len(y) and list(confusion.index) == list(TYPES)
    assert np.trace(confusion.to_numpy()) == (cv.predicted == y).sum()
    assert set(cv.recall) == set(TYPES)
    with pytest.raises(BertologyError, match="fewer than the 5 folds"):
        cross_validate(FeatureClassifier(), X[:12], y[:12], folds=5)


def test_bootstrap_macro_f1_equals_scikit_learns_on_each_resample():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    # block is rare, so some resamples lack it among their labels yet predict it: it must drop out of
    # those resamples' average while its false positives still lower the other types' precision
    labels = rng.choice(TYPES, 60, p=[0.3, 0.25, 0.2, 0.03, 0.22]).astype(object)
    predicted = np.where(rng.random(60) < 0.6, labels, rng.choice(TYPES, 60)).astype(object)
    rows = rng.integers(0, 60, (300, 60))
    expected = [
        f1_score(labels[r], predicted[r], labels=[t for t in TYPES if t in set(labels[r])], average="macro")
        for r in rows
    ]
    assert any("block" not in set(labels[r]) and "block" in set(predicted[r]) for r in rows)
    assert np.allclose(pattern_models._macro_f1_resampled(labels, predicted, rows), expected, rtol=0, atol=1e-12)


def test_fit_classifiers_writes_what_load_reads(planted, tmp_path):
    (X, y), (Xt, yt) = planted
    table = fit_classifiers(X, y, tmp_path, folds=3, cnn=CNNClassifier(epochs=5))
    assert list(table.index) == ["template", "features", "cnn"]
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["method"] in ("features", "cnn") and best["maps"] == len(y)
    gain = table.loc["cnn", "macro_f1"] - table.loc["features", "macro_f1"]
    assert best["method"] == ("cnn" if gain > table.loc["cnn", "se"] else "features") and table["se"].ge(0).all()
    features = load_classifier("features", str(tmp_path))
    assert (features.predict(Xt) == yt).mean() >= 0.95
    assert pattern_models.best_method(str(tmp_path)) == best["method"]


def test_broken_model_files_are_reported(tmp_path):
    (tmp_path / "features.json").write_text("{not json")
    with pytest.raises(BertologyError, match="features pattern classifier"):
        load_classifier("features", str(tmp_path))
    with pytest.raises(BertologyError, match="best.json"):
        pattern_models.best_method(str(tmp_path))
    with pytest.raises(ValueError, match="method must be"):
        load_classifier("forest", str(tmp_path))


@pytest.mark.skipif(not SHIPPED, reason="the shipped classifiers are not present")
@pytest.mark.parametrize("shape", [(2, 3), (4, 1)])
def test_shipped_classifiers_on_any_shape(shape):
    rng = np.random.default_rng(0)
    att, kinds, seg = planted_map("vertical", rng, pair=True)
    n = len(kinds)
    maps = np.broadcast_to(att, (*shape, n, n)).copy()
    item = ItemAttention(0, "x", tuple("w" * n), kinds, seg, maps, n)
    for method in ("features", "cnn", None):
        table = classify_items([item], dataset="toy", method=method)
        assert len(table) == shape[0] * shape[1] and set(table["type"]) <= set(TYPES)
        assert table["layer"].max() == shape[0] and table["head"].max() == shape[1]
    assert classify_map(att, kinds, seg) == table["type"].iloc[0]
    with pytest.raises(ValueError, match="thresholds belong"):
        classify_map(att, kinds, seg, thresholds={"most": 0.4}, method="cnn")


@pytest.mark.skipif(not SHIPPED, reason="the shipped classifiers are not present")
def test_shipped_classifier_reads_planted_patterns():
    maps, labels = planted_maps(20, seed=2)
    predicted = np.asarray([classify_map(*m) for m in maps], dtype=object)
    for t in TYPES:
        assert (predicted[labels == t] == t).mean() >= 0.8, t


def test_the_template_rules_load_like_the_trained_classifiers():
    att, kinds, seg = planted_map("diagonal", np.random.default_rng(1), pair=False)
    assert isinstance(load_classifier("template"), TemplateClassifier)
    assert classify_map(att, kinds, seg, method="template") == "diagonal"
    item = ItemAttention(0, "x", tuple("w" * len(kinds)), kinds, seg, att[None, None], len(kinds))
    assert classify_items([item], method="template")["type"].tolist() == ["diagonal"]
