"""The JSON renderer: the versioned document scripts and PR bots consume."""

from __future__ import annotations

import copy
import json
import pathlib
import re

import jsonpatch
import pytest

from reconciler import plans
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
    assert doc["format_version"] == "1.9"
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
    assert change["patch"] == [
        {"op": "replace", "path": "/spec/numWorkers", "value": 8},
        {"op": "add", "path": "/spec/environmentVariables/2",
         "value": {"name": "DB_PASSWORD", "value": "(sensitive)"}},
    ]
    assert jsonpatch.apply_patch(change["before"], change["patch"]) == change["after"]


def test_drift_lists_field_drift_phase_drift_and_deletion_outside():
    plan = examples.plan(examples.update_drift(), examples.resume_phase_drift(),
                         examples.create())
    recreated = examples.recreate()
    recreated.address = "DistributedTraining/7/zz-recreated"
    plan.changes.append(recreated)
    drift = json_render.plan_document(finished(plan))["resource_drift"]
    assert drift == [
        {"address": "DistributedInference/7/llama-70b-serve", "kind": "DistributedInference",
         "action_reason": "drift", "paths": ["spec.replicas"], "change": {"actions": ["update"]}},
        {"address": "DistributedTraining/7/resnet-mpi", "kind": "DistributedTraining",
         "action_reason": "phase_drift", "paths": ["desiredPhase"],
         "change": {"actions": ["update"]}},
        {"address": "DistributedTraining/7/zz-recreated", "kind": "DistributedTraining",
         "action_reason": "deleted_outside", "paths": [], "change": {"actions": ["delete"]}},
    ]


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


def _keys(doc, prefix=""):
    for k, v in doc.items():
        yield prefix + k
        if isinstance(v, dict) and k not in ("before", "after", "patch", "summary"):
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
