"""Saved plans end to end: `plan --out`, `show`, `apply PLANFILE`, staleness both ways."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.helpers.constants import CLIENT_SECRET

from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http


def _save(ws, name="plan.json", *extra):
    path = ws.root / name
    res = ws.plan("--out", str(path), *extra)
    assert res.exit_code == 0, res.output
    return path


def test_saved_plan_is_private_holds_no_token_and_applies_exactly(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    path = _save(ws)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert sim_server.token() not in text and CLIENT_SECRET not in text
    doc = json.loads(text)
    assert doc["format"] == "runai-reconcile-plan" and doc["version"] == 3
    assert sim_server.writes() == [], "plan --out must not write"

    # The specs change after the plan: apply PLANFILE still does what was reviewed.
    (ws.specs / "serve.yaml").unlink()
    res = ws.cli("apply", str(path))  # no --auto-approve, no TTY: no prompt for a saved plan
    assert res.exit_code == 0, res.output
    assert "Apply complete! Resources: 2 created" in res.output
    assert sorted(w["name"] for w in sim_server.live()) == ["bert-ddp", "llama-serve"]


def test_show_renders_the_saved_plan_in_every_format(ws, sim_server, applied):
    ws.write("train.yaml", TRAINING.replace("bert-ddp", "gpt-ddp"))
    path = _save(ws)
    for fmt in ("text", "json", "markdown"):
        planned = ws.plan("--format", fmt)
        shown = ws.cli("show", str(path), "--format", fmt)
        assert shown.exit_code == 0, shown.output
        if fmt == "json":
            # Two plans may read a workload differently (live phases move on; the list
            # vouches for it or not), and its `change.after` follows what was read: `show`
            # gives the document of the run that saved the plan.
            saved = ws.cli("plan", str(ws.specs), "--out", str(path), "--format", "json")
            assert saved.exit_code == 0, saved.output
            shown = ws.cli("show", str(path), "--format", fmt)
            strip = lambda out: [(rc["address"], rc["change"], rc["action"])
                                 for rc in json.loads(out)["resource_changes"]]
            assert strip(shown.stdout) == strip(saved.stdout)
            assert [(a, c["actions"]) for a, c, _ in strip(shown.stdout)] == [
                (a, c["actions"]) for a, c, _ in strip(planned.stdout)]
        else:
            assert shown.stdout == planned.stdout
    assert "DistributedTraining/7/gpt-ddp will be created" in ws.cli("show", str(path)).stdout


def test_a_plan_cannot_be_applied_twice(ws, sim_server):
    ws.write("serve.yaml", INFERENCE)
    path = _save(ws)
    assert ws.cli("apply", str(path)).exit_code == 0
    sim_server.clear_requests()
    again = ws.cli("apply", str(path))
    assert again.exit_code == 1
    assert "stale" in again.output and "applied already" in again.output
    assert sim_server.writes() == []


def test_a_plan_with_nothing_to_do_cannot_be_applied_twice_either(ws, sim_server, applied):
    path = _save(ws)
    assert "No changes" in ws.cli("show", str(path)).stdout
    serial = ws.state()["serial"]
    assert ws.cli("apply", str(path)).exit_code == 0
    assert ws.state()["serial"] > serial
    again = ws.cli("apply", str(path))
    assert again.exit_code == 1 and "stale" in again.output


def test_state_changed_since_the_plan_is_stale(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3"))
    path = _save(ws)
    ws.write("train.yaml", TRAINING.replace("numWorkers: 2", "numWorkers: 3"))
    assert ws.apply("--target", "DistributedTraining/7/bert-ddp").exit_code == 0
    sim_server.clear_requests()
    res = ws.cli("apply", str(path))
    assert res.exit_code == 1
    assert "stale" in res.output and "serial" in res.output
    assert sim_server.writes() == []


def test_plan_made_against_another_state_is_stale(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3"))
    path = _save(ws)
    other = ws.root / "other.json"
    other.write_text(ws.state_path.read_text().replace(ws.state()["lineage"],
                                                       "00000000-0000-4000-8000-000000000000"))
    res = ws.cli("--state", str(other), "apply", str(path))
    assert res.exit_code == 1
    assert "stale" in res.output and "lineage" in res.output


def test_live_changed_since_the_plan_is_stale(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3"))
    path = _save(ws)
    wid = applied["llama-serve"]["id"]
    assert sim_server.admin.patch(f"/_sim/workloads/{wid}",
                                  json={"spec": {"replicas": 5}}).status_code == 200
    sim_server.clear_requests()
    res = ws.cli("apply", str(path))
    assert res.exit_code == 1
    assert "stale" in res.output
    assert "DistributedInference/7/llama-serve was changed since the plan" in res.output
    assert sim_server.writes() == []


def test_live_deleted_or_created_since_the_plan_is_stale(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 3"))
    path = _save(ws)
    assert sim_server.admin.delete(f"/_sim/workloads/{applied['llama-serve']['id']}").status_code < 300
    res = ws.cli("apply", str(path))
    assert res.exit_code == 1 and "llama-serve was deleted since the plan" in res.output

    ws.write("new.yaml", TRAINING.replace("bert-ddp", "new-job"))
    path = _save(ws, "plan2.json")
    other = ws.root / "elsewhere"
    other.mkdir()
    (other / "new.yaml").write_text(TRAINING.replace("bert-ddp", "new-job"))
    assert ws.cli("--state", str(ws.root / "s2.json"), "apply", str(other),
                  "--auto-approve").exit_code == 0
    res = ws.cli("apply", str(path))
    assert res.exit_code == 1 and "new-job exists now" in res.output


def test_live_unchanged_except_its_phase_moving_on_still_applies(ws, sim_server, applied):
    ws.write("serve.yaml", INFERENCE.replace("replicas: 2", "replicas: 4"))
    path = _save(ws)
    wid = applied["bert-ddp"]["id"]
    assert sim_server.admin.post(f"/_sim/workloads/{wid}/phase",
                                 json={"phase": "Running"}).status_code < 300
    res = ws.cli("apply", str(path))
    assert res.exit_code == 0, res.output
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_saved_plan_refuses_targeting_flags_and_bad_files(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    path = _save(ws)
    res = ws.cli("apply", str(path), "--target", "DistributedTraining/7/bert-ddp")
    assert res.exit_code == 1 and "saved plan" in res.output
    junk = ws.root / "junk.json"
    junk.write_text("{\"hello\": 1}")
    res = ws.cli("apply", str(junk))
    assert res.exit_code == 1 and "is not a saved plan" in res.output
    res = ws.cli("show", str(ws.root / "missing.json"))
    assert res.exit_code == 1 and "cannot read plan file" in res.output
    newer = json.loads(path.read_text())
    newer["version"] = 99
    path.write_text(json.dumps(newer))
    res = ws.cli("show", str(path))
    assert res.exit_code == 1 and "newer runai-reconcile" in res.output


def test_apply_preview_in_json_leaves_stdout_to_the_document(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    res = ws.apply("--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["create"] == 1
    assert "Apply complete!" in res.stderr
