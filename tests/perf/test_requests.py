"""Requests per plan: what `plan` costs the control plane, counted by the simulator.

An unchanged fleet the state knows costs, with `--refresh=auto` (the default), one list
page per project and a token, no GET; with `--refresh=full`, one GET per workload and a
token; a fleet the state does not know costs one list call per project, not a GET per
spec; all read each project's GPU quota once; and `plan --no-refresh` sends nothing."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import specgen  # noqa: E402

pytestmark = pytest.mark.http

N = 30


def _counts(sim_server) -> collections.Counter:
    return collections.Counter(f"{r['method']} {r['route']}"
                               for r in sim_server.requests(api_only=False))


def test_plan_requests_new_fleet_then_unchanged_fleet(ws, sim_server):
    specgen.write_specs(ws.specs, N)
    projects = {1 + i % specgen.PROJECTS for i in range(N)}

    assert ws.plan().exit_code == 0
    fresh = _counts(sim_server)
    assert fresh == {"POST /api/v1/token": 1, "GET /api/v1/workloads": len(projects),
                     "GET /api/v1/org-unit/projects/{projectId}": len(projects)}

    assert ws.apply().exit_code == 0
    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    unchanged = _counts(sim_server)
    # The first plan after an apply: the apply recorded every list fingerprint.
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
