"""Tie-aware maxima: exact credit on constructed rows, float16 rounding keeps ties, and no stray argmax."""

import io
import tokenize
from pathlib import Path

import numpy as np
import pytest

import bertology_utils
from bertology_utils.core.maxima import resolution, tie_credit

ULP = 2.0**-12  # float16's spacing in [0.25, 0.5)


def test_resolution_is_one_float16_ulp_at_the_maximum():
    np.testing.assert_array_equal(resolution([0.3, 0.499, 0.5, 0.9, 1.0]), [ULP, ULP, 2 * ULP, 2 * ULP, 4 * ULP])
    assert resolution(0.4999) == 2 * ULP  # the maximum as float16 stores it: 0.5
    np.testing.assert_array_equal(resolution([0.0, -1.0, -np.inf]), 0.0)  # no credit there anyway
    assert resolution(0.4, np.float32) == np.spacing(np.float32(0.4))


@pytest.mark.parametrize(
    ("row", "credit"),
    [
        ([0.4, 0.4, 0.2], [0.5, 0.5, 0]),  # an exact tie
        ([0.4, 0.4 - ULP, 0.2 + ULP], [0.5, 0.5, 0]),  # one ulp apart: tied (float16 neighbours)
        ([0.4, 0.4 - ULP - 1e-7, 0.2], [1, 0, 0]),  # just outside
        ([0.3, 0.3, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3, 0]),
        ([0.0, 0.0, 0.0], [0, 0, 0]),  # no attention: no credit
        ([-np.inf, -np.inf], [0, 0]),  # every column excluded
    ],
)
def test_credit_of_constructed_rows(row, credit):
    np.testing.assert_array_equal(tie_credit(row), credit)


def test_explicit_tolerance_and_axis():
    row = [0.4, 0.4 - ULP / 2, 0.39]
    np.testing.assert_array_equal(tie_credit(row, tol=0), [1, 0, 0])  # exact ties only
    np.testing.assert_allclose(tie_credit(row, tol=0.01), [1 / 3, 1 / 3, 1 / 3])
    m = np.array([[0.1, 0.6], [0.6, 0.4]])  # column 0 peaks on row 1, column 1 on row 0
    np.testing.assert_array_equal(tie_credit(m, axis=0), [[0, 1], [1, 0]])
    stacked = np.stack([m, m.T])[None]  # (1, 2, 2, 2): vectorised over leading axes
    np.testing.assert_array_equal(tie_credit(stacked, axis=-2)[0, 1], tie_credit(m.T, axis=0))
    assert tie_credit(np.zeros((2, 3, 0))).shape == (2, 3, 0)


def test_storing_in_float16_never_breaks_a_tie():
    """Weights less than one float16 ulp apart stay within one ulp after rounding, so they stay tied."""
    rng = np.random.default_rng(0)
    top = rng.uniform(0.26, 0.49, 10_000)
    gap = rng.uniform(0, ULP, top.shape)
    rows = np.stack([top, top - gap, np.full_like(top, 0.1)], -1)
    np.testing.assert_array_equal(tie_credit(rows)[:, :2], 0.5)
    np.testing.assert_array_equal(tie_credit(rows.astype(np.float16))[:, :2], 0.5)


#: Every place the package takes an arg-maximum or ranks values, and why it is not an attention row's
#: maximum (those go through tie_credit). A new one fails the test below until it is listed here or converted.
NOT_ATTENTION_ROWS = {
    ("interventions/sink_interventions.py", 'kept[np.argsort(-mass, kind="stable")[:others]] = True'): (
        "the sink heads that park most, by their mean attention on sinks"
    ),
    ("interventions/sink_interventions.py", 'order = np.argsort(indices, kind="stable")'): "corpus order of items",
    ("interventions/sinks.py", "modal = [np.bincount(column).argmax() for column in self.peak_dim.T]"): (
        "the most frequent dimension of the largest activation"
    ),
    ("interventions/sinks.py", 'order = [int(d) for d in np.argsort(-counts, kind="stable")[:k] if counts[d] > 0]'): (
        "dimensions by their count of outlier activations"
    ),
    ("interventions/sinks.py", 'order = np.argsort(indices, kind="stable")  # corpus order, whatever the batching'): (
        "corpus order of items"
    ),
    (
        "papers/sinks.py",
        'peak = int(np.argmax(observed["log_ratio"]))',
    ): "the hidden state with the largest activation ratio",
    ("analyses/coreference.py", "return Head.argmax(self.accuracy)"): "best head of an accuracy grid",
    ("analyses/coreference.py", "pick = int(flat[half == chosen_on].mean(0).argmax())"): "held-out head choice",
    (
        "analyses/probes/estimators.py",
        "best.append(scores.argmax(-1).flatten().index_select(0, batch.positions))  # its real words, in order",
    ): "a trained probe's scores",
    (
        "analyses/pattern_models.py",
        "return self.classes_[self.decision_function_features(features).argmax(-1)]",
    ): "a classifier's class scores",
    ("analyses/pattern_cnn.py", "return self.classes_[self.logits_images(images).argmax(-1)]"): "class logits",
    ("analyses/probe_runs.py", "heaviest, best = Head.argmax(grid), Head.argmax(right)"): (
        "the probe's heaviest weight and the best head of an accuracy grid"
    ),
    (
        "analyses/head_roles.py",
        "best = counts[..., order].argmax(-1)  # the modal offset of each head's credit",
    ): "modal offset of credit already summed over rows (ties: nearest 0)",
    ("analyses/head_roles.py", "best = Head.argmax(acc) if found else None"): "best head of an accuracy grid",
    ("analyses/head_roles.py", "o = int(base.argmax())"): "best fixed-offset baseline",
    ("analyses/syntax/result.py", "d, layer, head = np.unravel_index(int(acc.argmax()), acc.shape)"): "best head",
    ("analyses/syntax/result.py", "o = int(base.argmax())"): "best fixed-offset baseline",
    ("analyses/syntax/result.py", "picks = flat.argmax(-1)  # the first maximum in (direction, layer, head) order"): (
        "held-out head choice"
    ),
    (
        "analyses/syntax/result.py",
        "offset = int(np.nan_to_num(self.baseline_accuracy[r], nan=-1.0).argmax())",
    ): "best fixed-offset baseline",
    (
        "analyses/syntax/result.py",
        "best = np.nan_to_num(grids, nan=-1.0).argmax(0)",
    ): "each head's best relation by accuracy",
    (
        "analyses/clustering/embedding.py",
        'index = np.argsort(d, axis=1, kind="stable")[:, :k]',
    ): "nearest heads by distance",
    (
        "analyses/pattern_types.py",
        'dominant = np.where(total[..., 0] > 0, np.asarray(TYPES, dtype=object)[counts.argmax(-1)], "")',
    ): "a head's most frequent pattern type, from counts",
    (
        "interventions/query_key.py",
        "top = logits.topk(2, dim=-1).indices  # (..., queries, 2)",
    ): "float32 q·k logits in memory, never stored; the margin needs one winner and one runner-up (exact ties "
    "are counted apart in n_ties)",
    ("interventions/query_key.py", "count = reached.int().argmax(-1) + 1"): "first dimension count reaching keep",
    ("interventions/attribution.py", "index = values.detach().argmax(-1)"): "a model's predicted class",
    ("interventions/attribution.py", "return logits.argmax(-1)"): "a model's predicted class",
    ("interventions/quadrature.py", "todo.append((i, int(np.argmax(p.errors))))"): "panel with the largest error",
    ("interventions/scoring.py", "pred = p.argmax(-1) if p.ndim > 1 else p.astype(np.int64)"): "predictions",
    (
        "interventions/scoring.py",
        "majority = int(np.bincount(ids, minlength=spec.num_labels).argmax())",
    ): "majority label",
    ("interventions/l0.py", 'order = np.argsort(fractions, kind="stable")'): "heads by gate fraction",
    ("interventions/scoring.py", 'order = np.argsort(values, kind="stable")'): "ranks for a Spearman correlation",
    ("interventions/pruning.py", "first = below.argmax(-1)  # the first step under the line"): (
        "first pruning step under the kept share"
    ),
    (
        "interventions/gated_logits.py",
        "return logits.argmax(-1).astype(np.min_scalar_type(max(logits.shape[-1] - 1, 0)))",
    ): "a model's predicted class",
    (
        "interventions/gated_logits.py",
        "first = torch.where(touched.any(-1), touched.float().argmax(-1), torch.tensor(gate_stack.shape[1]))",
    ): "first pruning step that touches a head",
    ("papers/hewitt.py", "best = fitted[int(np.nanargmax(uuas))]"): "the layer of highest UUAS",
    ("papers/kovaleva.py", "lowest = set(np.argsort(by_layer)[:2].tolist())"): "layers by similarity",
    ("papers/kovaleva.py", "best = int(np.nanargmax(d))"): "the head that improves most",
    ("papers/kovaleva.py", "best = int(np.nanargmax(d)) if np.isfinite(d).any() else None"): "layer differences",
    ("papers/clark/patterns.py", 'order = np.argsort(-share, kind="stable")'): "layers by attention share",
    ("core/batching.py", 'order = np.argsort(sizes, kind="stable")'): "items by size",
    ("core/heads.py", "def argmax(cls, grid: HeadMatrix) -> Head:"): "Head.argmax: best head of a grid",
    ("core/heads.py", "layer, head = np.unravel_index(int(np.nanargmax(values)), values.shape)"): "Head.argmax",
}
PICKS = {"argmax", "nanargmax", "argsort", "topk", "idxmax"}


def _picks() -> set[tuple[str, str]]:
    """(path under the package, stripped line) of every pick in code (not in strings or comments)."""
    root = Path(bertology_utils.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME and token.string in PICKS:
                found.add((path.relative_to(root).as_posix(), lines[token.start[0] - 1].strip()))
    return found


def test_the_package_takes_a_rows_maximum_only_through_tie_credit():
    found = _picks()
    stray = sorted(found - NOT_ATTENTION_ROWS.keys())
    assert not stray, (
        "an arg-maximum outside bertology_utils.core.maxima: use tie_credit for an attention row's maximum, "
        f"or list it in NOT_ATTENTION_ROWS with the reason it is not one: {stray}"
    )
    assert not NOT_ATTENTION_ROWS.keys() - found, f"stale entries: {sorted(NOT_ATTENTION_ROWS.keys() - found)}"
