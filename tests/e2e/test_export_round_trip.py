"""The export round trip against `sim serve` over HTTP: workloads of all five kinds created
directly through the API (server defaults sent explicitly, keyed lists out of order,
suspended ones, a secret variable) -> `export` -> `validate` (after supplying the secret)
-> `plan` with no state shows only adoptions -> `apply` makes no API write -> `plan
--detailed-exitcode` exits 0 and `drift` finds nothing. Also: exported files never hold a
secret's value, and an export onto existing files without --force changes none of them."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from reconciler import kinds, masking
from tests.helpers.export_bodies import EXAMPLES, split

from tests.helpers.workspace import changes_by_address

pytestmark = pytest.mark.http

SECRET = "hf_s3cr3t_value_never_in_git"


def _create(sim_server, kind: str, body: dict) -> str:
    r = sim_server.api("POST", kinds.get(kind).api_path, json=body)
    assert r.status_code == 202, r.text
    return r.json()["workloadId"]


@pytest.fixture
def fleet(sim_server):
    """The five examples created through the API (some suspended), plus a training that
    completed and a workspace being deleted, which export skips. -> {address: id}."""
    created = {}
    for kind, (marked, suspend) in EXAMPLES.items():
        posted, _ = split(marked)
        wid = _create(sim_server, kind, posted)
        if suspend:
            path = kinds.get(kind).api_path
            assert sim_server.api("POST", f"{path}/{wid}/suspend").status_code == 202
        created[kinds.address(kind, posted["projectId"], posted["name"])] = wid
    done = _create(sim_server, "Training", {"name": "finished", "projectId": "7",
                                            "clusterId": marked["clusterId"],
                                            "spec": {"image": "python:3.12"}})
    sim_server.admin.post(f"/_sim/workloads/{done}/phase", json={"phase": "Completed"})
    gone = _create(sim_server, "Workspace", {"name": "leaving", "projectId": "7",
                                             "clusterId": marked["clusterId"],
                                             "spec": {"image": "python:3.12"}})
    assert sim_server.api("DELETE", f"{kinds.WORKSPACE.api_path}/{gone}").status_code == 202
    return created


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _supply_secrets(root) -> None:
    """What a user does after export: puts the secret back in place of the placeholder
    (here the value itself, which keeps the spec equal to what runs)."""
    for path in root.rglob("*.yaml"):
        text = path.read_text()
        path.write_text(text.replace(masking.SECRET_PLACEHOLDER, SECRET))


SPECS = ["project-7/Training/llama-lora.yaml", "project-7/Workspace/jupyter.yaml",
         "project-8/DistributedTraining/bert-ddp.yaml", "project-7/Inference/mistral-chat.yaml",
         "project-8/DistributedInference/qwen-serve.yaml"]
# With --defaults: what the specs of a folder share (docs/specs.md, "Folder defaults").
DEFAULTS = {
    "_defaults.yaml": {"clusterId": EXAMPLES["Training"][0]["clusterId"]},
    "project-7/_defaults.yaml": {"project": "project-7", "spec": {
        "labels": [{"name": "tier", "value": "gold"}, {"name": "team", "value": "ml"}],
        "annotations": [{"name": "owner", "value": "ana"}],
        "environmentVariables": [{"name": "WANDB_PROJECT", "value": "export-demo"},
                                 {"name": "HF_HOME", "value": "/data/hf"}]}},
    "project-8/_defaults.yaml": {"project": "project-8"},
}


@pytest.mark.parametrize("flags", [(), ("--defaults",)], ids=["specs", "with-defaults"])
def test_the_round_trip_plans_clean_and_applies_without_a_write(ws, sim_server, fleet, flags):
    res = ws.cli("export", "--out", str(ws.specs), *flags)
    assert res.exit_code == 0, res.output
    files = _files(ws.specs)
    assert sorted(files) == sorted(SPECS + (list(DEFAULTS) if flags else []))
    if flags:
        assert {p: yaml.safe_load(files[p]) for p in DEFAULTS} == DEFAULTS
        for path in DEFAULTS:
            assert str(ws.specs / path) in res.output
    assert "Exported 5 workloads" in res.output
    assert "Skipped 1 deleted and 1 completed" in res.output
    assert all(SECRET.encode() not in data for data in files.values())
    assert "5 files hold a placeholder" in res.output
    assert "project-7/Training/llama-lora.yaml: spec.environmentVariables[HF_TOKEN].value" \
        in res.output

    training = yaml.safe_load(files["project-7/Training/llama-lora.yaml"])
    assert training.get("project") == (None if flags else "project-7")
    assert "projectId" not in training
    assert training["desiredPhase"] == "Stopped"  # it was suspended
    assert "backoffLimit" not in training["spec"]  # posted at its default
    assert "claimName" not in training["spec"]["storage"]["pvc"][0]  # generated
    assert [v["name"] for v in training["spec"]["environmentVariables"]] == (
        ["HF_TOKEN"] if flags else ["WANDB_PROJECT", "HF_TOKEN", "HF_HOME"])  # the API's order

    refused = ws.cli("validate", str(ws.specs))
    assert refused.exit_code == 1
    assert (f"spec.environmentVariables[{0 if flags else 1}].value: is a secret that export "
            "did not write") in refused.output
    assert SECRET not in refused.output

    _supply_secrets(ws.specs)
    valid = ws.cli("validate", str(ws.specs))
    assert valid.exit_code == 0, valid.output

    doc = ws.plan_json()
    changes = changes_by_address(doc)
    assert set(changes) == set(fleet)
    assert all(rc["adopted"] and rc["change"]["actions"] == ["no-op"] for rc in changes.values())
    summary = doc["summary"]
    assert summary["adopt"] == 5
    assert all(summary[a] == 0 for a in ("create", "update", "replace", "delete", "suspend",
                                         "resume"))
    assert SECRET not in json.dumps(doc)

    sim_server.clear_requests()
    applied = ws.apply()
    assert applied.exit_code == 0, applied.output
    assert "5 adopted" in applied.output
    assert sim_server.writes() == []

    again = ws.plan("--detailed-exitcode")
    assert again.exit_code == 0, again.output
    drift = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert drift.exit_code == 0, drift.output
    assert "No drift" in drift.output


def test_include_secrets_writes_the_value_for_its_owner_only(ws, sim_server, fleet):
    res = ws.cli("export", "--out", str(ws.specs), "--include-secrets", "--kind", "training")
    assert res.exit_code == 0, res.output
    path = ws.specs / "project-7" / "Training" / "llama-lora.yaml"
    assert SECRET in path.read_text()
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert "placeholder" not in res.output
    assert ws.cli("validate", str(ws.specs)).exit_code == 0


def test_export_onto_existing_files_without_force_changes_none(ws, sim_server, fleet):
    assert ws.cli("export", "--out", str(ws.specs)).exit_code == 0
    one = ws.specs / "project-7" / "Inference" / "mistral-chat.yaml"
    one.write_text(one.read_text() + "# my edit\n")
    before = _files(ws.specs)
    stamps = {p: p.stat().st_mtime_ns for p in ws.specs.rglob("*.yaml")}
    _create(sim_server, "Workspace", {"name": "newcomer", "projectId": "7",
                                      "clusterId": EXAMPLES["Workspace"][0]["clusterId"],
                                      "spec": {"image": "python:3.12"}})

    res = ws.cli("export", "--out", str(ws.specs))
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: 5 files exist already")
    assert "--force" in lines[0]
    assert _files(ws.specs) == before  # the new workload's file was not written either
    assert {p: p.stat().st_mtime_ns for p in ws.specs.rglob("*.yaml")} == stamps

    forced = ws.cli("export", "--out", str(ws.specs), "--force", "--format", "json")
    assert forced.exit_code == 0, forced.output
    listed = json.loads(forced.stdout)
    assert len(listed["exported"]) == 6
    assert listed["skipped"] == {"deleted": 1, "completed": 1}
    by_address = {e["address"]: e for e in listed["exported"]}
    assert by_address["Workspace/7/newcomer"]["file"] == str(
        ws.specs / "project-7" / "Workspace" / "newcomer.yaml")
    assert by_address["Inference/7/mistral-chat"]["secrets"] == [
        "spec.environmentVariables[HF_TOKEN].value"]
    assert "# my edit" not in one.read_text()
    assert not [p for p in ws.specs.rglob("*") if p.name.endswith(".tmp")]


def test_the_filters_select_and_bad_ones_are_one_error_line(ws, sim_server, fleet):
    res = ws.cli("export", "--out", str(ws.specs), "--project", "project-8", "--kind",
                 "DistributedInference", "--format", "json")
    assert res.exit_code == 0, res.output
    assert [e["address"] for e in json.loads(res.stdout)["exported"]] == [
        "DistributedInference/8/qwen-serve"]

    res = ws.cli("export", "--out", str(ws.root / "by-id"), "--project", "7", "--name", "m*",
                 "--name", "jup*", "--format", "json")
    assert sorted(e["address"] for e in json.loads(res.stdout)["exported"]) == [
        "Inference/7/mistral-chat", "Workspace/7/jupyter"]

    for flags, message in [
        (("--kind", "Trainig"), "Error: --kind Trainig: no such kind (did you mean Training?)"),
        (("--project", "project-9x"), "Error: --project project-9x: no such project "
                                      "(did you mean project-8 or project-7?)"),
        (("--project", ""), "Error: --project: an empty value"),  # was the API's 400
    ]:
        res = ws.cli("export", "--out", str(ws.root / "bad"), *flags)
        assert res.exit_code == 1
        assert res.output.strip().splitlines() == [res.output.strip()]
        assert res.output.startswith(message), res.output
        assert not (ws.root / "bad").exists()


def test_defaults_never_go_above_a_spec_that_export_did_not_write(ws, sim_server, fleet):
    ws.write("project-7/Training/mine.yaml", f"""
        kind: Training
        name: mine
        projectId: "7"
        clusterId: {EXAMPLES["Training"][0]["clusterId"]}
        spec:
          image: python:3.12
        """)
    res = ws.cli("export", "--out", str(ws.specs), "--defaults", "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["defaultsFiles"] == [str(ws.specs / "project-8" /
                                                           "_defaults.yaml")]
    assert sorted(p.name for p in ws.specs.rglob("_defaults.yaml")) == ["_defaults.yaml"]


def test_a_write_that_fails_midway_leaves_no_file_and_no_folder(ws, sim_server, fleet):
    # project-8 is a file: its specs cannot be written, but project-7's could (and were,
    # before: the next export then refused them as existing files).
    out = ws.root / "out"
    out.mkdir()
    (out / "project-8").write_text("")
    res = ws.cli("export", "--out", str(out))
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [res.output.strip()]
    assert res.output.startswith(f"Error: cannot write {out / 'project-8'}")
    assert "nothing was written" in res.output
    assert sorted(p.name for p in out.rglob("*")) == ["project-8"]


def test_an_out_that_is_no_folder_is_one_error_line(ws, sim_server, fleet, monkeypatch):
    monkeypatch.chdir(ws.root)
    (ws.root / "gone").symlink_to(ws.root / "nowhere")
    before = sorted(p.name for p in ws.root.iterdir())
    for out, says in [("", "Error: --out: an empty folder name"),  # was: written here, "to /"
                      ("gone", "Error: --out gone: not a folder")]:  # was: "File exists"
        res = ws.cli("export", "--out", out)
        assert res.exit_code == 1
        assert res.output.strip().splitlines() == [res.output.strip()]
        assert res.output.startswith(says) and "nothing was written" in res.output
        assert sorted(p.name for p in ws.root.iterdir()) == before


def test_a_project_with_a_name_of_its_own_is_exported_by_it_and_plans_clean(ws, sim_server):
    # The workload list named every project `project-<id>`, even one defined as `vision`:
    # export wrote `project: project-12`, which names no project, and the plan failed.
    cluster = EXAMPLES["Training"][0]["clusterId"]
    sim_server.admin.post("/_sim/projects", json={"id": "12", "name": "vision",
                                                  "clusterId": cluster}).raise_for_status()
    wid = _create(sim_server, "Training", {"name": "resnet", "projectId": "12",
                                           "clusterId": cluster,
                                           "spec": {"image": "python:3.12"}})
    res = ws.cli("export", "--out", str(ws.specs))
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load((ws.specs / "vision" / "Training" / "resnet.yaml").read_text())
    assert doc["project"] == "vision"
    plan = ws.plan_json()
    assert plan["summary"]["adopt"] == 1 and plan["summary"]["create"] == 0
    assert ws.apply().exit_code == 0
    assert ws.state()["resources"]["Training/12/resnet"]["workload_id"] == wid
    assert ws.plan("--detailed-exitcode").exit_code == 0


def _workspace(sim_server, name: str, **spec) -> str:
    return _create(sim_server, "Workspace", {
        "name": name, "projectId": "7", "clusterId": EXAMPLES["Workspace"][0]["clusterId"],
        "spec": {"image": "python:3.12", **spec}})


def test_a_defaults_file_export_does_not_write_may_not_change_an_exported_spec(ws, sim_server):
    # Two workspaces share a label (into project-7/Workspace/_defaults.yaml) beside a
    # training that has none; then one workspace loses the label. `export --force
    # --defaults` wrote no defaults for that folder now, and left the old one, which gave
    # the label back to the spec: its next plan was a replacement.
    one = _workspace(sim_server, "one", labels=[{"name": "team", "value": "ml"}])
    _workspace(sim_server, "two", labels=[{"name": "team", "value": "ml"}])
    _create(sim_server, "Training", {"name": "solo", "projectId": "7",
                                     "clusterId": EXAMPLES["Training"][0]["clusterId"],
                                     "spec": {"image": "python:3.12"}})
    assert ws.cli("export", "--out", str(ws.specs), "--defaults").exit_code == 0
    stale = ws.specs / "project-7" / "Workspace" / "_defaults.yaml"
    assert yaml.safe_load(stale.read_text()) == {"spec": {"labels": [{"name": "team",
                                                                      "value": "ml"}]}}
    sim_server.admin.patch(f"/_sim/workloads/{one}", json={"spec": {"labels": None}})
    before = _files(ws.specs)
    for flags in (("--defaults",), ()):
        res = ws.cli("export", "--out", str(ws.specs), "--force", *flags)
        assert res.exit_code == 1
        assert res.output.strip().splitlines() == [
            f"Error: {stale} would add to {ws.specs / 'project-7' / 'Workspace' / 'one.yaml'} "
            "fields its live workload does not have (the next plan would change it); nothing "
            "was written: move it away, or export into another folder"]
        assert _files(ws.specs) == before
    stale.unlink()
    assert ws.cli("export", "--out", str(ws.specs), "--force", "--defaults").exit_code == 0
    plan = ws.plan_json()
    assert plan["summary"]["adopt"] == 3 and plan["summary"]["replace"] == 0


def test_a_defaults_file_that_agrees_with_the_exported_specs_is_kept(ws, sim_server):
    _workspace(sim_server, "one")
    ws.write("_defaults.yaml", f"""
        clusterId: {EXAMPLES["Workspace"][0]["clusterId"]}
        lifecycle: {{preventDestroy: true}}
        """)
    res = ws.cli("export", "--out", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert ws.plan_json()["summary"]["adopt"] == 1


def test_a_defaults_file_the_loader_refuses_is_refused_by_export_with_its_line(ws, sim_server):
    # A duplicate key: a bare YAML load kept the last value and the export went on,
    # writing specs that validate then refused for the file it had read.
    _workspace(sim_server, "one")
    cluster = EXAMPLES["Workspace"][0]["clusterId"]
    ws.write("_defaults.yaml", f"clusterId: {cluster}\nclusterId: {cluster}\n")
    before = _files(ws.specs)
    res = ws.cli("export", "--out", str(ws.specs))
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"Error: {ws.specs / '_defaults.yaml'}:2: "), res.output
    assert "duplicate" in lines[0] and "nothing was written" in lines[0]
    assert "Traceback" not in res.output
    assert _files(ws.specs) == before
    ws.write("_defaults.yaml", f"clusterId: {cluster}\n")  # mended: the export goes on
    assert ws.cli("export", "--out", str(ws.specs)).exit_code == 0
