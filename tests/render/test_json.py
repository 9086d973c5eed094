"""The JSON renderer: the versioned document scripts and PR bots consume."""

from __future__ import annotations

import copy
import json
import pathlib
import re

import jsonpatch
import pytest

from reconciler import kinds, plans
from reconciler.plans import Action, FieldChange
from reconciler.render import json as json_render

from tests.helpers import examples
from tests.helpers.finishing import finished

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "plan-format.md"
GOLDEN = pathlib.Path(__file__).parent / "golden"
PATCHED = ("update", "replace")  # our `action`: a suspend's `["update"]` has no patch


def test_render_is_the_document_sorted_and_indented():
    plan = examples.PLANS["mixed"]()
    text = json_render.render_plan(finished(plan))
    assert json.loads(text) == json_render.plan_document(finished(plan))
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False)


def test_every_address_appears_once_noops_included(example):
    _, plan = example
    doc = json_render.plan_document(finished(plan))
    assert [rc["address"] for rc in doc["resource_changes"]] == sorted(c.address for c in plan.changes)
    assert doc["format_version"] == "1.10"
    assert doc["has_changes"] == plan.has_changes


def test_actions_follow_terraform():
    """`change.actions` in Terraform's words (a suspend or resume is an update of
    desiredPhase); our own action in `action` beside it."""
    expected = {"create": (["create"], "create"), "update": (["update"], "update"),
                "replace": (["delete", "create"], "replace"), "delete": (["delete"], "delete"),
                "suspend": (["update"], "suspend"), "resume_phase_drift": (["update"], "resume"),
                "no_changes": (["no-op"], "no-op")}
    for name, (actions, ours) in expected.items():
        rc = json_render.plan_document(finished(examples.PLANS[name]()))["resource_changes"][0]
        assert (rc["change"]["actions"], rc["action"]) == (actions, ours), name
    suspend = json_render.plan_document(finished(examples.PLANS["suspend"]()))["resource_changes"][0]
    assert [c["path"] for c in suspend["changed_paths"]] == ["desiredPhase"]


def test_replace_names_its_paths_and_keeps_before_and_after():
    rc = json_render.plan_document(finished(examples.PLANS["replace"]()))["resource_changes"][0]
    assert "spec.image" in rc["replace_paths"]
    assert rc["action_reason"] == "spec_changed"
    assert rc["change"]["before"]["spec"]["image"].endswith("24.05-py3")
    assert rc["change"]["after"]["spec"]["image"].endswith("24.10-py3")
    assert rc["patch"] is None


def test_update_carries_its_patch_body():
    rc = json_render.plan_document(finished(examples.PLANS["update"]()))["resource_changes"][0]
    assert rc["patch"] == {"spec": {"replicas": 4}}
    assert rc["changed_paths"] == [{"path": "spec.replicas", "before": 2, "after": 4,
                                    "drift": False, "added": False,
                                    "forces_replacement": False}]


def _json_equal(a, b) -> bool:
    """Equal as JSON text: 1, 1.0 and true differ (Python's == says they are equal)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_change_patch_turns_before_into_after_in_every_golden_plan(golden):
    for rc in json.loads(golden.read_text(encoding="utf-8"))["resource_changes"]:
        change = rc["change"]
        if rc["action"] not in PATCHED:
            assert change["patch"] is None, rc["address"]
            continue
        got = jsonpatch.apply_patch(change["before"], change["patch"])
        assert _json_equal(got, change["after"]), rc["address"]
        assert got != change["before"] or not change["patch"], rc["address"]


def test_golden_plans_hold_updates_and_replaces_with_patches():
    ops = [op for g in GOLDEN.glob("*.json")
           for rc in json.loads(g.read_text(encoding="utf-8"))["resource_changes"]
           if rc["action"] in PATCHED for op in rc["change"]["patch"]]
    assert {op["op"] for op in ops} >= {"replace", "add"}, ops


def test_update_patch_is_rfc6902_from_before_to_after():
    rc = json_render.plan_document(finished(examples.PLANS["update"]()))["resource_changes"][0]
    assert rc["change"]["patch"] == [{"op": "replace", "path": "/spec/replicas", "value": 4}]


def test_change_patch_tells_numbers_from_booleans():
    before = {"spec": {"replicas": 1, "workers": [1], "port": 8000, "same": {"a": [True]}}}
    after = {"spec": {"replicas": True, "workers": [1.0], "port": 8000, "same": {"a": [True]}}}
    rc = examples.inference("llama-70b-serve", Action.UPDATE, plans.REASON_SPEC_CHANGED,
                            before=before, after=after)
    patch = json_render.plan_document(finished(examples.plan(rc)))["resource_changes"][0]["change"]["patch"]
    assert patch == [{"op": "replace", "path": "/spec/replicas", "value": True},
                     {"op": "replace", "path": "/spec/workers/0", "value": 1.0}]


def test_change_patch_never_holds_a_sensitive_value():
    before = examples.training_body("bert-ddp")
    after = copy.deepcopy(before)
    after["spec"]["args"] = "--password=s3cr3t-args"  # lifecycle.sensitive: spec.args
    after["spec"]["environmentVariables"][1]["value"] = "hf_rotated"  # secret-looking name
    after["spec"]["environmentVariables"].append({"name": "DB_PASSWORD", "value": "pw-new"})
    after["spec"]["numWorkers"] = 8
    rc = examples.training(
        "bert-ddp", Action.REPLACE, plans.REASON_SPEC_CHANGED, before=before, after=after,
        changes=[FieldChange("spec.args", before["spec"]["args"], after["spec"]["args"],
                             forces_replacement=True)],
        sensitive=("spec.args",), desired_phase="Running")
    out = json_render.render_plan(finished(examples.plan(rc)))
    for secret in ("s3cr3t-args", "hf_rotated", "hf_abcdefghijklmnop", "pw-new", "train.py"):
        assert secret not in out
    change = json.loads(out)["resource_changes"][0]["change"]
    # Masked on both sides, a changed secret is no operation; an added one is added masked.
    # The operations follow the members in key order.
    assert change["patch"] == [
        {"op": "add", "path": "/spec/environmentVariables/2",
         "value": {"name": "DB_PASSWORD", "value": "(sensitive)"}},
        {"op": "replace", "path": "/spec/numWorkers", "value": 8},
    ]
    assert jsonpatch.apply_patch(change["before"], change["patch"]) == change["after"]


def test_drift_lists_field_drift_phase_drift_and_deletion_outside():
    plan = examples.plan(examples.update_drift(), examples.resume_phase_drift(),
                         examples.create())
    recreated = examples.recreate()
    recreated.address = "DistributedTraining/7/zz-recreated"
    plan.changes.append(recreated)
    drift = json_render.plan_document(finished(plan))["resource_drift"]
    assert [(d["address"], d["kind"], d["type"], d["action_reason"], d["paths"],
             d["change"]["actions"]) for d in drift] == [
        ("DistributedInference/7/llama-70b-serve", "DistributedInference",
         "runai_distributed_inference", "drift", ["spec.replicas"], ["update"]),
        ("DistributedTraining/7/resnet-mpi", "DistributedTraining",
         "runai_distributed_training", "phase_drift", ["desiredPhase"], ["update"]),
        ("DistributedTraining/7/zz-recreated", "DistributedTraining",
         "runai_distributed_training", "deleted_outside", [], ["delete"]),
    ]
    # Terraform's before and after of a change outside: as last applied, and live now.
    replicas = [(d["change"]["before"] or {}).get("spec", {}).get("replicas") for d in drift]
    assert replicas[0] == 2 and drift[0]["change"]["after"]["spec"]["replicas"] == 4
    assert drift[1]["change"]["before"] == drift[1]["change"]["after"]  # the body is as it was
    assert drift[2]["change"]["before"]["spec"]["numWorkers"] == 2
    assert drift[2]["change"]["after"] is None
    assert {d["mode"] for d in drift} == {"managed"}


def test_summary_state_and_targets():
    doc = json_render.plan_document(finished(examples.PLANS["targeted"]()))
    assert doc["summary"] == {"create": 0, "update": 1, "replace": 0, "delete": 0,
                              "suspend": 0, "resume": 0, "no-op": 0,
                              "adopt": 0, "state_only": 0}
    assert doc["state"] == {"lineage": examples.LINEAGE, "serial": 3}
    assert doc["targets"] == ["DistributedInference/7/llama-70b-serve"]
    assert "targets" not in json_render.plan_document(finished(examples.PLANS["update"]()))


def test_secret_looking_env_values_are_masked_everywhere():
    for name, build in examples.PLANS.items():
        out = json_render.render_plan(finished(build()))
        for secret in ("hf_abcdefghijklmnop", "hf_old", "hf_new"):
            assert secret not in out, name
    doc = json_render.plan_document(finished(examples.PLANS["create"]()))
    envs = doc["resource_changes"][0]["change"]["after"]["spec"]["environmentVariables"]
    assert envs == [{"name": "NCCL_DEBUG", "value": "INFO"},
                    {"name": "HF_TOKEN", "value": "(sensitive)"}]


def test_rendering_does_not_change_the_plan():
    plan = examples.PLANS["mixed"]()
    before = copy.deepcopy(plan)
    json_render.plan_document(finished(plan))
    assert plan == before


# Members holding workload bodies (or their masks), whose fields are the API's.
BODIES = ("before", "after", "patch", "summary", "values", "sensitive_values",
          "after_unknown", "before_sensitive", "after_sensitive")


def _keys(doc, prefix=""):
    for k, v in doc.items():
        yield prefix + k
        if isinstance(v, dict) and k not in BODIES:
            yield from _keys(v, prefix + k + ".")
        if isinstance(v, list) and v and isinstance(v[0], dict) and k != "patch":
            yield from _keys(v[0], prefix + k + "[].")


def test_every_field_is_documented():
    documented = set(re.findall(r"`([a-z_\[\].-]+)`", DOC.read_text(encoding="utf-8")))
    doc = json_render.plan_document(finished(examples.PLANS["mixed"]()))
    doc.update(json_render.plan_document(finished(examples.PLANS["targeted"]())))
    missing = sorted(k for k in _keys(doc)
                     if not any(k == d or k.endswith("." + d) for d in documented))
    assert not missing, f"fields missing from docs/plan-format.md: {missing}"
    assert {a.value for a in Action} <= documented


# --- read as a Terraform plan ------------------------------------------------------------


def test_update_after_is_the_live_object_with_the_update_applied():
    """A Rego or checkov rule over `change.after` sees what the workload will be: the live
    object's server defaults, which the spec leaves out, are in it."""
    before = examples.inference_body("llama-70b-serve", 2)
    before["spec"].update(priorityClass="inference", preemptibility="non-preemptible")
    rc = examples.inference("llama-70b-serve", Action.UPDATE, plans.REASON_SPEC_CHANGED,
                            before=before, after=examples.inference_body("llama-70b-serve", 4),
                            changes=[FieldChange("spec.replicas", 2, 4)],
                            patch={"spec": {"replicas": 4}})
    change = json_render.plan_document(finished(examples.plan(rc)))["resource_changes"][0]["change"]
    assert change["after"]["spec"]["priorityClass"] == "inference"
    assert change["after"]["spec"]["replicas"] == 4
    assert jsonpatch.apply_patch(change["before"], change["patch"]) == change["after"]
    assert change["after_unknown"] == {}


def test_planned_values_and_prior_state_hold_the_workloads_after_and_before_apply():
    doc = json_render.plan_document(finished(examples.PLANS["mixed"]()))
    changes = {rc["address"]: rc for rc in doc["resource_changes"]}
    planned = {r["address"]: r for r in doc["planned_values"]["root_module"]["resources"]}
    prior = {r["address"]: r for r in doc["prior_state"]["values"]["root_module"]["resources"]}
    assert set(planned) == {a for a, rc in changes.items() if rc["change"]["after"] is not None}
    assert set(prior) == {a for a, rc in changes.items() if rc["change"]["before"] is not None}
    deleted = [a for a, rc in changes.items() if rc["action"] == "delete"]
    assert deleted and not set(deleted) & set(planned) and set(deleted) <= set(prior)
    for address, r in planned.items():
        rc = changes[address]
        assert (r["mode"], r["type"], r["name"], r["provider_name"]) == (
            "managed", rc["type"], rc["name"], rc["provider_name"])
        assert r["values"] == rc["change"]["after"]
        assert r["sensitive_values"] == rc["change"]["after_sensitive"]
    assert doc["terraform_version"] == doc["prior_state"]["terraform_version"] != ""
    assert doc["prior_state"]["format_version"] == "1.0"


def test_create_leaves_the_workload_id_unknown_and_delete_has_no_after():
    create = json_render.plan_document(finished(examples.PLANS["create"]()))
    change = create["resource_changes"][0]["change"]
    assert change["before"] is None and change["after_unknown"] == {"workloadId": True}
    assert change["after"]["spec"]["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert create["prior_state"]["values"]["root_module"]["resources"] == []
    delete = json_render.plan_document(finished(examples.PLANS["delete"]()))
    change = delete["resource_changes"][0]["change"]
    assert change["after"] is None and change["after_sensitive"] is False
    assert delete["planned_values"]["root_module"]["resources"] == []


def test_sensitivity_masks_are_true_where_a_value_is_masked():
    after = examples.training_body("bert-ddp")
    rc = examples.training("bert-ddp", Action.CREATE, plans.REASON_NEW, after=after,
                           sensitive=("spec.args",), desired_phase="Running")
    change = json_render.plan_document(finished(examples.plan(rc)))["resource_changes"][0]["change"]
    assert [e["name"] for e in after["spec"]["environmentVariables"]] == ["NCCL_DEBUG", "HF_TOKEN"]
    assert change["after_sensitive"]["spec"]["args"] is True
    assert change["after_sensitive"]["spec"]["environmentVariables"] == [{}, {"value": True}]
    assert "image" not in change["after_sensitive"]["spec"]  # shown: not listed
    assert change["after"]["spec"]["args"] == "(sensitive)"
    assert change["before_sensitive"] is False


def test_replace_paths_in_terraforms_steps():
    rc = json_render.plan_document(finished(examples.PLANS["replace"]()))["resource_changes"][0]
    assert rc["replace_paths"] == ["spec.environmentVariables[HF_HOME]",
                                   "spec.environmentVariables[HF_TOKEN].value",
                                   "spec.image", "spec.tolerations"]
    assert rc["change"]["replace_paths"] == [["spec", "environmentVariables", 2],
                                             ["spec", "environmentVariables", 1, "value"],
                                             ["spec", "image"], ["spec", "tolerations"]]


def test_every_kind_has_its_documented_resource_type():
    table = dict(re.findall(r"^\| `([A-Za-z]+)` \| `(runai_[a-z_]+)` \|$",
                            DOC.read_text(encoding="utf-8"), re.MULTILINE))
    assert table == {name: json_render.resource_type(name) for name in kinds.KINDS}
    assert len(set(table.values())) == len(kinds.KINDS)


def test_change_patch_does_not_depend_on_the_order_of_the_members():
    """The API's order and a saved plan's (keys sorted) give one patch."""
    before = examples.training_body("bert-ddp")
    after = copy.deepcopy(before)
    after["spec"].update(image="nvcr.io/nvidia/pytorch:24.10-py3", numWorkers=8)
    after["clusterId"] = "another"

    def reordered(body):
        return {k: reordered(body[k]) if isinstance(body[k], dict) else body[k]
                for k in reversed(list(body))}

    patches = []
    for b, a in ((before, after), (reordered(before), reordered(after))):
        rc = examples.training("bert-ddp", Action.REPLACE, plans.REASON_SPEC_CHANGED,
                               before=b, after=a, desired_phase="Running")
        patches.append(json_render.plan_document(finished(examples.plan(rc)))
                       ["resource_changes"][0]["change"]["patch"])
    assert patches[0] == patches[1]
    assert [op["path"] for op in patches[0]] == ["/clusterId", "/spec/image", "/spec/numWorkers"]


def test_a_number_beyond_64_bits_is_rendered_as_json_has_it():
    body = examples.training_body("bert-ddp")
    body["spec"]["backoffLimit"] = 2 ** 70
    rc = examples.training("bert-ddp", Action.CREATE, plans.REASON_NEW, after=body,
                           desired_phase="Running")
    text = json_render.render_plan(finished(examples.plan(rc)))
    assert json.loads(text)["resource_changes"][0]["change"]["after"]["spec"]["backoffLimit"] == 2 ** 70
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False)
