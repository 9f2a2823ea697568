"""Vig (2019), bertviz's neuron view ("Deconstructing BERT, Part 2"): its query·key claim, checked against our numbers.

Vig's posts read a head's score for a key as the sum over dimensions of the elementwise product
of query and key, and observed that a head attending to [SEP] (delimiter-focused) or spread over
its own sentence (bag of words) needs only a few dimensions of that product to decide where to
attend, while a next-word head needs many (to tell which of many positions is next). The counts
come from :func:`bertology_utils.interventions.query_key.query_key_dimensions`; a head's pattern
from Clark et al.'s surface statistics (``bertology_utils.analyses.patterns.surface_statistics``:
"sep", "cls", "next", "entropy"). The posts give no numbers: the paper value is their
qualitative reading.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bertology_utils.papers.claims import Claim, Verdict, greater, head_grid, permutation_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PAPER", "SEP_BROAD", "NEXT_WORD", "pattern_groups", "qk_dimensions_by_pattern", "plot_query_key_dimensions"]

PAPER = "Vig 2019"
#: Group labels of :func:`pattern_groups`.
SEP_BROAD, NEXT_WORD = "[SEP]/broad", "next-word"


def _membership(
    sep_share: npt.ArrayLike,
    next_share: npt.ArrayLike,
    entropy: npt.ArrayLike | None,
    cls_share: npt.ArrayLike | None,
    uniform_entropy: float | None,
    broad_ratio: float,
    share: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(meets the [SEP]/broad definition, meets the next-word definition), each (layers, heads) bool."""
    sep = head_grid(sep_share, "sep_share").astype(np.float64)
    nxt = head_grid(next_share, "next_share", sep.shape).astype(np.float64)
    if cls_share is not None:
        sep = sep + head_grid(cls_share, "cls_share", sep.shape).astype(np.float64)
    broad = np.zeros(sep.shape, dtype=bool)
    if entropy is not None:
        values = head_grid(entropy, "entropy", sep.shape)
        if values.dtype == bool:
            broad = values
        else:
            if uniform_entropy is None or not math.isfinite(uniform_entropy):
                raise ValueError("entropy in nats needs uniform_entropy (a uniform head's entropy) to define broad")
            broad = np.asarray(values, dtype=np.float64) >= broad_ratio * uniform_entropy
    return (sep >= share) | broad, nxt >= share


def pattern_groups(
    sep_share: npt.ArrayLike,
    next_share: npt.ArrayLike,
    entropy: npt.ArrayLike | None = None,
    *,
    cls_share: npt.ArrayLike | None = None,
    uniform_entropy: float | None = None,
    broad_ratio: float = 0.9,
    share: float = 0.5,
) -> np.ndarray:
    """(layers, heads) labels: :data:`SEP_BROAD`, :data:`NEXT_WORD` or "" (neither, or both).

    A [SEP]/broad head puts at least ``share`` of its attention on [SEP] (plus [CLS] when
    ``cls_share`` is given), or is broad; a next-word head puts at least ``share`` on the next
    token. ``entropy`` is either boolean broad flags or each head's mean row entropy in nats, and
    then a head is broad when its entropy is at least ``broad_ratio`` times ``uniform_entropy``
    (a uniform head's, e.g. ``SurfaceStats.uniform_entropy``: the mean log row length). A head
    meeting both definitions belongs to neither group.
    """
    sep_broad, next_word = _membership(sep_share, next_share, entropy, cls_share, uniform_entropy, broad_ratio, share)
    labels = np.full(sep_broad.shape, "", dtype=object)
    labels[sep_broad & ~next_word] = SEP_BROAD
    labels[next_word & ~sep_broad] = NEXT_WORD
    return labels


def qk_dimensions_by_pattern(
    dims: npt.ArrayLike,
    sep_share: npt.ArrayLike,
    next_share: npt.ArrayLike,
    entropy: npt.ArrayLike | None = None,
    *,
    cls_share: npt.ArrayLike | None = None,
    uniform_entropy: float | None = None,
    broad_ratio: float = 0.9,
    share: float = 0.5,
    alpha: float = 0.05,
    n_permutations: int = 10_000,
    seed: int = 0,
    note: str = "",
) -> Claim:
    """ "[SEP]/broad heads need few query·key dimensions, next-word heads many".

    ``dims``: (layers, heads) dimensions needed per head, e.g. ``QueryKeyDimensions.median`` (a
    fraction of the head size); NaN heads are left out. Groups as :func:`pattern_groups`. The statistic is the
    difference of the groups' medians (next-word minus [SEP]/broad) over what relabelling the heads gives, with the
    interval of ``n_permutations`` seeded relabellings (:func:`~bertology_utils.papers.claims.permutation_interval`,
    level 1 - ``alpha``). Holds when it lies above 0 (next-word heads need more, beyond chance), differs when it
    lies at or below 0, inconclusive when it straddles 0: two heads a group never decide it. Not testable when
    either group has fewer than 2 heads. A one-sided Mann-Whitney U test is reported beside it.
    """
    values = head_grid(dims, "dims").astype(np.float64)
    sep_broad, next_word = _membership(sep_share, next_share, entropy, cls_share, uniform_entropy, broad_ratio, share)
    if sep_broad.shape != values.shape:
        raise ValueError(f"dims {values.shape} and the shares {sep_broad.shape} differ in shape")
    finite = np.isfinite(values)
    sep_dims, next_dims = values[sep_broad & ~next_word & finite], values[next_word & ~sep_broad & finite]
    n_sep, n_next = len(sep_dims), len(next_dims)
    testable = n_sep >= 2 and n_next >= 2
    u, p, median_next, median_sep = greater(next_dims, sep_dims)
    method = f"permutation, {n_permutations} relabellings of the two groups' heads"
    if testable:
        pooled = np.concatenate([next_dims, sep_dims])
        relabelled = np.random.default_rng(seed).permuted(np.tile(pooled, (n_permutations, 1)), axis=1)
        null = np.median(relabelled[:, :n_next], axis=1) - np.median(relabelled[:, n_next:], axis=1)
        interval = permutation_interval(median_next - median_sep, null, level=1 - alpha, method=method)
    else:
        interval = permutation_interval(math.nan, [], level=1 - alpha, method=method)
    verdict = Verdict.by_interval(interval) if testable else Verdict.NOT_TESTABLE
    heads = f"{n_sep} [SEP]/broad heads, {n_next} next-word heads"
    ours = (
        f"median {median_sep:.2f} ({n_sep} [SEP]/broad heads) vs {median_next:.2f} ({n_next} next-word heads); "
        f"over chance {interval}; one-sided Mann-Whitney U = {u:.1f}, p = {p:.2g}"
        if testable
        else f"{heads}: each group needs at least 2"
    )
    broad_rule = (
        f"or mean row entropy >= {broad_ratio:g} x a uniform head's"
        if entropy is not None and np.asarray(entropy).dtype != bool
        else "or flagged broad"
        if entropy is not None
        else "(no broad heads given)"
    )
    sep_rule = "[SEP]+[CLS]" if cls_share is not None else "[SEP]"
    return Claim(
        "qk_dimensions_by_pattern",
        "A head attending to [SEP] or spread over its sentence needs few dimensions of query x key to decide "
        "where to attend; a next-word head needs many",
        PAPER,
        "qualitative (neuron view): few active dimensions for [SEP] and bag-of-words heads, most for next-word heads",
        ours,
        verdict,
        f"groups: [SEP]/broad = {sep_rule} share >= {share:g} {broad_rule}; next-word = next-token share >= "
        f"{share:g} (heads in both left out). holds: the difference of medians next-word - [SEP]/broad, less its "
        f"permutation null's central {1 - alpha:.0%} range, lies above 0; differs: at or below 0; inconclusive: it "
        "straddles 0; not testable: a group has < 2 heads",
        {
            "sep_broad_heads": n_sep,
            "next_word_heads": n_next,
            "heads_in_both": int((sep_broad & next_word & finite).sum()),
            "median_dims_sep_broad": median_sep,
            "median_dims_next_word": median_next,
            "u_statistic": u,
            "p_value": p,
        },
        interval=interval,
        note=(
            "dimensions: per head, the fewest dimensions of q*k whose largest contributions reach a share of the "
            "margin between the best and second-best key (content logits only: the attention mask and MPNet's "
            "relative position bias are not products of dimensions; [CLS]/[SEP] queries left out)"
            + (f"; {note}" if note else "")
        ),
    )


def plot_query_key_dimensions(
    dims: npt.ArrayLike, groups: np.ndarray | None = None, *, title: str | None = None, label: str = "dimensions needed"
) -> Figure:
    """Left: ``dims`` (layers, heads) as a grid, layers and heads from 1. Right (with ``groups``, e.g. from
    :func:`pattern_groups`): a box and strip plot of the heads' values by group. Returns the figure."""
    import matplotlib.pyplot as plt

    values = head_grid(dims, "dims").astype(np.float64)
    fig, axes = plt.subplots(
        1, 2 if groups is not None else 1, figsize=(11 if groups is not None else 6, 4), squeeze=False
    )
    ax = axes[0, 0]
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label=label)
    layers, heads = values.shape
    ax.set(
        xticks=range(heads),
        xticklabels=range(1, heads + 1),
        yticks=range(layers),
        yticklabels=range(1, layers + 1),
        xlabel="head",
        ylabel="layer",
        title="per head",
    )
    if groups is not None:
        labels = head_grid(groups, "groups", values.shape)
        names = [name for name in (SEP_BROAD, NEXT_WORD) if (labels == name).any()]
        names += sorted({str(g) for g in labels.ravel()} - set(names) - {""})
        if (labels == "").any():
            names.append("")
        data = [values[(labels == name) & np.isfinite(values)] for name in names]
        ax = axes[0, 1]
        ax.boxplot(data, showfliers=False)
        jitter = np.random.default_rng(0)
        for i, part in enumerate(data, start=1):
            ax.scatter(i + jitter.uniform(-0.15, 0.15, len(part)), part, s=12, alpha=0.6, color="tab:blue")
        ax.set_xticks(
            range(1, len(names) + 1), [f"{name or 'other'}\n({len(d)} heads)" for name, d in zip(names, data)]
        )
        ax.set(ylabel=label, title="by pattern")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
