"""Signals and kills through real processes against `sim serve`: SIGTERM is Ctrl-C (exit
143), a second signal abandons what is in flight and the result says which actions may
have happened, a signal during the refresh writes nothing, and after `kill -9` in the
middle of replacements `drift` and `plan` read the journal: an interrupted apply, not
drift."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from tests.helpers.reliability import convergence, live_names, spawn, wait_for_posts, write_fleet
from tests.helpers.postgres import PG_ENV, missing
from tests.helpers.reliability import faults, wait_until, journal

pytestmark = [pytest.mark.chaos, pytest.mark.http]


def deletes(sim) -> int:
    return sum(1 for r in sim.requests() if r["method"] == "DELETE")


def applied_fleet(ws, sim, n: int) -> list[str]:
    """`n` trainings applied; then their image changed, so that the next apply replaces them."""
    names = write_fleet(ws, n)
    assert ws.apply().exit_code == 0
    write_fleet(ws, n, image="nvcr.io/nvidia/pytorch:24.10-py3")
    sim.clear_requests()
    return names


def interrupted_twice(ws, sim, *apply_args: str):
    """`apply` of `apply_args` (replacing 2 workloads, 2 at a time) sent SIGINT, then
    SIGTERM, while both replacements are under way: (the process, its stdout, stderr)."""
    faults(sim, latencyMs=600)
    proc = spawn(ws, "--parallelism", "2", "apply", *apply_args)
    wait_until(lambda: deletes(sim) >= 2, proc)
    # Deletes answered at 0.6 s, then waits until gone (each GET 0.6 s): signals at 0.8 s
    # and 0.9 s land during those waits.
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    time.sleep(1.0)  # a create the dead process had sent still lands
    faults(sim, latencyMs=0)
    return proc, out, err


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_refresh_writes_nothing_and_exits_130_or_143(ws, sim_server,
                                                                          signum, code):
    applied_fleet(ws, sim_server, 6)
    before = ws.state_path.read_bytes()
    faults(sim_server, latencyMs=2000, tokenFaults=False)  # 2 s a read; the token at once
    proc = spawn(ws, "apply", str(ws.specs), "--auto-approve")
    wait_until(lambda: any(r["method"] == "GET" for r in sim_server.requests()), proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    faults(sim_server, latencyMs=0, tokenFaults=True)
    assert proc.returncode == code, err
    assert "Interrupted before any action started: nothing was applied." in err
    assert "Aborted!" not in err and "Traceback" not in err
    assert ws.state_path.read_bytes() == before
    assert not journal(ws).exists()
    assert [r for r in sim_server.requests() if r["method"] != "GET"] == []


def test_sigterm_finishes_what_is_in_flight_records_it_and_exits_143(ws, sim_server):
    names = write_fleet(ws, 30)
    faults(sim_server, latencyMs=150)
    proc = spawn(ws, "--parallelism", "2", "apply", str(ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    faults(sim_server, latencyMs=0)
    assert proc.returncode == 143, err
    assert "SIGTERM received: no new actions start" in err
    assert "Apply interrupted!" in out and "not started" in out and "unknown" not in out
    assert "Traceback" not in err
    created = live_names(sim_server)
    assert 3 <= len(created) < len(names)
    conv = convergence(ws, sim_server, sorted(created))
    assert conv.ok, conv  # what was done is recorded, with its id
    assert not journal(ws).exists()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert convergence(ws, sim_server, names).ok


def test_a_second_signal_abandons_the_replacements_in_flight_and_says_they_may_have_happened(
        ws, sim_server):
    names = applied_fleet(ws, sim_server, 2)
    proc, out, err = interrupted_twice(ws, sim_server, str(ws.specs), "--auto-approve",
                                       "--format", "json")
    assert proc.returncode == 130, err  # the first signal decides
    assert "Traceback" not in err
    # Not "2 not started": both were under way, and the summary says what is known.
    assert "0 not started, 2 unknown." in err
    for name in names:
        assert f"Unknown: DistributedTraining/7/{name}: replace abandoned (delete " in err
    assert "it may have happened; the next apply looks it up" in err
    doc = json.loads(out)  # stdout: one document, the result of the abandoned run
    assert doc["interrupted"] is True and doc["signal"] == "SIGINT"
    assert {o["address"]: o["outcome"] for o in doc["outcomes"]} == {
        f"DistributedTraining/7/{n}": "unknown" for n in names}
    assert all(o["detail"].startswith("delete ") for o in doc["outcomes"])
    assert doc["summary"]["unknown"] == 2 and doc["summary"]["not_started"] == 0
    assert journal(ws).exists()  # the intents stay open for the next apply

    drift = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert drift.exit_code == 0, drift.output
    assert "deleted outside" not in drift.output
    res = ws.apply()
    assert res.exit_code == 0, res.output
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    assert ws.plan("--detailed-exitcode").exit_code == 0


@pytest.fixture(params=["file", pytest.param("postgres", marks=pytest.mark.postgres)])
def state_args(request, ws) -> list[str]:
    """The global flags that point the CLI at the state: the workspace's file, or a fresh
    state name in the PostgreSQL of $RUNAI_RECONCILE_TEST_PG."""
    if request.param == "file":
        return ["--state", str(ws.state_path)]
    url = os.environ.get(PG_ENV)
    if not url:
        missing(f'{PG_ENV} is not set: start a server with eval "$(.ci/postgres.sh start)"')
    return ["--state", url, "--state-name", f"signals-{uuid.uuid4().hex[:8]}"]


def stored(state_args: list[str]):
    """(serial, address -> workload id, open intents' seqs) as the CLI's store reads them."""
    from reconciler.state import open_store

    name = state_args[3] if len(state_args) > 2 else "default"
    store = open_store(state_args[1], name=name)
    try:
        state, pending = store.read_with_pending()
    finally:
        getattr(store, "close", lambda: None)()
    return (state.serial, {a: r.workload_id for a, r in state.resources.items()},
            [i.seq for i in pending])


def test_after_kill_9_mid_replacement_drift_and_plan_say_interrupted_apply_not_drift(
        ws, sim_server, state_args):
    def cli(*args: str):
        return ws.cli(*state_args, *args)

    names = write_fleet(ws, 4)
    assert cli("apply", str(ws.specs), "--auto-approve").exit_code == 0
    write_fleet(ws, 4, image="nvcr.io/nvidia/pytorch:24.10-py3")
    sim_server.clear_requests()
    addresses = {f"DistributedTraining/7/{n}" for n in names}
    # 1.5 s per API request (the token at once): the kill lands long before the first
    # delete is answered, even on a loaded machine.
    faults(sim_server, latencyMs=1500, tokenFaults=False)
    proc = spawn(ws, *state_args, "--parallelism", "4", "apply", str(ws.specs), "--auto-approve")
    wait_until(lambda: deletes(sim_server) >= 4, proc)
    proc.send_signal(signal.SIGKILL)  # the deletes are sent, their answers not yet read
    proc.communicate(timeout=30)
    faults(sim_server, latencyMs=0, tokenFaults=True)
    deadline = time.monotonic() + 10
    while live_names(sim_server) and time.monotonic() < deadline:
        time.sleep(0.05)  # the server performs them, then they finish deleting
    assert not live_names(sim_server)
    before = stored(state_args)
    assert len(before[2]) == 4  # four open delete intents

    text = cli("drift", str(ws.specs), "--detailed-exitcode")
    assert text.exit_code == 0, text.output  # an interrupted apply alone is not drift
    assert "deleted outside" not in text.output
    assert "No drift." in text.output
    assert "Interrupted apply (not drift): 4 workloads were being deleted, replaced or created" \
        in text.output
    doc = json.loads(cli("drift", str(ws.specs), "--format", "json").stdout)
    assert doc["has_drift"] is False and doc["drift"] == []
    assert {i["address"] for i in doc["interrupted"]} == addresses
    assert doc["summary"]["interrupted"] == 4
    md = cli("drift", str(ws.specs), "--format", "markdown").stdout
    assert "**Interrupted apply (not drift):**" in md and "deleted outside" not in md
    assert stored(state_args) == before  # drift is read-only: it neither recovers nor compacts

    res = cli("plan", str(ws.specs), "--format", "json")
    plan = json.loads(res.stdout)
    finished = {rc["address"] for rc in plan["resource_changes"]
                if rc["action_reason"] == "interrupted_apply"}
    assert finished == {i["address"] for i in doc["interrupted"]}  # plan and drift agree
    assert all(rc["change"]["actions"] == ["create"] for rc in plan["resource_changes"])
    assert plan["resource_drift"] == []
    out = cli("plan", str(ws.specs)).output
    assert "was left half-done by an interrupted apply (not drift) and will be created" in out
    assert "deleted outside" not in out

    res = cli("apply", str(ws.specs), "--auto-approve")
    assert res.exit_code == 0, res.output
    assert "4 created" in res.output
    serial, ids, pending = stored(state_args)
    assert pending == []
    assert ids == {f"DistributedTraining/7/{w['name']}": w["id"] for w in sim_server.live()}
    assert sorted(live_names(sim_server)) == names
    assert cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0


def test_a_second_signal_during_a_saved_plan_s_apply_leaves_its_intents_open(ws, sim_server):
    # As for a specs folder's apply (above): the saved plan's apply, which moves the serial
    # even when nothing changed, writes no state over the intents it abandoned.
    names = applied_fleet(ws, sim_server, 2)
    plan_path = ws.root / "replace.plan"
    assert ws.plan("--out", str(plan_path)).exit_code == 0
    proc, out, err = interrupted_twice(ws, sim_server, str(plan_path))
    assert proc.returncode == 130, err
    assert "0 not started, 2 unknown." in out + err
    assert journal(ws).exists()  # the intents stay open for the next apply
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert convergence(ws, sim_server, names).ok
    assert ws.plan("--detailed-exitcode").exit_code == 0
