"""`runai-reconcile sim serve` as a subprocess on a free loopback port, for any test area,
and `reset`, which the fixtures sharing one such process call between tests.

    with sim_serve(tmp_dir, "--latency-ms", "50") as server:
        server.url, server.log_path, server.proc
    reset(httpx.Client(base_url=server.url))   # no workloads, start-up faults, empty log
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx


@dataclass
class Served:
    url: str
    port: int
    log_path: pathlib.Path
    proc: subprocess.Popen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def sim_serve(tmp_dir: pathlib.Path, *flags: str, start_timeout: float = 20.0):
    """Start `sim serve` with `flags` (phase changes instant unless a flag says otherwise),
    wait until it accepts connections, yield a Served, and stop it afterwards."""
    port = free_port()
    log_path = pathlib.Path(tmp_dir) / f"sim-{port}.log"
    if "--phase-seconds" not in flags:
        flags = ("--phase-seconds", "0", *flags)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "sim", "serve", "--port", str(port), *flags],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_dir)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("sim serve did not start:\n" + log_path.read_text())
                time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{port}", port, log_path, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def reset(admin: httpx.Client, *, workloads: bool = True) -> None:
    """Put a shared `sim serve` back as it started: every fault setting (latency, error
    rates, Retry-After, token lifetime, ...: DELETE /_sim/faults restores the start-up
    flags, so a setting added later is covered too), an empty request log and, unless
    `workloads` is false, no workloads or defined projects."""
    if workloads:
        admin.delete("/_sim/workloads").raise_for_status()
    admin.delete("/_sim/faults").raise_for_status()
    admin.delete("/_sim/requests").raise_for_status()


# A value unlike the start-up one for every fault setting (`/_sim/faults` names): the
# fixtures' own test sets them all, and fails if one is missing here.
ODD_FAULTS = {"latencyMs": 1, "jitterMs": 1, "errorRate": 0.25, "commitFailRate": 0.25,
              "tokenTtl": 60, "retryAfterSeconds": 7, "commitFailMode": "drop",
              "tokenFaults": False, "errorPaths": ["/api/v1/token"], "errorStatus": 500}
