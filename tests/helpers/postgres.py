"""The test PostgreSQL: the variable naming its URL, `missing`, which skips a test for
want of it except in CI, where it fails (state, reliability and watch tests), and
`PgState`, one state name in it with the CLI pointed at it (the CLI tests on a PostgreSQL
state): `spawn` starts it as a process, for a run beside another or one to kill; `run`
runs it to its end in this process (`tests.helpers.cli.invoke`)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from psycopg.conninfo import conninfo_to_dict

from reconciler.state.postgres import PostgresStore
from tests.helpers.cli import invoke
from tests.helpers.reliability import live_names

PG_ENV = "RUNAI_RECONCILE_TEST_PG"  # a PostgreSQL URL the tests may create schemas in


def missing(what: str) -> None:
    """Skip the test for want of `what`, except in CI (which provides it), where it fails."""
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the PostgreSQL tests: {what}")
    pytest.skip(what)


class PgState:
    """One state name in the test server, and the CLI pointed at it."""

    def __init__(self, ws, url: str, name: str | None = None):
        self.ws, self.url = ws, url
        self.name = name or f"cli-{uuid.uuid4().hex[:8]}"
        self.password = conninfo_to_dict(url).get("password") or ""
        self.outputs: list[str] = []

    def spawn(self, *args: str, state: str | None = None,
              name: str | None = None) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNAI_", "PG"))}
        env.update({k: v for k, v in self.ws.env.items() if v is not None})
        return subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "--state", state or self.url,
             "--state-name", name or self.name, *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, cwd=self.ws.root)

    def wait(self, proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=timeout)
        self.outputs += [out, err]
        return proc.returncode, out, err

    def run(self, *args: str, state: str | None = None,
            name: str | None = None) -> tuple[int, str, str]:
        """The CLI run to its end in this process, with the environment `spawn` gives."""
        env = {k: None for k in os.environ if k.startswith("PG")}
        env.update(self.ws.env)
        res = invoke(self.ws.root, "--state", state or self.url, "--state-name",
                     name or self.name, *args, **env)
        self.outputs += [res.stdout, res.stderr]
        return res.returncode, res.stdout, res.stderr

    def apply(self, *extra: str) -> tuple[int, str, str]:
        return self.run(*extra, "apply", str(self.ws.specs), "--auto-approve")

    def store(self) -> PostgresStore:
        return PostgresStore(self.url, name=self.name)

    def converged(self, sim, names: list[str]) -> None:
        """Live holds each name once, and the state tracks exactly those workloads."""
        counts = live_names(sim)
        assert {n: c for n, c in counts.items() if c > 1} == {}, "duplicates"
        assert set(counts) == set(names)
        live = {w["name"]: w["workloadId"] for w in sim.admin.get("/_sim/workloads").json()
                ["workloads"] if w["projectId"] == "7" and w["desiredPhase"] != "Deleted"}
        store = self.store()
        try:
            state = store.read()
            assert not store.has_journal()
        finally:
            store.close()
        assert {r.name: r.workload_id for r in state.resources.values()} == live

    def no_password_anywhere(self) -> None:
        assert self.password and not any(self.password in o for o in self.outputs)
