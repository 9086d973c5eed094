"""Policy rules fail closed and judge what the plan changes, through the CLI against
`sim serve`: a quota the projects API will not give (500, 403) fails a `withinProjectQuota`
deny rule, naming the read, and apply refuses it with no write in the simulator's request
log; `onUnknown: warn` lets it pass with a note. An old `:latest` workload the plan leaves
alone is a pre-existing warning, not a failure of a plan that adds a clean one; `scope: all`
makes it fail."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.policy import training, write_policy

pytestmark = pytest.mark.http

PROJECT = re.compile(r"^/api/v1/org-unit/projects/[^/?]+$")


class _Proxy:
    """The simulator behind a loopback proxy that answers the project read (GET
    /api/v1/org-unit/projects/{id}) with `status` and forwards everything else."""

    def __init__(self, upstream: str, status: int):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "GET" and PROJECT.match(self.path.split("?")[0]):
                    proxy.refused += 1
                    out = json.dumps({"code": status, "message": "no"}).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                r = httpx.request(self.command, upstream + self.path, content=body,
                                  headers=headers, timeout=30)
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                         "content-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.status = status
        self.refused = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def refusing(ws, sim_server, request):
    """`ws` pointed at the proxy, whose project reads answer `request.param`."""
    proxy = _Proxy(sim_server.url, request.param)
    ws.env = {**ws.env, "RUNAI_URL": proxy.url, "RUNAI_MAX_ATTEMPTS": "1"}
    yield proxy
    proxy.close()


QUOTA = "rules:\n  - name: quota\n    withinProjectQuota: true\n"
WHY = {500: "GET /api/v1/org-unit/projects/7: 500 ",
       403: "GET /api/v1/org-unit/projects/7 answered 403: not readable with these credentials"}


@pytest.mark.parametrize("refusing", [500, 403], indirect=True)
def test_a_quota_the_api_will_not_give_fails_the_plan_and_apply_writes_nothing(
        ws, sim_server, refusing):
    status = refusing.status
    ws.write("a.yaml", training())
    pol = write_policy(ws, QUOTA)
    planned = ws.plan("--policy", pol)
    assert planned.exit_code == 1, planned.output
    assert refusing.refused, "the quota was asked for"
    line = next(x for x in planned.stdout.splitlines() if x.startswith("  FAIL "))
    assert line.startswith("  FAIL project 7: rule quota (withinProjectQuota): could not be "
                           "checked: its GPU quota is unknown (" + WHY[status]), line
    assert line.endswith("; 8 GPUs planned (now 0)")
    assert "Policy failed" in planned.stdout and "1 rule: 1 failed" in planned.stdout
    assert "Error: the plan breaks 1 deny rule of the policy (quota)" in planned.stderr
    doc = json.loads(ws.cli("plan", str(ws.specs), "--format", "json", "--policy", pol).stdout)
    assert doc["gpu_impact"]["projects"][0]["quota"] is None
    assert doc["gpu_impact"]["projects"][0]["quota_unknown"].startswith(WHY[status])
    assert doc["policy"]["rules"][0]["violations"][0]["unknown"] is True

    sim_server.clear_requests()
    applied = ws.apply("--policy", pol)
    assert applied.exit_code == 1, applied.output
    assert "(quota): nothing was applied" in applied.stderr
    assert sim_server.writes() == [], "refused before any write"
    assert not ws.state_path.exists()


@pytest.mark.parametrize("refusing", [500], indirect=True)
def test_on_unknown_warn_lets_an_unread_quota_pass_with_a_note_and_apply_goes_ahead(
        ws, sim_server, refusing):
    ws.write("a.yaml", training())
    pol = write_policy(ws, QUOTA + "    onUnknown: warn\n")
    planned = ws.plan("--policy", pol, "--detailed-exitcode")
    assert planned.exit_code == 2, planned.output
    assert "Policy passed" in planned.stdout and "1 rule: 1 unchecked" in planned.stdout
    assert re.search(r"note: rule quota: project 7: its GPU quota is unknown \(GET "
                     r"/api/v1/org-unit/projects/7: 500 .*\); 8 GPUs planned \(now 0\); "
                     r"not checked", planned.stdout), planned.stdout
    sim_server.clear_requests()
    assert ws.apply("--policy", pol).exit_code == 0
    assert sim_server.writes(), "warn: the apply went ahead"


@pytest.mark.parametrize("refusing", [500], indirect=True)
def test_a_saved_plan_whose_quota_could_not_be_read_is_refused_by_apply(ws, sim_server,
                                                                         refusing):
    ws.write("a.yaml", training())
    pol = write_policy(ws, QUOTA)
    out = ws.root / "plan.json"
    assert ws.plan("--policy", pol, "--out", str(out)).exit_code == 1
    doc = json.loads(out.read_text())
    assert doc["version"] == 3 and doc["quota_unknown"]["7"].startswith(WHY[500])
    shown = ws.cli("show", str(out), "--format", "json")
    rule = json.loads(shown.stdout)["policy"]["rules"][0]
    assert rule["status"] == "failed" and rule["violations"][0]["unknown"] is True
    sim_server.clear_requests()
    applied = ws.cli("apply", str(out))
    assert applied.exit_code == 1 and "nothing was applied" in applied.stderr
    assert sim_server.writes() == []


PINNED = "rules:\n  - name: pinned\n    forbidLatestTag: true\n"
OLD = ('Training/7/old: rule pinned (forbidLatestTag): spec.image '
       '"nvcr.io/nvidia/pytorch:latest"')


def _old_latest_workload(ws) -> None:
    """`old`, applied before the policy came in, runs an image tagged latest."""
    ws.write("old.yaml", training("old", image="nvcr.io/nvidia/pytorch:latest"))
    assert ws.apply().exit_code == 0


def test_an_untouched_latest_workload_is_a_pre_existing_warning_not_a_failure(ws, sim_server):
    _old_latest_workload(ws)
    pol = write_policy(ws, PINNED)
    unchanged = ws.plan("--policy", pol, "--detailed-exitcode")
    assert unchanged.exit_code == 0, unchanged.output
    assert "No changes." in unchanged.stdout and "FAIL" not in unchanged.stdout
    assert "Policy passed" in unchanged.stdout
    assert f"WARN (pre-existing) {OLD}" in unchanged.stdout

    ws.write("new.yaml", training("new"))  # the pull request: a clean workload
    planned = ws.plan("--policy", pol)
    assert planned.exit_code == 0, planned.output
    assert "Plan: 1 to create" in planned.stdout
    assert ("Policy passed (" + pol + "): 1 rule: 1 passed; 1 pre-existing violation."
            ) in planned.stdout
    assert f"WARN (pre-existing) {OLD}" in planned.stdout
    doc = json.loads(ws.cli("plan", str(ws.specs), "--format", "json", "--policy",
                            pol).stdout)
    rule = doc["policy"]["rules"][0]
    assert rule["status"] == "passed" and rule["violations"] == []
    assert [v["address"] for v in rule["preexisting"]] == ["Training/7/old"]
    md = ws.cli("plan", str(ws.specs), "--format", "markdown", "--policy", pol).stdout
    assert f"- pre-existing `{OLD}`" in md

    sim_server.clear_requests()
    assert ws.apply("--policy", pol).exit_code == 0
    assert [w["method"] for w in sim_server.writes()] == ["POST"], "new is created"


def test_changing_the_latest_workload_fails_and_scope_all_fails_it_untouched(ws, sim_server):
    _old_latest_workload(ws)
    everything = write_policy(ws, PINNED + "    scope: all\n")
    res = ws.plan("--policy", everything)
    assert res.exit_code == 1, res.output
    assert "No changes." in res.stdout and f"FAIL {OLD}" in res.stdout
    assert "Error: the plan breaks 1 deny rule of the policy (pinned)" in res.stderr

    pol = write_policy(ws, PINNED, "changed.yaml")
    ws.write("old.yaml", training("old", image="nvcr.io/nvidia/pytorch:latest", gpus=4))
    res = ws.plan("--policy", pol)  # the plan replaces it: judged
    assert res.exit_code == 1, res.output
    assert f"FAIL {OLD}" in res.stdout and "pre-existing" not in res.stdout
    sim_server.clear_requests()
    assert ws.apply("--policy", pol).exit_code == 1
    assert sim_server.writes() == []
