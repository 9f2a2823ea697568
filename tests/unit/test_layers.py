"""The package's folders are layers: a module imports only from its own folder or from folders below it.

Every import of every module counts (module level, inside functions, under ``TYPE_CHECKING``; absolute
and relative), since a lazy import still ties the two layers together. Folders in the same layer are
siblings and may not import each other. A private name or module (one leading underscore) is not
imported from another folder: the folder's ``__init__`` re-exports what others may use.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import bertology_utils

PACKAGE = "bertology_utils"
ROOT = Path(bertology_utils.__file__).parent

#: The layers, lowest first; folders in one tuple are siblings. The package's own ``__init__`` and
#: ``__main__`` sit above every layer (they gather the public API and start the command).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("data",),
    ("attention",),
    ("analyses", "interventions"),
    ("papers",),
    ("run",),
    ("present",),
    ("cli",),
)
TOP = ""  # the folder name of the package's root modules
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders} | {TOP: len(LAYERS)}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(name: str) -> bool:
    return (ROOT.parent / name.replace(".", "/") / "__init__.py").is_file()


def is_module(name: str) -> bool:
    return is_package(name) or (ROOT.parent / (name.replace(".", "/") + ".py")).is_file()


def folder_of(name: str) -> str:
    """``bertology_utils.attention.store`` -> ``attention``; the root package and its modules -> TOP."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and is_package(".".join(parts[:2])) else TOP


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports(path: Path):
    """(line, text, imported module, imported name or None) for each package import in ``path``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        text = ast.unparse(node) if isinstance(node, (ast.Import, ast.ImportFrom)) else ""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield node.lineno, text, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                # ``from bertology_utils.x import y``: y may be a module of its own.
                full = f"{source}.{alias.name}"
                yield (node.lineno, text, full, None) if is_module(full) else (node.lineno, text, source, alias.name)


def violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        here = folder_of(module)
        where = f"{module} (line {{line}}: {{text}})"
        if here not in RANK:
            found.append(f"{module}: folder {here!r} is not in LAYERS (tests/unit/test_layers.py)")
            continue
        for line, text, target, name in imports(path):
            there = folder_of(target)
            at = where.format(line=line, text=text)
            if there == here:
                continue
            if there not in RANK:
                found.append(f"{at}: folder {there!r} is not in LAYERS")
            elif RANK[there] > RANK[here]:
                found.append(f"{at}: {here or 'the package root'} imports from the higher layer {there}")
            elif RANK[there] == RANK[here]:
                found.append(f"{at}: {here} imports from its sibling layer {there}")
            hidden = [part for part in target.split(".")[1:] if private(part)] + (
                [name] if name and private(name) else []
            )
            if hidden:
                found.append(f"{at}: imports the private {', '.join(hidden)} from another folder ({there})")
    return found


def test_imports_follow_the_layers():
    found = violations()
    assert not found, (
        "imports against the layer order (lowest first: "
        + " < ".join(" = ".join(f) for f in LAYERS)
        + "):\n  "
        + "\n  ".join(found)
    )


# --------------------------------------------------------------------------- the public API


def defined_public_names(path: Path) -> list[str]:
    """Functions and classes a module defines at top level without a leading underscore."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]


def test_every_module_with_public_names_lists_them_in_all():
    unlisted = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        module = importlib.import_module(module_name(path))
        names = defined_public_names(path)
        exported = getattr(module, "__all__", None)
        if names and exported is None:
            unlisted.append(f"{module.__name__}: no __all__ (defines {', '.join(names)})")
        elif names:
            missing = [name for name in names if name not in exported]
            if missing:
                unlisted.append(f"{module.__name__}: __all__ lacks {', '.join(missing)}")
        for name in exported or ():
            if not hasattr(module, name):
                unlisted.append(f"{module.__name__}: __all__ names {name}, which it does not have")
    assert not unlisted, "\n  ".join(["public names and __all__ disagree:", *unlisted])


@pytest.mark.parametrize("package", sorted(module_name(p) for p in ROOT.glob("**/__init__.py")))
def test_packages_re_export_what_their_modules_export(package):
    """A package's ``__all__`` names resolve, each function or class to one its module lists in its own ``__all__``
    (other values, such as a registry's instances, carry their class's module)."""
    module = importlib.import_module(package)
    assert module.__all__, f"{package} has no __all__"
    wrong = []
    for name in module.__all__:
        value = getattr(module, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        home = sys.modules.get(getattr(value, "__module__", "") or "")
        inside = home is not None and home is not module and home.__name__.startswith(PACKAGE + ".")
        if inside and name not in getattr(home, "__all__", [name]):
            wrong.append(f"{name} (from {home.__name__}, whose __all__ does not list it)")
    assert not wrong, f"{package} re-exports private names: {', '.join(wrong)}"
    assert set(module.__all__) <= set(dir(module))


def test_importing_the_package_and_its_cli_does_not_import_torch():
    code = (
        "import sys, bertology_utils, bertology_utils.cli, bertology_utils.core.settings, bertology_utils.data; "
        "sys.stdout.write(repr(sorted({'torch', 'transformers', 'matplotlib'} & set(sys.modules))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]"
