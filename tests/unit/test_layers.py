"""The package's folders are layers: a module imports only from its own folder or from folders below it.

Every import of every module counts (module level, inside functions, under ``TYPE_CHECKING``; absolute
and relative), since a lazy import still ties the two layers together. Folders in the same layer are
siblings and may not import each other. A private name (one leading underscore) belongs to its module:
no other module imports it or reads it off an imported module (``module._name``), in the same folder
or not; a shared helper is public in one home. A private module is imported only inside its package,
whose ``__init__`` re-exports what others may use. And the modules form no import cycle, counting every
import and every ``import_module`` of a module named by a string.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import networkx as nx
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


def import_nodes(tree: ast.Module):
    """The ``import`` statements of ``tree``, wherever they are."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports(path: Path):
    """(line, text, imported module, imported name or None, local name, the module it names or None) for
    each package import in ``path``: ``import a.b`` binds ``a`` to the module ``a``, ``import a.b as m``
    and ``from a import b`` (b a module) bind a name to ``a.b``, ``from a import f`` binds no module."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in import_nodes(parse(path)):
        text = ast.unparse(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    top = alias.name.split(".")[0]
                    yield node.lineno, text, alias.name, None, alias.asname or top, alias.name if alias.asname else top
        else:
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                # ``from bertology_utils.x import y``: y may be a module of its own.
                full, local = f"{source}.{alias.name}", alias.asname or alias.name
                if is_module(full):
                    yield node.lineno, text, full, None, local, full
                else:
                    yield node.lineno, text, source, alias.name, local, None


def private_attributes(path: Path):
    """(line, text, module, name) for each private attribute read off an imported package module
    (``module._name`` after ``from bertology_utils.x import module`` or ``import bertology_utils.x.module``)."""
    bound = {local: module for *_, local, module in imports(path) if module}
    for node in ast.walk(parse(path)):
        if not (isinstance(node, ast.Attribute) and private(node.attr)):
            continue
        head, _, rest = ast.unparse(node.value).partition(".")
        target = f"{bound[head]}.{rest}" if rest and head in bound else bound.get(head)
        if target and is_module(target):
            yield node.lineno, ast.unparse(node), target, node.attr


def hidden_from(module: str, target: str, name: str | None) -> list[str]:
    """What ``module`` may not take from ``target``: ``name`` when private (and ``target`` another module),
    and the private modules on ``target``'s path that lie outside ``module``'s own package."""
    hidden = []
    parts = target.split(".")
    for i, part in enumerate(parts[1:], start=1):
        inside = ".".join(parts[:i])  # the package a private module is private to
        if private(part) and not (module == inside or module.startswith(inside + ".")):
            hidden.append(f"the private module {'.'.join(parts[: i + 1])}")
    if name and private(name) and target != module:
        hidden.append(f"the private {name} of {target}")
    return hidden


def violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        here = folder_of(module)
        where = f"{module} (line {{line}}: {{text}})"
        if here not in RANK:
            found.append(f"{module}: folder {here!r} is not in LAYERS (tests/unit/test_layers.py)")
            continue
        for line, text, target, _, *_ in imports(path):
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
    return found


def private_uses() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        for line, text, target, name, *_ in imports(path):
            found += [
                f"{module} (line {line}: {text}): imports {hidden}" for hidden in hidden_from(module, target, name)
            ]
        for line, text, target, name in private_attributes(path):
            if target != module:
                found.append(f"{module} (line {line}: {text}): reads the private {name} of {target}")
    return found


def test_imports_follow_the_layers():
    found = violations()
    assert not found, (
        "imports against the layer order (lowest first: "
        + " < ".join(" = ".join(f) for f in LAYERS)
        + "):\n  "
        + "\n  ".join(found)
    )


def test_no_module_takes_another_modules_private_names():
    found = private_uses()
    assert not found, "private names used outside their module (make the helper public in one home):\n  " + (
        "\n  ".join(found)
    )


#: The one module that imports a module whose name it computes: :func:`~bertology_utils.core.lazy.lazy_exports`,
#: which loads the modules a package ``__init__`` maps its public names to, on first use of a name. Those maps are
#: the packages' lazy public API, the ``__init__`` above its own modules (it imports none of them itself), not an
#: import between two modules; they are no edges of the import graph.
LAZY_LOADER = f"{PACKAGE}.core.lazy"


def named_imports(path: Path):
    """(line, text, target) for each ``import_module(...)`` / ``importlib.import_module(...)`` call in ``path``:
    target the package module its string names (a name past the module: the module), "" for another package,
    None when the name is not a string literal."""
    for node in ast.walk(parse(path)):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) in ("import_module", "importlib.import_module")):
            continue
        name = node.args[0] if node.args else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            yield node.lineno, ast.unparse(node), None
            continue
        parts = name.value.split(".")
        if parts[0] != PACKAGE:
            yield node.lineno, ast.unparse(node), ""
            continue
        while not is_module(".".join(parts)):
            parts.pop()
        yield node.lineno, ast.unparse(node), ".".join(parts)


def test_only_the_lazy_loader_imports_a_module_by_a_computed_name():
    """A name computed at run time hides an import from the layer and cycle checks."""
    found = [
        f"{module_name(path)} (line {line}: {text})"
        for path in sorted(ROOT.rglob("*.py"))
        if module_name(path) != LAZY_LOADER
        for line, text, target in named_imports(path)
        if target is None
    ]
    assert not found, "imports by a computed module name:\n  " + "\n  ".join(found)


def import_graph() -> nx.DiGraph:
    """Module -> the package modules it imports: at import time, inside functions, under ``TYPE_CHECKING`` and by
    name (``import_module("bertology_utils...")``)."""
    graph = nx.DiGraph()
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        graph.add_node(module)
        graph.add_edges_from((module, target) for _, _, target, *_ in imports(path))
        graph.add_edges_from((module, target) for _, _, target in named_imports(path) if target)
    return graph


def test_modules_import_each_other_without_cycles():
    """A cycle makes what a module finds depend on which one is imported first; a lazy import (inside a function,
    under ``TYPE_CHECKING``, by name) only hides it: the two modules still need each other, so neither is below the
    other. What both need belongs in a module below both."""
    graph = import_graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, "modules in an import cycle:\n  " + "\n  ".join(", ".join(c) for c in sorted(cycles))


def test_the_cycle_check_sees_every_kind_of_import(tmp_path, monkeypatch):
    """Each kind of import the graph counts closes a cycle in a throwaway package shaped like this one."""
    package = tmp_path / PACKAGE / "layer"
    package.mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("")
    kinds = {
        "at import time": "from bertology_utils.layer import low\n",
        "inside a function": "def f():\n    from bertology_utils.layer import low\n",
        "under TYPE_CHECKING": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bertology_utils.layer.low\n"
        ),
        "by name": 'import importlib\nimportlib.import_module("bertology_utils.layer.low")\n',
    }
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / PACKAGE)
    for kind, code in kinds.items():
        (package / "high.py").write_text(code)
        (package / "low.py").write_text("from bertology_utils.layer import high\n")
        assert not nx.is_directed_acyclic_graph(import_graph()), kind


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
