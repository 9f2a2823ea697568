"""Faults: extraction killed with SIGKILL over and over while readers poll the store; the finished
store must equal a serial extraction bit for bit, and no reader may ever see a torn store.

Three paths, under CPU load (``--load`` busy processes) while ``--readers`` processes poll the store
(open it, ``status()``, read a few committed items and compare them with the serial store's):

  local   one ``extract_attention`` process, killed and started again until it finishes
  shards  ``--writers`` processes writing disjoint shards of one store, killed and restarted; then
          the same shards written to separate stores and ``merge_stores`` joining them, killed and rerun
  dask    ``extract_on_cluster`` on a local cluster of two worker processes, a worker killed at a random
          moment (the scheduler reruns its task, which resumes the shard) and the driver rerun if it fails

Each store is extracted again from nothing (a round) until the path has had ``--kills`` kills.
A kill lands at a random moment, or (local and shards) at a point injected at random: after an array's
new shape but before its chunks ("shape"), between a block's arrays ("array"), after a block's data but
before its commit ("commit"), while merge copies a shard ("copy"), or just before it renames the copy
into place ("publish").

Columns: rounds, cycles, kills (and where the injected ones landed), items extracted, reads and polls by
the readers, torn reads (a reader's read failed, differed from the serial store, or an item it had seen
committed was gone), items lost and duplicated in the finished stores, and whether every finished
store equals the serial one. Torn, lost and duplicated must be 0, equal must be yes.

    python bench/bench_faults.py [--kills 100] [--items 120] [--model NAME] [--record]

``--record`` writes the results to bench/results/faults.json and the store page's table (docs/guide/store.md) from them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from _machine import machine

from bertology_utils.attention.store import AttentionStore
from bertology_utils.core.errors import StoreError

PATHS = ("local", "shards", "dask")
#: Where a writer kills itself, by path (see the module docstring); "random" is a kill from outside.
POINTS = {"local": ("shape", "array", "commit"), "shards": ("shape", "array", "commit"), "merge": ("copy", "publish")}
SETTINGS = {"block_size": 2, "batch_size": 2}  # a commit every two items: many moments to die between


# ----------------------------------------------------------------------------- in the child processes


def _inject(fault: tuple[str, int] | None) -> None:
    """Make this process kill itself at the ``n``-th passage through ``point``."""
    if fault is None:
        return
    import zarr
    from zarr.core.array import AsyncArray

    from bertology_utils.attention import store as store_module

    point, n = fault
    seen = Counter()

    def die_at(name: str) -> None:
        seen[name] += 1
        if name == point and seen[name] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    resize, append, update = AsyncArray.resize, AsyncArray.append, zarr.Group.update_attributes
    copytree, publish = shutil.copytree, store_module.AttentionStore._publish

    async def resized(self, *args, **kwargs):
        await resize(self, *args, **kwargs)
        die_at("shape")  # the array's new shape is written, its chunks not yet

    async def appended(self, *args, **kwargs):
        out = await append(self, *args, **kwargs)
        die_at("array")  # one array of the block written, the others (appended concurrently) maybe not
        return out

    def updating(self, *args, **kwargs):
        die_at("commit")  # every array of the block written, the commit not
        return update(self, *args, **kwargs)

    def copy(a, b, **kw):
        die_at("copy")
        return shutil.copy2(a, b, **kw)

    def copying(src, dst, *args, **kwargs):
        if args:  # copytree's own recursion, which passes the copy function on
            return copytree(src, dst, *args, **kwargs)
        return copytree(src, dst, copy_function=copy, **kwargs)

    def publishing(self, *args):
        die_at("publish")
        return publish(self, *args)

    AsyncArray.resize, AsyncArray.append, zarr.Group.update_attributes = resized, appended, updating
    shutil.copytree, store_module.AttentionStore._publish = copying, publishing


def _extract(path: str, corpus, model: str, fault, shard) -> None:
    import torch

    from bertology_utils.attention.extraction import extract_attention

    torch.set_num_threads(1)
    _inject(fault)
    extract_attention(corpus, path, model, shard=shard, progress=False, **SETTINGS)


def _merge(target: str, sources: list[str], fault) -> None:
    from bertology_utils.attention.store import merge_stores

    _inject(fault)
    merge_stores(target, sources)


def _drive_cluster(path: str, corpus, model: str, pids_file: str) -> None:
    """``extract_on_cluster`` on a local cluster, writing its workers' pids for the killer to pick from."""
    import threading

    from bertology_utils.attention.distributed import extract_on_cluster
    from bertology_utils.core.cluster import connect

    with connect("local:2") as client:
        stop = threading.Event()

        def report() -> None:
            while not stop.is_set():
                try:
                    pids = sorted(client.run(os.getpid, wait=True).values())
                    Path(pids_file + ".tmp").write_text(json.dumps(pids))
                    os.replace(pids_file + ".tmp", pids_file)
                except Exception:  # a worker restarting: ask again
                    pass
                stop.wait(0.1)

        watcher = threading.Thread(target=report, daemon=True)
        watcher.start()
        try:
            extract_on_cluster(corpus, path, model, cluster=client, shards=4, progress=False, **SETTINGS)
        finally:
            stop.set()


def _item_ids(store: AttentionStore) -> list[str]:
    """Every committed entry's item id, shard by shard (an item written twice would show twice)."""
    return [str(i) for s in store.shards for i in s.values("item_ids", 0, s.committed)]


def _busy(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _read(pointer: str, serial: str, stop, results, seed: int) -> None:
    """Poll the store named in ``pointer`` until ``stop``: every read either succeeds and equals the serial
    store or counts as torn, and no item once committed may disappear."""
    rng = np.random.default_rng(seed)
    reference = AttentionStore.open(serial)
    seen: dict[str, set[int]] = {}
    counts = Counter()
    examples: list[str] = []

    def torn(why: str) -> None:
        counts["torn"] += 1
        if len(examples) < 5:
            examples.append(why)

    while not stop.is_set():
        try:
            path = Path(pointer).read_text()
        except FileNotFoundError:
            time.sleep(0.01)
            continue
        try:
            store = AttentionStore.open(path)
        except StoreError as exc:
            if "no attention store" not in str(exc):
                torn(f"open: {exc}")
            time.sleep(0.005)
            continue
        try:
            status = store.status()
            counts["polls"] += 1
            done = set(np.flatnonzero(status >= 0).tolist())
            if seen.setdefault(path, set()) - done:
                torn(f"items {sorted(seen[path] - done)[:5]} were committed and are gone")
            seen[path] |= done
            ok = np.flatnonzero(status == 0)
            for i in rng.choice(ok, size=min(3, len(ok)), replace=False) if len(ok) else ():
                got, want = store.get(int(i), dtype=np.float16), reference.get(int(i), dtype=np.float16)
                counts["reads"] += 1
                if got.words != want.words or not np.array_equal(got.attention, want.attention):
                    torn(f"item {i} differs from the serial store")
        except Exception as exc:  # anything at all: a reader of a consistent store never fails
            torn(f"{type(exc).__name__}: {exc}")
    results.put({**counts, "examples": examples})


# ----------------------------------------------------------------------------- in the bench process


class _Bench:
    def __init__(self, root: Path, corpus, model: str, rng: random.Random, kill_within: float):
        self.root, self.corpus, self.model, self.rng, self.kill_within = root, corpus, model, rng, kill_within
        self.serial = root / "serial.zarr"
        self.pointer = root / "current"
        self.context = multiprocessing.get_context("forkserver")

    def point_at(self, path: Path) -> None:
        (self.root / "current.tmp").write_text(str(path))
        os.replace(self.root / "current.tmp", self.pointer)

    def start(self, target, *args, daemon: bool = True):
        process = self.context.Process(target=target, args=args, daemon=daemon)
        process.start()
        return process

    def fault(self, points: tuple[str, ...]) -> tuple[str, int] | None:
        """Half the cycles die at an injected point (its n-th passage), half at a random moment."""
        if self.rng.random() < 0.5:
            return None
        return self.rng.choice(points), self.rng.randint(1, 2 * len(self.corpus) // SETTINGS["block_size"])

    def cycle(self, processes: list, faults: list, stats: Counter) -> list[int]:
        """Let ``processes`` run until each has ended or been killed; the others end on their own."""
        unfaulted = [p for p, f in zip(processes, faults) if f is None]
        victim = self.rng.choice(unfaulted) if unfaulted else None
        deadline = time.monotonic() + self.rng.uniform(0.05, self.kill_within)
        while any(p.is_alive() for p in processes):
            if victim is not None and victim.is_alive() and time.monotonic() > deadline:
                victim.kill()
            time.sleep(0.01)
        for p, f in zip(processes, faults):
            p.join()
            if p.exitcode == -signal.SIGKILL:
                stats["kills"] += 1
                stats[f"killed at {f[0] if f else 'random'}"] += 1
        return [p.exitcode for p in processes]

    def check(self, path: Path, stats: Counter) -> None:
        """Lost, duplicated and unequal items of a finished store, against the serial one."""
        store, reference = AttentionStore.open(path), AttentionStore.open(self.serial)
        status = store.status()
        stats["items"] += int((status >= 0).sum())
        stats["lost"] += int((status < 0).sum())
        ids = _item_ids(store)
        stats["duplicated"] += len(ids) - len(set(ids))
        same = np.array_equal(status, reference.status()) and ids == _item_ids(reference)
        for a, b in zip(store.iter_items(dtype=np.float16), reference.iter_items(dtype=np.float16), strict=True):
            same &= (a.item_id, a.words, a.n_tokens) == (b.item_id, b.words, b.n_tokens)
            same &= all(np.array_equal(x, y) for x, y in [(a.attention, b.attention), (a.word_kinds, b.word_kinds)])
        stats["unequal"] += int(not same)

    def run_local(self, path: Path, stats: Counter) -> None:
        while True:
            fault = self.fault(POINTS["local"])
            stats["cycles"] += 1
            (code,) = self.cycle(
                [self.start(_extract, str(path), self.corpus, self.model, fault, None)], [fault], stats
            )
            if code == 0:
                return
            if code != -signal.SIGKILL:
                raise RuntimeError(f"an extraction process failed with exit code {code}")

    def run_shards(self, path: Path, stats: Counter, writers: int) -> None:
        todo = list(range(writers))
        while todo:  # all writers of one store side by side; the killed ones start again
            faults = [self.fault(POINTS["shards"]) for _ in todo]
            stats["cycles"] += 1
            processes = [
                self.start(_extract, str(path), self.corpus, self.model, f, (i, writers)) for i, f in zip(todo, faults)
            ]
            codes = self.cycle(processes, faults, stats)
            if any(c not in (0, -signal.SIGKILL) for c in codes):
                raise RuntimeError(f"a shard writer failed with exit codes {codes}")
            todo = [i for i, c in zip(todo, codes) if c != 0]
        self.check(path, stats)
        # The same shards in separate stores, joined by merge_stores killed and rerun.
        parts = [str(path.with_suffix(f".part{i}")) for i in range(writers)]
        for i, part in enumerate(parts):
            self.start(_extract, part, self.corpus, self.model, None, (i, writers)).join()
        merged = path.with_suffix(".merged")
        self.point_at(merged)
        while True:
            fault = self.fault(POINTS["merge"])
            stats["cycles"] += 1
            (code,) = self.cycle([self.start(_merge, str(merged), parts, fault)], [fault], stats)
            if code == 0:
                break
            if code != -signal.SIGKILL:
                raise RuntimeError(f"merge failed with exit code {code}")
        self.check(merged, stats)

    def run_dask(self, path: Path, stats: Counter, kills: int) -> None:
        pids_file = str(path) + ".pids"
        while True:
            stats["cycles"] += 1
            # Not a daemon: its cluster starts worker processes of its own.
            driver = self.start(_drive_cluster, str(path), self.corpus, self.model, pids_file, daemon=False)
            done_at_kill = -1
            while driver.is_alive():
                time.sleep(self.rng.uniform(0.05, self.kill_within))
                try:
                    pids = json.loads(Path(pids_file).read_text())
                    done = AttentionStore.open(path).done
                except (FileNotFoundError, json.JSONDecodeError, StoreError):
                    continue
                # Both workers up and the job moved since the last kill: a kill interrupts real work.
                if driver.is_alive() and len(pids) == 2 and done > done_at_kill and stats["kills"] < kills:
                    try:
                        os.kill(self.rng.choice(pids), signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    stats["kills"] += 1
                    stats["killed at random"] += 1
                    done_at_kill = done
            driver.join()
            if driver.exitcode == 0:
                return
            stats["driver reruns"] += 1  # a task lost too many workers (distributed's allowed-failures)
            if stats["driver reruns"] > max(10, stats["cycles"] // 2):
                raise RuntimeError(f"the cluster driver keeps failing (exit code {driver.exitcode})")

    def path(self, name: str, kills: int, writers: int) -> Counter:
        stats: Counter = Counter()
        rounds = 0
        while stats["kills"] < kills and rounds < 4 * kills:  # a round too quick to kill in counts too
            rounds += 1
            store = self.root / f"{name}{rounds}.zarr"
            self.point_at(store)
            if name == "local":
                self.run_local(store, stats)
            elif name == "shards":
                self.run_shards(store, stats, writers)
            else:
                self.run_dask(store, stats, kills)
            if name != "shards":
                self.check(store, stats)
            stats["equal stores"] += 1
        stats["rounds"] = rounds
        return stats


def run(
    paths=PATHS,
    *,
    kills: int = 100,
    items: int | None = 120,
    corpus=None,
    model: str | None = None,
    readers: int = 2,
    writers: int = 3,
    load: int = 1,
    kill_within: float = 1.5,
    seed: int = 0,
    root: Path | None = None,
) -> dict[str, dict]:
    """Run the fault paths; per path, what the table prints (``torn``, ``lost``, ``duplicated`` must be 0)."""
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.models import load_model

    if corpus is None:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_extraction import corpus_of

        corpus, _ = corpus_of(items)
    model = model or load_model().name
    out = {}
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        bench = _Bench(Path(tmp), corpus, model, random.Random(seed), kill_within)
        bench.context.set_forkserver_preload(["bertology_utils.attention.extraction", "torch", "transformers"])
        extract_attention(corpus, bench.serial, model, progress=False, **SETTINGS)
        idle, done_reading = bench.context.Event(), bench.context.Event()
        busy = [bench.start(_busy, idle) for _ in range(load)]
        try:
            for name in paths:
                queue = bench.context.Queue()
                polling = [
                    bench.start(_read, str(bench.pointer), str(bench.serial), done_reading, queue, k)
                    for k in range(readers)
                ]
                started = time.perf_counter()
                stats = bench.path(name, kills, writers)
                done_reading.set()
                examples = []
                for reader in polling:
                    seen = queue.get(timeout=120)
                    examples += seen.pop("examples")
                    stats.update(seen)
                    reader.join()
                done_reading.clear()
                stats["seconds"] = round(time.perf_counter() - started)
                out[name] = {**stats, "torn examples": examples}
        finally:
            idle.set()
            for p in busy:
                p.join(timeout=5)
    return out


COLUMNS = ("rounds", "cycles", "kills", "items", "polls", "reads", "torn", "lost", "duplicated", "unequal", "seconds")


def table(results: dict[str, dict]) -> str:
    """The results as a Markdown table, with where the injected kills landed."""
    lines = ["| path | " + " | ".join(COLUMNS) + " | kills landed |", "|---" * (len(COLUMNS) + 2) + "|"]
    for name, stats in results.items():
        landed = ", ".join(
            f"{k.removeprefix('killed at ')} {v}" for k, v in sorted(stats.items()) if k.startswith("killed at")
        )
        lines.append(f"| {name} | " + " | ".join(str(stats.get(c, 0)) for c in COLUMNS) + f" | {landed} |")
    return "\n".join(lines)


ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "results" / "faults.json"
#: The generated block (bertology_utils.present.generated) that shows the recorded run, and its page.
BLOCK = "faults"
PAGE = ROOT / "docs" / "guide" / "store.md"


def doc_block(record: dict) -> str:
    """What the documentation shows of a recorded run: how it ran, then the table."""
    s = record["settings"]
    total = sum(r["kills"] for r in record["results"].values())
    return (
        f"{total} kills ({record['date']}, {record['machine']}; {s['model']}, {s['items']} items, "
        f"{s['readers']} readers, {s['writers']} shard writers, {s['load']} busy process(es), seed {s['seed']}):\n\n"
        + table(record["results"])
    )


def _record(args: argparse.Namespace, results: dict) -> None:
    from bertology_utils.core.models import load_model

    settings = {k: v for k, v in vars(args).items() if k != "record"} | {"model": args.model or load_model().name}
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "settings": settings,
        "results": results,
    }
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    from bertology_utils.present.generated import write_block

    write_block(PAGE, BLOCK, doc_block(record))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--kills", type=int, default=100, help="kills per path (at least)")
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--model", default=None)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the bench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", action="store_true", help="record the results and the documented table")
    args = parser.parse_args()
    paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    results = run(
        paths,
        kills=args.kills,
        items=args.items,
        model=args.model,
        readers=args.readers,
        writers=args.writers,
        load=args.load,
        seed=args.seed,
    )
    print(table(results))
    for name, stats in results.items():
        for example in stats["torn examples"]:
            print(f"{name}: torn: {example}")
    bad = {
        n: s for n, s in results.items() if s.get("torn") or s.get("lost") or s.get("duplicated") or s.get("unequal")
    }
    if args.record:
        _record(args, results)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
