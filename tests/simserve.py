"""`runai-reconcile sim serve` as a subprocess on a free loopback port, for any test area.

    with sim_serve(tmp_dir, "--latency-ms", "50") as server:
        server.url, server.log_path, server.proc
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import subprocess
import sys
import time
from dataclasses import dataclass


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
