"""Sensitive paths in `export` against `sim serve`: `export` withholds the values of the paths the
state marks sensitive (`lifecycle.sensitive`), not only secret-looking variable names. A
workload applied with `lifecycle.sensitive` naming an innocent variable and `spec.args` is
exported: the values are in no output and no file, the placeholder is refused by validate
naming the file; `--include-secrets` writes them (mode 0600); the exported spec keeps
`lifecycle.sensitive`, so after the values are filled in the plan is clean and masks them."""

from __future__ import annotations

import json
import os
import stat

import pytest
import yaml

from reconciler import masking

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

CONFIG = "cfg-b64-q8Zx7Lp2Vm"
ARGS = "--api-key=plain-args-0xC0FFEE"
PATHS = ["spec.args", "spec.environmentVariables[MODEL_CONFIG].value"]
REL = "project-7/Workspace/notebook.yaml"


@pytest.fixture
def applied(ws, sim_server):
    ws.write("nb.yaml", f"""
        kind: Workspace
        name: notebook
        projectId: "7"
        clusterId: {CLUSTER}
        lifecycle:
          sensitive: {json.dumps(PATHS)}
        spec:
          image: python:3.12
          args: "{ARGS}"
          environmentVariables:
            - name: MODEL_CONFIG
              value: {CONFIG}
            - name: LOG_LEVEL
              value: info
        """)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return ws


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_export_withholds_the_paths_the_state_marks_sensitive(applied, tmp_path):
    ws, out = applied, tmp_path / "exported"
    res = ws.cli("export", "--out", str(out))
    assert res.exit_code == 0, res.output
    as_json = ws.cli("export", "--out", str(tmp_path / "again"), "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    files = _files(out)
    for text in (res.output, as_json.output, *(d.decode() for d in files.values())):
        assert CONFIG not in text and ARGS not in text
    assert f"{REL}: {', '.join(PATHS)}" in res.output
    listed = json.loads(as_json.stdout)["exported"][0]
    assert sorted(listed["secrets"]) == PATHS
    doc = yaml.safe_load(files[REL])
    assert doc["lifecycle"] == {"sensitive": PATHS}
    assert doc["spec"]["args"] == masking.SECRET_PLACEHOLDER
    env = {v["name"]: v["value"] for v in doc["spec"]["environmentVariables"]}
    assert env == {"MODEL_CONFIG": masking.SECRET_PLACEHOLDER, "LOG_LEVEL": "info"}
    assert stat.S_IMODE(os.stat(out / REL).st_mode) == 0o644

    refused = ws.cli("validate", str(out))
    assert refused.exit_code == 1
    assert f"{out / REL}" in refused.output
    assert "spec.args: is a sensitive value that export did not write" in refused.output
    assert "spec.environmentVariables[0].value: is a secret that export did not write" \
        in refused.output

    # Filled in, the exported folder plans clean, the values masked in every output.
    path = out / REL
    path.write_text(path.read_text().replace(f"args: '{masking.SECRET_PLACEHOLDER}'",
                                             f"args: '{ARGS}'")
                    .replace(masking.SECRET_PLACEHOLDER, CONFIG))
    assert ws.cli("validate", str(out)).exit_code == 0
    for fmt in ("text", "json"):
        plan = ws.cli("plan", str(out), "--format", fmt, "--detailed-exitcode")
        assert plan.exit_code == 0, plan.output
        assert CONFIG not in plan.output and ARGS not in plan.output


def test_include_secrets_writes_the_sensitive_paths_mode_0600(applied, tmp_path):
    ws, out = applied, tmp_path / "exported"
    res = ws.cli("export", "--out", str(out), "--include-secrets")
    assert res.exit_code == 0, res.output
    assert CONFIG not in res.output and ARGS not in res.output
    doc = yaml.safe_load((out / REL).read_text())
    assert doc["spec"]["args"] == ARGS
    assert doc["spec"]["environmentVariables"][0] == {"name": "MODEL_CONFIG", "value": CONFIG}
    assert doc["lifecycle"] == {"sensitive": PATHS}
    assert stat.S_IMODE(os.stat(out / REL).st_mode) == 0o600
    plan = ws.cli("plan", str(out), "--detailed-exitcode")
    assert plan.exit_code == 0, plan.output


def test_without_a_state_export_is_as_before(ws, sim_server, tmp_path):
    assert sim_server.api("POST", "/api/v1/workloads/workspaces", json={
        "name": "bare", "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "python:3.12", "args": ARGS}}).status_code == 202
    res = ws.cli("export", "--out", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load((tmp_path / "e" / "project-7/Workspace/bare.yaml").read_text())
    assert doc["spec"]["args"] == ARGS and "lifecycle" not in doc
    assert not ws.state_path.exists()


def test_an_unreadable_state_is_the_error_other_commands_give(ws, sim_server, tmp_path):
    ws.state_path.parent.mkdir(parents=True)
    ws.state_path.write_text("{not json")
    res = ws.cli("export", "--out", str(tmp_path / "e"))
    other = ws.cli("state", "list")
    assert res.exit_code == other.exit_code == 1
    assert res.output.strip().splitlines()[-1] == other.output.strip().splitlines()[-1]
    assert res.output.startswith("Error:")
    assert not (tmp_path / "e").exists()
