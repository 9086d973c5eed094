"""The reliability checks, used by the reliability suites and by the state, hardening and
perf tests that kill or race `runai-reconcile`: `runai-reconcile` as a real subprocess
(`spawn`, to kill it), fleets of specs (`write_fleet`), waits on the simulator's request
log, the convergence check (no duplicate, lost or untracked workload), and `PgWorkspace`,
a workspace on a PostgreSQL state.

`@backends` runs a test on a state file and on a PostgreSQL state (a name of its own in
$RUNAI_RECONCILE_TEST_PG): `ws` is then a `PgWorkspace` (tests/reliability/conftest.py's
`ws`); `spawn`, `stored_state` and `journal_left` serve both."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.helpers.specs import training_doc
from tests.helpers.workspace import Workspace


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


def spawn(ws: Workspace, *args: str, sigint_ignored: bool = False,
          python: tuple[str, ...] = ("-m", "reconciler.cli")) -> subprocess.Popen:
    """`runai-reconcile --state <ws state> ARGS` as a subprocess (stdout, stderr piped).
    `sigint_ignored`: started as a background job of a non-interactive shell is (and as
    many containers and CI runners start it), SIGINT ignored. `python`: what the
    interpreter runs instead of the CLI's module (`-c` and a program calling it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update({k: v for k, v in ws.env.items() if v is not None})
    shell = ("sh", "-c", 'trap "" INT; exec "$0" "$@"') if sigint_ignored else ()
    return subprocess.Popen(
        [*shell, sys.executable, *python, *state_args(ws), *args],
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


def faults(sim, **settings) -> None:
    # tokenTtl too: the session's simulator keeps another test's short token lifetime
    # (the `sim_server` fixture resets latency and error rates only), and a token that
    # expires within one slow request is refused again after its renewal.
    sim.admin.put("/_sim/faults", json={"tokenTtl": 3600, **settings}).raise_for_status()


def wait_until(check, proc, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def journal(ws):
    return ws.state_path.with_name("state.json.journal")
