"""The token asked for as a command starts (`api.early`): through `sim serve` over real HTTP,
`plan`, `apply` and `drift` each send one token request (the early one, whose answer the
client takes as its own), a refusal is still asked once and reported as before, an early
answer that comes too late leaves the client to ask itself, and the spec loaders still
fork beside it; where the client would not ask the same way, nothing is sent early."""

from __future__ import annotations

import threading
import time

import pytest

from reconciler.api import early
from reconciler.operations import planning
from tests.helpers.cli import run
from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http

ENV = {"RUNAI_URL": "http://127.0.0.1:9", "RUNAI_CLIENT_ID": "me", "RUNAI_CLIENT_SECRET": "s"}


def tokens(sim_server) -> list[dict]:
    return [r for r in sim_server.requests(api_only=False) if r["path"] == "/api/v1/token"]


@pytest.mark.parametrize("env,url,verify", [
    ({**ENV, "RUNAI_TOKEN": "t"}, None, True),                  # a fixed token: no exchange
    ({k: v for k, v in ENV.items() if k != "RUNAI_CLIENT_SECRET"}, None, True),
    ({**ENV, "HTTPS_PROXY": "http://proxy:3128"}, None, True),   # httpx's transport goes via it
    ({**ENV, "http_proxy": "http://proxy:3128"}, None, True),
    (ENV, None, False),                                          # --insecure
    ({**ENV, "SSL_CERT_FILE": "/etc/ca.pem"}, "https://runai.example.com", True),
    (ENV, "https://me:pw@runai.example.com", True),              # refused by the client
    (ENV, "ftp://runai.example.com", True),
    (ENV, "http://runai.example.com:99999", True),
    ({k: v for k, v in ENV.items() if k != "RUNAI_URL"}, None, True),
])
def test_nothing_is_sent_early_where_the_client_would_not_ask_the_same_way(env, url, verify):
    assert early.start(url, env, verify=verify) is None
    assert not [t for t in threading.enumerate() if t.name == "early-token"]


@pytest.mark.parametrize("command", ["plan", "apply", "drift"])
def test_a_command_sends_one_token_request(ws, sim_server, command):
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    if command == "drift":
        assert run(ws, "apply", str(ws.specs), "--auto-approve").returncode == 0
    sim_server.clear_requests()
    args = [command, str(ws.specs)] + (["--auto-approve"] if command == "apply" else [])
    proc = run(ws, "-v", *args)
    assert proc.returncode == 0, proc.stderr
    assert len(tokens(sim_server)) == 1, proc.stderr  # the early one, taken as the client's
    assert proc.stderr.count("POST /api/v1/token -> 200") == 1
    assert sim_server.requests(), "the command read the API with it"


def test_a_refused_early_token_is_reported_as_before_and_not_asked_again(ws, sim_server):
    ws.write("train.yaml", TRAINING)
    proc = run(ws, "apply", str(ws.specs), "--auto-approve",
               RUNAI_CLIENT_SECRET="not-the-secret")
    assert proc.returncode == 1
    assert "POST /api/v1/token: 401" in proc.stderr and "check RUNAI_CLIENT_ID" in proc.stderr
    assert "not-the-secret" not in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    assert len(tokens(sim_server)) == 1
    assert not sim_server.requests()


def test_an_early_answer_that_comes_too_late_leaves_the_client_to_ask(ws, sim_server,
                                                                       monkeypatch):
    ws.write("train.yaml", TRAINING)
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 400}).raise_for_status()
    try:
        monkeypatch.setattr(early, "WAIT_S", 0.05)
        res = ws.apply()
    finally:
        sim_server.admin.put("/_sim/faults", json={"latencyMs": 0}).raise_for_status()
    assert res.exit_code == 0, res.output
    assert len(tokens(sim_server)) == 2  # the late one, and the client's own
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]


def test_the_spec_loaders_fork_beside_the_token_request(tmp_path):
    # The token's thread starts once the loaders have forked (no thread may run then):
    # a big folder still loads in a child while the token request is in flight.
    for i in range(120):
        (tmp_path / f"t{i:03d}.yaml").write_text(
            TRAINING.replace("name: bert-ddp", f"name: t{i:03d}"))
    release = threading.Event()

    class Factory:
        def __call__(self):
            raise AssertionError("not connected here")

        def prepare(self):
            threading.Thread(target=release.wait, args=(10,), daemon=True).start()

    try:
        with planning.loading(str(tmp_path), connect=Factory()) as specs:
            assert threading.active_count() > 1  # the "token request" is in flight
            assert specs.in_background
            assert len(specs.result()) == 120
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
