"""A sensitive value in a drifted field, in the pending
changes drift lists, in a saved plan shown, in `state show`, and in the error about a
damaged state record, through the CLI against `sim serve`: never shown, in any format."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

ADDRESS = "Training/7/t1"
SPEC = f"""
kind: Training
name: t1
projectId: "7"
clusterId: {CLUSTER}
lifecycle:
  sensitive: [spec.args]
spec:
  image: busybox
  args: --key=ARGS-SECRET-1
  environmentVariables:
    - name: DB_PASSWORD
      value: PW-SECRET-1
    - name: LOG_LEVEL
      value: debug
"""
FIRST = ("ARGS-SECRET-1", "PW-SECRET-1")
FORMATS = ("text", "json", "markdown")


def masked(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text
    assert "(sensitive)" in text


@pytest.fixture
def applied(ws, sim_server):  # noqa: F811
    ws.write("t.yaml", SPEC)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [live] = sim_server.live()
    return live["id"]


def test_drifted_sensitive_fields_and_pending_sensitive_changes_are_masked(ws, sim_server, applied):
    # Behind the tool's back: both values changed, one of them to another type.
    r = sim_server.admin.patch(f"/_sim/workloads/{applied}", json={"spec": {
        "args": "--key=ARGS-SECRET-2",
        "environmentVariables": [{"name": "DB_PASSWORD", "value": 424242424242},
                                 {"name": "LOG_LEVEL", "value": "info"}]}})
    assert r.status_code == 200
    # And in the specs (pending, not drift): new values again.
    ws.write("t.yaml", SPEC.replace("ARGS-SECRET-1", "ARGS-SECRET-3")
             .replace("PW-SECRET-1", "PW-SECRET-3"))
    secrets = (*FIRST, "ARGS-SECRET-2", "424242424242", "ARGS-SECRET-3", "PW-SECRET-3")
    for fmt in FORMATS:
        res = ws.cli("drift", str(ws.specs), "--format", fmt, "--detailed-exitcode")
        assert res.exit_code == 2, res.output
        masked(res.output, *secrets)
        assert "spec.args" in res.output and "DB_PASSWORD" in res.output
        assert "info" in res.output  # what is not sensitive is shown as it is
    report = json.loads(ws.cli("drift", str(ws.specs), "--format", "json").stdout)
    assert "(sensitive)" in json.dumps(report["drift"]) and "(sensitive)" in json.dumps(report["pending_changes"])


def test_a_saved_plan_shown_masks_its_sensitive_values_and_the_file_holds_none(ws, applied):
    ws.write("t.yaml", SPEC.replace("ARGS-SECRET-1", "ARGS-SECRET-3")
             .replace("PW-SECRET-1", "PW-SECRET-3"))
    path = ws.root / "plan.json"
    assert ws.plan("--out", str(path)).exit_code == 0
    for fmt in FORMATS:
        res = ws.cli("show", str(path), "--format", fmt)
        assert res.exit_code == 0, res.output
        masked(res.output, *FIRST, "ARGS-SECRET-3", "PW-SECRET-3")
    kept = path.read_text()
    assert "ARGS-SECRET-3" not in kept and "PW-SECRET-3" not in kept  # apply reads them again


def test_state_show_masks_sensitive_paths_and_secret_variables_unless_asked(ws, applied):
    res = ws.cli("state", "show", ADDRESS)
    assert res.exit_code == 0
    masked(res.output, *FIRST)
    spec = json.loads(res.output)["applied"]["spec"]
    assert spec["args"] == "(sensitive)"
    assert {e["name"]: e["value"] for e in spec["environmentVariables"]} == {
        "DB_PASSWORD": "(sensitive)", "LOG_LEVEL": "debug"}
    # The state holds no value to show: --show-sensitive shows the keyed hashes.
    shown = json.loads(ws.cli("state", "show", "--show-sensitive", ADDRESS).output)
    assert not any(secret in json.dumps(shown) for secret in FIRST)
    spec = shown["applied"]["spec"]
    assert spec["args"].startswith("hmac-sha256:")
    assert {e["name"]: e["value"][:12] for e in spec["environmentVariables"]} == {
        "DB_PASSWORD": "hmac-sha256:", "LOG_LEVEL": "debug"}


@pytest.mark.parametrize("damage", ["state file", "journal"])
def test_a_damaged_state_record_is_reported_without_quoting_its_body(ws, applied, damage):
    doc = ws.state()
    record = doc["resources"][ADDRESS]
    record["applied"] = [record["applied"]]  # the body, secrets and all, in a list
    if damage == "state file":
        ws.state_path.write_text(json.dumps(doc))
    else:
        entry = {"op": "set", "address": ADDRESS, "resource": record, "closes": None}
        header = {"journal": 1, "lineage": doc["lineage"]}
        ws.state_path.with_name("state.json.journal").write_text(
            json.dumps(header) + "\n" + json.dumps(entry) + "\n" + json.dumps({"op": "close", "seq": 1}) + "\n")
    for args in (["state", "list"], ["state", "show", ADDRESS], ["plan", str(ws.specs)],
                 ["drift", str(ws.specs)], ["apply", str(ws.specs), "--auto-approve"]):
        res = ws.cli(*args)
        assert res.exit_code == 1, (args, res.output)
        errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, res.stderr
        assert "applied: expected an object, got a list" in errors[0]
        for secret in FIRST:
            assert secret not in res.output, args
