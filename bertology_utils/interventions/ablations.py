"""Is [SEP] a no-op? Test the reading directly: move attention away from a kind of token, layer by layer.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Figure 3) read small gradients
of the loss with respect to attention to [SEP] as a sign that [SEP] is a "no-op"
(:mod:`~bertology_utils.interventions.gradients` measures them). Here the attention itself is moved: layer by
layer, the attention every head puts on [SEP] (or [CLS]) is taken away — dropped (``zero``: the head loses those
tokens' value vectors) or moved to the other tokens in proportion (``renormalise``: as if [SEP] were masked out) —
and the change of the final hidden states, of the objective's prediction and of its loss is measured against the
control: the same mass, row by row, taken off one random non-special token of the item.

* :func:`remove_attention_to` / :func:`move_matched_mass` — move the attention a head puts on some tokens
  elsewhere (or drop it), and the matched-mass control on one other token; :func:`ablate_tokens` /
  :func:`ablate_matched_random` do it inside a model, at the edit point of
  :mod:`~bertology_utils.interventions.editing`;
* :func:`ablation_curves` / :func:`ablation_summary` — the change each makes, layer by layer, and the ratio of
  target to control with its interval over the items.

Token kinds, batches and objectives: :mod:`bertology_utils.interventions.objectives`.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from bertology_utils.core.architectures import Model, self_attention_modules, shares_layers
from bertology_utils.core.batching import to_device
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import evaluating
from bertology_utils.core.typing import AttentionMaps, ItemValues, TokenMask, TokenVectors
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.data import Corpus
from bertology_utils.interventions.editing import (
    capture_attention,
    edit_attention,
    record_layer_outputs,
    replay_layers_below,
)
from bertology_utils.interventions.objectives import (
    DEFAULT_MAX_TOKENS,
    KIND_COLORS,
    KIND_LABELS,
    KINDS,
    OTHER,
    PUNCT,
    Objective,
    TokenBatch,
    token_batches,
)
from bertology_utils.interventions.results_cache import cached_results

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "REMOVAL_MODES",
    "remove_attention_to",
    "move_matched_mass",
    "negative_share",
    "ablate_tokens",
    "ablate_matched_random",
    "ITEM_MEASURES",
    "ablation_curves",
    "ablation_summary",
    "plot_ablation_curves",
]

#: How :func:`remove_attention_to` treats the attention it takes away.
REMOVAL_MODES = ("zero", "renormalise")
#: The measures :func:`ablation_curves` keeps each item's value of (``<measure>_items``), for intervals over items.
ITEM_MEASURES = ("hidden_change", "output_change", "loss_change")


# --------------------------------------------------------------------------- moving attention mass


def _key_mask(targets: torch.Tensor, probs: AttentionMaps) -> torch.Tensor:
    """A (B, 1, 1, T) or (B, 1, T, T) float mask from a (B, T) or (B, T, T) bool mask."""
    targets = targets.to(device=probs.device)
    if targets.dim() == 2:
        targets = targets[:, None, None, :]
    elif targets.dim() == 3:
        targets = targets[:, None, :, :]
    return targets.to(probs.dtype)


def remove_attention_to(probs: AttentionMaps, targets: torch.Tensor, mode: str = "renormalise") -> AttentionMaps:
    """Take away the attention each row puts on ``targets`` (bool, (B, T)).

    ``mode="zero"``: the attention is dropped, rows sum to 1 minus what they lost (the head's
    output loses exactly those tokens' value contributions). ``mode="renormalise"``: the row
    is rescaled to sum to 1 over the remaining tokens, so the mass moves to them in proportion
    to their attention (as if the targets had been masked out of the softmax). A row with no
    attention on the targets is returned bit for bit. A row that had all its attention on the
    targets keeps zero attention under both modes.

    :param probs: ``(B, H, T, T)`` one layer's attention.
    :param targets: ``(B, T)`` bool, the keys whose attention is taken (or ``(B, T, T)`` per query).
    :param mode: ``zero`` or ``renormalise``.
    :returns: ``(B, H, T, T)`` the edited attention.
    """
    if mode not in REMOVAL_MODES:
        raise ValueError(f"mode must be one of {REMOVAL_MODES}, not {mode!r}")
    mask = _key_mask(targets, probs)
    removed = (probs * mask).sum(-1, keepdim=True)
    kept = probs * (1 - mask)
    if mode == "zero":
        return kept
    return kept / _row_total(kept, removed > 0)


def _row_total(kept: torch.Tensor, changed: torch.Tensor) -> torch.Tensor:
    """What to divide rows by to make them sum to 1 again.

    Exactly 1 where nothing changed (those rows stay bit for bit), the sum of what is left
    elsewhere (never ``1 - removed``, which cancels catastrophically when almost everything
    was removed), and 1 for rows with nothing left (they stay all zero).
    """
    total = kept.sum(-1, keepdim=True)
    return torch.where(changed & (total > 0), total, torch.ones_like(total))


def move_matched_mass(
    probs: AttentionMaps, reference: TokenMask, token: ItemValues, mode: str = "renormalise"
) -> AttentionMaps:
    """The control for :func:`remove_attention_to`: move the same mass off one other token.

    For each row, ``m`` = the attention on ``reference`` (bool, (B, T)) is taken off
    the single key ``token[b]`` (an index per item) instead. ``mode="zero"``: that mass is
    dropped; ``mode="renormalise"``: it goes to the row's other keys in proportion to their
    attention. The row loses ``m`` of the token's value vector instead of the reference
    tokens' — a matched, linear counterfactual. Where the token had less than ``m``, its
    weight becomes negative (count these with :func:`negative_share`).

    :param probs: ``(B, H, T, T)`` one layer's attention.
    :param reference: ``(B, T)`` bool, the keys whose mass is matched.
    :param token: ``(B,)`` the key each item's mass is taken off.
    :param mode: ``zero`` or ``renormalise``.
    :returns: ``(B, H, T, T)`` the edited attention.
    """
    if mode not in REMOVAL_MODES:
        raise ValueError(f"mode must be one of {REMOVAL_MODES}, not {mode!r}")
    mass = (probs * _key_mask(reference, probs)).sum(-1, keepdim=True)  # (B, H, Q, 1)
    onehot = torch.zeros(probs.shape[0], probs.shape[-1], dtype=torch.bool, device=probs.device)
    onehot[torch.arange(probs.shape[0], device=probs.device), token.to(probs.device)] = True
    at_token = _key_mask(onehot, probs)  # (B, 1, 1, K)
    moved = probs - mass * at_token
    if mode == "zero":
        return moved
    others = probs * (1 - at_token)
    return moved + mass * (others / _row_total(others, mass > 0))


def negative_share(
    probs: AttentionMaps, reference: TokenMask, token: ItemValues, valid_rows: TokenMask | None = None
) -> ItemValues:
    """Per item (B,): share of (row, head) pairs where ``token`` had less attention than the ``reference`` mass.

    Those are the rows where :func:`move_matched_mass` gives the token a negative weight.
    ``valid_rows`` (bool, (B, T)) restricts the count to real attending tokens.

    :param probs: ``(B, H, T, T)`` one layer's attention, before the move.
    :param reference: ``(B, T)`` bool, the keys whose mass is matched.
    :param token: ``(B,)`` the key each item's mass is taken off.
    :param valid_rows: ``(B, T)`` the attending rows counted (None: all).
    :returns: ``(B,)`` shares in [0, 1].
    """
    mass = (probs * _key_mask(reference, probs)).sum(-1)  # (B, H, Q)
    on_token = probs[torch.arange(probs.shape[0], device=probs.device), :, :, token.to(probs.device)]
    below = (on_token < mass).to(probs.dtype)
    if valid_rows is None:
        return below.mean((1, 2))
    weight = valid_rows[:, None, :].to(below).expand_as(below)
    return (below * weight).sum((1, 2)) / weight.sum((1, 2)).clamp_min(1)


@contextlib.contextmanager
def ablate_tokens(
    model: Model, targets: TokenMask, layers: Sequence[int] | None = None, mode: str = "renormalise"
) -> Iterator[None]:
    """In ``layers`` (0-based; None: all), every head's attention to ``targets`` (bool, (B, T)) is removed.

    :param model: the model.
    :param targets: ``(B, T)`` bool, the keys whose attention is taken (:func:`remove_attention_to`).
    :param layers: the layers edited (from 0; None: all).
    :param mode: ``zero`` or ``renormalise``.
    :returns: a context manager.
    """
    chosen = None if layers is None else set(int(layer) for layer in layers)

    def edit(layer: int, probs: AttentionMaps) -> AttentionMaps | None:
        if chosen is not None and layer not in chosen:
            return None
        return remove_attention_to(probs, targets, mode)

    with edit_attention(model, edit):
        yield


@contextlib.contextmanager
def ablate_matched_random(
    model: Model,
    reference: TokenMask,
    token: ItemValues,
    layers: Sequence[int] | None = None,
    mode: str = "renormalise",
) -> Iterator[None]:
    """The control of :func:`ablate_tokens`: in ``layers``, the mass on ``reference`` is taken off ``token`` instead.

    :param model: the model.
    :param reference: ``(B, T)`` bool, the keys whose mass is matched (:func:`move_matched_mass`).
    :param token: ``(B,)`` the key each item's mass is taken off.
    :param layers: the layers edited (from 0; None: all).
    :param mode: ``zero`` or ``renormalise``.
    :returns: a context manager.
    """
    chosen = None if layers is None else set(int(layer) for layer in layers)

    def edit(layer: int, probs: AttentionMaps) -> AttentionMaps | None:
        if chosen is not None and layer not in chosen:
            return None
        return move_matched_mass(probs, reference, token, mode)

    with edit_attention(model, edit):
        yield


# --------------------------------------------------------------------------- curves


def _random_tokens(batch: TokenBatch, seed: int) -> ItemValues:
    """(B,) one random non-special token per item (punctuation or other), seeded by (seed, item index)."""
    kinds = batch.kinds.cpu().numpy()
    chosen = np.zeros(len(batch.items), dtype=np.int64)
    for b, item in enumerate(batch.items):
        candidates = np.flatnonzero((kinds[b] == PUNCT) | (kinds[b] == OTHER))
        if len(candidates) == 0:
            raise BertologyError(f"item {item.item_id} has no non-special token to serve as the control")
        chosen[b] = np.random.default_rng([seed, item.index, 1]).choice(candidates)
    return to_device(chosen, batch.input_ids.device)


def _hidden_change(base: TokenVectors, new: TokenVectors, real: TokenMask) -> ItemValues:
    """(B,) mean over real tokens of ||h' - h|| / ||h||."""
    relative = (new - base).float().norm(dim=-1) / base.float().norm(dim=-1).clamp_min(1e-12)
    weights = real.to(relative.dtype)
    return (relative * weights).sum(-1) / weights.sum(-1).clamp_min(1)


def ablation_curves(
    items: Iterable,
    objective: Objective,
    *,
    targets: Sequence[str] = ("sep", "cls"),
    modes: Sequence[str] = REMOVAL_MODES,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    batch_size: int = 16,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    progress: bool = True,
    cache: bool = False,
) -> pd.DataFrame:
    """Move the attention on ``targets`` away, one layer at a time, against the matched random-token control.

    For each target kind, mode (``zero`` / ``renormalise``) and layer (0-based in ``layers``;
    None: all), every head of that layer loses its attention to the target tokens, and
    separately the same mass, row by row, is taken off one random non-special token of the
    item (same token in every layer). Returns one row per (layer from 1, target, intervention
    "target"/"control", mode) with item means of:

    * ``mass``: attention moved, per attending row and head;
    * ``hidden_change``: mean over real tokens of ||h' - h|| / ||h|| of the final hidden states;
    * ``output_change``: the objective's own measure (``objective.output_change_name``);
    * ``loss_change``: mean change of the objective's loss;
    * ``negative_share``: for the control, the share of (row, head) pairs where the random
      token had less attention than the mass taken off it (its weight went negative);

    plus ``*_se`` standard errors over items, and for each of :data:`ITEM_MEASURES` the items' own values
    (``<measure>_items``: an array per row, the items in the same order in every row), which
    :func:`ablation_summary` resamples for its intervals. ``DataFrame.attrs`` holds the objective's name,
    the output-change measure, and ``null_change``: the largest hidden-state change caused by
    an ablation of nothing (0 when the machinery is exact).

    An ablation at layer ``l`` reuses the unablated pass's outputs of the layers below ``l``
    (:func:`~bertology_utils.interventions.editing.replay_layers_below`): the same numbers, at
    about half the model's cost per setting on average. A model whose layers share one module (ALBERT)
    runs every pass in full: no layer there has an output of its own to replay.

    ``cache``: store the curves in the results cache (:mod:`~bertology_utils.interventions.results_cache`) and
    reuse them when the model's weights, the items, the objective (:meth:`Objective.cache_key`; never
    for an objective without one) and every setting above are the same.

    :param items: sentences or sentence pairs (anything :meth:`~bertology_utils.data.Corpus.of` takes).
    :param objective: whose prediction and loss are compared.
    :param targets: the kinds of token whose attention is moved: ``sep``, ``cls``, ``punct``.
    :param modes: ``zero`` and/or ``renormalise`` (:data:`REMOVAL_MODES`).
    :param layers: the layers (from 0) ablated one at a time; None: all.
    :param seed: picks each item's control token.
    :param batch_size: items per pass.
    :param max_tokens: longer items are skipped (None: what the model takes).
    :param progress: show a progress bar of the passes.
    :param cache: read and store the curves in the results cache.
    :returns: the curves, one row per (layer, target, intervention, mode).
    """
    loaded = objective.loaded
    n_layers = len(self_attention_modules(loaded.model, shared=True))
    layers = list(range(n_layers)) if layers is None else [int(layer) for layer in layers]
    unknown = [t for t in targets if t not in ("sep", "cls", "punct")]
    if unknown:
        raise ValueError(f"targets must be among 'sep', 'cls', 'punct', not {unknown}")
    corpus = Corpus.of(items)
    batches, skipped = token_batches(loaded, corpus, batch_size=batch_size, max_tokens=max_tokens)
    if not batches:
        raise BertologyError(f"no items to ablate ({len(skipped)} skipped as longer than {max_tokens} tokens)")
    fields = {"targets": list(targets), "modes": list(modes), "layers": layers, "seed": seed}
    fields |= {"items": len(corpus), "batch_size": batch_size, "max_tokens": max_tokens}
    fields["per_item"] = list(ITEM_MEASURES)  # curves stored before the items' own values were kept: not these
    key = objective.cache_key()
    compute = functools.partial(_ablations, objective, batches, targets, modes, layers, seed, progress)
    arrays = cached_results(
        "ablation-curves", loaded, corpus.sha256, {**fields, "objective": key}, compute, cache and bool(key)
    )
    columns = [str(c) for c in arrays["columns"]]
    frame = pd.DataFrame({c: arrays[f"column {c}"] for c in columns})
    for name in ITEM_MEASURES:  # (rows, items) arrays: one array per row
        frame[f"{name}_items"] = list(np.asarray(arrays[f"items {name}"], dtype=np.float64))
    frame.attrs.update(
        objective=objective.name,
        output_change=objective.output_change_name,
        null_change=float(arrays["null_change"]),
        skipped=len(skipped),
        model=loaded.name,
    )
    return frame


def _ablations(
    objective: Objective,
    batches: list[TokenBatch],
    targets: Sequence[str],
    modes: Sequence[str],
    layers: list[int],
    seed: int,
    progress: bool,
) -> dict[str, np.ndarray]:
    """:func:`ablation_curves`' passes: its frame as one array per column (strings as str), and the null change."""
    loaded = objective.loaded
    # every value stays on the device until all passes ran: a read per pass would wait for a GPU at every pass
    records: dict[tuple, dict[str, list[torch.Tensor]]] = {}
    null_changes: list[torch.Tensor] = []
    shared = shares_layers(loaded.model)  # one module at every depth: nothing to record or replay
    with evaluating(loaded.model):
        total = len(batches) * (1 + len(targets) * len(modes) * len(layers) * 2)
        with torch.no_grad(), tqdm(total=total, desc="ablations", unit="pass", disable=not progress) as bar:
            for batch in batches:
                batch = objective.prepare(batch)
                recording: contextlib.AbstractContextManager[dict] = (
                    contextlib.nullcontext({}) if shared else record_layer_outputs(loaded.model)
                )
                with capture_attention(loaded.model, retain_grad=False) as captured, recording as below:
                    base = objective.forward(batch)
                probs = torch.stack(list(captured.probs), 1).float()  # (B, L, H, T, T)
                real = batch.real
                with ablate_tokens(loaded.model, torch.zeros_like(real), None, "renormalise"):
                    nothing = objective.forward(batch)
                null_changes.append((nothing.hidden - base.hidden).abs().max())
                bar.update(1)
                token = _random_tokens(batch, seed)
                rows = real.to(probs.dtype)
                for target in targets:
                    reference = batch.kinds == KINDS.index(target)
                    mass = (probs * reference[:, None, None, None, :].to(probs.dtype)).sum(-1)  # (B, L, H, Q)
                    mass = (mass * rows[:, None, None, :]).sum(-1) / rows.sum(-1)[:, None, None]  # (B, L, H)
                    mass = mass.mean(-1)  # (B, L)
                    for mode in modes:
                        for layer in layers:
                            for kind, context in (
                                ("target", ablate_tokens(loaded.model, reference, [layer], mode)),
                                ("control", ablate_matched_random(loaded.model, reference, token, [layer], mode)),
                            ):
                                replay = (
                                    contextlib.nullcontext()
                                    if shared
                                    else replay_layers_below(loaded.model, layer, below)
                                )
                                with replay, context:
                                    new = objective.forward(batch)
                                values = {
                                    "mass": mass[:, layer],
                                    "hidden_change": _hidden_change(base.hidden, new.hidden, real),
                                    "output_change": objective.output_change(base, new, batch),
                                    "loss_change": new.losses - base.losses,
                                }
                                if kind == "control":
                                    values["negative_share"] = negative_share(probs[:, layer], reference, token, real)
                                entry = records.setdefault((layer + 1, target, kind, mode), {})
                                for name, value in values.items():
                                    entry.setdefault(name, []).append(value.detach().double())
                                bar.update(1)
    rows_out = []
    for (layer, target, kind, mode), entry in records.items():
        row = {"layer": layer, "target": target, "intervention": kind, "mode": mode}
        for name, chunks in entry.items():
            samples = torch.cat(chunks).cpu().numpy()
            row[name] = float(samples.mean())
            row[f"{name}_se"] = float(samples.std(ddof=1) / np.sqrt(len(samples))) if len(samples) > 1 else np.nan
            if name in ITEM_MEASURES:
                row[f"{name}_items"] = samples
        row["items"] = int(sum(len(c) for c in entry["mass"]))
        rows_out.append(row)
    frame = pd.DataFrame(rows_out).sort_values(["target", "mode", "intervention", "layer"], ignore_index=True)
    per_item = {f"items {name}": np.stack(frame.pop(f"{name}_items").to_list()) for name in ITEM_MEASURES}
    arrays = {f"column {c}": frame[c].to_numpy() for c in frame.columns}
    arrays = {name: a.astype(str) if a.dtype == object else a for name, a in arrays.items()}  # npz: no pickle
    columns = np.asarray(frame.columns, dtype=str)
    null_change = float(torch.stack(null_changes).max())  # every batch's (ablation_curves refuses no batch)
    return {"columns": columns, "null_change": np.asarray(null_change), **arrays, **per_item}


def ablation_summary(
    curves: pd.DataFrame, measure: str = "hidden_change", *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per target and mode: ``measure`` averaged over layers for the target and the control, and their ratio.

    Also the mean mass moved, and the share of control rows where the random token's weight
    went negative (see :func:`ablation_curves`). With the items' own values (``<measure>_items``), the ratio's
    percentile bootstrap interval over the items (``ratio_low``, ``ratio_high`` at ``ratio_level``; ``items``
    resampled): each item's change averaged over the layers, target and control resampled together, the ratio
    that of their sums (``n_resamples`` draws, ``seed``). NaN bounds without per-item values, with fewer than 3
    items, or when the ratio is not finite.

    :param curves: what :func:`ablation_curves` returned.
    :param measure: the change compared: ``hidden_change``, ``output_change`` or ``loss_change``.
    :param level: the interval's confidence level.
    :param n_resamples: bootstrap draws.
    :param seed: the draws' seed.
    :returns: one row per target and mode: the target's and the control's change, ``ratio`` and its interval,
        ``items``, ``mean mass moved`` and, where measured, ``control rows with negative weight``.
    """
    table = curves.pivot_table(index=["target", "mode"], columns="intervention", values=measure, aggfunc="mean")
    by = curves.groupby(["target", "mode"])
    table = table.rename(columns={"target": f"{measure} (target)", "control": f"{measure} (control)"})
    table["ratio"] = table[f"{measure} (target)"] / table[f"{measure} (control)"]
    bounds = [_ratio_interval(curves, target, mode, measure, level, n_resamples, seed) for target, mode in table.index]
    table["ratio_low"] = [low for low, _, _ in bounds]
    table["ratio_high"] = [high for _, high, _ in bounds]
    table["ratio_level"] = level
    table["items"] = [n for _, _, n in bounds]
    table["mean mass moved"] = curves[curves.intervention == "target"].groupby(["target", "mode"])["mass"].mean()
    if "negative_share" in curves:
        table["control rows with negative weight"] = by["negative_share"].mean()
    table.columns.name = None
    return table.reset_index()


def _ratio_interval(
    curves: pd.DataFrame, target: str, mode: str, measure: str, level: float, n_resamples: int, seed: int
) -> tuple[float, float, int]:
    """:func:`ablation_summary`'s interval of one target and mode: (low, high, items); NaN bounds when it has none."""
    column = f"{measure}_items"
    if column not in curves:
        return math.nan, math.nan, 0
    part = curves[(curves.target == target) & (curves["mode"] == mode)]
    per_layer = {kind: part.loc[part.intervention == kind, column].to_list() for kind in ("target", "control")}
    arrays = per_layer["target"] + per_layer["control"]
    if not per_layer["target"] or not per_layer["control"] or len({len(a) for a in arrays}) != 1:
        return math.nan, math.nan, 0
    changes = {kind: np.mean(np.stack(arrays).astype(np.float64), axis=0) for kind, arrays in per_layer.items()}
    n = len(changes["target"])
    if n < 3 or not (np.isfinite(changes["target"]).all() and np.isfinite(changes["control"]).all()):
        return math.nan, math.nan, n
    weights = bootstrap_weights(n, n_resamples, seed)
    control = weights @ changes["control"]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (weights @ changes["target"]) / np.where(control != 0, control, np.nan)
    interval = Draws({"ratio": ratio}, f"{n} items", level).interval(ratio)
    return interval.low, interval.high, n


def plot_ablation_curves(curves: pd.DataFrame, measure: str = "hidden_change", title: str | None = None) -> Figure:
    """One panel per target and mode: ``measure`` by layer, target vs matched random-token control.

    Error bars are standard errors over items; grey bars (right axis) show the mass moved.

    :param curves: what :func:`ablation_curves` returned.
    :param measure: the change drawn: ``hidden_change``, ``output_change`` or ``loss_change``.
    :param title: the figure's title (None: none).
    :returns: the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    targets, modes = list(dict.fromkeys(curves.target)), list(dict.fromkeys(curves["mode"]))
    fig, axes = plt.subplots(
        len(targets),
        len(modes),
        figsize=(4.6 * len(modes) + 3, 3.2 * len(targets) + 0.6),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    names = {
        "hidden_change": "hidden-state change\n(mean ||h' - h|| / ||h||)",
        "output_change": curves.attrs.get("output_change", "output change"),
        "loss_change": "loss change",
    }
    # one legend for the figure: a legend in each panel covers its curves, and beside each, leaves no room for them
    legend: dict[str, Any] = {}
    for r, target in enumerate(targets):
        for c, mode in enumerate(modes):
            ax = axes[r, c]
            part = curves[(curves.target == target) & (curves["mode"] == mode)]
            mass = part[part.intervention == "target"].set_index("layer")["mass"]
            twin = ax.twinx()
            twin.bar(mass.index, mass.values, color="lightgrey", alpha=0.5, width=0.6)
            twin.set_ylim(0, max(1.0, float(mass.max()) * 1.1))
            if c == len(modes) - 1:
                twin.set_ylabel("mass moved", color="grey")
            ax.set_zorder(twin.get_zorder() + 1)
            ax.patch.set_visible(False)
            for kind, color, label in (
                ("target", KIND_COLORS[target], f"{KIND_LABELS[target]} attention moved"),
                ("control", "black", "same mass off a random token"),
            ):
                line = part[part.intervention == kind]
                legend[label] = ax.errorbar(
                    line.layer, line[measure], yerr=line.get(f"{measure}_se"), marker="o", capsize=3, color=color
                )
            ax.set(xlabel="layer" if r == len(targets) - 1 else "", xticks=sorted(part.layer.unique()))
            if c == 0:
                ax.set_ylabel(names.get(measure, measure))
            ax.set_title(f"{KIND_LABELS[target]}, {mode}")
    legend["mass moved (right axis)"] = Patch(color="lightgrey", alpha=0.5)
    fig.legend(legend.values(), legend.keys(), loc="outside right center")
    if title:
        fig.suptitle(title)
    return fig
