"""The simulator's and the client's CPU per request: N creates, N GETs, the inferences' PATCHes.

Callers: run by hand when changing reconciler/simulator (`python benchmarks/simcost.py
--n 1000`). Starts `runai-reconcile sim serve --quiet` on loopback, drives it with
`RunaiClient` at P requests in flight, and reads the simulator process's CPU seconds
(utime + stime from /proc/PID/stat, so Linux only) before and after each step, and the
client's own CPU (this process). The benchmark of plan/apply is bench.py; this isolates
the fake API's share of it, and the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import specgen  # noqa: E402

from reconciler import kinds  # noqa: E402
from reconciler.api.client import RunaiClient  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _bounded(coros, parallelism: int) -> list:
    gate = asyncio.Semaphore(parallelism)

    async def one(coro):
        async with gate:
            return await coro
    return await asyncio.gather(*(one(c) for c in coros))


async def measure(url: str, pid: int, n: int,
                  parallelism: int) -> list[tuple[str, int, float, float]]:
    """(step, requests, simulator CPU s, client CPU s) for create, GET twice, PATCH."""
    with tempfile.TemporaryDirectory() as tmp:
        bodies = []
        for path in specgen.write_specs(Path(tmp), n):
            body = yaml.safe_load(path.read_text())
            bodies.append((kinds.get(body.pop("kind")), body))
    rows = []
    async with RunaiClient(url, client_id="runai-sim", client_secret="runai-sim-secret",
                           max_connections=parallelism) as client:
        await client.list_workloads(limit=1)  # the token, outside the measured steps

        async def step(name, coros):
            before, mine = _cpu_seconds(pid), time.process_time()
            out = await _bounded(coros, parallelism)
            rows.append((name, len(out), _cpu_seconds(pid) - before, time.process_time() - mine))
            return out

        created = await step("create", [client.create(k, b) for k, b in bodies])
        ids = [(k, c["workloadId"]) for (k, _), c in zip(bodies, created)]
        await step("GET", [client.get(k, i) for k, i in ids])
        await step("GET again", [client.get(k, i) for k, i in ids])
        await step("PATCH", [client.patch(k, i, {"spec": {"replicas": 2}}) for k, i in ids
                             if k is kinds.DISTRIBUTED_INFERENCE])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="workloads (default 1000)")
    ap.add_argument("--parallelism", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--data", action="store_true", help="serve with --data (a temporary file)")
    args = ap.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "reconciler.cli", "sim", "serve", "--port", str(port),
               "--latency-ms", str(args.latency_ms), "--quiet"]
        if args.data:
            cmd += ["--data", str(Path(tmp) / "sim.json")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(url + "/_sim/faults")
                    break
                except httpx.TransportError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("sim serve did not start")
                    time.sleep(0.1)
            rows = asyncio.run(measure(url, proc.pid, args.n, args.parallelism))
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"| step | requests | sim CPU s | sim CPU ms per request | client CPU ms per request "
          f"|  (N={args.n}, P={args.parallelism}, latency {args.latency_ms:g} ms)\n"
          "|---|---:|---:|---:|---:|")
    for name, count, cpu, client in rows:
        per = 1000 / max(count, 1)
        print(f"| {name} | {count:,} | {cpu:.2f} | {cpu * per:.3f} | {client * per:.3f} |")


if __name__ == "__main__":
    main()
