"""The lock (requirements/lock-linux-py311-cpu.txt): it satisfies pyproject.toml, and make setup's environment is it;
the installer's lock (requirements/uv.txt) is its pin with hashes."""

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock-linux-py311-cpu.txt"
LOCK_INPUT = ROOT / "requirements" / "lock.in"
UV_LOCK = ROOT / "requirements" / "uv.txt"
UV_INPUT = ROOT / "requirements" / "uv.in"
#: What make setup leaves in the environment it built (the Makefile's SETUP_STAMP).
SETUP_STAMP = Path(sys.prefix) / ".setup-lock.stamp"
REFRESH = "refresh the lock with `make lock` (see docs/getting-started.md, Locked dependencies), then `make setup`"


def locked(lock: Path = LOCK) -> dict[str, Version]:
    """Canonical name -> pinned version, from a lock's ``name==version`` lines."""
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", lock.read_text(encoding="utf-8"), re.MULTILINE)
    return {canonicalize_name(name): Version(version) for name, version in pins}


def lines_of(path: Path) -> list[str]:
    """A requirements input's lines without comments and blank lines."""
    lines = [line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def requirements() -> list[Requirement]:
    """What make setup installs: pyproject.toml's dependencies, dev and distributed extras and build backend, and
    requirements/lock.in."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    texts = (
        project["dependencies"]
        + project["optional-dependencies"]["dev"]
        + project["optional-dependencies"]["distributed"]
        + pyproject["build-system"]["requires"]
        + lines_of(LOCK_INPUT)
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


@pytest.mark.parametrize("lock", [LOCK, UV_LOCK], ids=lambda p: p.name)
def test_every_pin_has_a_hash(lock):
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text(encoding="utf-8"))
    assert [b.split()[0] for b in blocks if "==" in b.split()[0] and "--hash=sha256:" not in b] == []


def test_the_installers_lock_is_its_pin():
    pins = [Requirement(line) for line in lines_of(UV_INPUT)]
    assert [p.name for p in pins] == ["uv"] and str(pins[0].specifier).startswith("==")
    assert locked(UV_LOCK) == {"uv": Version(str(pins[0].specifier)[2:])}, (
        f"requirements/uv.txt is not uv.in's pin: {REFRESH}"
    )


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


def setup_commands(venv: Path, installer: str) -> subprocess.CompletedProcess:
    """What ``make setup`` would run to build ``venv`` with ``installer`` (a dry run: nothing is installed)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    target = str(venv / ".setup-lock.stamp")
    command = ["make", "--dry-run", "--no-print-directory", f"VENV={venv}", f"INSTALLER={installer}", target]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_make_setup_installs_the_lock_hash_checked_with_the_installer(tmp_path, installer):
    done = setup_commands(tmp_path / "venv", installer)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    [lock] = [line for line in lines if f"-r {LOCK.relative_to(ROOT)}" in line]
    assert "--require-hashes" in lock
    assert ("/bin/uv pip install" in lock) == (installer == "uv")
    assert ("-m pip install" in lock) == (installer == "pip")
    # uv itself comes from its own lock, hash-checked, before it installs anything
    first = [k for k, line in enumerate(lines) if f"-r {UV_LOCK.relative_to(ROOT)}" in line]
    assert (first == [lines.index(lock) - 1]) if installer == "uv" else first == []
    if installer == "uv":
        assert "--require-hashes" in lines[first[0]] and "--compile-bytecode" in lock


def test_make_setup_refuses_an_unknown_installer(tmp_path):
    done = setup_commands(tmp_path / "venv", "conda")
    assert done.returncode != 0 and 'INSTALLER must be uv or pip, not "conda"' in done.stderr
