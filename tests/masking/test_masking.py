"""Sensitive values are masked in every output: plan, show, apply's preview and drift, in
text, json and markdown; the state and the saved plan keep them (both are 0600)."""

from __future__ import annotations

import json

import jsonpatch
import pytest

from tests.helpers.specs import TRAINING

pytestmark = pytest.mark.http

SECRETS = ("hf_live_secret_value", "sk-api-key-value", "s3cr3t-args-value", "db-passwd-value")

SECRET_TRAINING = TRAINING.replace(
    "      value: INFO\n",
    "      value: INFO\n"
    "    - name: HF_TOKEN\n      value: hf_live_secret_value\n"
    "    - name: openai_api_key\n      value: sk-api-key-value\n"
    "    - name: DB_PASSWD\n      value: db-passwd-value\n",
).replace("args: --nproc_per_node=8 train.py", "args: --password=s3cr3t-args-value") \
    + "lifecycle:\n  sensitive: [spec.args]\n"


def _assert_masked(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} shown by {where}"
    assert "(sensitive)" in text, where


def test_masked_in_every_format_of_every_command(ws, sim_server):
    ws.write("train.yaml", SECRET_TRAINING)
    path = ws.root / "plan.json"
    for fmt in ("text", "json", "markdown"):
        res = ws.plan("--format", fmt, "--out", str(path))
        assert res.exit_code == 0, res.output
        _assert_masked(res.output, f"plan --format {fmt}")
        _assert_masked(ws.cli("show", str(path), "--format", fmt).output, f"show --format {fmt}")
    # The saved plan holds none of the values (no RUNAI_RECONCILE_PLAN_KEY): apply reads
    # them again from the specs.
    assert not any(s in path.read_text() for s in SECRETS)
    res = ws.cli("apply", str(path))
    assert res.exit_code == 0, res.output
    _assert_masked(res.output, "apply PLANFILE preview")
    # The state holds each sensitive value's keyed hash, never the value.
    assert not any(s in ws.state_path.read_text() for s in SECRETS)
    assert "hmac-sha256:" in ws.state_path.read_text()

    # A change of each sensitive value: apply's preview, plan and drift keep them masked.
    wid = sim_server.live()[0]["id"]
    changed = SECRET_TRAINING
    for s in SECRETS:
        changed = changed.replace(s, s + "-2")
    ws.write("train.yaml", changed)
    for fmt in ("text", "json", "markdown"):
        res = ws.plan("--format", fmt)
        _assert_masked(res.output, f"plan of a change --format {fmt}")
    # The patch is made from the masked bodies: it turns the shown before into the shown after.
    change = json.loads(ws.plan("--format", "json").output)["resource_changes"][0]["change"]
    assert change["actions"] == ["delete", "create"]
    assert jsonpatch.apply_patch(change["before"], change["patch"]) == change["after"]
    res = ws.apply("--format", "text")
    assert res.exit_code == 0
    _assert_masked(res.output, "apply preview")

    wid = sim_server.live()[0]["id"]
    live = sim_server.api("GET", f"/api/v1/workloads/distributed/{wid}").json()
    env = [dict(e, value=e["value"] + "-3") if e["name"] != "NCCL_DEBUG" else e
           for e in live["spec"]["environmentVariables"]]
    r = sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {
        "environmentVariables": env, "args": "--password=s3cr3t-args-value-3"}})
    assert r.status_code == 200
    for fmt in ("text", "json", "markdown"):
        res = ws.cli("drift", str(ws.specs), "--format", fmt, "--detailed-exitcode")
        assert res.exit_code == 2, res.output
        _assert_masked(res.output, f"drift --format {fmt}")
        assert "spec.args" in res.output and "HF_TOKEN" in res.output


def test_mask_text_masks_a_secret_in_every_encoding_and_leaves_the_rest():
    from reconciler import masking

    secret = 'pa"ss\\wo/rd +1'
    forms = masking.encoded_forms(secret)
    assert 'pa\\"ss\\\\wo/rd +1' in forms and "pa%22ss%5Cwo%2Frd%20%2B1" in forms
    assert "pa%22ss%5Cwo%2Frd+%2B1" in forms and "cGEic3Ncd28vcmQgKzE=" in forms
    for form in forms:
        assert masking.mask_text(f"got <{form}> for id ci-bot", [secret]) == \
            "got <***> for id ci-bot"


def test_keyed_hashes_keep_the_shape_and_hash_a_value_once():
    from reconciler import masking

    body = {"spec": {"environmentVariables": [{"name": "API_TOKEN", "value": "s3cr3t"},
                                              {"name": "MODE", "value": "fast"}],
                     "args": "--x", "compute": {"gpuDevicesRequest": 2.0}}}
    hashed = masking.hash_sensitive(body, ("spec.compute",), b"k" * 32)
    env = hashed["spec"]["environmentVariables"]
    assert env[1] == {"name": "MODE", "value": "fast"} and hashed["spec"]["args"] == "--x"
    assert masking.is_hashed(env[0]["value"]) and "s3cr3t" not in repr(hashed)
    assert hashed["spec"]["compute"]["gpuDevicesRequest"] == masking.keyed_hash(2, b"k" * 32)
    assert masking.hash_sensitive(hashed, ("spec.compute",), b"k" * 32) == hashed
    assert masking.hash_sensitive(body, ("spec.compute",), b"j" * 32) != hashed
    plain = {"spec": {"image": "busybox"}}
    assert masking.hash_sensitive(plain, (), b"k" * 32) is plain
