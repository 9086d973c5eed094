"""A secret variable's value from a spec and
one from a `_defaults.yaml`, and a `lifecycle.sensitive` image, are absent from the output
of plan with --policy (the violations quote images), apply, show, drift, export (its output
and the files it writes without --include-secrets) and import, in every format and with
-v's request log, through the CLI against `sim serve`."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.cli import PROGRESS, invoke, run_on_a_terminal

pytestmark = pytest.mark.http

DEFAULTS = f"""
clusterId: {CLUSTER}
projectId: "7"
spec:
  environmentVariables:
    - name: API_TOKEN
      value: DEFAULTS-SECRET-1
"""
SPEC = """
kind: Training
name: t1
lifecycle:
  sensitive: [spec.image]
spec:
  image: registry.internal/image-secret-1:latest
  compute: {gpuDevicesRequest: 2}
  environmentVariables:
    - name: DB_PASSWORD
      value: SPEC-SECRET-1
"""
POLICY = """\
rules:
  - name: images
    allowedImages: ["nvcr.io/*"]
    enforcement: warn
  - name: latest
    forbidLatestTag: true
    enforcement: warn
  - name: cap
    maxGpusPerWorkload: 1
    enforcement: warn
"""
SECRETS = ("DEFAULTS-SECRET-1", "SPEC-SECRET-1", "image-secret-1")
FORMATS = ("text", "json", "markdown")


def run(ws, *args: str):
    """`runai-reconcile ARGS` on the workspace, in this process (`invoke`): -v's log is on
    the stderr returned, as a process's would be. Only the progress line needs a process
    (a terminal: `run_on_a_terminal`)."""
    return invoke(ws.root, "--state", str(ws.state_path), *args, **ws.env)


def clean(res, *, exits=(0,)) -> str:
    """The output of a CLI run, stdout and stderr (-v's log)."""
    out = res.stdout + res.stderr
    assert res.returncode in exits, out
    for secret in SECRETS:
        assert secret not in out, (secret, out)
    return out


@pytest.fixture
def policy(ws):  # noqa: F811
    ws.write("team/_defaults.yaml", DEFAULTS)
    ws.write("team/t.yaml", SPEC)
    path = ws.root / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def test_plan_apply_show_drift_with_a_policy_never_show_the_secrets(ws, sim_server, policy):
    for fmt in FORMATS:
        out = clean(run(ws, "-v", "plan", str(ws.specs), "--policy", policy, "--format", fmt))
        assert "(sensitive)" in out and "rule images" in out and "rule latest" in out
        assert "GET /api/v1/org-unit/projects/7" in out  # the -v log was on
    saved = ws.root / "plan.json"
    clean(run(ws, "plan", str(ws.specs), "--policy", policy, "--out", str(saved)))
    for fmt in FORMATS:
        assert "rule images" in clean(run(ws, "show", str(saved), "--format", fmt))
    clean(run(ws, "-v", "apply", str(saved), "--format", "json"))
    # The progress line (on a terminal) with -v's log lines through it.
    ws.write("team/t.yaml", SPEC.replace("gpuDevicesRequest: 2", "gpuDevicesRequest: 3"))
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 700}).raise_for_status()
    code, out, terminal = run_on_a_terminal(ws, "-v", "apply", str(ws.specs), "--auto-approve",
                                            "--policy", policy)
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()
    assert code == 0, terminal
    assert PROGRESS.search(terminal), terminal  # the line was drawn
    assert "Apply complete!" in out + terminal
    for secret in SECRETS:
        assert secret not in out + terminal, secret
    for fmt in FORMATS:
        clean(run(ws, "-v", "drift", str(ws.specs), "--format", fmt))
        clean(run(ws, "-v", "apply", str(ws.specs), "--auto-approve", "--policy", policy,
                     "--format", fmt))


def test_export_and_import_never_show_or_write_the_secrets(ws, sim_server, policy):
    assert ws.apply().exit_code == 0
    [live] = sim_server.live()
    out_dir = ws.root / "exported"
    for fmt in ("text", "json"):
        clean(run(ws, "-v", "export", "--out", str(out_dir), "--format", fmt, "--force"))
    [written] = list(out_dir.rglob("t1.yaml"))
    text = written.read_text()
    assert "DEFAULTS-SECRET-1" not in text and "SPEC-SECRET-1" not in text
    clean(run(ws, "state", "rm", "Training/7/t1"))
    clean(run(ws, "-v", "import", "Training/7/t1", live["id"]))
    clean(run(ws, "state", "rm", "Training/7/t1"))
    clean(run(ws, "-v", "import", "--all", str(ws.specs)))
    # A refused import (the address is held now) quotes nothing of the body either.
    clean(run(ws, "-v", "import", "Training/7/t1", live["id"]), exits=(1,))
    shown = json.loads(clean(run(ws, "state", "show", "Training/7/t1")))
    assert shown["applied"]["spec"]["image"] == "(sensitive)"
