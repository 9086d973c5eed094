"""Regressions found by trying the tool as a user: the state follows the specs when live
already matches them, and a replacement never carries an ignored change along unseen."""

from __future__ import annotations

import pytest

from reconciler import diff

from tests.helpers.workspace import changes_by_address
from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http


def test_spec_change_already_live_is_recorded_so_drift_goes_quiet(ws, sim_server):
    ws.write("serve.yaml", INFERENCE)
    assert ws.apply().exit_code == 0
    wid = {w["name"]: w["id"] for w in sim_server.live()}["llama-serve"]
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"replicas": 3}})
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3"))  # the spec now agrees with live
    assert ws.plan("--detailed-exitcode").exit_code == 0
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert sim_server.writes() == []
    assert ws.state()["resources"]["DistributedInference/7/llama-serve"]["applied"]["spec"]["replicas"] == 3
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_replace_keeps_ignored_paths_at_their_applied_values(ws, sim_server):
    spec = TRAINING.replace("spec:\n", "lifecycle:\n  ignoreChanges: [spec.numWorkers]\nspec:\n", 1)
    ws.write("train.yaml", spec)
    assert ws.apply().exit_code == 0
    ws.write("train.yaml", spec.replace("numWorkers: 2", "numWorkers: 8").replace("24.05", "24.10"))
    doc = ws.plan_json()
    rc = changes_by_address(doc)["DistributedTraining/7/bert-ddp"]
    assert rc["replace_paths"] == ["spec.image"]
    assert rc["change"]["after"]["spec"]["numWorkers"] == 2  # what will be sent
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    creates = [r["body"] for r in sim_server.writes() if r["method"] == "POST" and "suspend" not in r["path"]]
    assert [b["spec"]["numWorkers"] for b in creates] == [2]
    assert ws.plan("--detailed-exitcode").exit_code == 0


TABLE = [
    # (body, prior, ignore, expected)
    ({"spec": {"a": 1, "b": 2}}, {"spec": {"a": 9, "b": 2}}, ["spec.a"], {"spec": {"a": 9, "b": 2}}),
    ({"spec": {"a": 1}}, {"spec": {}}, ["spec.a"], {"spec": {}}),
    ({"spec": {}}, {"spec": {"c": {"d": 1}}}, ["spec.c.d"], {"spec": {"c": {"d": 1}}}),
    ({"spec": {"environmentVariables": [{"name": "A", "value": "new"}, {"name": "B", "value": "b"}]}},
     {"spec": {"environmentVariables": [{"name": "A", "value": "old"}]}},
     ["spec.environmentVariables[A].value"],
     {"spec": {"environmentVariables": [{"name": "A", "value": "old"}, {"name": "B", "value": "b"}]}}),
    ({"spec": {"labels": [{"name": "x", "value": "1"}]}}, {"spec": {"labels": []}},
     ["spec.labels[x]"], {"spec": {"labels": []}}),
    ({"spec": {"labels": []}}, {"spec": {"labels": [{"name": "x", "value": "1"}]}},
     ["spec.labels[x]"], {"spec": {"labels": [{"name": "x", "value": "1"}]}}),
    ({"spec": {"a": 1}}, {"spec": {"a": 2}}, [], {"spec": {"a": 1}}),
]


@pytest.mark.parametrize("body,prior,ignore,expected", TABLE)
def test_keep_ignored(body, prior, ignore, expected):
    import copy

    original = copy.deepcopy(body)
    assert diff.keep_ignored(body, prior, ignore) == expected
    assert body == original  # never mutated


def test_an_empty_specs_folder_does_not_plan_to_delete_everything(ws, sim_server, tmp_path):
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    assert ws.apply().exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    sim_server.clear_requests()
    for cmd in (("plan", str(empty)), ("apply", str(empty), "--auto-approve")):
        res = ws.cli(*cmd)
        assert res.exit_code == 1, res.output
        assert "delete all 2 workloads" in res.stderr and "--destroy" in res.stderr
    assert sim_server.writes() == []
    assert len(sim_server.live()) == 2
    # removing one of two specs is an ordinary delete
    (ws.specs / "serve.yaml").unlink()
    assert ws.plan("--detailed-exitcode").exit_code == 2


def test_drift_without_a_state_file_is_an_error_not_a_pass(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 1
    assert "state.json" in res.stderr


def test_a_create_that_starts_suspended_says_so(ws, sim_server):
    ws.write("train.yaml", TRAINING.replace("spec:\n", "desiredPhase: Stopped\nspec:\n", 1))
    for fmt in ("text", "markdown"):
        out = ws.plan("--format", fmt).output
        assert 'desiredPhase: "Stopped"' in out, out
    assert ws.apply().exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_name_held_by_an_unmanaged_workload_of_another_kind_is_said_at_plan_time(
        ws, sim_server, caplog):
    import logging

    from tests.helpers.constants import CLUSTER

    body = {"name": "bert-ddp", "projectId": "7", "clusterId": CLUSTER,
            "spec": {"leader": {"image": "vllm/vllm-openai:v0.6.3"}}}
    assert sim_server.api("POST", "/api/v1/workloads/distributed-inferences", json=body).status_code == 202
    ws.write("train.yaml", TRAINING)
    with caplog.at_level(logging.WARNING, logger="reconciler.refresh"):
        res = ws.plan()
    assert res.exit_code == 0
    assert "DistributedTraining/7/bert-ddp will be created" in res.output
    assert "'bert-ddp' in project 7 is taken by workload" in caplog.text
