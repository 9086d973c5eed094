"""The pure modules are pure when they run, not only in the import contracts: each,
imported alone in a fresh interpreter (a package with all its modules), loads no state
store, lock, journal, specs loader, API client or live read of ours, and no `fcntl`,
socket or HTTP client module.

The contracts (pyproject.toml, `lint-imports`) read the import statements; this reads
what an import really loads, as a package's `__init__` or a library decides it. A probe
in each interpreter sees every module as it is first loaded, with the chain of modules
that loaded it, and every import statement of ours, even of a module already loaded.
One exception, by that chain: pydantic (the policy's rule models) reads its plugins'
package metadata, and the standard library's `email.utils` it loads imports `socket`
without opening one."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.helpers.constants import ROOT

# Each is imported alone; between them they import every pure module of the contract.
PURE = ["reconciler.diff", "reconciler.planner", "reconciler.plans", "reconciler.gpus",
        "reconciler.policy", "reconciler.render", "reconciler.kinds", "reconciler.export",
        "reconciler.drift", "reconciler.adoption", "reconciler.listing",
        "reconciler.watch.workload"]

IO = ["fcntl", "socket", "ssl", "http.client", "urllib.request", "httpx", "aiohttp",
      "psycopg", "uvicorn", "starlette",
      "reconciler.state.store", "reconciler.state.locking", "reconciler.state.journal",
      "reconciler.state.backends", "reconciler.state.postgres", "reconciler.state.election",
      "reconciler.state.folders", "reconciler.api", "reconciler.live", "reconciler.executor",
      "reconciler.refresh", "reconciler.planfile", "reconciler.operations",
      "reconciler.desired.loader", "reconciler.desired.background", "reconciler.desired.cache",
      "reconciler.desired.sources"]

# Run as `python -c PROBE MODULE IO-JSON`: prints {module: the chain that loaded it}.
PROBE = r"""
import builtins, json, sys
target, io = sys.argv[1], tuple(json.loads(sys.argv[2]))
found = {}

def io_module(name):
    return any(name == m or name.startswith(m + ".") for m in io)

def chain():
    out, frame = [], sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if not out or out[-1] != name:
            out.append(name)
        frame = frame.f_back
    return out[::-1]

class Probe:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if io_module(name) and name not in found:
            found[name] = chain()
        return None

real_import = builtins.__import__

def traced(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if importer.startswith("reconciler") and level == 0 and io_module(name):
        found.setdefault(name, [importer, name])
    return real_import(name, globals, locals, fromlist, level)

sys.meta_path.insert(0, Probe)
builtins.__import__ = traced
import importlib, pkgutil
module = importlib.import_module(target)
for info in pkgutil.walk_packages(getattr(module, "__path__", []), target + "."):
    importlib.import_module(info.name)
print(json.dumps(found))
"""


def _excused(name: str, loaded_by: list[str]) -> bool:
    """`socket`, loaded by pydantic's own machinery (the first module after our last)."""
    ours = [i for i, m in enumerate(loaded_by) if m.startswith("reconciler")]
    after = loaded_by[ours[-1] + 1] if ours and ours[-1] + 1 < len(loaded_by) else ""
    return name == "socket" and after.split(".")[0] == "pydantic"


@pytest.fixture(scope="module")
def loaded() -> dict[str, dict[str, list[str]]]:
    """module -> {I/O module it loaded: the chain that loaded it}, all probes at once."""
    procs = {m: subprocess.Popen([sys.executable, "-c", PROBE, m, json.dumps(IO)], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for m in PURE}
    out = {}
    for module, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{module}: {stderr}"
        out[module] = json.loads(stdout)
    return out


def test_the_probed_modules_are_the_contracts_pure_ones():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [pure] = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("id") == "pure"]
    assert set(PURE) <= set(pure["source_modules"])


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_loads_no_io(loaded, module):
    bad = {name: " -> ".join(by) for name, by in loaded[module].items()
           if not _excused(name, by)}
    assert bad == {}, f"{module} loads I/O modules: {json.dumps(bad, indent=1)}"


def test_the_probe_sees_a_store_loaded_through_a_package():
    proc = subprocess.run([sys.executable, "-c", PROBE, "reconciler.state.backends",
                           json.dumps(IO)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    found = json.loads(proc.stdout)
    assert "reconciler.state.store" in found and "fcntl" in found
