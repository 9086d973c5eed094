"""`runai-reconcile import` through the CLI against `sim serve` over HTTP: one workload by
id and `--all` from a specs folder, with no API write; the next plan shows only where the
spec differs from live (no perpetual diff from server defaults); every refusal is exit 1,
one Error: line, and leaves the state's bytes and serial as they were; adoptions in the
plan are their own line and count in every format."""

from __future__ import annotations

import json
import threading

import pytest

from reconciler.state import LocalFileStore, journal

from tests.helpers.constants import CLUSTER
from tests.helpers.adoption import TRAININGS, SECRET, post_training, examples_live_without_state
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as SIM_CLUSTER

# The examples' access rule (specs/organisation).
RULE_AT = f"AccessRule/{SIM_CLUSTER}/nlp-researchers"

pytestmark = pytest.mark.http


TRAINING_SPEC = f"""
kind: Training
name: finetune
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  compute: {{gpuDevicesRequest: 1}}
  environmentVariables:
    - name: API_TOKEN
      value: {SECRET}
    - name: HF_HOME
      value: /data/hf
"""


def one_error_line(res) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.exit_code == 1, res.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


# --- one workload -------------------------------------------------------------------


def test_import_records_the_workload_without_api_writes_and_the_next_plan_is_clean(
        ws, sim_server):
    wid = post_training(sim_server)
    ws.write("finetune.yaml", TRAINING_SPEC)
    sim_server.clear_requests()
    res = ws.cli("import", "Training/7/finetune", wid)
    assert res.exit_code == 0, res.output
    assert f"Adopted Training/7/finetune (workload {wid})" in res.stdout
    assert sim_server.writes() == []
    rec = ws.state()["resources"]["Training/7/finetune"]
    assert rec["workload_id"] == wid and rec["desired_phase"] == "Running"
    assert ws.state()["serial"] == 1
    # Live is filled with server defaults (imagePullPolicy, backoffLimit, ...): none of them
    # is recorded as last applied, or the next plan would read them as removed by the user.
    live = sim_server.api("GET", f"{TRAININGS}/{wid}").json()
    assert live["spec"]["imagePullPolicy"] == "IfNotPresent" and live["spec"]["backoffLimit"] == 6
    spec = rec["applied"]["spec"]
    assert "imagePullPolicy" not in spec and "backoffLimit" not in spec
    # The state keeps a secret's keyed hash, as an apply would, never the value.
    token = {e["name"]: e["value"] for e in spec["environmentVariables"]}["API_TOKEN"]
    assert token.startswith("hmac-sha256:") and SECRET not in ws.state_path.read_text()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes" in res.stdout
    drift = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert drift.exit_code == 0, drift.output


def test_after_import_the_plan_shows_the_real_differences_from_the_spec(ws, sim_server):
    wid = post_training(sim_server)
    ws.write("finetune.yaml", TRAINING_SPEC.replace("gpuDevicesRequest: 1", "gpuDevicesRequest: 2"))
    assert ws.cli("import", "Training/7/finetune", wid).exit_code == 0
    doc = ws.plan_json()
    (rc,) = doc["resource_changes"]
    assert rc["change"]["actions"] == ["delete", "create"] and not rc["adopted"]
    assert [c["path"] for c in rc["changed_paths"]] == ["spec.compute.gpuDevicesRequest"]


def test_a_spec_that_spells_out_server_defaults_plans_clean_after_import(ws, sim_server):
    # The examples set some defaults explicitly (a PVC's accessModes readWriteOnce: true,
    # which the recorded body leaves out with its other default modes).
    ids = examples_live_without_state(ws)
    addr = "Workspace/7/jupyter-research"
    assert ws.cli("import", addr, ids[addr]).exit_code == 0
    res = ws.plan("--detailed-exitcode", "--target", addr)
    assert res.exit_code == 0, res.output


def test_a_suspended_workload_is_recorded_stopped(ws, sim_server):
    wid = post_training(sim_server)
    sim_server.api("POST", f"{TRAININGS}/{wid}/suspend").raise_for_status()
    ws.write("finetune.yaml", TRAINING_SPEC + "desiredPhase: Stopped\n")
    assert ws.cli("import", "Training/7/finetune", wid).exit_code == 0
    assert ws.state()["resources"]["Training/7/finetune"]["desired_phase"] == "Stopped"
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_an_id_of_another_kind_is_found_and_named(ws, sim_server):
    ids = examples_live_without_state(ws)
    wid = ids["Workspace/7/jupyter-research"]
    err = one_error_line(ws.cli("import", "Training/7/jupyter-research", wid))
    assert "its kind is Workspace, not Training" in err


# --- refusals: exit 1, one line, nothing written ------------------------------------


def _refusals(wid: str, other_id: str) -> list[tuple[str, list[str], str]]:
    return [
        ("unknown-id", ["Training/7/nobody", "0b6f6a4e-0000-4000-8000-00000000dead"],
         "no workload with id 0b6f6a4e-0000-4000-8000-00000000dead"),
        ("kind", ["Workspace/7/other", other_id], "its kind is Training, not Workspace"),
        ("project", ["Training/8/other", other_id], "its project is 7, not 8"),
        ("name", ["Training/7/renamed", other_id], "its name is 'other', not 'renamed'"),
        ("in-state", ["Training/7/finetune", wid], "Training/7/finetune is in the state already"),
        ("same-id-other-address", ["Training/7/elsewhere", wid],
         f"workload {wid} is in the state already, as Training/7/finetune"),
        ("malformed", ["Training/7", other_id], "invalid address 'Training/7'"),
        ("unknown-kind", ["Trainin/7/other", other_id], "invalid address 'Trainin/7/other'"),
        # Not a UUID: refused before any request (once a traceback, or another endpoint's
        # answer read as a workload: ".." is the kind's list).
        *((f"id-{bad!r}", ["Training/7/other", bad], f"workload id {bad!r}: expected a "
           "workload's UUID") for bad in ("", "a/b", "..", "%2e%2e", f" {other_id}")),
    ]


def test_every_refusal_is_one_error_line_and_writes_nothing(ws, sim_server):
    wid = post_training(sim_server)
    other_id = post_training(sim_server, name="other")
    assert ws.cli("import", "Training/7/finetune", wid).exit_code == 0
    before = ws.state_path.read_bytes()
    journal_path = ws.state_path.with_name("state.json.journal")
    sim_server.clear_requests()
    for case, args, says in _refusals(wid, other_id):
        err = one_error_line(ws.cli("import", *args))
        assert says in err, (case, err)
        assert ws.state_path.read_bytes() == before, case
        assert not journal_path.exists(), case
    assert sim_server.writes() == []
    assert json.loads(before)["serial"] == 1


def test_a_mismatch_names_every_field_that_differs_with_both_values(ws, sim_server):
    wid = post_training(sim_server)
    err = one_error_line(ws.cli("import", "Workspace/8/other", wid))
    assert err == (f"Error: workload {wid} does not match Workspace/8/other: its kind is "
                   "Training, not Workspace; its project is 7, not 8; its name is 'finetune', "
                   "not 'other'; nothing was written")
    assert not ws.state_path.exists()


def test_a_workload_being_deleted_is_refused(ws, sim_server):
    wid = post_training(sim_server)
    sim_server.admin.patch(f"/_sim/workloads/{wid}",
                           json={"desiredPhase": "Deleted"}).raise_for_status()
    err = one_error_line(ws.cli("import", "Training/7/finetune", wid))
    assert f"workload {wid} is being deleted" in err
    assert not ws.state_path.exists()


def test_import_waits_for_the_state_lock_and_refuses_when_it_stays_taken(ws, sim_server):
    wid = post_training(sim_server)
    with LocalFileStore(ws.state_path).lock("apply"):
        err = one_error_line(ws.cli("import", "Training/7/finetune", wid))
        assert "locked" in err and "apply" in err
        err = one_error_line(ws.cli("--lock-timeout", "0.3", "import", "Training/7/finetune", wid))
        assert "locked" in err
    assert not ws.state_path.exists()
    held = LocalFileStore(ws.state_path).lock("apply")
    held.__enter__()
    release = threading.Timer(0.5, held.__exit__, (None, None, None))
    release.start()
    try:
        res = ws.cli("--lock-timeout", "30", "import", "Training/7/finetune", wid)
    finally:
        release.join()
    assert res.exit_code == 0, res.output
    assert ws.state()["resources"]["Training/7/finetune"]["workload_id"] == wid


def test_import_refuses_while_an_interrupted_apply_is_open_in_the_journal(ws, sim_server):
    wid = post_training(sim_server)
    store = LocalFileStore(ws.state_path)
    store.append([journal.Intent(seq=1, action="create", address="Training/7/x").to_json()],
                 store.read().lineage)
    before = store.journal_path.read_bytes()
    err = one_error_line(ws.cli("import", "Training/7/finetune", wid))
    assert "interrupted apply" in err and "run apply first" in err
    assert store.journal_path.read_bytes() == before and not ws.state_path.exists()


def test_usage_errors_exit_1(ws, sim_server):
    for args in (["import"], ["import", "Training/7/x"], ["import", "--kind", "Training", "a", "b"],
                 ["import", "--all", "a", "b"], ["import", "--all", "--kind", "Trainer"]):
        res = ws.cli(*args)
        assert res.exit_code == 1, (args, res.output)
        assert "Traceback" not in res.output


# --- import --all --------------------------------------------------------------------


def test_import_all_adopts_what_the_specs_name_in_one_write_then_plans_clean(ws, sim_server):
    ids = examples_live_without_state(ws)
    ws.write("extra/not-live.yaml", TRAINING_SPEC.replace("finetune", "not-live"))
    # Plans show adoptions as their own line and count, and --detailed-exitcode says 2.
    text = ws.plan("--detailed-exitcode")
    assert text.exit_code == 2, text.output
    assert "apply adopts them into the state instead of creating them:" in text.stdout
    assert "  = Workspace/7/jupyter-research" in text.stdout
    assert ", 14 to adopt." in text.stdout and "1 to create" in text.stdout
    md = ws.plan("--format", "markdown").stdout
    assert "1 to create" in md and "14 to adopt" in md and "**Adopted**" in md
    doc = ws.plan_json()
    assert doc["summary"]["adopt"] == 14 and doc["summary"]["create"] == 1
    assert sum(rc["adopted"] for rc in doc["resource_changes"]) == 14

    sim_server.clear_requests()
    res = ws.cli("import", "--all", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert sim_server.writes() == []
    lists = [r for r in sim_server.requests() if r["path"] == "/api/v1/workloads"]
    assert len(lists) == 1  # one list request for the 10 specs, not one per spec
    assert "Not found live: Training/7/not-live" in res.stdout
    # The organisation's resources among them: they are counted as resources.
    assert "Adopted 14 resources" in res.stdout and "1 not found live" in res.stdout
    assert "Adopted Workspace/7/jupyter-research (workload " in res.stdout
    assert f"Adopted {RULE_AT} (resource " in res.stdout
    state = ws.state()
    assert state["serial"] == 1  # one write
    assert {a: r["workload_id"] for a, r in state["resources"].items()} == ids
    # What the specs say only the state keeps is taken from them (preventDestroy, names).
    assert state["resources"]["DistributedInference/7/qwen-32b-serve"]["project_name"]
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2 and "1 to create" in res.stdout and "adopt" not in res.stdout
    (ws.specs / "extra" / "not-live.yaml").unlink()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert ws.cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0

    again = ws.cli("import", "--all", str(ws.specs))
    assert again.exit_code == 0 and "Nothing adopted" in again.stdout
    assert "14 in the state already" in again.stdout and ws.state()["serial"] == 1


def test_import_all_filters_by_kind_and_by_project_id_or_name(ws, sim_server):
    ids = examples_live_without_state(ws)
    # --kind as export takes it: any case, a typo one Error: line with the closest kind.
    err = one_error_line(ws.cli("import", "--all", "--kind", "trainig", str(ws.specs)))
    assert err.startswith("Error: --kind trainig: no such kind (did you mean Training?)")
    assert not ws.state_path.exists()
    res = ws.cli("import", "--all", "--kind", "workspace", "--kind", "Training", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert set(ws.state()["resources"]) == {"Workspace/7/jupyter-research",
                                            "Training/7/llama-8b-lora"}
    # qwen-32b-serve and llama-8b-nim name their project (project: project-7); the others
    # give its id.
    res = ws.cli("import", "--all", "--project", "project-7", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert set(ws.state()["resources"]) == {"Workspace/7/jupyter-research",
                                            "Training/7/llama-8b-lora",
                                            "DistributedInference/7/qwen-32b-serve",
                                            "NIMService/7/llama-8b-nim"}
    res = ws.cli("import", "--all", "--project", "7", str(ws.specs))
    assert res.exit_code == 0, res.output
    # Every workload of the examples; the organisation's resources are in no project.
    assert set(ws.state()["resources"]) == {a for a in ids if a.split("/")[1] == "7"}
    before = ws.state_path.read_bytes()
    err = one_error_line(ws.cli("import", "--all", "--project", "team-z", str(ws.specs)))
    assert "--project team-z: no spec names this project" in err
    assert ws.state_path.read_bytes() == before


def test_import_all_skips_a_name_another_kind_holds(ws, sim_server):
    post_training(sim_server, name="jupyter-research")
    ws.copy_examples()
    res = ws.cli("import", "--all", "--kind", "Workspace", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert ("Not adopted: Workspace/7/jupyter-research: its name is taken by a workload of "
            "another kind") in res.stdout
    assert not ws.state_path.exists()


def test_import_all_with_bad_specs_is_the_spec_error_and_writes_nothing(ws, sim_server):
    ws.write("bad.yaml", TRAINING_SPEC.replace("image:", "imag:"))
    res = ws.cli("import", "--all", str(ws.specs))
    assert res.exit_code == 1 and "bad.yaml" in res.stderr and "Traceback" not in res.output
    assert not ws.state_path.exists()


def test_import_all_refuses_a_file_for_its_folder(ws, sim_server):
    # validate and plan refuse a file as DIR; import --all read no spec from it and said
    # "Nothing adopted", exit 0.
    examples_live_without_state(ws)
    not_specs = ws.write("notes.txt", "kind: Training\n")
    err = one_error_line(ws.cli("import", "--all", str(not_specs)))
    assert err == f"Error: {not_specs} is a file; import --all takes a specs folder"
    assert not ws.state_path.exists()
