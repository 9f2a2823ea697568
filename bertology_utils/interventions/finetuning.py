"""Fine-tune sequence classifiers on GLUE tasks with small, fixed CPU budgets, cached on disk.

The recipe (:func:`fine_tune`) is BERT's (Devlin et al. 2019, `BERT <https://arxiv.org/abs/1810.04805>`_): AdamW,
linear warm-up then linear decay, gradient clipping at 1, dropout on while training; what changes between runs is
the *budget* (:class:`Budget`: how many training examples, epochs, batch size, learning rate, token limit), the
seed and where the weights start (``init="pretrained"``, or ``"random"`` for
Kovaleva et al.'s comparison with the same architecture from scratch: 2019, `Revealing the Dark Secrets of BERT
<https://arxiv.org/abs/1908.08593>`_). Everything that
decides the result goes into the cache key:

* the sha256 of the initial weights (the encoder plus its seeded, freshly initialised
  classifier head; a random-init copy hashes differently),
* the task and the sha256 of the training data,
* the budget and the seed, and the recipe version.

Checkpoints live in ``settings.cache_dir()/finetuned/<model>-<task>-<init>-s<seed>-<key>/``
(``save_pretrained`` files, the tokenizer, and ``bertology.json`` with the key, the metrics and
the sha256 of the fine-tuned weights). A cache hit is reloaded with
:func:`~bertology_utils.core.models.load_model` and its weights are hashed again: an entry that does
not match its record, or cannot be read, is reported as corrupt, deleted and rebuilt, never
used. Entries are written to a temporary folder and renamed into place, so an interrupted run
leaves no half-written entry behind.

Tasks and their dev-set metrics (GLUE's): :mod:`bertology_utils.interventions.scoring`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from bertology_utils.attention.alignment import item_texts
from bertology_utils.core import __version__, settings
from bertology_utils.core.batching import Padding, length_grouped_batches, plan_batches, to_device
from bertology_utils.core.cache import CacheWarning, cache_lock, entry_name, key_digest
from bertology_utils.core.determinism import derived_seed, deterministic_algorithms, host_dropout
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.files import atomic_path, atomic_remove, atomic_write_text
from bertology_utils.core.models import (
    LoadedModel,
    autocast,
    check_precision,
    load_model,
    random_init,
    resolve_precision,
)
from bertology_utils.data import Corpus, Task, load_glue
from bertology_utils.interventions.editing import classifier_inference, first_token_readout
from bertology_utils.interventions.scoring import TaskSpec, glue_metrics, label_ids, task_spec

__all__ = [
    "Budget",
    "DEFAULT_BUDGETS",
    "default_budget",
    "USER_TASK_BUDGET",
    "encode",
    "subsample",
    "predict",
    "evaluate",
    "fine_tune",
    "FineTuned",
    "FineTuneCacheWarning",
    "finetuned_cache_dir",
    "RECIPE_VERSION",
]

#: Bump when the training loop changes in a way that changes results: old cache entries stop matching.
RECIPE_VERSION = 2
_META_FILE = "bertology.json"


class FineTuneCacheWarning(CacheWarning):
    """A cache entry was corrupt (or unreadable) and is being rebuilt (a warning, not an error: the run goes on)."""


# --------------------------------------------------------------------------- budgets


@dataclass(frozen=True)
class Budget:
    """What one fine-tuning run may spend. All of it but ``eval_examples`` is part of the cache key.

    :param train_examples: training examples drawn with the run's seed (None: the whole train split).
    :param epochs: passes over them.
    :param batch_size: examples per step.
    :param learning_rate: AdamW's peak learning rate.
    :param weight_decay: AdamW's decay (not on biases and layer-norm weights).
    :param warmup_fraction: the share of the steps the learning rate warms up over, in [0, 1).
    :param max_tokens: the longest input, special tokens included (at least 4).
    :param group_by_length: batches of random examples of about the same length.
    :param eval_examples: dev examples scored after training (None: all).
    """

    #: Training examples, drawn without replacement with the run's seed (None: the whole train split).
    train_examples: int | None = 2000
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 5e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    #: Inputs longer than this many tokens (special tokens included) are truncated, longest text first.
    max_tokens: int = 128
    #: Batches of random examples of about the same length (core.batching.length_grouped_batches):
    #: less padding, so a step costs less; False: plain random batches.
    group_by_length: bool = True
    #: Dev examples scored after training (None: the whole dev split; a seeded subsample otherwise).
    eval_examples: int | None = None

    def __post_init__(self) -> None:
        if self.train_examples is not None and self.train_examples < 1:
            raise ValueError("train_examples must be at least 1 (or None for all)")
        if self.epochs < 1 or self.batch_size < 1 or self.max_tokens < 4:
            raise ValueError("epochs and batch_size must be at least 1, max_tokens at least 4")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError("warmup_fraction must be in [0, 1)")

    def as_dict(self) -> dict:
        """The budget's fields by name (what the cache key and the record hold).

        :returns: field name -> value.
        """
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """The budget in one line, for a reader.

        :returns: e.g. "2000 training examples x 1 epoch(s), batch 16 (grouped by length), lr 0.0001, ...".
        """
        n = "all" if self.train_examples is None else str(self.train_examples)
        return (
            f"{n} training examples x {self.epochs} epoch(s), batch {self.batch_size}"
            + (" (grouped by length)" if self.group_by_length else "")
            + f", lr {self.learning_rate:g}, at most {self.max_tokens} tokens"
        )


#: Default budgets per task, sized for the default MiniLM on 2 CPU cores (a few minutes each).
#: Notebooks that use the same task and budget share one cached checkpoint.
DEFAULT_BUDGETS: dict[str, Budget] = {
    "SST-2": Budget(train_examples=2000, epochs=1, learning_rate=1e-4, max_tokens=64),
    "CoLA": Budget(train_examples=2000, epochs=2, learning_rate=1e-4, max_tokens=64),
    "MRPC": Budget(train_examples=None, epochs=2, learning_rate=1e-4, max_tokens=128),
    # RTE's inputs are long (about 65 tokens): 1,000 of its 2,490 pairs keep a run near SST-2's cost.
    "RTE": Budget(train_examples=1000, epochs=1, learning_rate=1e-4, max_tokens=128),
    "STS-B": Budget(train_examples=3000, epochs=2, learning_rate=1e-4, max_tokens=128),
}


#: The budget of a user's own task: the whole train split (up to 2,000 examples), two epochs.
USER_TASK_BUDGET = Budget(train_examples=2000, epochs=2, learning_rate=1e-4, max_tokens=128)


def default_budget(task: str | TaskSpec | Task) -> Budget:
    """The default :class:`Budget` of a task (:data:`USER_TASK_BUDGET` for a user's own).

    :param task: the task (see :func:`~bertology_utils.interventions.scoring.task_spec`).
    :returns: its budget (:data:`DEFAULT_BUDGETS`).
    """
    return DEFAULT_BUDGETS.get(task_spec(task).name, USER_TASK_BUDGET)


# --------------------------------------------------------------------------- encoding and prediction


def encode(tokenizer: PreTrainedTokenizerBase, items: Iterable, max_tokens: int) -> list[dict[str, list[int]]]:
    """Token ids (and token types, where the tokenizer makes them) of sentences or sentence pairs.

    Words are tokenized as :mod:`bertology_utils.attention.alignment` does (``is_split_into_words``), so a
    classifier sees the same tokens the attention analyses see; longer inputs are truncated
    to ``max_tokens``, the longer text of a pair first.

    :param tokenizer: the model's fast tokenizer.
    :param items: sentences or sentence pairs.
    :param max_tokens: the longest encoding, special tokens included.
    :returns: per item, in order, ``input_ids`` (and ``token_type_ids``) as lists.
    """
    singles: list[list[str]] = []
    pairs: list[tuple[list[str], list[str]]] = []
    order: list[tuple[bool, int]] = []
    for item in items:
        first, second, _ = item_texts(item)
        if second is None:
            order.append((False, len(singles)))
            singles.append(list(first))
        else:
            order.append((True, len(pairs)))
            pairs.append((list(first), list(second)))
    kwargs = dict(is_split_into_words=True, truncation=True, max_length=max_tokens, verbose=False)
    enc_single = tokenizer(singles, **kwargs) if singles else None
    enc_pair = tokenizer([a for a, _ in pairs], [b for _, b in pairs], **kwargs) if pairs else None
    out = []
    for is_pair, row in order:
        enc = enc_pair if is_pair else enc_single
        assert enc is not None  # a row of a kind means that kind's batch was encoded
        entry = {"input_ids": enc["input_ids"][row]}
        if "token_type_ids" in enc:
            entry["token_type_ids"] = enc["token_type_ids"][row]
        out.append(entry)
    return out


@torch.no_grad()
def predict(
    loaded: LoadedModel, items: Iterable, *, batch_size: int = 32, max_tokens: int | None = None, progress: bool = False
) -> np.ndarray:
    """Logits of a sequence classifier for every item, in input order: (n, num_labels) float32.

    Items are batched by length. ``max_tokens`` defaults to what the model takes. Runs in eval
    mode; wrap the call in :func:`bertology_utils.interventions.editing.gate_heads` to evaluate with
    heads switched off.

    :param loaded: a sequence classifier.
    :param items: sentences or sentence pairs.
    :param batch_size: items per pass.
    :param max_tokens: longer inputs are truncated (None: what the model takes).
    :param progress: show a progress bar.
    :returns: ``(n, num_labels)`` float32 logits.
    """
    items = list(items)
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    encodings = encode(loaded.tokenizer, items, limit)
    plan = plan_batches([len(e["input_ids"]) for e in encodings], batch_size)
    classes = loaded.config.num_labels
    assert classes is not None  # a sequence classifier's config counts its labels
    out = np.zeros((len(items), classes), dtype=np.float32)
    done = []  # each batch's logits stay on the device, read in one copy: a read per batch would wait for it
    with classifier_inference(loaded):
        padding = Padding.of(loaded)
        for rows in tqdm(plan, desc="predict", unit="batch", disable=not progress, leave=False):
            batch = padding.collate([encodings[i] for i in rows], loaded.device)
            done.append(loaded.model(**batch).logits.float())
    if done:
        out[np.concatenate(plan)] = torch.cat(done).cpu().numpy()
    return out


def evaluate(
    loaded: LoadedModel,
    corpus: Corpus,
    task: str,
    *,
    batch_size: int = 32,
    max_tokens: int | None = None,
    progress: bool = False,
) -> dict[str, float]:
    """GLUE metrics of ``loaded`` on a labelled corpus, plus ``n``.

    :param loaded: a sequence classifier.
    :param corpus: labelled items.
    :param task: the task the labels are of (see :func:`~bertology_utils.interventions.scoring.task_spec`).
    :param batch_size: items per pass.
    :param max_tokens: longer inputs are truncated (None: what the model takes).
    :param progress: show a progress bar.
    :returns: :func:`~bertology_utils.interventions.scoring.glue_metrics`, and ``n`` the items scored.
    """
    logits = predict(loaded, corpus, batch_size=batch_size, max_tokens=max_tokens, progress=progress)
    return {**glue_metrics(task, logits, corpus.labels), "n": len(corpus)}


# --------------------------------------------------------------------------- the cache


def finetuned_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where fine-tuned checkpoints are kept: ``cache_dir`` or ``settings.cache_dir()/finetuned``.

    :param cache_dir: a folder of one's own (``~`` expanded); None: the settings' cache.
    :returns: the folder (not created here).
    """
    return Path(cache_dir).expanduser() if cache_dir is not None else settings.cache_dir() / "finetuned"


@dataclass
class FineTuned:
    """A fine-tuned classifier and how it was made (what :func:`fine_tune` returns).

    :param loaded: the classifier.
    :param task: the task's name.
    :param base_name: the model it was fine-tuned from.
    :param init: ``pretrained`` or ``random`` (Kovaleva et al.'s comparison).
    :param seed: the run's seed.
    :param budget: what the run spent.
    :param metrics: dev metrics (GLUE's), with ``n`` the dev examples scored.
    :param path: the checkpoint's folder.
    :param key: the cache key's digest.
    :param from_cache: whether it was reused rather than trained.
    :param train_seconds: the training's wall time.
    :param loss_curve: the mean training loss of each tenth of the run.
    """

    loaded: LoadedModel = field(repr=False)
    task: str
    base_name: str
    init: str
    seed: int
    budget: Budget
    #: Dev metrics (GLUE's), with ``n`` the number of dev examples scored.
    metrics: dict
    path: Path
    key: str
    from_cache: bool
    train_seconds: float
    #: Mean training loss of each tenth of the run (a coarse learning curve).
    loss_curve: list = field(default_factory=list)

    def describe(self) -> str:
        """The run in one line, for a reader: model, task, init, seed, budget, dev metrics, where it came from.

        :returns: the line.
        """
        shown = ", ".join(f"{k} {v:.3f}" for k, v in self.metrics.items() if k not in ("n", "score"))
        origin = "reused from the cache" if self.from_cache else f"trained in {self.train_seconds:.0f} s"
        precision = "" if self.loaded.precision == "fp32" else f", {self.loaded.precision}"
        return (
            f"{self.base_name} fine-tuned on {self.task} ({self.init} init, seed {self.seed}{precision}; "
            f"{self.budget.describe()}): dev {shown} on {self.metrics.get('n')} examples; {origin} ({self.path})"
        )


def _cache_key(initial: LoadedModel, spec: TaskSpec, train: Corpus, budget: Budget, seed: int, init: str) -> dict:
    return {
        "initial_weights_sha256": initial.weights_sha256,
        "tokenizer_sha256": initial.tokenizer_sha256,
        "architecture": initial.architecture,
        "task": spec.name,
        "train_sha256": train.sha256,
        "train_size": len(train),
        # What is scored after training does not change the weights: eval_examples is left out.
        "budget": {k: v for k, v in budget.as_dict().items() if k != "eval_examples"},
        "seed": seed,
        "init": init,
        "recipe": RECIPE_VERSION,
        **initial.precision_key(),
    }


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide "newly initialized weights" notices: a fresh classifier head is the point here."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def _initial_model(model: LoadedModel | str | os.PathLike | None, spec: TaskSpec, seed: int, init: str) -> LoadedModel:
    """The model to fine-tune: the encoder with a seeded new classifier head (or all weights random)."""
    source = model.source if isinstance(model, LoadedModel) else model
    name = model.name if isinstance(model, LoadedModel) else model
    device = model.device if isinstance(model, LoadedModel) else None
    with torch.random.fork_rng(devices=[]), _quiet_transformers():
        torch.manual_seed(seed)
        loaded = load_model(
            source,
            head="sequence-classification",
            device=device,
            num_labels=spec.num_labels,
            problem_type=spec.problem_type,
        )
    if name is not None and loaded.name != name:
        loaded.name = str(name)
    if init == "random":
        with torch.random.fork_rng(devices=[]):
            loaded = random_init(loaded, seed)
    elif init != "pretrained":
        raise ValueError(f"init must be 'pretrained' or 'random', not {init!r}")
    return loaded


def _load_entry(path: Path, record: dict) -> LoadedModel:
    """Reload a cache entry and check its weights against the record; raise on any mismatch."""
    with _quiet_transformers():
        loaded = load_model(path, head="sequence-classification")
    if loaded.weights_sha256 != record.get("weights_sha256"):
        raise BertologyError(f"the weights in {path} do not match the sha256 recorded when they were written")
    return loaded


def subsample(n: int, size: int | None, seed: int) -> np.ndarray:
    """Sorted row numbers of ``size`` of ``n`` examples drawn with ``seed`` (all of them when ``size`` is None or
    at least ``n``): the examples :func:`fine_tune` trains and evaluates on.

    :param n: how many examples there are.
    :param size: how many to draw (None: all).
    :param seed: the draw's seed.
    :returns: ``(size,)`` int row numbers, sorted.
    """
    if size is None or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


#: Steps whose mean loss the progress bar shows, read from the device once per as many steps.
_SHOWN_LOSSES = 20


def _train(
    loaded: LoadedModel,
    encodings: list[dict],
    targets: np.ndarray,
    budget: Budget,
    seed: int,
    progress: bool,
    desc: str,
) -> tuple[list[float], list[str]]:
    """BERT's recipe on ``encodings``; returns the mean loss of each tenth of the steps, and the operations that had
    no deterministic implementation on the model's device."""
    model = loaded.model
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for parameter in model.parameters():
        if parameter.requires_grad:
            # BERT's recipe: no decay on biases and layer-norm weights, which are the 1-d parameters.
            (no_decay if parameter.ndim < 2 else decay).append(parameter)
    # One fused kernel for every tensor: torch's default per-tensor loop took about a third of a
    # MiniLM step on CPU (bench/bench_finetuning.py); the update is the same to float rounding.
    fused = all(p.device.type in ("cpu", "cuda") for p in decay + no_decay)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": budget.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=budget.learning_rate,
        fused=fused or None,
    )
    steps_per_epoch = math.ceil(len(encodings) / budget.batch_size)
    total = steps_per_epoch * budget.epochs
    warmup = int(budget.warmup_fraction * total)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
    generator = torch.Generator().manual_seed(seed)
    padding = Padding.of(loaded)
    target_dtype = torch.float32 if targets.dtype == np.float32 else torch.int64
    losses = []
    model.train()
    try:
        with (
            # dropout masks from a CPU generator: one seed trains the same model on CPU and GPU
            host_dropout(torch.Generator().manual_seed(derived_seed(seed, "dropout"))),
            deterministic_algorithms() as nondeterministic,
            first_token_readout(model),  # the same masks and gradients, without the last block's other tokens
            tqdm(total=total, desc=desc, unit="step", disable=not progress) as bar,
        ):
            lengths = [len(e["input_ids"]) for e in encodings]
            for _ in range(budget.epochs):
                if budget.group_by_length:
                    epoch = length_grouped_batches(lengths, budget.batch_size, generator)
                else:
                    epoch = torch.randperm(len(encodings), generator=generator).split(budget.batch_size)
                for chosen in epoch:
                    rows = chosen.numpy()
                    batch = padding.collate([encodings[i] for i in rows], loaded.device)
                    labels = to_device(torch.as_tensor(targets[rows], dtype=target_dtype), loaded.device)
                    with autocast(loaded):
                        loss = model(**batch, labels=labels).loss
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    scheduler.step()
                    losses.append(loss.detach())  # on the device: reading it would wait for the step
                    bar.update(1)
                    if progress and len(losses) % _SHOWN_LOSSES == 0:  # the bar's mean: a read every few steps
                        shown = torch.stack(losses[-_SHOWN_LOSSES:]).double().mean()
                        bar.set_postfix(loss=f"{float(shown):.3f}", refresh=False)
    finally:
        model.eval()
        optimizer.zero_grad(set_to_none=True)
    values = torch.stack(losses).double().cpu().numpy()
    curve = np.array_split(values, min(10, len(values)))
    return [float(np.mean(chunk)) for chunk in curve if len(chunk)], nondeterministic


def _write_record(folder: Path, record: dict) -> None:
    # whole: an entry whose record was cut short would be rebuilt, its training lost
    atomic_write_text(folder / _META_FILE, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")


def _write_entry(folder: Path, loaded: LoadedModel, record: dict) -> None:
    """Write a checkpoint whole: into a temporary sibling folder, then renamed into place."""
    model = loaded.model
    if not isinstance(model, PreTrainedModel):
        raise BertologyError(f"{type(model).__name__} is not a transformers model: it cannot be saved as a checkpoint")
    bar_was_shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" is noise for one small file
    try:
        with atomic_path(folder, folder=True) as partial:
            model.save_pretrained(partial)
            loaded.tokenizer.save_pretrained(partial)
            _write_record(partial, record)
    finally:
        if bar_was_shown:
            hf_logging.enable_progress_bar()


def fine_tune(
    task: str | Task = "SST-2",
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    budget: Budget | None = None,
    seed: int = 0,
    init: str = "pretrained",
    train: Corpus | None = None,
    dev: Corpus | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    precision: str | None = None,
    progress: bool = True,
    wait: bool = True,
) -> FineTuned:
    """Fine-tune ``model`` (a name, folder or LoadedModel; None: the default model) on a task.

    ``task`` is a GLUE name or a :class:`~bertology_utils.data.Task` (see ``data.resolve_task``).
    ``train`` and ``dev`` default to the task's splits from the data layer (raising
    DataNotFoundError, with where to get them, when absent); any labelled corpus of the
    task's kind can be passed instead (its sha256 is part of the key). ``budget`` defaults to
    :func:`default_budget`. With ``cache`` (the default) a matching checkpoint is reused
    and a new one is stored; a corrupt entry is rebuilt with a :class:`FineTuneCacheWarning`.
    The dev metrics of a reused entry are recomputed only when ``dev`` is not the one recorded.
    A LoadedModel is re-read from its ``source`` (in-memory changes to its weights are not seen).
    ``precision`` ("fp32", "bf16" or "auto", see :func:`~bertology_utils.core.models.resolve_precision`; None: a
    LoadedModel's own, else "fp32") is what the training
    steps compute in and what the returned classifier's passes keep
    (:attr:`~bertology_utils.core.models.LoadedModel.precision`); bf16 checkpoints are cached apart.

    :param task: the task.
    :param model: the model to fine-tune.
    :param budget: what the run may spend.
    :param seed: the classifier head's initialisation, the examples drawn, their order and dropout.
    :param init: ``pretrained``, or ``random`` for the same architecture from scratch.
    :param train: the training corpus (None: the task's train split).
    :param dev: the dev corpus scored (None: the task's dev split).
    :param cache: reuse and store checkpoints.
    :param cache_dir: where they are kept (:func:`finetuned_cache_dir`).
    :param precision: what the steps compute in.
    :param progress: show a progress bar of the steps.
    :param wait: with ``cache``, wait while another process trains this checkpoint (then reuse it); else raise
        :class:`~bertology_utils.core.cache.EntryBusy` at once.
    :returns: the classifier and how it was made.
    """
    if precision is None:
        precision = model.precision if isinstance(model, LoadedModel) else "fp32"
    check_precision(precision)  # before loading anything: a typo fails fast
    spec = task_spec(task)
    budget = budget or default_budget(spec)
    own = task if isinstance(task, Task) else None
    train = train if train is not None else own.train if own else load_glue(spec.name, "train")
    dev = dev if dev is not None else own.dev if own else load_glue(spec.name, "dev")
    if train.labels is None or dev.labels is None:
        raise BertologyError(f"{spec.name}: training and dev corpora need labels")
    initial = _initial_model(model, spec, seed, init)
    initial.precision = resolve_precision(precision, initial.device)
    base_name = initial.name
    key_fields = _cache_key(initial, spec, train, budget, seed, init)
    key = key_digest(key_fields)
    folder = finetuned_cache_dir(cache_dir) / entry_name(
        f"{Path(str(base_name)).name}-{spec.name}-{init}-s{seed}", key_fields
    )
    eval_rows = subsample(len(dev), budget.eval_examples, seed)
    dev_eval = (
        dev
        if len(eval_rows) == len(dev)
        else Corpus.from_items(
            [dev[i] for i in eval_rows],
            f"{dev.name}[{len(eval_rows)} of {len(dev)}]",
            [dev.labels[i] for i in eval_rows],
        )
    )

    with cache_lock(folder, wait) if cache else contextlib.nullcontext():  # one process trains a checkpoint
        return _cached_or_trained(
            folder, key, key_fields, initial, spec, train, dev_eval, budget, seed, init, cache, progress
        )


def _cached_or_trained(
    folder: Path,
    key: str,
    key_fields: dict,
    initial: LoadedModel,
    spec: TaskSpec,
    train: Corpus,
    dev_eval: Corpus,
    budget: Budget,
    seed: int,
    init: str,
    cache: bool,
    progress: bool,
) -> FineTuned:
    """The cached checkpoint at ``folder`` when it is sound, else a new one trained (and stored when ``cache``)."""
    base_name = initial.name
    if cache and (folder / _META_FILE).is_file():
        try:
            record = json.loads((folder / _META_FILE).read_text(encoding="utf-8"))
            if record.get("key") != key_fields:
                raise BertologyError("its recorded key does not match the folder name's")
            loaded = _load_entry(folder, record)
            loaded.precision = initial.precision
        except (BertologyError, ModelNotAvailableError, OSError, ValueError, KeyError) as exc:
            warnings.warn(
                FineTuneCacheWarning(f"corrupt fine-tuning cache entry {folder} ({exc}); rebuilding it"), stacklevel=2
            )
            atomic_remove(folder)
        else:
            loaded.name = f"{base_name} + {spec.name}"
            evaluations = record.setdefault("evaluations", {})
            metrics = evaluations.get(dev_eval.sha256)
            if metrics is None:
                metrics = evaluate(loaded, dev_eval, spec.name, max_tokens=budget.max_tokens, progress=progress)
                evaluations[dev_eval.sha256] = metrics
                with contextlib.suppress(OSError):
                    _write_record(folder, record)
            return FineTuned(
                loaded,
                spec.name,
                base_name,
                init,
                seed,
                budget,
                metrics,
                folder,
                key,
                True,
                float(record.get("train_seconds", 0.0)),
                list(record.get("loss_curve", [])),
            )

    rows = subsample(len(train), budget.train_examples, seed)
    encodings = encode(initial.tokenizer, [train[i] for i in rows], min(budget.max_tokens, initial.max_tokens))
    if train.labels is None:
        raise BertologyError(f"{spec.name}: the training corpus has no labels")
    targets = label_ids(spec.name, [train.labels[i] for i in rows])
    start = time.perf_counter()
    curve, nondeterministic = _train(initial, encodings, targets, budget, seed, progress, desc=f"fine-tune {spec.name}")
    seconds = time.perf_counter() - start
    loaded = LoadedModel(
        model=initial.model.eval(),
        tokenizer=initial.tokenizer,
        name=f"{base_name} + {spec.name}",
        source=str(folder),
        precision=initial.precision,
    )
    metrics = evaluate(loaded, dev_eval, spec.name, max_tokens=budget.max_tokens, progress=progress)
    record = {
        "key": key_fields,
        "base_name": str(base_name),
        "task": spec.name,
        "init": init,
        "seed": seed,
        "budget": budget.as_dict(),
        "weights_sha256": loaded.weights_sha256,
        "train_seconds": seconds,
        "loss_curve": curve,
        "device": str(initial.device),
        # empty: every operation ran deterministically (torch.use_deterministic_algorithms)
        "nondeterministic_ops": nondeterministic,
        "evaluations": {dev_eval.sha256: metrics},
        "dev": dev_eval.description,
        "versions": {
            "bertology_utils": __version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        },
    }
    if cache:
        _write_entry(folder, loaded, record)
    return FineTuned(loaded, spec.name, base_name, init, seed, budget, metrics, folder, key, False, seconds, curve)
