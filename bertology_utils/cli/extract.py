"""``bertology extract``: extract word-level attention of a data set into a resumable, shardable store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.cli._command import EXIT_OK, Command, interrupting_signal, sigterm_as_ctrl_c, store_lines
from bertology_utils.core.errors import BertologyError

if TYPE_CHECKING:
    from bertology_utils.data import Corpus

__all__ = ["COMMAND", "FROM_RULES", "TOO_LONG_POLICIES", "parse_shard"]

# The package modules import torch, transformers and zarr (seconds); they are imported inside
# the handler so that `bertology --help` and the other commands stay fast.

#: Mirrors bertology_utils.attention.word_attention.FROM_RULES and extraction.TOO_LONG_POLICIES (kept
#: literal for the import time above; tests/unit/cli/test_cli.py checks they agree).
FROM_RULES = ("mean", "first", "max")
TOO_LONG_POLICIES = ("skip", "error")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N`` (an argparse type)."""
    i, sep, n = text.partition("/")
    try:
        if not sep:
            raise ValueError
        shard = int(i), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N, e.g. 0/4") from None
    if not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: I/N needs 0 <= I < N (shards count from 0)")
    return shard


EXTRACT_DESCRIPTION = """\
Run a model over a data set and write the word-level attention of every item into an
attention store (a Zarr folder that notebooks read with AttentionStore.open). The input is
one of a registered data set, a CoNLL-U file, a text file (one sentence per line) or
sentences given on the command line. Extraction is resumable: re-running the same command
continues where an interrupted run stopped; a store written with other settings is refused
unless --overwrite. Items with more tokens than the model takes are skipped and reported
(or stop the run with --too-long error). --cluster runs the job on a Dask cluster (the
[distributed] extra): local:N starts N worker processes here, an address uses a running
scheduler; the store is the one a single process writes. Without Dask, --shard I/N extracts
one of N slices, so N processes or machines can work in parallel; `bertology merge` joins them.
"""

EXTRACT_EPILOG = """\
examples:
  bertology extract --dataset ud-english-ewt --split dev --store results/ewt-dev.zarr
  bertology extract --conllu my.conllu --model bert-base-uncased --from-rule first --store my.zarr
  bertology extract --sentence "The cat sat on the mat." --token-level --store cat.zarr

  on a Dask cluster: two worker processes here, or a running scheduler's workers (shared disk):
  bertology extract --dataset ud-english-ewt --split train --cluster local:2 --store ewt-train.zarr
  bertology extract --dataset ud-english-ewt --split train --cluster tcp://10.0.0.5:8786 --store /shared/ewt.zarr

  by hand, one shard per process (0/4 ... 3/4), then join the stores:
  bertology extract --dataset ud-english-ewt --split train --shard 0/4 --store part0.zarr
  bertology merge ewt-train.zarr part0.zarr part1.zarr part2.zarr part3.zarr

Data sets: see `bertology info`. Exit status: 0 done, 2 usage error or an item too long
with --too-long error (the store keeps what was done; re-run to resume).
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("input (exactly one)")
    source = data.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dataset",
        metavar="NAME",
        help="a registered data set: ud-english-ewt, sample, sample-pairs, glue/SST-2, ... (list: bertology info)",
    )
    source.add_argument("--conllu", type=Path, metavar="FILE", help="a CoNLL-U file")
    source.add_argument(
        "--text", type=Path, metavar="FILE", help="a UTF-8 text file, one sentence per line (blank lines skipped)"
    )
    source.add_argument("--sentence", action="append", dest="sentences", metavar="TEXT", help="a sentence; repeatable")
    data.add_argument("--split", metavar="SPLIT", help="the split of --dataset (default: its usual one, e.g. dev)")
    data.add_argument("--limit", type=_positive_int, metavar="N", help="only the first N items")

    parser.add_argument(
        "--store",
        type=Path,
        required=True,
        metavar="PATH",
        help="the attention store to write (a folder, e.g. results/ewt-dev.zarr)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME_OR_PATH",
        help="a Hugging Face Hub id or a local model folder (default: all-MiniLM-L6-v2)",
    )

    conv = parser.add_argument_group("conversion")
    conv.add_argument(
        "--from-rule",
        choices=FROM_RULES,
        default="mean",
        help="how the attention FROM a word's tokens is combined (default: %(default)s; "
        "attention TO a word is always summed)",
    )
    conv.add_argument("--token-level", action="store_true", help="also keep the token-level attention (large)")
    conv.add_argument(
        "--maps",
        metavar="METHOD",
        help="store a context-mixing method's maps instead of the attention: one of "
        "bertology_utils.interventions.mixing.METHODS, e.g. rollout, norm, alti, value_zeroing, flow "
        "(flow, O(n^4) per item, skips items over mixing.FLOW_MAX_TOKENS tokens unless --max-tokens says otherwise)",
    )
    conv.add_argument(
        "--too-long",
        choices=TOO_LONG_POLICIES,
        default="skip",
        help="items with more tokens than the model takes: skip them or stop (default: %(default)s)",
    )
    conv.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="treat items with more than N tokens as too long (default: the model's limit)",
    )

    run = parser.add_argument_group("running")
    run.add_argument(
        "--batch-size",
        type=_positive_int,
        default=32,
        metavar="N",
        help="items per forward pass (default: %(default)s)",
    )
    run.add_argument(
        "--block-size",
        type=_positive_int,
        default=512,
        metavar="N",
        help="items per write to the store (default: %(default)s)",
    )
    run.add_argument(
        "--shard",
        type=parse_shard,
        metavar="I/N",
        help="extract only slice I of N (0 <= I < N) of the items, for parallel workers",
    )
    run.add_argument(
        "--cluster",
        type=_cluster,
        metavar="local:N|ADDRESS",
        help="run on a Dask cluster: local:N worker processes, or a scheduler address (needs the [distributed] extra)",
    )
    run.add_argument(
        "--cluster-shards",
        type=_positive_int,
        metavar="N",
        help="with --cluster: tasks to cut the job into (default: four per worker)",
    )
    run.add_argument("--overwrite", action="store_true", help="delete a store at --store first instead of resuming it")
    run.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _cluster(text: str) -> str:
    from bertology_utils.core.cluster import parse_cluster

    try:
        return parse_cluster(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _load_corpus(args: argparse.Namespace) -> Corpus:
    from bertology_utils import data

    if args.split is not None and args.dataset is None:
        raise BertologyError("--split goes with --dataset")
    if args.dataset is not None:
        corpus = data.load_dataset(args.dataset, args.split)
    elif args.conllu is not None:
        corpus = data.read_conllu(args.conllu)
    elif args.text is not None:
        corpus = data.read_text_lines(args.text)
    else:
        corpus = data.Corpus.from_texts(args.sentences, name="sentences")
    if args.limit is not None and args.limit < len(corpus):
        corpus = corpus[: args.limit]
    return corpus


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.attention.extraction import extract_attention, shard_range
    from bertology_utils.core.models import load_model

    corpus = _load_corpus(args)
    print(f"data: {corpus.description}")
    loaded = load_model(args.model, progress=args.progress)
    print(
        f"model: {loaded.name} ({loaded.architecture}, {loaded.num_layers} layers x {loaded.num_heads} heads, "
        f"up to {loaded.max_tokens} tokens, on {loaded.device})"
    )
    if args.overwrite:
        print(f"overwriting any store at {args.store}")
    maps, max_tokens = None, args.max_tokens
    if args.maps is not None:
        from bertology_utils.interventions.mixing import MixingMaps

        try:
            maps = MixingMaps(args.maps)
        except ValueError as error:
            raise BertologyError(f"--maps: {error}") from None
        if maps.max_tokens is not None and max_tokens is None:  # a method with a length limit (flow)
            max_tokens = min(maps.max_tokens, loaded.max_tokens)
        print(f"maps: {args.maps} (not the raw attention)")
    if args.cluster is not None and args.shard is not None:
        raise BertologyError("--cluster cuts the job into shards itself: leave out --shard")
    if args.cluster is None and args.cluster_shards is not None:
        raise BertologyError("--cluster-shards goes with --cluster")
    if args.shard is not None:
        lo, hi = shard_range(len(corpus), args.shard)
        print(f"shard {args.shard[0]}/{args.shard[1]}: items {lo} to {hi - 1} of {len(corpus)}")
    settings = dict(
        batch_size=args.batch_size,
        block_size=args.block_size,
        from_rule=args.from_rule,
        keep_tokens=args.token_level,
        too_long=args.too_long,
        max_tokens=max_tokens,
        maps=maps,
        overwrite=args.overwrite,
        progress=args.progress,
    )
    try:
        with sigterm_as_ctrl_c():
            if args.cluster is not None:
                from bertology_utils.attention.distributed import extract_on_cluster

                print(f"cluster: {args.cluster}")
                store = extract_on_cluster(
                    corpus, args.store, loaded, cluster=args.cluster, shards=args.cluster_shards, **settings
                )
            else:
                store = extract_attention(corpus, args.store, loaded, shard=args.shard, **settings)
    except KeyboardInterrupt as exc:  # every block committed so far is kept (the store's commit protocol)
        signum = interrupting_signal(exc)
        print(
            f"\ninterrupted by {signum.name}; run the same command again to resume into {args.store}", file=sys.stderr
        )
        return 128 + signum
    print("\n".join(store_lines(store)))
    return EXIT_OK


COMMAND = Command(
    "extract",
    "extract word-level attention of a data set into a resumable, shardable store",
    _add_arguments,
    _handle,
    EXTRACT_EPILOG,
    EXTRACT_DESCRIPTION,
)
