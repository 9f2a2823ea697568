"""Progress on the long steps: a bar per step counting what it says it counts, nothing at all with
``progress=False``, the same numbers either way; and ``bertology run``'s status lines."""

import io
import json
import time

import numpy as np
import pytest
import torch
from synthetic_trees import random_heads
from tqdm.std import tqdm as plain_tqdm

from bertology_utils.analyses.probes import AttentionProbe, ProbeData, RightBranching, estimators, fit_probes
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions import dev_sets, gated_logits, head_relevance, l0, pruning, references
from bertology_utils.run.display import RunDisplay, expected_seconds, format_duration, notebook_sections

WORDS = ["the", "movie", "was", "good", "bad", "and", "very", "story", "film", "acting"]
N_DEV, BATCH = 12, 5


@pytest.fixture(scope="module")
def loaded(tiny_model_dirs):
    torch.manual_seed(0)
    return load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=2, device="cpu")


@pytest.fixture(scope="module")
def items():
    rng = np.random.default_rng(0)
    sentences = [Sentence(f"t{i}", tuple(rng.choice(WORDS, size=int(rng.integers(3, 9))))) for i in range(N_DEV)]
    return Corpus.from_items(sentences, "toy", [int(x) for x in rng.integers(0, 2, size=N_DEV)])


@pytest.fixture(scope="module")
def dev(loaded, items):
    return dev_sets.dev_set(loaded, items, "SST-2", batch_size=BATCH)


def probe_data(n: int = 10, layers: int = 2, heads: int = 3) -> ProbeData:
    """Random trees and random attention: what a probe makes of them does not matter here, only its epochs."""
    rng = np.random.default_rng(0)
    sentences, maps = [], []
    for i in range(n):
        words = int(rng.integers(2, 8))
        sentence = Sentence(f"s{i}", tuple(f"w{k}" for k in rng.integers(0, 30, size=words)), *random_heads(rng, words))
        logits = rng.normal(size=(layers, heads, words + 2, words + 2))
        kinds = np.array([LEADING_SPECIAL] + [WORD] * words + [SEPARATOR], dtype=np.int8)
        sentences.append(sentence)
        maps.append(
            ItemAttention(
                index=i,
                item_id=sentence.id,
                words=("[CLS]", *sentence.words, "[SEP]"),
                word_kinds=kinds,
                segments=np.zeros(words + 2, dtype=np.int8),
                attention=(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32),
                n_tokens=words + 2,
            )
        )
    return ProbeData(Corpus.from_items(sentences, "toy-trees"), maps, block_size=16)


#: Each long step: (name, call(loaded, dev, items, progress) -> its result). Every one is computed afresh
#: (no cache), so each shows its bars.
STEPS = {
    "ablation sweep": lambda m, dev, items, progress: pruning.ablation_sweep(m, dev, progress=progress),
    "importance": lambda m, dev, items, progress: pruning.head_importance(m, dev, progress=progress),
    "pruning curve": lambda m, dev, items, progress: pruning.pruning_curve(m, dev, step=0.25, progress=progress),
    "random pruning": lambda m, dev, items, progress: pruning.random_pruning_curves(
        m, dev, seeds=(0, 1), step=0.25, progress=progress
    ),
    "head relevance": lambda m, dev, items, progress: head_relevance.head_attribution(
        m, dev, steps=2, tolerance=0.01, max_panels=4, progress=progress
    ),
    "gate x gradient": lambda m, dev, items, progress: head_relevance.gate_times_gradient(m, dev, progress=progress),
    "L0 gates": lambda m, dev, items, progress: l0.l0_sweep(m, dev, dev, [0.1, 1.0], steps=7, progress=progress),
    "word references": lambda m, dev, items, progress: references.word_references(
        m, items, batch_size=BATCH, steps=2, tolerance=0.05, progress=progress
    ),
    "probes": lambda m, dev, items, progress: fit_probes(
        {
            "Attn": (AttentionProbe(max_epochs=3, patience=None, seed=0), probe_data(), probe_data(4)),
            "Right-branching": (RightBranching(), probe_data(), None),
        },
        n_jobs=1,
        progress=progress,
    ),
}

#: What each step's bars are: (description, unit, total) in the order they start; a total of None is
#: checked only against the count the bar reached (the passes of a gated sweep depend on the batching).
EXPECTED = {
    "ablation sweep": [("ablation sweep SST-2", "pass", None)],
    "importance": [("importance SST-2", "example", N_DEV)],
    "pruning curve": [("pruning curve SST-2", "step", 4), ("pruning curve SST-2: scoring", "pass", None)],
    "random pruning": [
        ("random pruning SST-2, seed 0", "pass", None),
        ("random pruning SST-2, seed 1", "pass", None),
    ],
    "head relevance": [("head relevance SST-2", "example", N_DEV)],
    "gate x gradient": [("gate x gradient SST-2", "example", N_DEV)],
    "L0 gates": [
        ("L0 gates SST-2, lambdas 0.1, 1", "step", 7),
        ("L0 masks SST-2: scoring", "pass", None),
    ],
    "word references": [("word references", "example", N_DEV)],
    "probes": [("probe Attn", "epoch", 3)],
}


@pytest.fixture
def bars(monkeypatch):
    """Every bar the long steps make, written to a string instead of the terminal."""
    made = []

    class Recorded(plain_tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "file": io.StringIO()})
            self.shown = not self.disable  # close() sets disable
            made.append(self)

    for module in (gated_logits, pruning, head_relevance, l0, references, estimators):
        monkeypatch.setattr(module, "tqdm", Recorded)
    return made


@pytest.mark.parametrize("step", STEPS)
def test_each_long_step_shows_bars_that_reach_their_totals(step, loaded, dev, items, bars):
    STEPS[step](loaded, dev, items, True)
    shown = [bar for bar in bars if bar.shown]
    assert [(bar.desc, bar.unit) for bar in shown] == [(desc, unit) for desc, unit, _ in EXPECTED[step]]
    for bar, (_, _, total) in zip(shown, EXPECTED[step]):
        assert bar.n == bar.total, f"{bar.desc}: {bar.n} of {bar.total}"
        assert total is None or bar.total == total, bar.desc


def test_gated_passes_are_counted_before_they_run(loaded, dev, bars):
    """The bar's total is the passes the loop then makes, however the configurations split over passes."""
    layers, heads = gated_logits.gate_shape(loaded)
    gates = torch.ones(7, layers, heads)
    gates[1:4, -1, 0] = 0  # three configurations gating only the last layer: their copies start there
    gates[4:, 0, :] = 0
    for configs_per_pass in (1, 2, None):
        bars.clear()
        gated_logits.predict_with_gates(loaded, dev, gates, configs_per_pass=configs_per_pass, progress=True)
        (bar,) = bars
        assert bar.n == bar.total > 0
    assert gated_logits.predict_with_gates(loaded, dev, gates, configs_per_pass=1, progress=True).shape[0] == 7
    assert bars[-1].total == len(dev.batches) * 7  # one pass per configuration and batch


@pytest.mark.parametrize("step", STEPS)
def test_progress_false_prints_nothing_and_changes_no_number(step, loaded, dev, items, capfd):
    quiet = STEPS[step](loaded, dev, items, False)
    assert capfd.readouterr() == ("", "")
    shown = STEPS[step](loaded, dev, items, True)
    assert capfd.readouterr().err  # the bars went to stderr
    _assert_same(quiet, shown)


def _assert_same(a, b):
    """Equal results, field by field (arrays exactly: a bar must not change what is computed)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, (np.ndarray, torch.Tensor)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    elif hasattr(a, "__dataclass_fields__"):
        for name in a.__dataclass_fields__:
            if name not in ("seconds",):
                _assert_same(getattr(a, name), getattr(b, name))
    elif hasattr(a, "history_"):  # a fitted probe: its epochs' losses and dev UAS, and its weights
        assert [{k: v for k, v in row.items() if k != "seconds"} for row in a.history_] == [
            {k: v for k, v in row.items() if k != "seconds"} for row in b.history_
        ]
        for x, y in zip(a.module_.state_dict().values(), b.module_.state_dict().values()):
            torch.testing.assert_close(x, y, rtol=0, atol=0)
    elif isinstance(a, (RightBranching, torch.nn.Module)):
        pass
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


# --------------------------------------------------------------------------- bertology run's status lines


def test_sections_are_the_last_markdown_heading_above_each_cell():
    cells = [
        {"cell_type": "code", "source": "x = 1"},
        {"cell_type": "markdown", "source": "# Title\n\nSome text.\n\n## The *model* and the data"},
        {"cell_type": "code", "source": "y = 2"},
        {"cell_type": "markdown", "source": ["No heading here, ", "#hashtag is not one"]},
        {"cell_type": "code", "source": "z = 3"},
        {"cell_type": "markdown", "source": ["### 4. Pruning ##"]},
        {"cell_type": "code", "source": ""},
    ]
    assert notebook_sections(cells) == [
        None,
        "The model and the data",
        "The model and the data",
        "The model and the data",
        "The model and the data",
        "4. Pruning",
        "4. Pruning",
    ]


def _run_json(root, name, notebooks, started="2026-11-26T10:00:00+00:00"):
    folder = root / name
    folder.mkdir(parents=True)
    record = {"run_name": name, "started": started, "notebooks": notebooks}
    (folder / "run.json").write_text(json.dumps(record))


def test_expected_time_is_the_latest_finished_run_with_the_same_parameters(tmp_path):
    def entry(duration, parameters, started, status="ok"):
        return {
            "name": "07_roles",
            "status": status,
            "duration_s": duration,
            "parameters": parameters,
            "started": started,
        }

    assert expected_seconds(tmp_path, "07_roles", {"n": 3}) is None  # no run yet
    _run_json(tmp_path, "a", [entry(100.0, {"n": 3, "tasks": ["SST-2"]}, "2026-11-26T10:00:00+00:00")])
    _run_json(tmp_path, "b", [entry(200.0, {"tasks": ["SST-2"], "n": 3}, "2026-11-26T12:00:00+00:00")])
    _run_json(tmp_path, "c", [entry(300.0, {"n": 4, "tasks": ["SST-2"]}, "2026-11-26T13:00:00+00:00")])
    _run_json(tmp_path, "d", [entry(5.0, {"n": 3, "tasks": ["SST-2"]}, "2026-11-26T14:00:00+00:00", "failed")])
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "run.json").write_text("{not json")
    # the tuple a caller passes is the list run.json holds; key order does not matter; failed runs stopped early
    assert expected_seconds(tmp_path, "07_roles", {"n": 3, "tasks": ("SST-2",)}) == 200.0
    assert expected_seconds(tmp_path, "07_roles", {"n": 4, "tasks": ["SST-2"]}) == 300.0
    assert expected_seconds(tmp_path, "07_roles", {"n": 5, "tasks": ["SST-2"]}) is None
    assert expected_seconds(tmp_path, "08_other", {"n": 3, "tasks": ["SST-2"]}) is None


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_log_gets_whole_status_lines_with_section_elapsed_and_expected():
    out, clock = io.StringIO(), Clock()
    display = RunDisplay(out, tty=False, clock=clock)
    display.started("07_roles", "[1/2] 07_roles", expected=1600.0)
    display.started("04_probes", "[2/2] 04_probes", expected=None)
    display.section("07_roles", "4. Pruning with L0 gates")
    clock.now += 192
    display.tick()
    display.finished("04_probes", "[2/2] 04_probes ok (192.0 s)")
    clock.now += 60
    display.tick()
    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/2] 07_roles ... (~26:40 expected from the last run with these parameters)",
        "[2/2] 04_probes ...",
        "[1/2] 07_roles: 4. Pruning with L0 gates (3:12 elapsed, ~26:40 expected)",
        "[2/2] 04_probes (3:12 elapsed)",
        "[2/2] 04_probes ok (192.0 s)",
        "[1/2] 07_roles: 4. Pruning with L0 gates (4:12 elapsed, ~26:40 expected)",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_terminal_gets_its_status_lines_redrawn_in_place():
    out, clock = io.StringIO(), Clock()
    display = RunDisplay(out, tty=True, clock=clock)
    display.started("00_tour", "[1/1] 00_tour", expected=None)
    display.section("00_tour", "Extracting attention")
    clock.now += 5
    display.tick()
    display.tick()
    display.finished("00_tour", "[1/1] 00_tour ok (5.0 s)")
    text = out.getvalue()
    # each redraw erases the line drawn before (cursor up, clear line) and draws it again
    assert text.count("[1/1] 00_tour: Extracting attention (0:05 elapsed)\n") == 2
    assert text.count("\x1b[F\x1b[2K") == 3  # before the two redraws and the last line
    assert text.endswith("[1/1] 00_tour ok (5.0 s)\n")


def test_the_display_thread_prints_on_its_own_and_stops_with_the_run():
    out = io.StringIO()
    with RunDisplay(out, tty=False, interval=0.01) as display:
        display.started("00_tour", "[1/1] 00_tour", expected=12.0)
        display.section("00_tour", "Extracting attention")
        for _ in range(500):
            if "Extracting attention" in out.getvalue():
                break
            time.sleep(0.01)
    assert "[1/1] 00_tour: Extracting attention (0:00 elapsed, ~0:12 expected)" in out.getvalue()
    assert not display.thread.is_alive()


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (59.6, "1:00"), (75, "1:15"), (3725, "1:02:05")])
def test_durations_read_as_clock_times(seconds, text):
    assert format_duration(seconds) == text
