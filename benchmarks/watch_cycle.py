"""Benchmarks `runai-reconcile watch` at N unchanged workloads against `sim serve` with latency.

Run from a clone (the package installed): `python benchmarks/watch_cycle.py` (N = 1,000,
50 ms), `--n 100 --latency-ms 50 --cycles 10` for a smaller run.
It generates N specs (`specgen`), applies them with the real CLI, then runs `watch --mode
heal --log-format json` for `--cycles` cycles at `--interval`, and reads each cycle's log
line: its wall time, the HTTP requests the watch sent (token and retries included) and
the CPU seconds the watch process spent. The issue's targets, side by side: at most
ceil(N/500) + one per project + 2 requests and 0.3 CPU-s per unchanged cycle. Then it
deletes one workload out of band and times drift to heal (target: interval + 2 s).
Callers: people, docs/watch.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import specgen  # noqa: E402
from bench import CLIENT_ID, CLIENT_SECRET, Sim, run_cli  # noqa: E402


def _api(sim: Sim, method: str, path: str, body: dict | None = None) -> dict:
    token_req = urllib.request.Request(
        sim.url + "/api/v1/token", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"grantType": "client_credentials", "clientID": CLIENT_ID,
                         "clientSecret": CLIENT_SECRET}).encode())
    with urllib.request.urlopen(token_req, timeout=60) as resp:
        token = json.loads(resp.read())["accessToken"]
    req = urllib.request.Request(sim.url + path, method=method,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _cycles(log: Path) -> list[dict]:
    out = []
    for line in log.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("event") == "cycle":
            out.append(doc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=50)
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--interval", default="5s")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    specs = root / "specs"
    specgen.write_specs(specs, args.n)
    sim = Sim(args.latency_ms, root)
    env = dict(os.environ, RUNAI_URL=sim.url, RUNAI_CLIENT_ID=CLIENT_ID,
               RUNAI_CLIENT_SECRET=CLIENT_SECRET, NO_COLOR="1")
    env.pop("RUNAI_TOKEN", None)
    state = ["--state", str(root / "state.json")]
    try:
        wall, _, code = run_cli(state + ["apply", str(specs), "--auto-approve"], env, root)
        print(f"apply of {args.n}: {wall:.1f} s (exit {code})", file=sys.stderr)
        projects = len({r["projectId"] for r in _api(sim, "GET", "/api/v1/workloads?limit=500")
                        ["workloads"]})
        log = root / "watch.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "reconciler.cli", *state, "watch", str(specs),
                 "--mode", "heal", "--interval", args.interval, "--log-format", "json",
                 "--listen", "off"], env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=err)
            try:
                while len(_cycles(log)) < args.cycles:
                    if proc.poll() is not None:
                        raise SystemExit(log.read_text())
                    time.sleep(0.1)
                # Drift: one workload deleted out of band, timed until the watch re-created it.
                live = _api(sim, "GET", "/api/v1/workloads?limit=1")["workloads"][0]
                t0 = time.monotonic()
                before = len(_cycles(log))
                sim.admin("DELETE", f"/_sim/workloads/{live['id']}")
                healed_s = None
                while time.monotonic() - t0 < 120:
                    done = [c for c in _cycles(log)[before:] if c.get("healed")]
                    if done:
                        healed_s = time.monotonic() - t0
                        break
                    time.sleep(0.05)
            finally:
                proc.terminate()
                proc.wait(30)
        cycles = _cycles(log)[1:args.cycles]  # the first reads the specs and warms up
        target_requests = math.ceil(args.n / 500) + projects + 2
        print(f"\nwatch at N = {args.n}, latency {args.latency_ms:g} ms, {projects} projects")
        print("| cycle | refresh | wall s | requests (target) | CPU s (target) |")
        print("|---|---|---|---|---|")
        for c in cycles:
            print(f"| {c['cycle']} | {c.get('refresh')} | {c['duration_s']:.2f} | "
                  f"{c['requests']} ({target_requests}) | {c['cpu_s']:.2f} (0.3) |")
        print(f"\ndrift to heal: {healed_s if healed_s is None else round(healed_s, 2)} s "
              f"(target: interval + 2 s = {args.interval} + 2 s)")
    finally:
        sim.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
