"""The house rules a reader relies on: modules small enough for one idea, and the methods documented."""

from __future__ import annotations

import ast
from pathlib import Path

import bertology_utils

ROOT = Path(bertology_utils.__file__).parent
#: The most lines a module may have: past it a module holds more than one idea.
MAX_LINES = 700
#: The layers whose public functions and classes are the methods users call and cite.
DOCUMENTED = ("interventions", "analyses")


def _modules(*folders: str) -> list[Path]:
    roots = [ROOT / folder for folder in folders] if folders else [ROOT]
    return sorted(path for root in roots for path in root.rglob("*.py"))


def _public_definitions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """The module's top-level functions and classes that ``__all__`` lists (all not underscored without one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    listed = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            listed = set(ast.literal_eval(node.value))
    return [
        node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.name.startswith("_")
        and (listed is None or node.name in listed)
    ]


def test_no_module_is_over_the_line_limit():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by idea): {long}"


def test_every_public_method_of_interventions_and_analyses_is_documented():
    undocumented = []
    for path in _modules(*DOCUMENTED):
        for node in _public_definitions(path):
            where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
            doc = ast.get_docstring(node)
            if not doc:
                undocumented.append(f"{where}: no docstring")
            elif not isinstance(node, ast.ClassDef):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                missing = [a.arg for a in arguments if a.arg not in ("self", "cls") and f":param {a.arg}:" not in doc]
                if missing:
                    undocumented.append(f"{where}: no :param: for {', '.join(missing)}")
    assert not undocumented, "document (sphinx style, as mkdocs.yml declares):\n" + "\n".join(undocumented)


def test_the_documentation_check_sees_a_missing_parameter(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '__all__ = ["f", "g"]\n\ndef f(a, b):\n    """F.\n\n    :param a: a.\n    """\n\n'
        "def g():\n    pass\n\ndef h():\n    pass\n"
    )
    assert [node.name for node in _public_definitions(module)] == ["f", "g"]
