"""Every module of the package imports on its own, in a fresh interpreter.

An import cycle, or a module that works only because another was imported first,
fails here before it fails a user (pip-tools does the same)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import reconciler

MODULES = sorted(m.name for m in pkgutil.walk_packages(reconciler.__path__, "reconciler."))


def test_the_package_has_its_modules():
    assert {"reconciler.cli", "reconciler.planner", "reconciler.simulator.app"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_alone(module: str):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
