"""Broken surroundings: no control plane, no name resolution, a certificate that does not
verify, a 5xx storm beyond the retry budget in the middle of an apply; and locks left by
dead processes. Each gives exit 1, one clear line per failure and a correct state."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reconciler.state import LocalFileStore
from tests.helpers.reliability import convergence, live_names, spawn, wait_for_posts, write_fleet
from tests.helpers.simserve import free_port

pytestmark = pytest.mark.http


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Error:")]


def broken_env(ws, url: str) -> None:
    ws.env = dict(ws.env, RUNAI_URL=url, RUNAI_RETRY_BUDGET="1")


def test_an_unreachable_control_plane_is_one_clear_line_and_the_state_is_untouched(ws):
    write_fleet(ws, 3)
    broken_env(ws, f"http://127.0.0.1:{free_port()}")
    res = ws.apply()
    assert res.exit_code == 1
    assert "Traceback" not in res.output
    [line] = error_lines(res.stderr)
    assert "cannot connect" in line and "gave up after" in line
    assert not ws.state_path.exists()


def test_a_host_name_that_does_not_resolve_is_one_clear_line(ws):
    write_fleet(ws, 3)
    broken_env(ws, "http://runai-control-plane.invalid")
    start = time.monotonic()
    res = ws.plan()
    assert res.exit_code == 1
    [line] = error_lines(res.stderr)
    assert "cannot resolve the control plane's host name" in line
    assert time.monotonic() - start < 5  # not retried


def test_a_certificate_that_does_not_verify_is_one_clear_line(ws, self_signed_https):
    write_fleet(ws, 3)
    broken_env(ws, self_signed_https)
    res = ws.apply()
    assert res.exit_code == 1
    [line] = error_lines(res.stderr)
    assert "TLS certificate could not be verified" in line and "--insecure" in line
    assert not ws.state_path.exists()


def test_a_certificate_trusted_through_ssl_cert_file_is_accepted(ws, self_signed_https, tmp_path):
    """SSL_CERT_FILE names the CA certificates to trust, as with httpx before: the TLS
    handshake passes, and what fails is the HTTP answer of this stand-in server."""
    write_fleet(ws, 3)
    broken_env(ws, self_signed_https.replace("127.0.0.1", "localhost"))
    ws.env["SSL_CERT_FILE"] = str(tmp_path / "cert.pem")
    res = ws.apply()
    assert res.exit_code == 1
    [line] = error_lines(res.stderr)
    assert "501" in line and "TLS" not in line and "certificate" not in line


def test_a_5xx_storm_mid_apply_fails_what_it_hits_reports_each_and_keeps_what_was_done(ws, sim_server):
    names = write_fleet(ws, 10)
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    proc = spawn(ws, "--parallelism", "1", "apply", str(ws.specs), "--auto-approve")
    wait_for_posts(sim_server, proc, 3)
    sim_server.admin.put("/_sim/faults", json={"errorRate": 1.0, "retryAfterSeconds": 0,
                                               "latencyMs": 0}).raise_for_status()
    out, err = proc.communicate(timeout=60)
    sim_server.admin.put("/_sim/faults", json={"errorRate": 0.0}).raise_for_status()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    created = live_names(sim_server)
    failed = len(names) - len(created)
    assert failed > 0
    lines = error_lines(err)
    assert len(lines) == failed  # one per failed action
    assert all("create failed" in line and ("503" in line or "429" in line)
               and "gave up after 8 attempts" in line for line in lines), lines
    assert f"{len(created)} created" in out and f"{failed} failed" in out
    assert convergence(ws, sim_server, sorted(created)).ok  # the state holds exactly those

    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert convergence(ws, sim_server, names).ok


HOLDER = textwrap.dedent("""
    import sys, time
    from reconciler.state import LocalFileStore
    with LocalFileStore(sys.argv[1]).lock("apply") as info:
        print(info.id, flush=True)
        time.sleep(60)
""")


def hold_lock(path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    return proc, proc.stdout.readline().strip()


def test_a_lock_left_by_a_killed_process_is_taken_over_and_force_unlock_checks_the_id(ws):
    proc, lock_id = hold_lock(ws.state_path)
    try:
        res = ws.cli("force-unlock", lock_id)
        assert res.exit_code == 1 and "held by a live process" in res.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    lock_file = ws.state_path.with_name("state.json.lock")
    assert lock_id in lock_file.read_text()  # the dead holder's info is still there ...
    res = ws.cli("force-unlock", "not-" + lock_id)
    assert res.exit_code == 1 and f"has id {lock_id}" in res.stderr
    res = ws.cli("force-unlock", lock_id)
    assert res.exit_code == 0 and f"Removed lock {lock_id}" in res.output
    assert lock_file.read_text() == ""

    proc, _ = hold_lock(ws.state_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    write_fleet(ws, 2)
    res = ws.apply()  # ... but never blocks the next run: the OS lock died with it
    assert res.exit_code == 0, res.output
    with LocalFileStore(ws.state_path).lock("plan"):
        pass
