"""Fixtures for the reliability suites: `ws`, the e2e workspace on a state file or, with
`@backends` (tests/helpers/reliability.py), on a PostgreSQL state, and a recorder of
figures for docs/reliability.md (`benchmarks/reliability_report.py`). The shared `sim serve`
is tests/fixtures/sim.py's; spawning, fleets and the convergence check are in
tests/helpers/reliability.py."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import pytest

from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET
from tests.helpers.reliability import PgWorkspace
from tests.helpers.workspace import Workspace

REPORT_ENV = "RELIABILITY_REPORT"  # a JSON-lines file the suites append their figures to


@pytest.fixture
def ws(request, tmp_path, sim_server):  # noqa: F811
    """The e2e workspace; with `@backends`, also on a PostgreSQL state."""
    env = {"RUNAI_URL": sim_server.url, "RUNAI_CLIENT_ID": CLIENT_ID,
           "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None, "NO_COLOR": "1"}
    if getattr(request, "param", "file") == "postgres":
        return PgWorkspace(tmp_path / "project", env, request.getfixturevalue("pg_url"))
    return Workspace(tmp_path / "project", env)


@dataclass
class Figures:
    suite: str
    faults: str
    runs: int = 0
    workloads: int = 0
    duplicates: int = 0
    lost: int = 0
    recoveries: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.call_passed = outcome.get_result().passed


@pytest.fixture
def figures(request):
    """Figures a test fills in; appended to $RELIABILITY_REPORT when that is set."""
    made: list[Figures] = []
    start = time.monotonic()
    callspec = getattr(request.node, "callspec", None)
    on_pg = callspec is not None and callspec.params.get("ws") == "postgres"

    def new(suite: str, faults: str) -> Figures:
        f = Figures(suite + (" (PostgreSQL state)" if on_pg else ""), faults)
        made.append(f)
        return f

    yield new
    path = os.environ.get(REPORT_ENV)
    if path and getattr(request.node, "call_passed", False):
        with open(path, "a", encoding="utf-8") as out:
            for f in made:
                if not f.seconds:
                    f.seconds = time.monotonic() - start
                out.write(json.dumps({**f.__dict__, "test": request.node.nodeid}) + "\n")
