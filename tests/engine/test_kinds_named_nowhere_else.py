"""No engine module names a type of resource but the registry and the spec models, and
docs/kinds.md's list of the files a new type touches is that set exactly.

Every module of the engine (`reconciler/`, the simulator aside: it keeps its own table on
purpose) is read as Python, and a module names a type when it holds, outside docstrings:
a registered type's name as a string (`"NIMService"`), one of the registry's entries
(`kinds.MANIFEST`), an import of a family module (`reconciler.kinds.nim`), or one of the
flags that once stood for one type (`manifest_body`, `envelope`)."""

from __future__ import annotations

import ast
import re

from reconciler import kinds
from tests.helpers.constants import ROOT

ENTRIES = frozenset(n for n in kinds.__all__ if isinstance(getattr(kinds, n), kinds.Kind))
FAMILIES = frozenset({"reconciler.kinds.flat", "reconciler.kinds.nim",
                      "reconciler.kinds.manifests", "reconciler.kinds.org",
                      "reconciler.kinds.access",
                      "reconciler.kinds.workload_policies"})
ONE_TYPE_FLAGS = frozenset({"manifest_body", "envelope"})


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            out.add(id(node.body[0].value))
    return out


def names_a_type(source: str) -> list[str]:
    """What in `source` names a type (empty: nothing)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs and node.value in kinds.KINDS:
            found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and (node.attr in ENTRIES
                                                  or node.attr in ONE_TYPE_FLAGS):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ENTRIES:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom):
            modules = ({node.module} if node.module in FAMILIES else set()) | {
                f"{node.module}.{a.name}" for a in node.names} & FAMILIES
            found += [f"line {node.lineno}: import {m}" for m in sorted(modules)]
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name in FAMILIES]
    return found


def _engine_modules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text()
            for p in sorted((ROOT / "reconciler").rglob("*.py"))
            if "simulator" not in p.relative_to(ROOT).parts}


def _listed_in_the_docs() -> set[str]:
    text = (ROOT / "docs" / "kinds.md").read_text()
    section = text.split("## Adding a type", 1)[1].split("\n## ", 1)[0]
    files = set()
    for bullet in re.findall(r"^- (.*(?:\n  .*)*)", section, re.M):
        files.update(re.findall(r"`(reconciler/[\w/]+\.py)`", bullet))
    return files


def test_only_the_files_docs_kinds_md_lists_name_a_type():
    naming = {path: found for path, source in _engine_modules().items()
              if (found := names_a_type(source))}
    listed = _listed_in_the_docs()
    assert listed, "docs/kinds.md lists no file under 'Adding a type'"
    assert {p: f for p, f in naming.items() if p not in listed} == {}, \
        "an engine module names a type (ask the entry instead)"
    assert listed - set(naming) == set(), "docs/kinds.md lists a file that names no type"


def test_the_walk_finds_each_way_of_naming_a_type():
    assert names_a_type('if kind.name == "NIMService":\n    pass\n')
    assert names_a_type("if kind.manifest_body:\n    pass\n")
    assert names_a_type("x = kinds.MANIFEST\n")
    assert names_a_type("from reconciler.kinds import nim\n")
    assert names_a_type("from reconciler.kinds.manifests import templates\n")
    assert not names_a_type('"""The Manifest kind, NIMService too."""\nx = kind.label(b)\n')
