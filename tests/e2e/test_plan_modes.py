"""--target, --replace, --destroy, --no-refresh, preventDestroy and ignoreChanges against the simulator."""

from __future__ import annotations

import pytest

from tests.helpers.workspace import changes_by_address

from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http

BERT = "DistributedTraining/7/bert-ddp"
LLAMA = "DistributedInference/7/llama-serve"


def test_target_plans_and_applies_only_those_addresses_and_says_so(ws, sim_server, applied):
    ws.write("train.yaml", TRAINING.replace("numWorkers: 2", "numWorkers: 3"))
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 4"))
    res = ws.plan("--target", LLAMA)
    assert "--target is in effect" in res.stdout and BERT not in res.stdout
    md = ws.plan("--target", LLAMA, "--format", "markdown")
    assert "--target is in effect" in md.stdout
    doc = ws.plan_json("--target", LLAMA)
    assert doc["targets"] == [LLAMA] and [rc["address"] for rc in doc["resource_changes"]] == [LLAMA]
    sim_server.clear_requests()
    res = ws.apply("--target", LLAMA)
    assert res.exit_code == 0 and "--target is in effect" in res.output
    assert [(w["method"], w["body"]) for w in sim_server.writes()] == [("PATCH", {"spec": {"replicas": 4}})]
    assert changes_by_address(ws.plan_json())[BERT]["change"]["actions"] == ["delete", "create"]


def test_replace_forces_a_replacement_by_request(ws, sim_server, applied):
    doc = ws.plan_json("--replace", LLAMA)
    rc = changes_by_address(doc)[LLAMA]
    assert rc["change"]["actions"] == ["delete", "create"]
    assert rc["action_reason"] == "replace_by_request"
    assert "will be replaced, as requested" in ws.plan("--replace", LLAMA).stdout
    assert ws.apply("--replace", LLAMA).exit_code == 0
    now = {w["name"]: w["id"] for w in sim_server.live()}
    assert now["llama-serve"] != applied["llama-serve"]["id"]
    assert now["bert-ddp"] == applied["bert-ddp"]["id"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_destroy_deletes_everything_in_the_state(ws, sim_server, applied):
    doc = ws.plan_json("--destroy")
    assert {a: rc["action_reason"] for a, rc in changes_by_address(doc).items()} == {
        BERT: "destroy_requested", LLAMA: "destroy_requested"}
    assert ws.apply("--destroy").exit_code == 0
    assert sim_server.live() == []
    assert ws.state()["resources"] == {}


def test_no_refresh_plans_from_the_state_without_any_get(ws, sim_server, applied):
    wid = applied["llama-serve"]["id"]
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"replicas": 5}})
    ws.write("train.yaml", TRAINING.replace("numWorkers: 2", "numWorkers: 3"))
    sim_server.clear_requests()
    doc = ws.plan_json("--no-refresh")
    assert sim_server.requests(api_only=False) == []
    by = changes_by_address(doc)
    assert by[BERT]["change"]["actions"] == ["delete", "create"]
    assert by[LLAMA]["change"]["actions"] == ["no-op"], "drift is invisible without a refresh"
    assert doc["resource_drift"] == []


PROTECTED = TRAINING + "lifecycle:\n  preventDestroy: true\n"


def test_prevent_destroy_survives_removing_the_spec_file(ws, sim_server):
    ws.write("train.yaml", PROTECTED)
    assert ws.apply().exit_code == 0
    (ws.specs / "train.yaml").unlink()
    for res in (ws.plan(), ws.apply(), ws.plan("--destroy")):
        assert res.exit_code == 1
        assert BERT in res.stderr and "preventDestroy" in res.stderr
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]
    # Lifted by `state rm`: the workload is forgotten, not deleted.
    assert ws.cli("state", "rm", BERT).exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]


def test_prevent_destroy_blocks_a_replace_until_set_false_and_applied(ws, sim_server):
    ws.write("train.yaml", PROTECTED)
    assert ws.apply().exit_code == 0
    ws.write("train.yaml", PROTECTED.replace("24.05", "24.10"))
    res = ws.plan()
    assert res.exit_code == 1 and BERT in res.stderr and "replace" in res.stderr
    assert ws.plan("--replace", BERT).exit_code == 1
    # Lifted by setting it false (the replace then goes ahead).
    ws.write("train.yaml", PROTECTED.replace("24.05", "24.10")
             .replace("preventDestroy: true", "preventDestroy: false"))
    assert ws.apply().exit_code == 0
    assert ws.state()["resources"][BERT]["prevent_destroy"] is False
    (ws.specs / "train.yaml").unlink()
    res = ws.apply()  # no specs left at all: refused unless deliberate (as Argo CD's allowEmpty)
    assert res.exit_code == 1 and "--destroy" in res.stderr
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]
    assert ws.apply("--destroy").exit_code == 0
    assert sim_server.live() == []


def test_ignore_changes_sent_on_create_then_ignored_from_specs_and_drift(ws, sim_server):
    ws.write("serve.yaml", INFERENCE + "lifecycle:\n  ignoreChanges: [spec.replicas]\n")
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    (create,) = sim_server.writes()
    assert create["body"]["spec"]["replicas"] == 2, "ignored paths are sent on create"
    wid = sim_server.live()[0]["id"]
    # Out of band (an autoscaler) ...
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"replicas": 6}})
    assert ws.plan("--detailed-exitcode").exit_code == 0
    # ... and in the specs: neither causes an update.
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3")
             + "lifecycle:\n  ignoreChanges: [spec.replicas]\n")
    assert ws.plan("--detailed-exitcode").exit_code == 0
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert sim_server.writes() == []
    # A change elsewhere still plans (a replace, since only replicas is updatable).
    ws.write("serve.yaml", INFERENCE.replace("v0.6.3", "v0.6.4")
             + "lifecycle:\n  ignoreChanges: [spec.replicas]\n")
    rc = changes_by_address(ws.plan_json())[LLAMA]
    assert rc["change"]["actions"] == ["delete", "create"]
    assert all(not p["path"].startswith("spec.replicas") for p in rc["changed_paths"])
