"""The cycle collector is the program's to tune, never the library's: loading specs (in
process or in children) leaves it as its caller set it, and no module of the package
but the CLI's entry point touches it (`operations.memory` holds the hooks the entry sets)."""

from __future__ import annotations

import ast
import gc
import pathlib
import sys

from reconciler.desired.loader import load_specs

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import specgen  # noqa: E402


def test_a_library_caller_whose_collector_is_on_sees_it_collect_while_specs_load(tmp_path):
    specgen.write_specs(tmp_path, 40)
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        workloads = load_specs(tmp_path)
    finally:
        gc.callbacks.remove(count)
    assert len(workloads) == 40
    # 40 specs are tens of thousands of containers: passes all along the load, not one
    # as a pause ends
    assert len(collections) > 5, "the loader paused the caller's cycle collector"


def test_only_the_cli_entry_point_touches_the_collector():
    package = ROOT / "reconciler"
    touching = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "gc" for a in node.names) \
                    or isinstance(node, ast.ImportFrom) and node.module == "gc":
                touching.append(str(path.relative_to(ROOT)))
    assert touching == ["reconciler/cli.py"]
