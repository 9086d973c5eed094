"""The tests' own layout: test folders follow the modules and features of the code (no
folder named for the review round that wrote it: `hardening`, `review`), and no test
module or helper imports a test module (`test_*.py`), a conftest, or a fixture module of
tests/fixtures: shared helpers live in tests/helpers, fixtures in conftest.py files and in
tests/fixtures (which pytest loads by the root conftest's `pytest_plugins`, and tests ask
for by name). Read with `ast`, so an import inside a function counts too. No test folder
takes the name of a module this Python can import (run from inside tests/, it would
stand in for that module)."""

from __future__ import annotations

import ast
import importlib.machinery
import pathlib
import sys
import textwrap

TESTS = pathlib.Path(__file__).resolve().parent
ROUND_FOLDERS = {"hardening", "review"}


def _module_of(path: pathlib.Path, root: pathlib.Path) -> list[str]:
    """`tests/e2e/test_x.py` -> ["tests", "e2e", "test_x"] (root is the folder holding tests/)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.AST, module: list[str], is_package: bool) -> list[list[str]]:
    """The dotted names an import statement reaches: each module, and for `from M import n`
    also M.n (n may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".") for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        package = module if is_package else module[:-1]
        base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        target = base + (node.module.split(".") if node.module else [])
    else:
        target = (node.module or "").split(".")
    return [target] + [target + [alias.name] for alias in node.names]


def _forbidden(name: list[str]) -> str | None:
    last = name[-1]
    if last.startswith("test_"):
        return "a test module"
    if last == "conftest":
        return "a conftest"
    if name[:2] == ["tests", "fixtures"] and len(name) > 2:
        return "a fixture module (ask for its fixtures by name)"
    return None


def import_violations(root: pathlib.Path) -> list[str]:
    """Every import, in root/tests, of a test module, a conftest or a fixture module."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        module = _module_of(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        in_fixtures = module[:2] == ["tests", "fixtures"]
        for node in ast.walk(tree):
            for name in _imported(node, module, path.name == "__init__.py"):
                why = _forbidden(name)
                if why and not (in_fixtures and why.startswith("a fixture module")):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports "
                                 f"{'.'.join(name)}, {why}")
    return sorted(set(found))


def round_folders(root: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("*")
                  if p.is_dir() and p.name in ROUND_FOLDERS)


def test_no_test_module_or_helper_imports_a_test_module_a_conftest_or_a_fixture_module():
    assert import_violations(TESTS.parent) == []


def test_no_folder_is_named_for_a_review_round():
    assert round_folders(TESTS.parent) == []


def test_no_test_folder_has_the_name_of_an_importable_module():
    """Run from inside tests/, pytest puts that folder first on `sys.path`: a folder of it
    named as an installed or standard module (`packaging`, which the lock's test imports)
    would stand in for that module, and its tests would not collect."""
    outside = [p for p in sys.path if p and pathlib.Path(p).resolve() not in (TESTS, TESTS.parent)]

    def module(name: str) -> bool:
        spec = importlib.machinery.PathFinder.find_spec(name, outside)
        return name in sys.builtin_module_names or (spec is not None and spec.origin is not None)

    assert sorted(p.name for p in TESTS.iterdir()
                  if p.is_dir() and p.name.isidentifier() and module(p.name)) == []


def test_the_checks_find_each_kind_of_wrong_import_and_a_round_folder(tmp_path):
    """The two checks above on a small tree with one of each fault (and allowed imports)."""
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": 'pytest_plugins = ["tests.fixtures.sim"]\n',
        "tests/fixtures/__init__.py": "",
        "tests/fixtures/sim.py": "from tests.helpers.workspace import Workspace\n",
        "tests/helpers/__init__.py": "",
        "tests/helpers/workspace.py": "from tests.e2e.test_a import SPEC\n",
        "tests/e2e/__init__.py": "",
        "tests/e2e/conftest.py": "",
        "tests/e2e/test_a.py": "from .conftest import CLUSTER\nfrom tests.helpers import workspace\n",
        "tests/e2e/test_b.py": "def test_b():\n    from .test_a import SPEC\n",
        "tests/e2e/test_c.py": "from tests.e2e import conftest\nimport tests.fixtures.sim\n",
        "tests/review/__init__.py": "",
        "tests/review/test_d.py": "from ..e2e import test_a\nfrom tests.e2e.conftest import ws\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    assert import_violations(tmp_path) == [
        "tests/e2e/test_a.py:1 imports tests.e2e.conftest, a conftest",
        "tests/e2e/test_b.py:2 imports tests.e2e.test_a, a test module",
        "tests/e2e/test_c.py:1 imports tests.e2e.conftest, a conftest",
        "tests/e2e/test_c.py:2 imports tests.fixtures.sim, a fixture module (ask for its "
        "fixtures by name)",
        "tests/helpers/workspace.py:1 imports tests.e2e.test_a, a test module",
        "tests/review/test_d.py:1 imports tests.e2e.test_a, a test module",
        "tests/review/test_d.py:2 imports tests.e2e.conftest, a conftest",
    ]
    assert round_folders(tmp_path) == ["tests/review"]
