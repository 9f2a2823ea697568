"""Extraction and store statistics on a Dask cluster: the same store bit for bit, a lost worker, equal statistics."""

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from bertology_utils.analyses.clustering import head_distances
from bertology_utils.analyses.patterns import STATISTICS, surface_statistics
from bertology_utils.analyses.syntax import score_syntax
from bertology_utils.attention.distributed import extract_on_cluster, shard_plan
from bertology_utils.attention.extraction import extract_attention
from bertology_utils.attention.store import AttentionStore
from bertology_utils.core import cluster as cluster_module
from bertology_utils.core.errors import BertologyError, StoreMismatchError
from bertology_utils.data import Corpus, read_conllu

distributed = pytest.importorskip("distributed")

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "sample" / "sample.conllu"
SETTINGS = {"block_size": 8, "batch_size": 4}


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes, as `--cluster local:2` starts them."""
    with cluster_module.connect("local:2") as c:
        yield c


@pytest.fixture(scope="module")
def bert(tiny_model_dirs):
    return str(tiny_model_dirs["bert"])


@pytest.fixture(scope="module")
def treebank():
    return read_conllu(SAMPLE)


@pytest.fixture(scope="module")
def plain(tmp_path_factory, treebank, bert):
    return extract_attention(treebank, tmp_path_factory.mktemp("plain") / "s.zarr", bert, progress=False, **SETTINGS)


def assert_same_items(a: AttentionStore, b: AttentionStore) -> None:
    assert a.metadata == b.metadata and a.n_items == b.n_items and b.is_complete
    assert np.array_equal(a.status(), b.status())
    for i in np.flatnonzero(a.status() == 0):
        x, y = a.get(int(i), dtype=np.float16), b.get(int(i), dtype=np.float16)
        assert (x.item_id, x.words, x.n_tokens) == (y.item_id, y.words, y.n_tokens)
        assert np.array_equal(x.word_kinds, y.word_kinds) and np.array_equal(x.segments, y.segments)
        assert np.array_equal(x.attention, y.attention), f"item {i} differs"


def test_shard_plan_cuts_only_on_block_bounds():
    assert shard_plan(0, 40, 5, 8) == [(0, 8), (8, 16), (16, 24), (24, 32), (32, 40)]
    assert shard_plan(0, 40, 4, 8) == [(0, 16), (16, 24), (24, 32), (32, 40)]  # 5 blocks in 4 shards
    assert shard_plan(0, 40, 2, 8) == [(0, 24), (24, 40)]
    assert shard_plan(0, 5, 4, 8) == [(0, 5)]  # one block: one shard
    assert shard_plan(3, 20, 8, 8) == [(3, 8), (8, 16), (16, 20)]  # a gap after a resumed shard
    assert shard_plan(0, 40, 1, 8) == [(0, 40)] and shard_plan(7, 7, 3, 8) == []
    for start, stop, shards in [(0, 1000, 7), (13, 999, 5), (0, 64, 64)]:
        plan = shard_plan(start, stop, shards, 8)
        assert plan[0][0] == start and plan[-1][1] == stop and len(plan) <= shards
        assert all(a[1] == b[0] and b[0] % 8 == 0 for a, b in zip(plan, plan[1:]))


def test_cluster_store_equals_the_single_process_store(client, treebank, bert, plain, tmp_path):
    store = extract_on_cluster(treebank, tmp_path / "c.zarr", bert, cluster=client, progress=False, **SETTINGS)
    assert len(store.shards) == min(8, -(-len(treebank) // 8))  # four shards per worker, at most one per block
    assert_same_items(plain, store)
    # A second run reuses the complete store; another model's workers are refused by its metadata.
    again = extract_on_cluster(treebank, tmp_path / "c.zarr", bert, cluster=client, progress=False, **SETTINGS)
    assert again.done == len(treebank)
    with pytest.raises(StoreMismatchError):
        extract_on_cluster(treebank, tmp_path / "c.zarr", bert, cluster=client, from_rule="max", **SETTINGS)


def test_an_interrupted_single_process_store_is_finished_on_the_cluster(client, treebank, bert, plain, tmp_path):
    path = tmp_path / "half.zarr"
    extract_attention(treebank, path, bert, shard=(0, 3), progress=False, **SETTINGS)
    store = extract_on_cluster(treebank, path, bert, cluster=client, shards=3, progress=False, **SETTINGS)
    assert_same_items(plain, store)


@pytest.mark.slow
def test_a_killed_worker_ends_in_a_complete_equal_store(tiny_model_dirs, tmp_path):
    """kill -9 of a worker while it writes its shard: the scheduler reruns the task, which resumes the shard."""
    model = str(tiny_model_dirs["bert"])
    lines = [f"sentence {i} has words {' '.join(['and more'] * (i % 7))} ." for i in range(240)]
    corpus = Corpus.from_texts(lines, name="many")
    settings = {"block_size": 2, "batch_size": 2}  # a commit every 2 items: many points to die between
    plain = extract_attention(corpus, tmp_path / "plain.zarr", model, progress=False, **settings)
    path = tmp_path / "killed.zarr"
    with cluster_module.connect("local:2") as c:
        pids = c.run(os.getpid)
        done = {}
        job = threading.Thread(
            target=lambda: done.update(
                store=extract_on_cluster(corpus, path, model, cluster=c, shards=4, progress=False, **settings)
            )
        )
        job.start()
        killed = None
        deadline = time.monotonic() + 120
        while killed is None and job.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
            if not (path / "zarr.json").is_file():
                continue
            store = AttentionStore.open(path)
            partial = [s for s in store.shards if 0 < s.committed < s.stop - s.start]
            busy = [w for w, keys in c.processing().items() if keys]
            if partial and busy and store.done < len(corpus) // 2:
                killed = busy[0]
                os.kill(pids[killed], signal.SIGKILL)
        job.join(timeout=300)
        assert killed is not None, "the job ended before a worker could be killed mid-shard"
        assert pids[killed] not in c.run(os.getpid).values()  # the killed process is gone, a new one took over
    assert "store" in done, "the cluster job did not finish"
    assert_same_items(plain, done["store"])


def test_statistics_on_the_cluster_equal_the_local_ones(client, treebank, plain, tiny_model_dirs, tmp_path):
    local, remote = surface_statistics(plain), surface_statistics(plain, cluster=client)
    assert (remote.n_items, remote.n_pairs, remote.rows) == (local.n_items, local.n_pairs, local.rows)
    for name in STATISTICS:
        np.testing.assert_allclose(remote[name], local[name], rtol=1e-12, atol=1e-15)
    assert remote.uniform_entropy == pytest.approx(local.uniform_entropy, rel=1e-12)

    a, b = score_syntax(treebank, plain), score_syntax(treebank, plain, cluster=client)
    assert a.relations == b.relations and a.n_sentences == b.n_sentences and a.skipped == b.skipped
    assert np.array_equal(a.counts, b.counts) and np.array_equal(a.correct, b.correct)  # same credit, same order: exact
    for name in ("sentence_index", "sentence_counts", "sentence_held_out", "sentence_offset_correct"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))  # per sentence too, in corpus order

    # Two models' heads in one matrix, on a subset of items, summed over ranges of the cluster.
    other = extract_attention(
        treebank, tmp_path / "electra.zarr", str(tiny_model_dirs["electra"]), progress=False, **SETTINGS
    )
    indices = [i for i in range(len(treebank)) if i % 3]
    d1 = head_distances(plain, other, indices=indices)
    d2 = head_distances(plain, other, indices=indices, cluster=client)
    assert (d2.n_items, d2.n_rows) == (d1.n_items, d1.n_rows)
    np.testing.assert_allclose(d2.matrix, d1.matrix, rtol=1e-10, atol=1e-12)


def test_statistics_need_a_store_on_a_cluster(plain):
    items = list(plain.iter_items(range(3)))
    with pytest.raises(ValueError, match="AttentionStore"):
        surface_statistics(items, cluster="local:1")


def test_cluster_specs_and_a_missing_engine(monkeypatch):
    assert cluster_module.parse_cluster(" local:3 ") == "local:3"
    assert cluster_module.parse_cluster("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    for bad in ["local:0", "local", "local:x", "", "two words"]:
        with pytest.raises(ValueError):
            cluster_module.parse_cluster(bad)
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    with pytest.raises(BertologyError, match=r"bertology-utils\[distributed\]"):
        cluster_module.require_distributed()


def test_extract_command_on_a_local_cluster(treebank, bert, plain, tmp_path, capsys):
    from bertology_utils.cli import main

    common = ["extract", "--conllu", str(SAMPLE), "--model", bert, "--block-size", "8", "--batch-size", "4"]
    store = tmp_path / "cli.zarr"
    assert main([*common, "--cluster", "local:2", "--store", str(store), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "cluster: local:2" in out and "items 40: extracted 40, skipped 0, missing 0 (5 shards)" in out
    assert_same_items(plain, AttentionStore.open(store))
    assert main([*common, "--cluster", "local:2", "--shard", "0/2", "--store", str(tmp_path / "x.zarr")]) == 2
    assert "leave out --shard" in capsys.readouterr().err
    assert main([*common, "--cluster-shards", "3", "--store", str(tmp_path / "y.zarr")]) == 2
    assert main([*common, "--cluster", "local:0", "--store", str(tmp_path / "z.zarr")]) == 2
    assert "at least one worker" in capsys.readouterr().err


def test_a_worker_error_reaches_the_caller(client, bert, tmp_path):
    """An item too long for the model, with too_long="error": the worker's error is raised here, not lost."""
    corpus = Corpus.from_texts(["A short one."] * 20 + [" ".join(["word"] * 200)], name="long")
    with pytest.raises(BertologyError, match="more than the 64"):
        extract_on_cluster(
            corpus, tmp_path / "e.zarr", bert, cluster=client, too_long="error", progress=False, **SETTINGS
        )
    with pytest.raises(TypeError, match="unknown settings: colour"):
        extract_on_cluster(corpus, tmp_path / "f.zarr", bert, cluster=client, colour="red")
