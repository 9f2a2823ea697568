"""The lock (requirements/lock-linux-py311-cpu.txt): it satisfies pyproject.toml, and make setup's environment is it."""

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock-linux-py311-cpu.txt"
LOCK_INPUT = ROOT / "requirements" / "lock.in"
#: What make setup leaves in the environment it built (the Makefile's SETUP_STAMP).
SETUP_STAMP = Path(sys.prefix) / ".setup-lock.stamp"
REFRESH = "refresh the lock with `make lock` (see docs/getting-started.md, Locked dependencies), then `make setup`"


def locked() -> dict[str, Version]:
    """Canonical name -> pinned version, from the lock's ``name==version`` lines."""
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", LOCK.read_text(encoding="utf-8"), re.MULTILINE)
    return {canonicalize_name(name): Version(version) for name, version in pins}


def requirements() -> list[Requirement]:
    """What make setup installs: pyproject.toml's dependencies, dev and distributed extras and build backend, and
    requirements/lock.in."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    lines = [line.split("#")[0].strip() for line in LOCK_INPUT.read_text(encoding="utf-8").splitlines()]
    texts = (
        project["dependencies"]
        + project["optional-dependencies"]["dev"]
        + project["optional-dependencies"]["distributed"]
        + pyproject["build-system"]["requires"]
        + [line for line in lines if line]
    )
    return [Requirement(text) for text in texts]


def test_the_lock_satisfies_pyproject_toml():
    pins = locked()
    assert len(pins) > 100 and pins["torch"] == Version("2.13.0+cpu")
    unmet = [
        f"{req} (locked: {pins.get(canonicalize_name(req.name), 'absent')})"
        for req in requirements()
        if pins.get(canonicalize_name(req.name)) not in req.specifier
    ]
    assert unmet == [], f"the lock does not satisfy {', '.join(unmet)}: {REFRESH}"


def test_every_pin_has_a_hash():
    blocks = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text(encoding="utf-8"))
    assert [b.split()[0] for b in blocks if "==" in b.split()[0] and "--hash=sha256:" not in b] == []


@pytest.mark.skipif(
    not SETUP_STAMP.is_file(),
    reason=f"{sys.prefix} was not built by make setup (no {SETUP_STAMP.name}), so it need not match the lock",
)
def test_the_environment_is_the_lock():
    wrong = []
    for name, version in locked().items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed) != version:
            wrong.append(f"{name} {installed or 'not installed'} (locked: {version})")
    assert wrong == [], f"this environment is not the lock's: {', '.join(wrong)}; run make setup"
