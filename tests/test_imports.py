"""Every module of the package imports on its own, in an interpreter that holds none of
the package's modules.

An import cycle, or a module that works only because another was imported first,
fails here before it fails a user (pip-tools does the same).

One interpreter does it all: it imports the package's required libraries (their
top-level modules, read from the installed metadata; importing them is theirs to test),
then forks once per module of the package (as many children at once as it has cores),
and the child imports that module alone and exits. A fork starts from the parent's
memory, where no `reconciler` module was ever imported, so each child sees what a fresh
interpreter would, less the libraries' own start-up, which a hundred interpreters would
otherwise pay a hundred times.
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
import importlib, importlib.metadata as md, json, os, re, shutil, sys, tempfile, traceback

def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()

required = {canonical(re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0])
            for r in md.requires("runai-reconcile") or () if "extra ==" not in r}
for top, dists in md.packages_distributions().items():
    if top.isidentifier() and not top.startswith("_") and any(
            canonical(d) in required for d in dists):
        importlib.import_module(top)
assert not [m for m in sys.modules if m == "reconciler" or m.startswith("reconciler.")]

def start(module, told):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            importlib.import_module(module)
        except BaseException:
            with open(told, "w") as out:
                out.write(traceback.format_exc())
            code = 1
        os._exit(code)
    return pid

# One child per core at a time: each imports its module and exits, and tells a failure
# through a file of its own.
waiting = json.loads(sys.argv[1])
cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
folder = tempfile.mkdtemp()
running, failures = {}, {}
while waiting or running:
    while waiting and len(running) < cores:
        module = waiting.pop(0)
        told = os.path.join(folder, module)
        running[start(module, told)] = (module, told)
    pid, status = os.wait()
    module, told = running.pop(pid)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        failures[module] = (open(told).read() if os.path.exists(told) else "") or (
            f"exit status {code}")
    else:
        failures[module] = ""
shutil.rmtree(folder)
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
