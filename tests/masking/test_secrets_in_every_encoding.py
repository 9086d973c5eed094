"""No secret value, in any encoding (as it is, JSON-escaped, URL-encoded, base64), in any
output or file: a spec whose values come from `${env:..}` and `${file:..}` (and one
written in the spec) is planned, applied, changed, planned into saved plans (with and
without RUNAI_RECONCILE_PLAN_KEY) and applied from them, drifted, healed by `watch`,
shown, exported and imported, through the CLI against `sim serve` with -v's request log;
every output (the watch's log, status answers, status page, metrics and alerts too), the
state, its backup and journal, the saved plans and the exported files are searched."""

from __future__ import annotations

import base64
import json
import urllib.parse

import httpx
import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.helpers.cli import invoke
from tests.helpers.receiver import Receiver
from tests.helpers.simserve import free_port
from tests.helpers.watchproc import Watch

pytestmark = pytest.mark.http

ENV_1 = 'env "S3cret"/one+1 x'
ENV_2 = 'env \\S3cret/two&=?'
FILE_1 = "file-S3cret/three+3=="
LITERAL = "literal-S3cret-four"
LIVE = 'live "S3cret" five/5'  # set in live behind the reconciler's back
SECRETS = (ENV_1, ENV_2, FILE_1, LITERAL, LIVE)
KEY = base64.b64encode(bytes(range(32))).decode()

SPEC = """
kind: Training
name: t1
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
spec:
  image: busybox
  args: ${file:secret.txt}
  environmentVariables:
    - name: MODEL_AUTH
      value: ${env:MY_SECRET}
    - name: DB_PASSWORD
      value: literal-S3cret-four
    - name: MODE
      value: fast
"""


def encodings(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {
        "raw": secret,
        "json": json.dumps(secret)[1:-1],
        "json-slash": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "url": urllib.parse.quote(secret, safe=""),
        "url-path": urllib.parse.quote(secret),
        "form": urllib.parse.quote_plus(secret),
        "base64": base64.b64encode(raw).decode().rstrip("="),
        "base64-url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }


def test_no_secret_in_any_encoding_in_any_output_or_file(ws, sim_server, monkeypatch):
    outputs: dict[str, str] = {}
    monkeypatch.chdir(ws.root)

    def cli(*args: str, secret: str = ENV_1, exits=(0,), verbose: bool = False,
            **env: str) -> str:
        """One command, in this process; with -v through `invoke`, which hands the CLI the
        root logger as a process of its own has it, so its request log is in the stderr."""
        if verbose:
            res = invoke(ws.root, "--state", str(ws.state_path), "-v", *args,
                         **{**ws.env, "MY_SECRET": secret, **env})
            code, stdout, text = res.returncode, res.stdout, res.stdout + res.stderr
        else:
            done = CliRunner().invoke(main, ["--state", str(ws.state_path), *args],
                                      env={**ws.env, "MY_SECRET": secret, **env})
            code, stdout, text = done.exit_code, done.stdout, done.stdout + done.stderr
        assert code in exits, (args, text)
        assert "Traceback" not in text, text
        outputs[f"{' '.join(args)} #{len(outputs)}"] = text
        return stdout

    ws.write("t.yaml", SPEC)
    (ws.root / "secret.txt").write_text(FILE_1 + "\n")
    specs = str(ws.specs)
    for fmt in ("text", "json", "markdown"):
        cli("plan", specs, "--format", fmt)
    cli("apply", specs, "--auto-approve", verbose=True)
    assert cli("plan", specs, "--detailed-exitcode") is not None  # no change: exit 0
    # The control plane got the values themselves.
    [live] = sim_server.live()
    body = sim_server.api("GET", f"/api/v1/workloads/trainings/{live['id']}").json()
    sent = {e["name"]: e["value"] for e in body["spec"]["environmentVariables"]}
    assert sent["MODEL_AUTH"] == ENV_1 and body["spec"]["args"] == FILE_1

    # A changed secret is planned (masked), saved without a key and applied from the file.
    for fmt in ("text", "json", "markdown"):
        out = cli("plan", specs, "--format", fmt, "--detailed-exitcode", secret=ENV_2, exits=(2,))
        assert "MODEL_AUTH" in out
    plan_file = ws.root / "plan.json"
    cli("plan", specs, "--out", str(plan_file), secret=ENV_2)
    for fmt in ("text", "json", "markdown"):
        cli("show", str(plan_file), "--format", fmt)
    kept = plan_file.read_text()
    cli("apply", str(plan_file), secret=ENV_1, exits=(1,))  # changed since the plan: refused
    cli("apply", str(plan_file), "--format", "json", secret=ENV_2, verbose=True)
    body = sim_server.api("GET", f"/api/v1/workloads/trainings/{sim_server.live()[0]['id']}").json()
    assert {e["name"]: e["value"] for e in body["spec"]["environmentVariables"]}[
        "MODEL_AUTH"] == ENV_2

    # With a key the plan holds them encrypted, and applies what it holds (the secret back
    # to the first value), whatever the environment says when it is applied.
    keyed = ws.root / "keyed.json"
    cli("plan", specs, "--out", str(keyed), secret=ENV_1, RUNAI_RECONCILE_PLAN_KEY=KEY)
    keyed_text = keyed.read_text()
    assert "aes-256-gcm:" in keyed_text
    cli("show", str(keyed), "--format", "json")
    cli("apply", str(keyed), secret=ENV_2, exits=(1,))  # no key: refused
    cli("apply", str(keyed), secret=ENV_2, RUNAI_RECONCILE_PLAN_KEY=KEY)
    wid = sim_server.live()[0]["id"]
    body = sim_server.api("GET", f"/api/v1/workloads/trainings/{wid}").json()
    env = body["spec"]["environmentVariables"]
    assert {e["name"]: e["value"] for e in env}["MODEL_AUTH"] == ENV_1

    # A secret changed in live is drift, shown masked.
    env = [dict(e, value=LIVE) if e["name"] == "MODEL_AUTH" else e for e in env]
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"environmentVariables": env}}
                           ).raise_for_status()
    for fmt in ("text", "json", "markdown"):
        out = cli("drift", specs, "--format", fmt, "--detailed-exitcode", exits=(2,))
        assert "MODEL_AUTH" in out
    cli("plan", specs, "--format", "json", verbose=True)

    # The watch sees the drift and heals it: its log, status answers, metrics and alerts.
    port = free_port()
    with Receiver() as receiver, Watch(ws, "--mode", "heal", "--interval", "300ms",
                                       "--listen", f"127.0.0.1:{port}", "--notify", receiver.url,
                                       extra_env={"MY_SECRET": ENV_1}) as watch:
        watch.wait_cycles(3)
        receiver.wait_for(1)
        for page in ("/api/status", "/metrics", "/"):
            answer = httpx.get(f"http://127.0.0.1:{port}{page}", timeout=10)
            assert answer.status_code == 200
            outputs[f"watch {page}"] = answer.text
        assert watch.stop() == 0
    outputs["watch log"] = watch.log_path.read_text()
    outputs["watch alerts"] = json.dumps(receiver.bodies)
    assert '"healed":1' in outputs["watch log"] and receiver.bodies
    body = sim_server.api("GET", f"/api/v1/workloads/trainings/{sim_server.live()[0]['id']}").json()
    assert {e["name"]: e["value"] for e in body["spec"]["environmentVariables"]}[
        "MODEL_AUTH"] == ENV_1
    wid = body["workloadId"]

    # Export (without --include-secrets), state views, import.
    exported = ws.root / "exported"
    for fmt in ("text", "json"):
        cli("export", "--out", str(exported), "--format", fmt, "--force", verbose=fmt == "json")
    cli("state", "list")
    cli("state", "show", "Training/7/t1")
    cli("state", "show", "--show-sensitive", "Training/7/t1")
    cli("state", "rm", "Training/7/t1")
    cli("import", "--all", specs)
    cli("apply", specs, "--auto-approve", "--format", "json", verbose=True)

    files = {"plan file": kept, "keyed plan file": keyed_text}
    for path in [*ws.state_path.parent.iterdir(), *exported.rglob("*")]:
        if path.is_file():
            files[str(path.relative_to(ws.root))] = path.read_text()
    assert "state/state.json" in files and len(files) > 4
    assert any("POST /api/v1/workloads/trainings" in t for t in outputs.values())  # -v's log
    searched = {**outputs, **files}
    for secret in SECRETS:
        for encoding, form in encodings(secret).items():
            for where, text in searched.items():
                assert form not in text, f"{secret!r} ({encoding}) in {where}"
