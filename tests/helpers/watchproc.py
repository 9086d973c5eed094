"""`runai-reconcile watch` as a subprocess, for the end-to-end tests of the watch loop:
its JSON log lines (stderr) read back as events, and waits on them; the spec those tests
watch (`inference`), a wait on any condition (`wait_until`) and a workload's detail from
the simulator (`detail`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.constants import CLUSTER


class Watch:
    """`watch` as a subprocess, its JSON log in `log_path`; `launcher` goes before the
    interpreter in the command line (e.g. a shell that ignores SIGINT, then execs it)."""

    def __init__(self, ws, *args: str, state: str | None = None, name: str = "watch",
                 extra_env: dict | None = None, state_name: str | None = None,
                 extra_args: tuple[str, ...] = (), launcher: tuple[str, ...] = ()):
        self.log_path = ws.root / f"{name}.log"
        env = {k: v for k, v in {**os.environ, **ws.env, **(extra_env or {})}.items()
               if v is not None}
        argv = [*launcher, sys.executable, "-m", "reconciler.cli", "--state", state or str(ws.state_path),
                *(("--state-name", state_name) if state_name else ()), *extra_args, "watch", str(ws.specs), "--log-format", "json", "--listen", "off", *args]
        ws.root.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._log,
                                     stdin=subprocess.DEVNULL, env=env, cwd=ws.root)

    def events(self, event: str | None = None) -> list[dict]:
        out = []
        for line in Path(self.log_path).read_text().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if event is None or doc.get("event") == event:
                out.append(doc)
        return out

    def cycles(self) -> list[dict]:
        return self.events("cycle")

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "an event"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = predicate()
            if got:
                return got
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"watch: no {what} within {timeout} s (exit {self.proc.poll()}):\n"
                             + Path(self.log_path).read_text()[-4000:])

    def wait_cycles(self, n: int, timeout: float = 30.0) -> list[dict]:
        """Until `n` more cycles than now have ended (ok or failed)."""
        start = len(self.cycles())
        return self.wait_for(lambda: len(self.cycles()) >= start + n and self.cycles(),
                             timeout, f"{n} cycles")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self._log.closed:
            self._log.close()


def inference(name: str, replicas: int = 2) -> str:
    return f"""
    kind: DistributedInference
    name: {name}
    projectId: "7"
    clusterId: {CLUSTER}
    spec:
      replicas: {replicas}
      workers: 1
      servingPort:
        port: 8000
      leader:
        image: vllm/vllm-openai:v0.6.3
        compute:
          gpuDevicesRequest: 1
      worker:
        image: vllm/vllm-openai:v0.6.3
        compute:
          gpuDevicesRequest: 1
    """


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def detail(sim_server, path: str, wid: str) -> dict:
    return sim_server.api("GET", f"/api/v1/workloads/{path}/{wid}").json()
