"""benchmarks/device_off.py, which docs/performance.md ("Under load") times against the CLI
as shipped: with any speed device turned off the CLI makes the same plan, so an A/B of it
measures the device and nothing else; a name it does not know is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import specgen  # noqa: E402

pytestmark = pytest.mark.http


def _plan(ws, off: str, cache: str) -> subprocess.CompletedProcess:
    env = cli.env_of(ws, RUNAI_RECONCILE_DEVICES_OFF=off, RUNAI_RECONCILE_SPEC_CACHE=cache,
                     XDG_CACHE_HOME=str(ws.root / "cache"))
    return subprocess.run([sys.executable, str(BENCH / "device_off.py"), "--state",
                           str(ws.state_path), "plan", str(ws.specs), "--detailed-exitcode"],
                          env=env, cwd=ws.root, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_each_device_off_makes_the_same_plan(ws, sim_server):
    paths = specgen.write_specs(ws.specs, 120)  # above MIN_FILES: the children and the indexer start
    assert ws.apply().exit_code == 0
    paths[7].write_text(paths[7].read_text().replace("TRAIN_OPTION_00", "TRAIN_OPTION_X", 1))
    shipped = _plan(ws, "", "off")
    assert shipped.returncode == 2, shipped.stderr
    assert "Plan: 0 to create, 0 to update, 1 to replace" in shipped.stdout
    for off, cache in (("children", "off"), ("gc", "off"), ("indexer", ""),
                       ("gc", ""), ("children,indexer,gc", "")):
        got = _plan(ws, off, cache)
        assert (got.returncode, got.stdout) == (2, shipped.stdout), (off, cache, got.stderr)


def test_an_unknown_device_is_refused(ws, sim_server):
    got = _plan(ws, "children,uvloop", "off")
    assert got.returncode == 1
    assert "unknown ['uvloop']" in got.stderr
