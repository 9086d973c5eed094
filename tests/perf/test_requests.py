"""Requests per plan: what `plan` costs the control plane, counted by the simulator.

An unchanged fleet the state knows costs, with `--refresh=auto` (the default), one list
page per project and a token, no GET; with `--refresh=full`, one GET per workload and a
token; a fleet the state does not know costs one list call per project, not a GET per
spec; all read each project's GPU quota once; and `plan --no-refresh` sends nothing."""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import specgen  # noqa: E402

pytestmark = pytest.mark.http

N = 30
MOVING = {"Creating", "Initializing", "Pending", "Resuming", "Stopping"}  # phases on their way


def _counts(sim_server) -> collections.Counter:
    return collections.Counter(f"{r['method']} {r['route']}"
                               for r in sim_server.requests(api_only=False))


def _settle(sim_server, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while any(w.get("phase") in MOVING for w in sim_server.live()):
        assert time.monotonic() < deadline, "the simulator's phases did not settle"
        time.sleep(0.05)


def test_plan_requests_new_fleet_then_unchanged_fleet(ws, sim_server):
    specgen.write_specs(ws.specs, N)
    projects = {1 + i % specgen.PROJECTS for i in range(N)}

    assert ws.plan().exit_code == 0
    fresh = _counts(sim_server)
    assert fresh == {"POST /api/v1/token": 1, "GET /api/v1/workloads": len(projects),
                     "GET /api/v1/org-unit/projects/{projectId}": len(projects)}

    assert ws.apply().exit_code == 0
    # The shared simulator moves phases (Creating -> Running) after the apply, and each
    # move moves updatedAt (docs/refresh.md): once they settled, an apply with nothing to
    # do records the fingerprints the list shows then.
    _settle(sim_server)
    assert ws.apply().exit_code == 0
    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    unchanged = _counts(sim_server)
    # After an apply, the apply recorded every list fingerprint: no GET.
    assert unchanged == {"POST /api/v1/token": 1, "GET /api/v1/workloads": len(projects),
                         "GET /api/v1/org-unit/projects/{projectId}": len(projects)}

    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode", "--refresh=full")
    assert res.exit_code == 0, res.output
    unchanged = _counts(sim_server)
    gets = sum(n for route, n in unchanged.items() if route.startswith("GET /api/v1/workloads/"))
    assert gets == N
    assert unchanged["GET /api/v1/org-unit/projects/{projectId}"] == len(projects)
    assert sum(unchanged.values()) == N + len(projects) + 1  # and the token

    sim_server.clear_requests()
    assert ws.plan("--no-refresh").exit_code == 0
    assert _counts(sim_server) == {}
