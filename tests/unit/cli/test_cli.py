"""The `bertology extract`, `info` and `merge` commands, end to end on the tiny BERT model."""

import json
import subprocess
import sys

import numpy as np
import pytest

from bertology_utils.attention import extraction, word_attention
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR
from bertology_utils.attention.store import AttentionStore
from bertology_utils.cli import main
from bertology_utils.cli.extract import FROM_RULES, TOO_LONG_POLICIES, parse_shard

SENTENCES = [["The", "cat", "sat", "."], ["Dogs", "bark", "loudly", "at", "night", "."], ["Hello", "!"]]


def _conllu(path, sentences):
    blocks = []
    for n, words in enumerate(sentences, 1):
        rows = [
            f"{i}\t{w}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
            for i, w in enumerate(words, 1)
        ]
        blocks.append(f"# sent_id = s{n}\n" + "\n".join(rows) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bert(tiny_model_dirs):
    return str(tiny_model_dirs["bert"])


def _extract(*args):
    return main(["extract", *map(str, args), "--no-progress"])


def test_extract_conllu_resume_and_refuse_other_settings(tmp_path, bert, capsys):
    conllu, store_path = _conllu(tmp_path / "three.conllu", SENTENCES), tmp_path / "three.zarr"
    assert _extract("--conllu", conllu, "--model", bert, "--store", store_path) == 0
    out = capsys.readouterr().out
    assert "data: three: 3 sentences" in out and "2 layers x 4 heads" in out
    assert "items 3: extracted 3, skipped 0, missing 0" in out and str(store_path) in out

    store = AttentionStore.open(store_path)
    assert store.summary()["extracted"] == 3 and store.is_complete
    for item, words in zip(store, SENTENCES):
        assert item.words == ("[CLS]", *words, "[SEP]")
        assert item.word_kinds[0] == LEADING_SPECIAL and item.word_kinds[-1] == SEPARATOR
        assert item.attention.shape == (2, 4, len(words) + 2, len(words) + 2)

    assert _extract("--conllu", conllu, "--model", bert, "--store", store_path) == 0
    assert "reusing the complete store" in capsys.readouterr().out

    assert _extract("--conllu", conllu, "--model", bert, "--store", store_path, "--from-rule", "first") == 2
    err = capsys.readouterr().err
    assert err.startswith("bertology: error:") and "from_rule" in err and "Traceback" not in err


def test_too_long_items_are_skipped_and_reported_or_stop_the_run(tmp_path, bert, capsys):
    long = " ".join(["word"] * 200)  # far more than the tiny model's 64 positions
    assert (
        _extract("--sentence", long, "--sentence", "A short one.", "--model", bert, "--store", tmp_path / "skip.zarr")
        == 0
    )
    out = capsys.readouterr().out
    assert "1 item longer than 64 tokens was skipped: indices 0" in out
    assert "extracted 1, skipped 1" in out

    assert _extract("--sentence", long, "--model", bert, "--store", tmp_path / "err.zarr", "--too-long", "error") == 2
    err = capsys.readouterr().err
    assert err.startswith("bertology: error:") and "64" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_shards_merged_equal_an_unsharded_extraction(tmp_path, bert, capsys):
    text = tmp_path / "five.txt"
    text.write_text(
        "One two three.\n\nA longer sentence with more words in it.\nShort.\n"
        "Another quite long sentence, with a comma.\nThe end\n",
        encoding="utf-8",
    )
    common = ["--text", text, "--model", bert]
    assert _extract(*common, "--store", tmp_path / "full.zarr") == 0
    for i in range(2):
        assert _extract(*common, "--shard", f"{i}/2", "--store", tmp_path / f"part{i}.zarr") == 0
    out = capsys.readouterr().out
    assert "data: five: 5 sentences" in out and "shard 1/2: items 2 to 4 of 5" in out
    assert "not extracted yet" in out

    merged = tmp_path / "merged.zarr"
    assert main(["merge", str(merged), str(tmp_path / "part0.zarr")]) == 0
    assert "not complete" in capsys.readouterr().out
    assert main(["merge", str(merged), str(tmp_path / "part1.zarr")]) == 0  # a late shard joins
    out = capsys.readouterr().out
    assert "items 5: extracted 5, skipped 0, missing 0" in out and "complete: every item" in out

    full, joined = AttentionStore.open(tmp_path / "full.zarr"), AttentionStore.open(merged)
    assert joined.is_complete and len(joined.shards) == 2
    for i in range(5):
        a, b = full.get(i, dtype=np.float16), joined.get(i, dtype=np.float16)
        assert a.words == b.words and a.item_id == b.item_id
        assert np.array_equal(a.attention, b.attention)


def test_info_without_model_as_json(capsys):
    assert main(["info", "--no-model", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["model"] is None
    sample = [d for d in info["datasets"] if d["name"] == "sample"]
    assert sample and sample[0]["path"] and sample[0]["where"]
    assert {"python", "torch", "transformers", "bertology_utils", "zarr", "papermill"} <= set(info["versions"])
    assert {"BERTOLOGY_DATA_DIR", "cache_dir", "offline", "default_model_path"} <= set(info["settings"])


def test_info_without_model_does_not_import_torch():
    """`info --no-model` is the quick look: it answers without paying seconds for torch and transformers."""
    code = (
        "import sys; from bertology_utils.cli import main; status = main(['info', '--no-model', '--json']); "
        "heavy = sorted({'torch', 'transformers'} & set(sys.modules)); "
        "sys.stderr.write(repr(heavy)); sys.exit(status)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("[]")
    assert json.loads(done.stdout)["model"] is None


def test_info_describes_the_model(bert, capsys):
    assert main(["info", "--model", bert, "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert (model["layers"], model["heads"], model["max_tokens"]) == (2, 4, 64)


def test_info_reports_what_it_cannot_open(tmp_path, capsys):
    assert main(["info", "--no-model", "--store", str(tmp_path / "none.zarr")]) == 1
    out = capsys.readouterr().out
    assert "no attention store at" in out and "data sets" in out


@pytest.mark.parametrize("bad", ["3/2", "2/2", "-1/2", "0-4", "a/b", "1/0"])
def test_bad_shard_is_a_usage_error(bad, capsys):
    assert main(["extract", "--sentence", "hi", "--store", "x.zarr", "--shard", bad]) == 2
    assert "--shard" in capsys.readouterr().err


def test_parse_shard():
    assert parse_shard("0/4") == (0, 4) and parse_shard("3/4") == (3, 4)


def test_usage_errors(capsys):
    assert main(["extract", "--store", "x.zarr"]) == 2  # no input
    assert main(["extract", "--sentence", "a", "--conllu", "f", "--store", "x.zarr"]) == 2  # two inputs
    assert main(["extract", "--sentence", "a", "--split", "dev", "--store", "x.zarr"]) == 2
    assert "--split goes with --dataset" in capsys.readouterr().err


def test_help_reads_well(capsys):
    assert main(["extract", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--shard" in out and "examples:" in out and "bertology merge" in out
    for command in ("info", "merge"):
        assert main([command, "--help"]) == 0
        assert "examples:" in capsys.readouterr().out


def test_regression_options_are_documented(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--check REFERENCE_DIR" in out and "--update-reference REFERENCE_DIR" in out and "--params-file" in out
    assert "make refresh-references" in out
    assert main(["check", "--help"]) == 0
    out = capsys.readouterr().out
    assert "RUN_DIR REFERENCE_DIR" in out and "examples:" in out and "check.json" in out


def test_choices_match_the_package():
    assert FROM_RULES == word_attention.FROM_RULES
    assert TOO_LONG_POLICIES == extraction.TOO_LONG_POLICIES


def test_assets_lists_each_library_and_fails_when_one_is_missing(no_js_libraries, capsys):
    from bertology_utils.present import assets

    assert main(["assets"]) == 1
    out = capsys.readouterr().out
    assert out.count("MISSING") == len(assets.ASSETS) and "npm ci" in out
    for asset in assets.ASSETS.values():  # every pinned library installed: all found, exit 0
        path = no_js_libraries / asset.package / asset.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("/* stand-in */")
    assert main(["assets"]) == 0
    assert "MISSING" not in capsys.readouterr().out


def test_extract_context_mixing_maps_and_refuse_an_unknown_method(tmp_path, bert, capsys):
    from bertology_utils.core.models import load_model
    from bertology_utils.data import Corpus
    from bertology_utils.interventions.mixing import MixingMaps

    conllu, store_path = _conllu(tmp_path / "three.conllu", SENTENCES), tmp_path / "rollout.zarr"
    assert _extract("--conllu", conllu, "--model", bert, "--store", store_path, "--maps", "rollout") == 0
    assert "maps: rollout" in capsys.readouterr().out
    store = AttentionStore.open(store_path)
    assert store.num_heads == 1 and store.metadata["maps"]["name"] == "rollout"
    expected = extraction.attention_for(
        Corpus.from_texts([" ".join(s) for s in SENTENCES], name="s"),
        load_model(bert, device="cpu"),
        maps=MixingMaps("rollout"),
    )
    for item, reference in zip(store, expected):
        np.testing.assert_allclose(item.attention, reference.attention, atol=1e-3)
        np.testing.assert_allclose(item.attention.sum(-1), 1, atol=1e-2)  # rollout rows are distributions

    assert _extract("--conllu", conllu, "--model", bert, "--store", tmp_path / "x.zarr", "--maps", "saliency") == 2
    err = capsys.readouterr().err
    assert "--maps" in err and "rollout" in err and "Traceback" not in err


def test_extract_stopped_by_sigterm_keeps_its_commits_and_resumes(tmp_path, bert):
    """SIGTERM mid-extraction: exit 143 with how to resume, a store holding whole blocks, and a re-run finishes it."""
    import signal
    import time

    conllu, store_path = _conllu(tmp_path / "many.conllu", SENTENCES * 400), tmp_path / "many.zarr"
    command = [sys.executable, "-m", "bertology_utils", "extract", "--conllu", str(conllu), "--model", bert]
    command += ["--store", str(store_path), "--block-size", "4", "--batch-size", "4", "--no-progress"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:  # until a few blocks are committed
        try:
            if AttentionStore.open(store_path).done >= 8:
                break
        except Exception:  # not created yet
            pass
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM; run the same command again to resume" in err and "Traceback" not in err
    store = AttentionStore.open(store_path)
    assert 8 <= store.done < len(SENTENCES) * 400 and store.done % 4 == 0  # whole blocks only
    assert subprocess.run(command, capture_output=True, text=True, timeout=300).returncode == 0
    assert AttentionStore.open(store_path).is_complete
