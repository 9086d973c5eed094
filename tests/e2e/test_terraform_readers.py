"""The JSON documents read by a tool written for `terraform show -json` (issue 20, item 9):
`change.actions` and the `actions` of drift's pending changes and of apply's outcomes hold
only Terraform's words; a suspend and a resume are updates of `desiredPhase`, our own
word for them in `action` beside it. Through the CLI against `sim serve`."""

from __future__ import annotations

import json

import pytest

from tests.helpers.workspace import changes_by_address
from tests.helpers.specs import TRAINING

pytestmark = pytest.mark.http

# docs/plan-format.md, "Read by tools written for Terraform": what Terraform's JSON output
# format lists as the values of `change.actions`.
TERRAFORM_ACTIONS = [["no-op"], ["create"], ["read"], ["update"], ["delete", "create"],
                     ["create", "delete"], ["delete"]]
ADDR = "DistributedTraining/7/bert-ddp"


def _terraform_summary(doc: dict) -> dict[str, int]:
    """What a Terraform plan summariser does: refuse an unknown major version or action,
    count the rest."""
    assert doc["format_version"].split(".")[0] == "1"
    counts: dict[str, int] = {}
    for rc in doc["resource_drift"]:
        assert rc["change"]["actions"] in TERRAFORM_ACTIONS, rc
    for rc in doc["resource_changes"]:
        actions = rc["change"]["actions"]
        assert actions in TERRAFORM_ACTIONS, actions
        key = "replace" if len(actions) == 2 else actions[0]
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_suspend_and_resume_read_as_updates_by_a_terraform_tool(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    assert ws.apply().exit_code == 0
    ws.write("train.yaml", TRAINING.replace("spec:\n", "desiredPhase: Stopped\nspec:\n", 1))

    doc = ws.plan_json()
    assert _terraform_summary(doc) == {"update": 1}
    rc = changes_by_address(doc)[ADDR]
    assert rc["action"] == "suspend"
    assert [(c["path"], c["before"], c["after"]) for c in rc["changed_paths"]] == [
        ("desiredPhase", "Running", "Stopped")]
    assert doc["summary"]["suspend"] == 1

    res = ws.cli("drift", str(ws.specs), "--format", "json")
    assert res.exit_code == 0, res.output
    pending, = json.loads(res.stdout)["pending_changes"]
    assert (pending["actions"], pending["action"]) == (["update"], "suspend")

    res = ws.cli("apply", str(ws.specs), "--auto-approve", "--format", "json")
    assert res.exit_code == 0, res.output
    applied = json.loads(res.stdout)
    outcome, = applied["outcomes"]
    assert (outcome["actions"], outcome["action"], outcome["outcome"]) == (
        ["update"], "suspend", "done")
    assert _terraform_summary(applied["plan"]) == {"update": 1}

    # Resumed outside: drift, read as an update outside and planned as one (a suspend).
    wid = json.loads(ws.cli("state", "show", ADDR).stdout)
    wid = wid.get("workload_id") or wid.get("workloadId")
    assert sim_server.api("POST", f"/api/v1/workloads/distributed/{wid}/resume").status_code == 202
    doc = ws.plan_json()
    drift, = doc["resource_drift"]
    assert (drift["address"], drift["change"]["actions"]) == (ADDR, ["update"])
    assert _terraform_summary(doc) == {"update": 1}
    assert ws.apply().exit_code == 0

    # Back to Running in the spec: a resume, an update too.
    ws.write("train.yaml", TRAINING)
    doc = ws.plan_json()
    rc = changes_by_address(doc)[ADDR]
    assert (rc["change"]["actions"], rc["action"]) == (["update"], "resume")
    assert _terraform_summary(doc) == {"update": 1}
