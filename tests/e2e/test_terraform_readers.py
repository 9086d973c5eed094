"""The JSON documents read by tools written for `terraform show -json`, through the CLI
against `sim serve`: `change.actions` and the `actions` of drift's pending changes and of
apply's outcomes hold only Terraform's words (a suspend and a resume are updates of
`desiredPhase`, our own word for them in `action` beside it); checkov's `terraform_plan`
framework reads every workload of a plan of every kind; a Rego policy over
`resource_changes[].type` and `change.after` (docs/examples/policy.rego, evaluated by
regopy) denies what it should; and `show` of a saved plan gives the patches `plan` did."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonpatch
import pytest

from tests.helpers import simserve, validators
from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET, ROOT
from tests.helpers.workspace import Workspace, changes_by_address
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


# --- a plan of every kind, read by checkov and by a Rego policy ----------------------------

EXAMPLES = ROOT / "docs" / "examples"
UNPINNED = """
kind: Training
name: quick-try
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
spec:
  image: nvcr.io/nvidia/pytorch:latest
  compute:
    gpuDevicesRequest: 1
"""
MISTRAL = "Inference/7/mistral-7b-chat"


@pytest.fixture(scope="module")
def every_kind(_sim_process, tmp_path_factory):
    """The example specs (every kind) applied; then, in the specs, an Inference's image
    changed (an update), a training's image changed (a replace), one training removed (a
    delete) and one added with an unpinned image (a create); outside, the Inference made
    preemptible (which the spec leaves to the server, so the plan keeps it). The plan
    saved and printed as JSON (one run), and the saved one shown as JSON."""
    simserve.reset(_sim_process.admin)
    env = {"RUNAI_URL": _sim_process.url, "RUNAI_CLIENT_ID": CLIENT_ID,
           "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None, "NO_COLOR": "1"}
    root = tmp_path_factory.mktemp("terraform-readers")
    ws = Workspace(root / "project", env)
    ws.copy_examples()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    wid = next(w["id"] for w in _sim_process.live() if w["name"] == "mistral-7b-chat")
    assert _sim_process.admin.patch(f"/_sim/workloads/{wid}", json={
        "spec": {"preemptibility": "preemptible"}}).status_code == 200

    mistral = ws.specs / "inference" / "mistral-7b-chat.yaml"
    mistral.write_text(mistral.read_text().replace("vllm-openai:v0.6.3", "vllm-openai:v0.6.4"))
    bert = ws.specs / "training" / "bert-ddp.yaml"
    bert.write_text(bert.read_text().replace("pytorch:24.05-py3", "pytorch:24.10-py3"))
    (ws.specs / "training" / "resnet-mpi.yaml").unlink()
    ws.write("quick-try.yaml", UNPINNED)

    saved = root / "saved.plan"
    plan = ws.plan_json("--out", str(saved))
    shown = ws.cli("show", str(saved), "--format", "json")
    assert shown.exit_code == 0, shown.output
    path = root / "plan.json"
    path.write_text(json.dumps(plan))
    return {"plan": plan, "shown": json.loads(shown.stdout), "path": path}


# The organisation's types, among the examples beside the workloads.
ORGANISATION = {"runai_department", "runai_project", "runai_access_rule", "runai_policy"}


def test_the_plan_acts_on_every_kind(every_kind):
    plan = every_kind["plan"]
    types = {rc["type"] for rc in plan["resource_changes"]}
    assert types == {"runai_distributed_training", "runai_distributed_inference",
                     "runai_training", "runai_workspace", "runai_inference",
                     "runai_nim_service", "runai_manifest", *ORGANISATION}
    actions = {rc["address"]: rc["action"] for rc in plan["resource_changes"]}
    assert actions[MISTRAL] == "update"
    assert actions["DistributedTraining/7/bert-ddp"] == "replace"
    assert actions["DistributedTraining/7/resnet-mpi"] == "delete"
    assert actions["Training/7/quick-try"] == "create"
    # `change.after` is the planned object: `change.patch` applied to `before` gives it.
    for rc in plan["resource_changes"]:
        if rc["action"] in ("update", "replace"):
            change = rc["change"]
            assert jsonpatch.apply_patch(change["before"], change["patch"]) == change["after"]


def test_checkov_reads_every_workload_of_the_plan(every_kind):
    checkov = validators.tool("checkov")
    res = subprocess.run(
        [checkov, "-f", str(every_kind["path"]), "--framework", "terraform_plan",
         "--external-checks-dir", str(EXAMPLES / "checkov"), "-o", "json",
         "--skip-download", "--soft-fail"],
        capture_output=True, text=True, timeout=240, cwd=every_kind["path"].parent)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    planned = every_kind["plan"]["planned_values"]["root_module"]["resources"]
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["resource_count"] == len(planned) == sum(
        rc["action"] != "delete" for rc in every_kind["plan"]["resource_changes"])
    failed = {c["resource"] for c in report["results"]["failed_checks"]}
    passed = {c["resource"] for c in report["results"]["passed_checks"]}
    assert failed == {"Training/7/quick-try"}  # its image is `:latest`
    # The example check is of workloads' images: the organisation's resources are no
    # workload (read, counted above, and checked by none).
    assert passed | failed == {r["address"] for r in planned if r["type"] not in ORGANISATION}


def test_a_rego_policy_over_the_planned_objects_denies_what_it_should(every_kind):
    from regopy import Interpreter

    rego = Interpreter()
    rego.add_module("policy", (EXAMPLES / "policy.rego").read_text(encoding="utf-8"))
    rego.set_input_term(json.dumps(every_kind["plan"]))
    denied, = json.loads(str(rego.query("data.runai.plan.deny")))["expressions"]
    # The Inference is preemptible only live (made so outside; its spec leaves it to the
    # server): the planned object says so, the spec alone would not.
    assert sorted(denied) == [
        f"{MISTRAL}: a serving workload would run preemptible",
        "Training/7/quick-try: image nvcr.io/nvidia/pytorch:latest is not pinned to a tag "
        "other than latest",
    ]
    after = changes_by_address(every_kind["plan"])[MISTRAL]["change"]["after"]
    assert after["spec"]["image"] == "vllm/vllm-openai:v0.6.4"


def test_show_of_the_saved_plan_gives_the_patches_plan_did(every_kind):
    def patches(doc):
        return {rc["address"]: (rc["change"]["patch"], rc["change"]["after"])
                for rc in doc["resource_changes"]}

    assert patches(every_kind["shown"]) == patches(every_kind["plan"])
    assert patches(every_kind["plan"])[MISTRAL][0] == [
        {"op": "replace", "path": "/spec/image", "value": "vllm/vllm-openai:v0.6.4"}]
