"""Every figure the lecture shows, drawn as its notebook draws it on small synthetic inputs of a BERT-base's shape,
passes the slide rules once saved (core.figure_text: text of at least 16 px at the shown size, no overlaps).

A figure the notebook draws with seaborn or pandas directly is drawn here the way the notebook's cell draws it;
save_image fits it for the slide as it saves it, so the test measures what save_image writes.
"""

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from bertology_utils.core.figure_text import fit_for_slide, shown_width, text_boxes, text_problems  # noqa: E402
from bertology_utils.core.figures import DEFAULT_DPI, plot_layer_head_grid  # noqa: E402
from bertology_utils.present.lecture_outline import LECTURE  # noqa: E402

L, H = 12, 12  # BERT-base's layers and heads: the size the lecture's figures are drawn at
RNG = np.random.default_rng(0)
TASKS = ("SST-2", "MRPC", "RTE")
RELATIONS = [
    "nsubj", "dobj", "amod", "det", "case", "nmod", "advmod", "aux", "compound", "conj", "cc", "mark", "acl",
    "xcomp", "ccomp", "poss", "nummod", "advcl", "appos", "auxpass",
]  # fmt: skip


def _long_heads(columns, name):
    layer, head = np.divmod(np.arange(L * H), H)
    frame = pd.DataFrame({"layer": layer + 1, "head": head + 1, **{c: RNG.random(L * H) for c in columns}})
    return frame.melt(id_vars=["layer", "head"], value_vars=list(columns), var_name=name, value_name="share")


def relative_position_by_layer():
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    sns.stripplot(data=_long_heads(["previous", "self", "next"], "position"), x="layer", y="share", hue="position",
                  dodge=True, size=3, ax=ax)  # fmt: skip
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set_ylabel("mean attention share per head")
    ax.set_title("Attention to the previous / same / next token")
    return fig


def special_tokens_by_layer():
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    sns.stripplot(data=_long_heads(["cls", "sep", "period", "comma"], "target"), x="layer", y="share", hue="target",
                  dodge=True, size=3, ax=ax)  # fmt: skip
    ax.set_ylabel("mean attention share per head")
    ax.set_title("Attention to [CLS], [SEP], '.' and ',' (token level, treebank pairs)")
    return fig


def entropy_by_layer():
    import seaborn as sns

    data = pd.concat([_long_heads(["x"], "kind").assign(data=d) for d in ("treebank", "pairs")])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for ax, title in zip(axes, ("all rows", "[CLS] row")):
        sns.boxplot(data=data, x="layer", y="share", hue="data", ax=ax, fliersize=1)
        ax.axhline(0.5, color="k", ls="--", lw=1, label="uniform")
        ax.set_ylabel("entropy (nats)")
        ax.set_title(f"Entropy per head, {title}")
    axes[1].get_legend().remove()
    return fig


def best_head_vs_baseline():
    from bertology_utils.analyses.syntax.figures import plot_best_vs_baseline

    n = len(RELATIONS)
    table = pd.DataFrame(
        {"accuracy": RNG.random(n), "held_out_accuracy": RNG.random(n), "baseline_accuracy": RNG.random(n),
         "best_head": [f"{l}-{h}" for l, h in RNG.integers(1, 13, (n, 2))]},
        index=RELATIONS,
    )  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * n + 2), 4.5))
    plot_best_vs_baseline(table, ax=ax, title="bert-base-uncased: best head vs best fixed offset, per relation")
    fig.tight_layout()
    return fig


def coreference_head():
    """The notebook's layout: the heads' accuracy grid beside a 30-word example (bars stand in for
    ``plot_pronoun_attention``, whose input is a GAP item's attention)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(16, 4.5), gridspec_kw={"width_ratios": [1, 2.6]})
    plot_layer_head_grid(100 * RNG.random((L, H)), ax=left, title="GAP: accuracy of each head (%), best (5, 4)",
                         fmt=".0f", label="accuracy (%)", annotate=False)  # fmt: skip
    right.bar(range(30), RNG.random(30))
    right.set_xticks(range(30), [f"word{i}" for i in range(30)], rotation=90)
    fig.tight_layout()
    return fig


def uas_by_relation():
    frequent = pd.DataFrame(RNG.random((len(RELATIONS), 3)), index=RELATIONS,
                            columns=["attention only", "words + attention", "words only"])  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(frequent) + 2), 4.5))
    (100 * frequent).plot.bar(ax=ax, width=0.8)
    ax.set_ylabel("test UAS (%)")
    ax.set_ylim(0, 100)
    ax.set_title("bert-base-uncased: UAS by gold relation (test)")
    ax.legend(fontsize=8, ncols=3)
    fig.tight_layout()
    return fig


def structural_probes():
    from bertology_utils.analyses.probes import plot_structural_layers

    rows = [
        {"layer": k, "probe": probe, "rank": 384, "split": "test", "metric": metric, "value": value}
        for k in range(L + 1)
        for probe, metric, value in (
            ("distance", "uuas", 0.4 + 0.3 * RNG.random()),
            ("depth", "root_acc", RNG.random()),
        )
    ]
    fig, ax = plt.subplots(figsize=(9.0, 4.0))  # as notebook 04 draws it
    plot_structural_layers(pd.DataFrame(rows), {"Attn": 0.55, "Attn + words": 0.72}, ax=ax,
                           title="bert-base-uncased: structural probes per layer (test)")  # fmt: skip
    fig.tight_layout()
    return fig


def mds_behaviours():
    from bertology_utils.analyses.clustering.figures import plot_embedding

    coords = RNG.normal(size=(L * H, 2))
    names = ["entropy (nats)", *(f"share to {n}" for n in ("[CLS]", "[SEP]", "punctuation", "next", "previous"))]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for ax, title in zip(axes.flat, names):
        plot_embedding(coords, RNG.random(L * H), ax=ax, title=title, size=25)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def pattern_types_by_layer():
    from bertology_utils.analyses.pattern_types import TYPES
    from bertology_utils.present.pattern_figures import plot_type_shares_by_layer

    names = ["treebank", "pairs", "MRPC"]
    index = pd.MultiIndex.from_product([names, range(1, L + 1)], names=["dataset", "layer"])
    shares = pd.DataFrame(RNG.dirichlet(np.ones(len(TYPES)), len(index)), index=index, columns=list(TYPES))
    return plot_type_shares_by_layer(shares, names)


def _by_layer(columns):
    return pd.DataFrame(RNG.random((L, len(columns))), index=pd.Index(range(1, L + 1), name="layer"), columns=columns)


def special_token_shares_by_task():
    from bertology_utils.papers import kovaleva

    kinds = ["cls", "sep", "punct"]
    return kovaleva.plot_special_token_shares(
        {t: _by_layer(kinds) for t in TASKS}, {t: _by_layer(kinds) for t in TASKS}
    )


def attention_change():
    return plot_layer_head_grid(RNG.random((L, H)), title="SST-2: attention before vs after fine-tuning (cosine)",
                                label="cosine", cmap="magma").figure  # fmt: skip


def head_ablation():
    from bertology_utils.interventions.pruning import AblationResult
    from bertology_utils.papers import kovaleva

    result = AblationResult("SST-2", "accuracy", 0.91, RNG.normal(0, 0.01, (L, H)), RNG.normal(0, 0.05, L), 0.3,
                            RNG.normal(0, 0.01, (L, H)), RNG.normal(0, 0.05, L))  # fmt: skip
    return kovaleva.plot_head_ablation(result, task="SST-2")


def pretrained_vs_random_init():
    from bertology_utils.papers import kovaleva

    table = pd.DataFrame({"pre-trained": [0.92, 0.85, 0.66], "random init": [0.8, 0.68, 0.53],
                          "majority class": [0.51, 0.68, 0.53]}, index=pd.Index(TASKS, name="task"))  # fmt: skip
    return kovaleva.plot_init_comparison(table)


def _curves():
    from bertology_utils.interventions.pruning import PruningCurve

    fractions = np.linspace(0, 1, 15)
    curve = PruningCurve("importance", fractions, np.linspace(0.92, 0.5, 15), 0.92)
    randoms = [PruningCurve("random", fractions, np.sort(RNG.random(15))[::-1], 0.92) for _ in range(3)]
    return curve, randoms


def pruning_curve():
    from bertology_utils.interventions.pruning import plot_pruning_curves

    curve, randoms = _curves()
    return plot_pruning_curves(curve, randoms, keep=0.9, task="RTE").figure


def importance():
    from bertology_utils.papers import michel

    raw = RNG.random((L, H))
    return michel.plot_importance(raw / np.linalg.norm(raw, axis=1, keepdims=True), raw, RNG.normal(0, 0.01, (L, H)),
                                  (0.45, 1e-8), task="RTE")  # fmt: skip


def head_roles():
    from bertology_utils.analyses.head_roles import ROLES, plot_roles

    masks = {role: RNG.random((L, H)) < 0.2 for role in ROLES}
    roles = SimpleNamespace(masks=masks, shape=(L, H), untested=())
    return plot_roles(roles, confidence=RNG.random((L, H)),
                      title="bert-base-uncased: head roles (P positional, S syntactic, R rare-word), colour = confidence",
                      ).figure  # fmt: skip


def relevance():
    from bertology_utils.papers import voita

    return voita.plot_relevance(RNG.random((L, H)), RNG.random((L, H)), RNG.random((L, H)) < 0.1, task="SST-2")


def l0_pruning():
    from bertology_utils.interventions.l0 import plot_l0_pruning

    lambdas = np.array([0.0, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0])
    kept = np.array([144, 140, 120, 90, 40, 20, 3])
    scores = np.array([0.92, 0.92, 0.91, 0.9, 0.85, 0.8, 0.5])
    sweep = SimpleNamespace(lambdas=lambdas, kept=kept, scores=scores, n_heads=L * H,
                            curve=lambda: (1 - kept / (L * H), scores))  # fmt: skip
    curve, randoms = _curves()
    return plot_l0_pruning(sweep, curve, randoms, keep=0.9, task="SST-2")


def query_key_dimensions():
    from bertology_utils.papers import vig

    groups = RNG.choice([vig.SEP_BROAD, vig.NEXT_WORD, "other"], (L, H))
    return vig.plot_query_key_dimensions(RNG.random((L, H)), groups,
                                         title="bert-base-uncased: share of q·k dimensions needed for 90% of the margin")  # fmt: skip


def special_token_shares():
    from bertology_utils.interventions import mixing

    kinds = ["cls", "sep", "punct"]
    fig = mixing.plot_shares(_by_layer(kinds), _by_layer(kinds), kinds)
    fig.axes[0].set_title("bert-base-uncased: attention on special tokens, raw vs norm-weighted")
    return fig


def faithfulness_by_layer():
    from bertology_utils.interventions import mixing

    # every reference 08 judges against, and its methods
    references = ("blank_out", "input_x_gradient", "integrated_gradients", "attnlrp", "cp_lrp")
    methods = (
        "attention",
        "norm_layer",
        "rollout",
        "flow",
        "alti",
        "globenc",
        "value_zeroing",
        "value_zeroing_rollout",
    )
    rows = [{"reference": r, "method": m, "layer": layer, "mean": RNG.uniform(-0.2, 0.8)}
            for r in references for m in methods for layer in range(1, L + 1)]  # fmt: skip
    return mixing.plot_faithfulness(pd.DataFrame(rows))


def atlas_grid():
    grid = RNG.random((L, H))
    grid[0, :3] = np.nan
    return plot_layer_head_grid(grid, title="importance: bert-base-uncased", label="importance").figure


def ablation():
    from bertology_utils.interventions.ablations import plot_ablation_curves

    rows = [
        {"layer": layer, "target": target, "mode": mode, "intervention": kind, "mass": RNG.random(),
         "hidden_change": RNG.random(), "hidden_change_se": 0.05 * RNG.random()}
        for target in ("sep", "cls") for mode in ("zero", "renormalise") for kind in ("target", "control")
        for layer in range(1, L + 1)
    ]  # fmt: skip
    title = "bert-base-uncased — SST-2 classifier loss (fine-tuned bert-base-uncased)"
    return plot_ablation_curves(pd.DataFrame(rows), title=title)


def _sink_statistics():
    from bertology_utils.interventions.sinks import SinkStatistics

    n, e = 8, 16
    counts = np.zeros((L + 1, e), dtype=np.int64)
    counts[:, 3] = 40
    return SinkStatistics(
        model="bert-base-uncased", num_layers=L, num_heads=H, multiple=10.0, items=np.arange(n),
        mass=RNG.random((n, 3, L, H)) / 3, norm_share=RNG.random((n, 3, L, H)) / 3,
        sink_norm=RNG.uniform(0.1, 1, (n, L, H)), other_norm=np.ones((n, L, H)), update=RNG.random((n, L, H)),
        peak_mass=RNG.random((n, L, H)), layer_norm_share=RNG.random((n, 3, L)) / 3,
        ratio=RNG.uniform(5, 300, (n, L + 1)), inf_norm=RNG.uniform(1, 20, (n, L + 1)),
        kurtosis=RNG.uniform(3, 100, (n, L + 1)), peak_kind=RNG.integers(0, 4, (n, L + 1)),
        peak_dim=np.full((n, L + 1), 3), outliers_by_kind=RNG.integers(0, 20, (n, L + 1, 4)),
        tokens_by_kind=np.tile([1, 1, 3, 20], (n, 1)), outlier_dims=counts,
    )  # fmt: skip


def sink_heads():
    from bertology_utils.interventions.sink_figures import plot_sink_heads

    stats = _sink_statistics()
    fig = plot_sink_heads(stats, stats.sink_mass.mean(0) > 0.5)
    fig.suptitle("bert-base-uncased: sinks per head", y=1.02)
    return fig


def outliers_by_state():
    from bertology_utils.interventions.sink_figures import plot_outliers

    return plot_outliers(_sink_statistics())


#: The lecture's figures: (notebook, figure name pattern) as lecture_outline names them -> how the notebook draws it.
FIGURES = {
    ("01_patterns", "relative_position_by_layer"): relative_position_by_layer,
    ("01_patterns", "special_tokens_by_layer"): special_tokens_by_layer,
    ("01_patterns", "entropy_by_layer"): entropy_by_layer,
    ("03_syntax_coref", "best_head_vs_baseline"): best_head_vs_baseline,
    ("03_syntax_coref", "coreference_head"): coreference_head,
    ("04_probes", "uas_by_relation"): uas_by_relation,
    ("04_probes", "structural_probes"): structural_probes,
    ("05_clustering", "mds_behaviours"): mds_behaviours,
    ("01_patterns", "pattern_types_by_layer"): pattern_types_by_layer,
    ("07_head_roles", "special_token_shares_by_task"): special_token_shares_by_task,
    ("06_pruning", "attention_change_*"): attention_change,
    ("06_pruning", "head_ablation_*"): head_ablation,
    ("06_pruning", "pretrained_vs_random_init"): pretrained_vs_random_init,
    ("06_pruning", "pruning_curve_*"): pruning_curve,
    ("06_pruning", "importance_*"): importance,
    ("07_head_roles", "head_roles"): head_roles,
    ("07_head_roles", "relevance_*"): relevance,
    ("07_head_roles", "l0_pruning_*"): l0_pruning,
    ("07_head_roles", "query_key_dimensions"): query_key_dimensions,
    ("08_context_mixing", "special_token_shares"): special_token_shares,
    ("08_context_mixing", "faithfulness_by_layer"): faithfulness_by_layer,
    ("02_sep_noop", "ablation_*"): ablation,
    ("09_atlas", "atlas_grid"): atlas_grid,
    ("10_sinks", "sink_heads"): sink_heads,
    ("10_sinks", "outliers_by_state"): outliers_by_state,
}
#: Lecture figures not drawn here, each with why: their inputs are a model run's objects, not a few arrays.
NOT_DRAWN = {
    ("02_sep_noop", "attention_and_gradient"): "GradientStats of a model's gradients",
}


def test_every_lecture_figure_is_drawn_here_or_said_why_not():
    assert {t.figure for t in LECTURE} == set(FIGURES) | set(NOT_DRAWN)


def slide_problems(fig, *, fit=True):
    """The slide rules' problems of ``fig`` as save_image writes it (fitted) or as drawn (``fit=False``)."""
    if fit:
        fit_for_slide(fig)
    text = text_boxes(fig, dpi=DEFAULT_DPI)
    return text_problems(text, shown_width(text.size))


@pytest.mark.parametrize("figure", list(FIGURES), ids=[name for _, name in FIGURES])
def test_a_lecture_figure_passes_at_slide_size(figure):
    fig = FIGURES[figure]()
    try:
        assert slide_problems(fig) == []
    finally:
        plt.close("all")
