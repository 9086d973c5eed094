"""The PostgreSQL server restarted (pg_ctl restart) in the middle of an apply on a
PostgreSQL state: no action starts once its journal intent cannot be written, the apply
exits 1 with one error line, and the next apply recovers and converges, no duplicate.

The server restarted is this module's own (.ci/postgres.sh start), not the shared one of
$RUNAI_RECONCILE_TEST_PG: the tests running beside it (pytest-xdist's other worker) keep
theirs up."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers.reliability import convergence, journal_left, spawn, wait_for_posts, write_fleet
from tests.helpers.postgres import PG_ENV, missing

pytestmark = [pytest.mark.postgres, pytest.mark.http]

POSTGRES_SH = pathlib.Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"


@pytest.fixture(scope="module")
def own_server() -> Iterator[dict[str, str]]:
    """A PostgreSQL of this module's own: {"url": ..., "dir": ...}, stopped at the end."""
    if not os.environ.get(PG_ENV):
        missing(f'{PG_ENV} is not set: start a server with eval "$(.ci/postgres.sh start)"')
    started = subprocess.run([str(POSTGRES_SH), "start"], capture_output=True, text=True,
                             timeout=120)
    if started.returncode != 0:
        missing(f"cannot start a PostgreSQL of the test's own: {started.stderr.strip()}")
    exports = dict(line.removeprefix("export ").split("=", 1)
                   for line in started.stdout.splitlines() if line.startswith("export "))
    yield {"url": exports[PG_ENV], "dir": exports["RUNAI_RECONCILE_TEST_PG_DIR"]}
    subprocess.run([str(POSTGRES_SH), "stop", exports["RUNAI_RECONCILE_TEST_PG_DIR"]],
                   capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def pg_url(own_server) -> str:
    """The `ws` of these tests keeps its state in the module's own server."""
    return own_server["url"]


def created_names(sim) -> list[str]:
    return [r["body"]["name"] for r in sim.requests()
            if r["method"] == "POST" and r["route"].endswith("/distributed")]


@pytest.mark.parametrize("ws", ["postgres"], indirect=True)
def test_a_server_restart_mid_apply_starts_no_new_action_and_the_next_apply_recovers(
        ws, sim_server, own_server):
    folder = own_server["dir"]
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    names = write_fleet(ws, 30)
    proc = spawn(ws, "--parallelism", "3", "apply", str(ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 4)
    subprocess.run([str(POSTGRES_SH), "restart", folder], check=True, timeout=90)
    out, err = proc.communicate(timeout=60)
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("Error: PostgreSQL state backend (host ") and "cannot " in last
    sent = created_names(sim_server)
    assert len(sent) < len(names)  # it stopped

    # Each create sent has its intent in the journal: it was committed before the request.
    store = ws.store()
    try:
        raw = store._load_journal() or b""
        _, pending = store.read_with_pending()
    finally:
        store.close()
    intents = {json.loads(line)["address"].rsplit("/", 1)[1] for line in raw.splitlines()
               if json.loads(line).get("op") == "intent"}
    assert set(sent) <= intents

    res = ws.apply()
    assert res.exit_code == 0, res.output
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    assert not journal_left(ws)
    assert pending, "the restart found no create in flight"
    for intent in pending:  # each create in flight at the cut was looked up by name
        assert f"{intent.address}: found workload" in res.stderr or \
            f"{intent.address}: the interrupted run had not created it" in res.stderr
    # Each name was created once (a request cut off in flight may have been logged by the
    # simulator without an answer: the next apply found it not created and sent it again).
    created = collections.Counter(
        r["body"]["name"] for r in sim_server.requests() if r["method"] == "POST"
        and r["route"].endswith("/distributed") and r["status"] and r["status"] < 300)
    assert created == dict.fromkeys(names, 1)
