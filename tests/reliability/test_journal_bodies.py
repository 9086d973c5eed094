"""A create's body is on disk once in the journal: its intent holds it, and the records
after it (the intent's `maybe`, the outcome's record) name it by the intent's number. A
run killed mid-apply leaves such a journal, and the next `plan` and `apply` read it as
they read one that spelled every body out."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.helpers.reliability import (convergence, journal, live_names, spawn,
                                       wait_for_posts, write_fleet)

pytestmark = pytest.mark.http

IMAGE = "registry.example.com/fleet/trainer:body-once-7"


def test_a_killed_apply_journals_each_body_once_and_the_next_apply_converges(ws, sim_server):
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    names = write_fleet(ws, 12, image=IMAGE)
    proc = spawn(ws, "--parallelism", "4", "apply", str(ws.specs), "--auto-approve")
    # A fifth create goes out only once one of the first four is recorded: two are.
    wait_for_posts(sim_server, proc, 6)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    time.sleep(0.3)  # requests the dead process had sent still land
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()

    raw = journal(ws).read_bytes()
    entries = [json.loads(line) for line in raw.split(b"\n")[1:-1]]  # the last may be torn
    creates = [e for e in entries if e["op"] == "intent" and e["action"] == "create"]
    records = [e for e in entries if e["op"] == "set" and e["resource"] is not None]
    assert len(creates) >= 6 and len(records) >= 2
    # The image is in each body once; on disk it is there once per create, no more.
    assert all(json.dumps(e["body"]).count(IMAGE) == 1 for e in creates)
    assert raw.count(IMAGE.encode()) == len(creates)
    assert all(r["resource"]["applied_of"] in {e["seq"] for e in creates} for r in records)

    created = set(live_names(sim_server))
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"{len(names) - len(created)} to create" in res.stdout  # none twice
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert convergence(ws, sim_server, names).ok
    state = ws.state()
    assert all(r["applied"]["spec"]["image"] == IMAGE for r in state["resources"].values())


def test_a_record_naming_the_body_of_no_intent_is_refused_naming_its_line(ws, sim_server):
    write_fleet(ws, 1, image=IMAGE)
    assert ws.apply().exit_code == 0
    before = ws.state_path.read_bytes()
    [(address, record)] = ws.state()["resources"].items()
    record = {k: v for k, v in record.items() if k != "applied"}
    journal(ws).write_text(
        json.dumps({"journal": 2, "lineage": ws.state()["lineage"]}) + "\n"
        + json.dumps({"op": "set", "address": address, "closes": None,
                      "resource": {**record, "applied_of": 1}}) + "\n")
    res = ws.plan()
    assert res.exit_code == 1
    assert f"journal {journal(ws)} line 2 is corrupt" in res.stderr
    assert "names the body of no intent" in res.stderr and "Traceback" not in res.stderr
    assert ws.state_path.read_bytes() == before
