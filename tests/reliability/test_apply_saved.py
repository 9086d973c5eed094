"""`apply PLANFILE` on the same path as `apply DIR`: it recovers what a killed run left in
the journal first, exits 130 on Ctrl-C with the actions in flight recorded, and refuses a
plan made before a killed run changed the state (the journal moves the records, not the
serial)."""

from __future__ import annotations

import signal
import time

import pytest

from reconciler.state import LocalFileStore, ResourceState
from reconciler.state import journal
from tests.helpers.constants import CLUSTER
from tests.helpers.reliability import (convergence, interrupt_after_posts, live_names, spawn,
                                       wait_for_posts, write_fleet)
from tests.helpers.specs import training_doc

pytestmark = pytest.mark.http


def left_by_a_killed_create(ws, sim, name: str) -> None:
    """What `kill -9` leaves when it lands after a create's POST went out and before its
    outcome was journaled: the workload exists live, the journal holds the open intent."""
    doc = ws.plan_json()
    [after] = [rc["change"]["after"] for rc in doc["resource_changes"]
               if rc["name"] == name and rc["change"]["actions"] == ["create"]]
    assert sim.api("POST", "/api/v1/workloads/distributed", json=after).status_code == 202
    store = LocalFileStore(ws.state_path)
    state = store.read()
    maybe = ResourceState(kind="DistributedTraining", name=name, project_id="7",
                          cluster_id=CLUSTER, workload_id=None, applied=after)
    store.append([journal.Intent(1, "create", maybe.address, body=after,
                                 maybe=maybe).to_json()], state.lineage)


def journal_path(ws):
    return ws.state_path.with_name("state.json.journal")


def test_a_plan_made_after_a_killed_run_recovers_its_journal_without_a_duplicate(ws, sim_server):
    names = write_fleet(ws, 3)
    left_by_a_killed_create(ws, sim_server, names[0])
    plan_path = ws.root / "plan.json"
    res = ws.plan("--out", str(plan_path))
    assert res.exit_code == 0, res.output
    assert "2 to create" in res.stdout  # the killed run's workload is found by name

    res = ws.cli("apply", str(plan_path))
    assert res.exit_code == 0, res.output
    assert f"{names[0]}: found workload" in res.stderr and "interrupted run" in res.stderr
    assert "Apply complete! Resources: 2 created" in res.stdout
    assert live_names(sim_server) == {n: 1 for n in names}  # no duplicate
    assert convergence(ws, sim_server, names).ok
    assert not journal_path(ws).exists()
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_real_kill_9_then_plan_out_and_apply_planfile_converge(ws, sim_server, figures):
    fig = figures("kill -9 mid-apply, then plan --out + apply PLANFILE",
                  "kill -9 after 4 creates; 150 ms latency")
    start = time.monotonic()
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    names = write_fleet(ws, 20)
    proc = spawn(ws, "--parallelism", "4", "apply", str(ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 4)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    time.sleep(0.3)  # requests the dead process had sent still land
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()
    created = set(live_names(sim_server))
    assert created

    plan_path = ws.root / "plan.json"
    assert ws.plan("--out", str(plan_path)).exit_code == 0
    res = ws.cli("apply", str(plan_path))
    assert res.exit_code == 0, res.output
    assert f"{len(names) - len(created)} created" in res.stdout
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    assert not journal_path(ws).exists()
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 2, len(names), conv.duplicates, conv.lost
    fig.recoveries = res.stderr.count("created by an interrupted run")
    fig.seconds = time.monotonic() - start


def test_a_plan_made_before_a_killed_run_is_stale_though_the_serial_did_not_move(ws, sim_server):
    (ws.specs / "first.yaml").write_text(training_doc("first"))
    assert ws.apply().exit_code == 0
    (ws.specs / "later.yaml").write_text(training_doc("later"))
    plan_path = ws.root / "plan.json"
    assert ws.plan("--out", str(plan_path)).exit_code == 0
    serial = ws.state()["serial"]
    # Then a run is killed: it had created `other`, which the plan does not act on.
    (ws.specs / "other.yaml").write_text(training_doc("other"))
    left_by_a_killed_create(ws, sim_server, "other")
    assert ws.state()["serial"] == serial  # the journal holds the change, not the file
    sim_server.clear_requests()

    res = ws.cli("apply", str(plan_path))
    assert res.exit_code == 1
    assert "stale" in res.stderr and "interrupted or killed" in res.stderr
    assert sim_server.writes() == []
    assert journal_path(ws).exists()  # refused before anything, recovery included

    assert ws.apply().exit_code == 0  # apply DIR recovers it and creates `later`
    assert live_names(sim_server) == {"first": 1, "later": 1, "other": 1}
    assert convergence(ws, sim_server, ["first", "later", "other"]).ok


def test_ctrl_c_during_apply_planfile_finishes_what_is_in_flight_and_exits_130(ws, sim_server,
                                                                                figures):
    fig = figures("Ctrl-C mid-apply PLANFILE, then apply", "SIGINT after 3 creates; 150 ms latency")
    start = time.monotonic()
    names = write_fleet(ws, 30)
    plan_path = ws.root / "plan.json"
    assert ws.plan("--out", str(plan_path)).exit_code == 0
    interrupt_after_posts(ws, sim_server, 3, "--parallelism", "2", "apply", str(plan_path))
    created = live_names(sim_server)
    assert 3 <= len(created) < len(names)
    conv = convergence(ws, sim_server, sorted(created))
    assert conv.ok, conv  # every workload that exists is in the state, with its id
    assert not journal_path(ws).exists()

    again = ws.cli("apply", str(plan_path))
    assert again.exit_code == 1 and "stale" in again.stderr  # a plan applies once
    assert ws.apply().exit_code == 0
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 3, len(names), conv.duplicates, conv.lost
    fig.seconds = time.monotonic() - start
