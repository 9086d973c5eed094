"""The CLI on a PostgreSQL state against `sim serve`, each command a separate process:
apply then plan, two applies on one state name and on two, kill -9 of the lock holder,
a server that cannot be reached; and the URL's password in no output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.helpers.reliability import posts, wait_for_posts, write_fleet
from tests.helpers.postgres import PgState

pytestmark = [pytest.mark.postgres, pytest.mark.http]


def faults(sim, **settings) -> None:
    sim.admin.put("/_sim/faults", json=settings).raise_for_status()


@pytest.fixture
def pg(ws, pg_url):  # noqa: F811
    state = PgState(ws, pg_url)
    yield state
    state.no_password_anywhere()


def test_apply_then_plan_shows_no_changes_and_the_state_lives_in_the_database(pg, sim_server):
    names = write_fleet(pg.ws, 5)
    code, out, err = pg.apply()
    assert code == 0, err
    assert "Apply complete! Resources: 5 created" in out
    code, out, err = pg.run("plan", str(pg.ws.specs), "--detailed-exitcode")
    assert code == 0, out + err
    assert "No changes" in out
    code, out, _ = pg.run("state", "list")
    assert out.split() == [f"DistributedTraining/7/{n}" for n in names]
    assert not pg.ws.state_path.exists()  # no state file was written
    pg.converged(sim_server, names)
    saved = str(pg.ws.root / "noop.plan")
    assert pg.run("plan", str(pg.ws.specs), "--out", saved)[0] == 0
    serial = pg.store().read().serial
    code, _, err = pg.run("apply", saved)  # a saved plan moves the serial: never twice
    assert code == 0, err
    assert pg.store().read().serial > serial
    code, _, err = pg.run("apply", saved)
    assert code == 1 and "is stale" in err


def test_the_state_url_can_come_from_the_environment(pg, sim_server):
    write_fleet(pg.ws, 2)
    assert pg.apply()[0] == 0
    pg.ws.env["RUNAI_RECONCILE_STATE"] = pg.url
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNAI_", "PG"))}
    env.update({k: v for k, v in pg.ws.env.items() if v is not None})
    proc = subprocess.run([sys.executable, "-m", "reconciler.cli", "--state-name", pg.name,
                           "state", "list"], env=env, capture_output=True, text=True,
                          cwd=pg.ws.root, timeout=60)
    pg.outputs += [proc.stdout, proc.stderr]
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.split()) == 2


def test_of_two_applies_on_one_state_name_one_names_the_holder_and_one_waits_saying_so(pg, sim_server):
    # 12 creates, 2 at a time, 500 ms each (the token at once): the first apply would hold
    # the lock for ~3 s, while the refused run (in this process) and the waiter (a process,
    # which starts in about a second) find it held. Once the waiter has said it waits,
    # every answer comes at once and the first finishes without waiting out the rest.
    faults(sim_server, latencyMs=500, tokenFaults=False)
    names = write_fleet(pg.ws, 12)
    first = pg.spawn("--parallelism", "2", "apply", str(pg.ws.specs), "--auto-approve")
    wait_for_posts(sim_server, first, 1)
    refused = pg.run("apply", str(pg.ws.specs), "--auto-approve")
    waiter = pg.spawn("--lock-timeout", "90", "apply", str(pg.ws.specs), "--auto-approve")
    said = ""
    while "(--lock-timeout)" not in said and (line := waiter.stderr.readline()):
        said += line  # up to the line that says it waits, or to its end
    faults(sim_server, latencyMs=0)
    code1, _, err1 = pg.wait(first)
    code3, _, err3 = pg.wait(waiter)
    err3 = said + err3
    pg.outputs.append(said)
    assert code1 == 0, err1
    code2, _, err2 = refused
    assert code2 == 1
    [line] = err2.strip().splitlines()
    assert line.startswith("Error: state is locked by ")
    assert f"pid {first.pid} (operation apply since " in line and "lock id " in line
    assert f"state {pg.name!r}" in line
    assert code3 == 0, err3
    assert "waiting up to 90 s for it (--lock-timeout)" in err3
    assert "created" not in err3  # it found nothing left to do
    pg.converged(sim_server, names)


def test_applies_on_two_state_names_proceed_at_once(pg, ws, tmp_path, sim_server):
    from tests.helpers.workspace import Workspace

    # 20 creates, 2 at a time, 500 ms each (the token at once): the first would hold its
    # lock for ~5 s, while the second (1 create) runs from start to end; then every
    # answer comes at once and the first finishes without waiting out the rest.
    faults(sim_server, latencyMs=500, tokenFaults=False)
    other = PgState(Workspace(tmp_path / "other", ws.env), pg.url)
    names_a = write_fleet(pg.ws, 20, prefix="team-a")
    names_b = write_fleet(other.ws, 1, prefix="team-b")
    a = pg.spawn("--parallelism", "2", "apply", str(pg.ws.specs), "--auto-approve")
    wait_for_posts(sim_server, a, 1)
    b = other.spawn("--parallelism", "2", "apply", str(other.ws.specs), "--auto-approve")
    code_b, _, err_b = other.wait(b)
    running = a.poll() is None
    faults(sim_server, latencyMs=0)
    code_a, _, err_a = pg.wait(a)
    assert code_a == 0, err_a
    assert code_b == 0, err_b  # no --lock-timeout: a held lock would have refused it
    assert running, "the first apply had ended before the second: nothing overlapped"
    assert len(pg.store().read().resources) == len(names_a)
    assert len(other.store().read().resources) == len(names_b)
    other.no_password_anywhere()


def test_kill_9_of_the_holder_the_next_apply_proceeds_recovers_and_converges(pg, sim_server):
    faults(sim_server, latencyMs=80, jitterMs=40)
    names = write_fleet(pg.ws, 30)
    proc = pg.spawn("--parallelism", "4", "apply", str(pg.ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 6)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    time.sleep(0.3)  # requests the dead process had sent still land
    faults(sim_server, latencyMs=0, jitterMs=0)
    store = pg.store()
    try:
        _, pending = store.read_with_pending()  # what the dead run did is in the database
        holder, _ = store._holder()
        assert holder is not None and f"pid {proc.pid}" in holder.who  # a stale record
    finally:
        store.close()
    assert pending, "the kill found no create in flight"

    code, out, err = pg.apply()  # no force-unlock, no --lock-timeout
    assert code == 0, err
    assert "locked" not in err
    for intent in pending:  # each create in flight was looked up by name
        assert f"{intent.address}: found workload" in err or \
            f"{intent.address}: the interrupted run had not created it" in err
    pg.converged(sim_server, names)
    code, out, err = pg.run("plan", str(pg.ws.specs), "--detailed-exitcode")
    assert code == 0, out + err


def test_force_unlock_refuses_a_live_holder_and_clears_a_dead_ones_record(pg, sim_server):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from reconciler.state.postgres import PostgresStore\n"
         "s = PostgresStore(sys.argv[1], name=sys.argv[2])\n"
         "with s.lock('apply') as info:\n    print(info.id, flush=True)\n    sys.stdin.read()",
         pg.url, pg.name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lock_id = holder.stdout.readline().strip()
    try:
        code, _, err = pg.run("force-unlock", lock_id)
        assert code == 1 and "held by a live session" in err and "pg_terminate_backend(" in err
        code, _, err = pg.run("force-unlock", "not-" + lock_id)
        assert code == 1 and f"has id {lock_id}, not not-{lock_id}" in err
    finally:
        holder.kill()
        holder.communicate()
    time.sleep(0.2)
    code, out, err = pg.run("force-unlock", lock_id)
    assert code == 0, err
    assert f"Removed lock {lock_id}" in out
    code, _, err = pg.run("force-unlock", lock_id)
    assert code == 1 and "is not locked" in err


def test_drift_on_a_state_name_never_written_says_so_without_the_password(pg, sim_server):
    write_fleet(pg.ws, 1)
    code, _, err = pg.run("drift", str(pg.ws.specs))
    assert code == 1
    assert f"no state at postgresql://postgres@" in err and f"state {pg.name!r}" in err


def _with(url: str, **changes) -> str:
    params = conninfo_to_dict(url)
    params.update(changes)
    return "postgresql://{user}:{password}@{host}:{port}/{dbname}".format(**params)


@pytest.mark.parametrize("case", ["wrong password", "unreachable", "no such database"])
def test_a_server_that_cannot_be_used_is_one_line_naming_host_and_database_exit_1(pg, case):
    params = conninfo_to_dict(pg.url)
    url = {"wrong password": lambda: _with(pg.url, password="not-the-" + pg.password),
           "unreachable": lambda: _with(pg.url, port="1"),
           "no such database": lambda: _with(pg.url, dbname="no_such_db")}[case]()
    secret = conninfo_to_dict(url)["password"]
    pg.ws.specs.mkdir(exist_ok=True)
    code, out, err = pg.run("plan", str(pg.ws.specs), state=url)
    assert code == 1
    [line] = err.strip().splitlines()
    host, port = params["host"], "1" if case == "unreachable" else params["port"]
    db = "no_such_db" if case == "no such database" else params["dbname"]
    assert line.startswith(f"Error: PostgreSQL state backend (host {host} port {port}, "
                           f"database {db}): cannot connect: ")
    assert {"wrong password": "password authentication failed",
            "unreachable": "Connection refused",
            "no such database": 'database "no_such_db" does not exist'}[case] in line
    assert secret not in out + err and "Traceback" not in err
    assert make_conninfo(url)  # the URL itself was well formed


def test_a_session_lost_mid_apply_starts_no_new_action_exits_1_and_the_next_apply_recovers(
        pg, sim_server):
    faults(sim_server, latencyMs=150)
    names = write_fleet(pg.ws, 30)
    proc = pg.spawn("--parallelism", "3", "apply", str(pg.ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 4)
    with psycopg.connect(pg.url, autocommit=True) as conn:  # as a server restart would
        conn.execute("SELECT pg_terminate_backend(lock_backend_pid) FROM runai_reconcile.states "
                     "WHERE name = %s", (pg.name,))
    at_cut = posts(sim_server)
    code, out, err = pg.wait(proc)
    faults(sim_server, latencyMs=0)
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(
        "Error: PostgreSQL state backend (host ") and "the connection is lost" in err
    assert "WARNING" not in err
    assert posts(sim_server) <= at_cut + 3  # only those in flight at the cut
    code, out, err = pg.apply()
    assert code == 0, err
    pg.converged(sim_server, names)


def test_history_and_restore_after_a_wrong_state_rm(pg, sim_server):
    names = write_fleet(pg.ws, 3)
    assert pg.apply()[0] == 0
    gone = f"DistributedTraining/7/{names[0]}"
    assert pg.run("state", "rm", gone)[0] == 0
    code, out, err = pg.run("state", "history")
    assert code == 0, err
    header, *rows = out.strip().splitlines()
    assert header.split() == ["SERIAL", "WHEN", "WHO", "OPERATION", "WORKLOADS"]
    # An apply writes once: its actions with the list fingerprints of what it touched.
    assert [(r.split()[0], r.split()[-1]) for r in rows] == [("2", "2"), ("1", "3")]
    assert "state rm" in rows[0] and "apply" in rows[1] and " pid " in rows[0]
    code, out, err = pg.run("state", "restore", "1")
    assert code == 0, err
    assert out.startswith("Restored serial 1 (3 workloads) as serial 3 of postgresql://")
    code, out, _ = pg.run("state", "history", "--format", "json")
    doc = json.loads(out)
    assert doc["keeps"] == "every version"
    assert [(v["serial"], v["workloads"], v["operation"]) for v in doc["versions"]] == [
        (3, 3, "state restore 1"), (2, 2, "state rm"), (1, 3, "apply")]
    code, out, err = pg.run("plan", str(pg.ws.specs), "--detailed-exitcode")
    assert code == 0, out + err  # the forgotten workload is tracked again: no create
    pg.converged(sim_server, names)


def test_migrate_file_to_postgresql_then_plan_shows_no_changes_and_says_what_to_pass(pg, sim_server):
    names = write_fleet(pg.ws, 4)
    code, out, err = pg.run("apply", str(pg.ws.specs), "--auto-approve", name="default",
                            state=str(pg.ws.state_path))
    assert code == 0, err
    before = pg.ws.state_path.read_bytes()
    code, out, err = pg.run("state", "migrate", "--to", pg.url, "--to-name", pg.name,
                            name="default", state=str(pg.ws.state_path))
    assert code == 0, err
    assert "Copied the state (serial 1, 4 workloads" in out and "the source is unchanged" in out
    server = pg.url.split("@", 1)[1]
    assert f"Next, pass --state 'postgresql://postgres@{server}' --state-name '{pg.name}'" in out
    assert pg.ws.state_path.read_bytes() == before
    code, out, err = pg.run("plan", str(pg.ws.specs), "--detailed-exitcode")
    assert code == 0, out + err
    pg.converged(sim_server, names)
    code, out, err = pg.run("state", "migrate", "--to-name", pg.name + "-copy")
    assert code == 0 and f"--state-name '{pg.name}-copy'" in out, err
    other = pg.ws.root / "back" / "state.json"
    code, out, err = pg.run("state", "migrate", "--to", str(other))
    assert code == 0 and f"Next, pass --state '{other}' (or" in out, err
    assert json.loads(other.read_text())["serial"] == 1
    code, out, err = pg.run("state", "migrate", "--to", pg.url, "--to-name", pg.name,
                            name="default", state=str(other))
    assert code == 0 and "already holds this state" in out, err
