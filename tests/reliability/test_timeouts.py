"""Through the CLI, run in the test's process: one retry budget for the whole command
(`--timeout`, RUNAI_RECONCILE_TIMEOUT), said when the first retry starts and in the final
error with the real time waited; a refused token request asked once; credentials never
echoed (in a URL, or quoted back by the API); no NaN from the API reaches a plan.

Against `sim serve` with faults, and, where the simulator cannot answer as a broken
control plane would (a 500 or a 403 from the token endpoint, a body quoting a secret, a
NaN), a small HTTP server of the test's own on loopback."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from dataclasses import dataclass

import pytest

from tests.helpers.cli import invoke
from tests.helpers.reliability import convergence, live_names, spawn, wait_for_posts, write_fleet

pytestmark = pytest.mark.http

# What a loaded machine adds beyond the budget under test: generous, since what is caught
# here took minutes (327 s for a failing token endpoint).
SLACK = 10


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Error:")]


@dataclass
class Ran:
    returncode: int
    out: str
    err: str


def run(ws, *args: str, env: dict | None = None):
    """`runai-reconcile ARGS` in this process (`invoke`: stdout and stderr apart, its
    warnings in that stderr, an exception let out fails the test): (what it printed, s).
    The waits are the client's own, on the real clock; a process would add its start-up
    and prove nothing more about the budget (the Ctrl-C and kill tests are processes)."""
    if env:
        ws.env = dict(ws.env, **env)
    started = time.monotonic()
    res = invoke(ws.root, "--state", str(ws.state_path), *args, **ws.env)
    return Ran(res.returncode, res.stdout, res.stderr), time.monotonic() - started


def token_requests(sim) -> int:
    return sum(1 for r in sim.requests(api_only=False) if r["path"] == "/api/v1/token")


@pytest.fixture
def faults(sim_server):
    """Set faults on the session's simulator; all back to none afterwards."""
    def put(**body):
        sim_server.admin.put("/_sim/faults", json=body).raise_for_status()
    yield put
    put(errorRate=0.0, latencyMs=0, retryAfterSeconds=1, tokenFaults=True, commitFailRate=0.0,
        commitFailMode="random", errorPaths=[], errorStatus=None)


# --- item 4: one budget for the whole command -------------------------------------------


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_failing_token_endpoint_costs_the_budget_once_and_says_so(ws, sim_server, faults, how):
    write_fleet(ws, 20)
    faults(errorRate=1.0, retryAfterSeconds=1)  # every request 503/429, the token's too
    args = ["--timeout", "2.5"] if how == "flag" else []
    env = {"RUNAI_RECONCILE_TIMEOUT": "2.5"} if how == "env" else None
    proc, took = run(ws, *args, "plan", str(ws.specs), env=env)
    assert proc.returncode == 1, proc.err
    assert "Traceback" not in proc.err
    # One warning when the first retry starts, naming what fails and for how long it retries.
    [warning] = [line for line in proc.err.splitlines() if line.startswith("WARNING:")]
    assert warning.startswith("WARNING: the token endpoint failed: POST /api/v1/token: ")
    assert "retrying at most 7 more times, for up to 2.5 s more (--timeout 2.5 s)" in warning
    [line] = error_lines(proc.err)
    assert line.startswith("Error: the token endpoint failed: POST /api/v1/token: ")
    assert "the --timeout of 2.5 s" in line
    # At least the one Retry-After it waited; how far past it a loaded machine woke is not
    # this test's (the client's deadline arithmetic is tests/api/test_budget.py's, on a
    # fake clock).
    waited = float(line.split(" in ")[-1].split(" s")[0])
    assert waited >= 1.0, line
    # The whole command, start-up included, within the budget and a few seconds; each of the
    # 20 GETs waiting for the token used to retry it again for a budget of its own.
    assert took < 2.5 + SLACK, took
    assert token_requests(sim_server) <= 4


# --- one clear line per failure -----------------------------------------------------------

PROJECTS = "/api/v1/org-unit/projects"


@pytest.mark.parametrize("command", [("plan",), ("apply", "--auto-approve")])
def test_a_projects_api_answering_503_ends_on_one_error_naming_the_read(ws, sim_server, faults,
                                                                        command):
    """The quota read spends the --timeout: the command ends there, on one Error naming the
    read, with no warning before it that the plan goes on without the quota, and no request
    nested in another's message."""
    write_fleet(ws, 3)
    faults(errorRate=1.0, errorPaths=[PROJECTS], errorStatus=503, retryAfterSeconds=1)
    proc, _ = run(ws, "--timeout", "2", *command, str(ws.specs))
    assert proc.returncode == 1, proc.err
    [line] = error_lines(proc.err)
    assert line.startswith("Error: project 7's GPU quota could not be read: "
                           f"GET {PROJECTS}/7: 503 Service Unavailable"), line
    assert line.count("GET ") == 1 and "not sent" not in line
    assert "unknown in this plan" not in proc.err
    [warning] = [x for x in proc.err.splitlines() if x.startswith("WARNING:")]
    assert warning.startswith(f"WARNING: GET {PROJECTS}/7: 503") and "retrying" in warning
    assert not live_names(sim_server)  # nothing was created


def test_a_token_endpoint_answering_500_is_named_as_the_token_endpoint(ws, sim_server, faults):
    """The quota read (beside the refresh) is the first to need a token: the token
    endpoint's failure is named as such, never as that project's GPU quota."""
    write_fleet(ws, 3)
    assert ws.apply().exit_code == 0
    faults(errorRate=1.0, errorPaths=["/api/v1/token"], errorStatus=500, retryAfterSeconds=1)
    proc, _ = run(ws, "--timeout", "2", "plan", str(ws.specs))
    assert proc.returncode == 1, proc.err
    [line] = error_lines(proc.err)
    assert line.startswith("Error: the token endpoint failed: POST /api/v1/token: 500 "), line
    assert "quota" not in proc.err and "project 7" not in proc.err


def test_the_retry_line_promises_what_happens(ws, sim_server, faults):
    """Answers the client may retry at once (Retry-After: 0) run out of attempts long
    before the --timeout: the retry line says how many more there will be, and the quota
    read then gives up after that many; it is unknown in the plan, said once, not nested."""
    write_fleet(ws, 3)
    faults(errorRate=1.0, errorPaths=[PROJECTS], errorStatus=503, retryAfterSeconds=0)
    proc, _ = run(ws, "--timeout", "30", "plan", str(ws.specs))
    assert proc.returncode == 0, proc.err
    retry, unknown = [x for x in proc.err.splitlines() if x.startswith("WARNING:")]
    assert "retrying at most 7 more times, for up to 30 s more (--timeout 30 s)" in retry
    assert unknown.startswith("WARNING: project 7's GPU quota could not be read (GET "
                              f"{PROJECTS}/7: 503 Service Unavailable")
    assert "(gave up after 8 attempts in " in unknown and unknown.count("GET ") == 1
    assert "Plan: 3 to create" in proc.out
    assert not error_lines(proc.err)


def test_a_control_plane_that_does_not_answer_is_given_up_at_the_deadline(ws, sim_server, faults):
    write_fleet(ws, 5)
    faults(latencyMs=20_000)  # far longer than any budget here; the per-request timeout is 30 s
    proc, took = run(ws, "--timeout", "1.5", "plan", str(ws.specs))
    assert proc.returncode == 1, proc.err
    [line] = error_lines(proc.err)
    assert "timed out" in line and "the --timeout of 1.5 s ran out" in line, line
    assert re.search(r"gave up after 1 attempt in \d+\.\d s", line), line  # 1.5 s on a fake clock
    assert took < 1.5 + SLACK, took


def test_the_budget_is_for_the_command_not_for_each_request(ws, sim_server, faults):
    """Reads that keep failing after the token was had: the plan ends at the deadline, not
    after one budget per workload read one after the other."""
    write_fleet(ws, 3)
    assert ws.apply().exit_code == 0
    faults(errorRate=1.0, retryAfterSeconds=1, tokenFaults=False)
    proc, took = run(ws, "--timeout", "2", "--parallelism", "1", "drift", str(ws.specs))
    assert proc.returncode == 1, proc.err
    assert "Traceback" not in proc.err
    assert "the --timeout of 2 s" in proc.err
    assert took < 2 + SLACK, took


def test_a_refused_token_request_is_not_retried(ws, sim_server):
    write_fleet(ws, 20)
    ws.env = dict(ws.env, RUNAI_CLIENT_SECRET="not-the-secret")
    proc, _ = run(ws, "plan", str(ws.specs))
    assert proc.returncode == 1
    [line] = error_lines(proc.err)
    assert "POST /api/v1/token: 401" in line and "check RUNAI_CLIENT_ID" in proc.err
    assert "not-the-secret" not in proc.err
    assert token_requests(sim_server) == 1  # not once per request waiting for a token


def test_a_budget_spent_mid_apply_loses_nothing_and_the_next_apply_converges(ws, sim_server,
                                                                            faults):
    """The storm starts after three creates; creates then are performed but answered 500
    (ambiguous), and the lookups that would resolve them fail: the apply gives up at its
    deadline, records those as "may exist", and the next apply finds them by name."""
    names = write_fleet(ws, 12)
    faults(latencyMs=150)
    proc = spawn(ws, "--timeout", "2", "--parallelism", "2", "apply", str(ws.specs),
                 "--auto-approve")
    wait_for_posts(sim_server, proc, 3)
    storm = time.monotonic()
    faults(errorRate=0.7, retryAfterSeconds=1, commitFailRate=1.0, commitFailMode="500",
           tokenFaults=False, latencyMs=0)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - storm
    faults(errorRate=0.0, commitFailRate=0.0, tokenFaults=True)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert took < 2 + SLACK, took
    lines = error_lines(err)
    assert lines and all("create failed" in line for line in lines), lines
    assert any("not sent, the command gave up on the API" in line
               or "--timeout of 2 s" in line for line in lines), lines
    assert max(live_names(sim_server).values(), default=1) == 1  # nothing created twice

    res = ws.apply()
    assert res.exit_code == 0, res.output
    result = convergence(ws, sim_server, names)
    assert result.ok, result


def test_a_refused_connection_is_still_three_quick_tries(ws):
    from tests.helpers.simserve import free_port

    write_fleet(ws, 3)
    ws.env = dict(ws.env, RUNAI_URL=f"http://127.0.0.1:{free_port()}")
    proc, took = run(ws, "--timeout", "30", "plan", str(ws.specs))
    assert proc.returncode == 1
    [line] = error_lines(proc.err)
    # 0.2 + 0.4 s on a fake clock (tests/api); here only that it is three quick tries.
    assert "connection refused" in line, line
    assert re.search(r"gave up after 3 attempts in \d+\.\d s", line), line
    assert took < SLACK


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_bad_timeout_is_one_error_line(ws, value):
    proc, _ = run(ws, "--timeout", value, "plan", str(ws.specs))
    assert proc.returncode == 1
    assert "--timeout" in proc.err and "Traceback" not in proc.err


# --- a control plane of the test's own, for what the simulator does not answer ----------


class Broken(http.server.BaseHTTPRequestHandler):
    """Answers the token route and every GET with what the test set on the server."""

    def do_POST(self):  # noqa: N802
        self.server.seen.append(("POST", self.path))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if len(self.server.seen) > self.server.answers_before_hanging:
            self.server.released.wait(30)  # no answer until the test ends
            return
        self._answer(*self.server.token_answer)

    def do_GET(self):  # noqa: N802
        self.server.seen.append(("GET", self.path))
        self._answer(*self.server.get_answer)

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def broken():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    server.seen = []
    server.answers_before_hanging = 1_000_000
    server.released = threading.Event()
    server.token_answer = (500, '{"code": 500, "message": "internal error"}')
    server.get_answer = (500, '{"code": 500, "message": "internal error"}')
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.released.set()
    server.shutdown()
    server.server_close()


def test_a_token_endpoint_answering_500_is_given_up_at_the_deadline_with_the_time_waited(ws, broken):
    write_fleet(ws, 20)
    ws.env = dict(ws.env, RUNAI_URL=broken.url)
    proc, took = run(ws, "--timeout", "2", "plan", str(ws.specs))
    assert proc.returncode == 1, proc.err
    [warning] = [line for line in proc.err.splitlines() if line.startswith("WARNING:")]
    assert "the token endpoint failed: POST /api/v1/token: 500" in warning
    [line] = error_lines(proc.err)
    assert line.startswith("Error: the token endpoint failed: POST /api/v1/token: 500 "
                           "Internal Server Error: internal error")
    assert "the --timeout of 2 s" in line
    assert took < 2 + SLACK, took
    assert all(p == "/api/v1/token" for _, p in broken.seen)


@pytest.mark.parametrize("command", [["plan", "{specs}"], ["apply", "{specs}", "--auto-approve"],
                                     ["import", "--all", "{specs}"], ["export", "--out", "out"]],
                         ids=lambda c: c[0])
def test_every_command_that_talks_to_the_api_keeps_the_deadline(ws, broken, command):
    write_fleet(ws, 5)
    ws.env = dict(ws.env, RUNAI_URL=broken.url)
    args = [a.format(specs=ws.specs) for a in command]
    proc, took = run(ws, "--timeout", "1.5", *args)
    assert proc.returncode == 1, proc.err
    assert "Traceback" not in proc.err
    lines = error_lines(proc.err)
    assert lines and "POST /api/v1/token: 500" in lines[0], lines
    assert "the --timeout of 1.5 s" in proc.err
    assert took < 1.5 + SLACK, took
    assert not ws.state_path.exists()


def test_a_last_attempt_cut_short_by_the_deadline_does_not_hide_the_apis_answer(ws, broken):
    """The token endpoint answers 500, then nothing: the attempt the --timeout ends (which
    on a loaded machine may be one started a few milliseconds before it) is no answer of
    the API's, and the error says the 500 the API gave."""
    write_fleet(ws, 2)
    ws.env = dict(ws.env, RUNAI_URL=broken.url)
    broken.answers_before_hanging = 1
    proc, took = run(ws, "--timeout", "1.5", "plan", str(ws.specs))
    assert proc.returncode == 1, proc.err
    [line] = error_lines(proc.err)
    assert line.startswith("Error: the token endpoint failed: POST /api/v1/token: 500 "
                           "Internal Server Error: internal error"), line
    assert "gave up after 2 attempts" in line and "the --timeout of 1.5 s ran out" in line
    assert len(broken.seen) == 2
    assert took < 1.5 + SLACK, took


def test_a_403_from_the_token_endpoint_is_asked_once(ws, broken):
    write_fleet(ws, 20)
    broken.token_answer = (403, '{"code": 403, "message": "client is disabled"}')
    ws.env = dict(ws.env, RUNAI_URL=broken.url)
    proc, took = run(ws, "plan", str(ws.specs))
    assert proc.returncode == 1
    [line] = error_lines(proc.err)
    assert "POST /api/v1/token: 403 Forbidden: client is disabled" in line
    assert broken.seen == [("POST", "/api/v1/token")]
    assert "WARNING" not in proc.err


# --- item 7: masking every credential, refusing NaN --------------------------------------


def test_an_api_error_quoting_a_credential_not_in_use_masks_it(ws, broken):
    """RUNAI_TOKEN is used; the 403 body quotes RUNAI_CLIENT_SECRET and a database password."""
    write_fleet(ws, 2)
    secret, db_password = "client-secret-4711", "db-pass-0815"
    broken.get_answer = (403, json.dumps({
        "code": 403, "message": f"token refused; secret {secret} is not allowed",
        "details": f"seen {db_password} and bearer-token-value"}))
    ws.env = dict(ws.env, RUNAI_URL=broken.url, RUNAI_TOKEN="bearer-token-value",
                  RUNAI_CLIENT_ID=None, RUNAI_CLIENT_SECRET=secret, PGPASSWORD=db_password)
    proc, _ = run(ws, "plan", str(ws.specs))
    assert proc.returncode == 1
    [line] = error_lines(proc.err)
    assert "403 Forbidden: token refused; secret *** is not allowed (seen *** and ***)" in line
    for value in (secret, db_password, "bearer-token-value"):
        assert value not in proc.err and value not in proc.out
    assert "Traceback" not in proc.err


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_in_an_api_answer_is_refused(ws, broken, number):
    write_fleet(ws, 1)
    broken.token_answer = (200, '{"accessToken": "t", "expiresIn": 3600}')
    broken.get_answer = (200, '{"workloads": [{"id": "w", "name": "job-000", "projectId": "7", '
                              f'"type": "distributed", "gpus": {number}}}], "next": 0}}')
    ws.env = dict(ws.env, RUNAI_URL=broken.url)
    proc, _ = run(ws, "plan", str(ws.specs))
    assert proc.returncode == 1, proc.out
    [line] = error_lines(proc.err)
    assert "GET /api/v1/workloads" in line and "is not a finite number" in line, line
    assert not ws.state_path.exists()


# --- item 6: a URL with credentials -------------------------------------------------------


@pytest.mark.parametrize("url", ["http://user:hunter2@127.0.0.1:9/", "https://hunter2@runai.example",
                                 "user:hunter2@runai.example", "http://u:hunter2@[::1"])
@pytest.mark.parametrize("where", ["flag", "env"])
def test_a_url_with_credentials_is_one_error_line_that_never_echoes_them(ws, url, where):
    write_fleet(ws, 1)
    args = ["--url", url] if where == "flag" else []
    if where == "env":
        ws.env = dict(ws.env, RUNAI_URL=url)
    proc, took = run(ws, *args, "plan", str(ws.specs))
    assert proc.returncode == 1
    [line] = error_lines(proc.err)
    assert "has credentials in it" in line and "in the environment" in line, line
    assert "hunter2" not in proc.err + proc.out and "Traceback" not in proc.err
    assert took < SLACK  # nothing was tried
