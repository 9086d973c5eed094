"""Every module of the package imports on its own, in an interpreter that holds none of
the package's modules.

An import cycle, or a module that works only because another was imported first,
fails here before it fails a user (pip-tools does the same).

One interpreter does it all: it imports the package's required libraries (their
top-level modules, read from the installed metadata; importing them is theirs to test),
then forks once per module of the package, and the child imports that module alone and
exits. A fork starts from the parent's memory, where no `reconciler` module was ever
imported, so each child sees what a fresh interpreter would, less the libraries' own
start-up, which a hundred interpreters would otherwise pay a hundred times.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys

import pytest

import reconciler

MODULES = sorted(m.name for m in pkgutil.walk_packages(reconciler.__path__, "reconciler."))

# Runs in a fresh interpreter: argv[1] is the JSON list of modules; prints one JSON object,
# module -> the child's traceback ("" when it imported).
_FORKING_IMPORTER = r"""
import importlib, importlib.metadata as md, json, os, re, sys, traceback

def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()

required = {canonical(re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0])
            for r in md.requires("runai-reconcile") or () if "extra ==" not in r}
for top, dists in md.packages_distributions().items():
    if top.isidentifier() and not top.startswith("_") and any(
            canonical(d) in required for d in dists):
        importlib.import_module(top)
assert not [m for m in sys.modules if m == "reconciler" or m.startswith("reconciler.")]

failures = {}
for module in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            importlib.import_module(module)
        except BaseException:
            os.write(write, traceback.format_exc().encode())
            code = 1
        os.close(write)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        told = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        failures[module] = told or f"exit status {os.waitstatus_to_exitcode(status)}"
    else:
        failures[module] = ""
print(json.dumps(failures))
"""


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, str]:
    """Each module's traceback when imported alone ("" when it imported)."""
    proc = subprocess.run([sys.executable, "-c", _FORKING_IMPORTER, json.dumps(MODULES)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_package_has_its_modules():
    assert {"reconciler.cli", "reconciler.planner", "reconciler.simulator.app"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_alone(module: str, imported_alone: dict[str, str]):
    assert module in imported_alone
    assert imported_alone[module] == "", imported_alone[module]
