"""Fixtures for the reliability suites: the e2e `sim serve` and workspace, many specs at
once, `runai-reconcile` as a real subprocess (to kill it), the convergence check, and
a recorder of figures for docs/reliability.md (`benchmarks/reliability_report.py`).

`@backends` runs a test on a state file and on a PostgreSQL state (a name of its own in
$RUNAI_RECONCILE_TEST_PG): `ws` is then a `PgWorkspace`; `spawn`, `stored_state` and
`journal_left` serve both."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.e2e.conftest import (CLIENT_ID, CLIENT_SECRET, CLUSTER, Workspace,  # noqa: F401
                                _sim_process, sim_server)
from tests.state.conftest import pg_url  # noqa: F401

REPORT_ENV = "RELIABILITY_REPORT"  # a JSON-lines file the suites append their figures to


def training_doc(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3") -> str:
    return (f"kind: DistributedTraining\nname: {name}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            f"spec:\n  image: {image}\n  distributedFramework: PyTorch\n  numWorkers: 2\n")


class PgWorkspace(Workspace):
    """A workspace whose state is a fresh state name in the test PostgreSQL."""

    def __init__(self, root, env: dict, url: str):
        super().__init__(root, env)
        self.url, self.name = url, f"rel-{uuid.uuid4().hex[:8]}"
        self.state_args = ["--state", url, "--state-name", self.name]

    def cli(self, *args: str, input: str | None = None):
        return CliRunner().invoke(main, [*self.state_args, *args], env=self.env, input=input,
                                  catch_exceptions=False)

    def store(self):
        from reconciler.state.postgres import PostgresStore

        return PostgresStore(self.url, name=self.name)


@pytest.fixture
def ws(request, tmp_path, sim_server):  # noqa: F811
    """The e2e workspace; with `@backends`, also on a PostgreSQL state."""
    env = {"RUNAI_URL": sim_server.url, "RUNAI_CLIENT_ID": CLIENT_ID,
           "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None, "NO_COLOR": "1"}
    if getattr(request, "param", "file") == "postgres":
        return PgWorkspace(tmp_path / "project", env, request.getfixturevalue("pg_url"))
    return Workspace(tmp_path / "project", env)


backends = pytest.mark.parametrize(
    "ws", ["file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


def state_args(ws: Workspace) -> list[str]:
    return getattr(ws, "state_args", ["--state", str(ws.state_path)])


def stored_state(ws: Workspace) -> dict | None:
    """The state as stored (parsed), None when nothing was written."""
    if isinstance(ws, PgWorkspace):
        store = ws.store()
        try:
            state = store.read()
        finally:
            store.close()
        return state.to_json() if state.serial else None
    return ws.state() if ws.state_path.exists() else None


def journal_left(ws: Workspace) -> bool:
    if isinstance(ws, PgWorkspace):
        store = ws.store()
        try:
            return store.has_journal()
        finally:
            store.close()
    return ws.state_path.with_name("state.json.journal").exists()


def write_fleet(ws: Workspace, n: int, prefix: str = "job", image: str | None = None) -> list[str]:
    """`n` DistributedTraining specs in one multi-document file; returns their names."""
    names = [f"{prefix}-{i:03d}" for i in range(n)]
    docs = [training_doc(n_, **({"image": image} if image else {})) for n_ in names]
    (ws.specs / "fleet.yaml").write_text("---\n".join(docs))
    return names


def spawn(ws: Workspace, *args: str) -> subprocess.Popen:
    """`runai-reconcile --state <ws state> ARGS` as a subprocess (stdout, stderr piped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update({k: v for k, v in ws.env.items() if v is not None})
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", *state_args(ws), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, cwd=ws.root)


def posts(sim) -> int:
    """Creates the simulator has received so far (the fleets here are trainings)."""
    return sum(1 for r in sim.requests() if r["method"] == "POST"
               and r["route"].endswith("/distributed"))


def wait_for_posts(sim, proc: subprocess.Popen, n: int, timeout: float = 30) -> None:
    """Until `proc` has sent `n` creates; fails if it exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while posts(sim) < n:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def interrupt_after_posts(ws: Workspace, sim, n: int, *args: str) -> None:
    """Run `runai-reconcile ARGS` at 150 ms per request, Ctrl-C it once it has sent `n`
    creates, and check it exits 130 saying so, with no traceback; latency back to 0."""
    sim.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    proc = spawn(ws, *args)
    wait_for_posts(sim, proc, n)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    sim.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()
    assert proc.returncode == 130, err
    assert "Apply interrupted!" in out and "not started" in out
    assert "Traceback" not in err


def live_names(sim) -> collections.Counter:
    """How many live (not being deleted) workloads hold each name in project 7."""
    workloads = sim.admin.get("/_sim/workloads").json()["workloads"]
    return collections.Counter(w["name"] for w in workloads
                               if w["projectId"] == "7" and w["desiredPhase"] != "Deleted")


@dataclass
class Convergence:
    duplicates: int
    lost: int
    extra: int
    untracked: int  # live workloads the state does not know (or knows by another id)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.extra or self.untracked)


def convergence(ws: Workspace, sim, names: list[str]) -> Convergence:
    """Compare live with the desired names and with the state file."""
    counts = live_names(sim)
    wanted = set(names)
    workloads = sim.admin.get("/_sim/workloads").json()["workloads"]
    ids = {w["name"]: w["workloadId"] for w in workloads
           if w["projectId"] == "7" and w["desiredPhase"] != "Deleted"}
    state = (stored_state(ws) or {}).get("resources", {})
    tracked = {r["name"]: r["workload_id"] for r in state.values()}
    return Convergence(
        duplicates=sum(c - 1 for c in counts.values() if c > 1),
        lost=len(wanted - set(counts)),
        extra=len(set(counts) - wanted),
        untracked=sum(1 for n, wid in ids.items() if tracked.get(n) != wid)
        + len(set(tracked) - set(ids)),
    )


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
