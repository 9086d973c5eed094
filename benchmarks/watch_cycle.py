"""Benchmarks `runai-reconcile watch` at N unchanged workloads against `sim serve` with latency.

Run from a clone (the package installed): `python benchmarks/watch_cycle.py` (N = 1,000,
50 ms), `--n 100 --cycles 6 --drifts 2` for a smaller run.
It generates N specs (`specgen`), applies them with the real CLI, then, side by side in
one run:

- `plan` of the unchanged fleet (`--refresh=auto`), the whole process, as a cron job would
  run it between watch cycles: its wall time, CPU seconds (its rusage) and the requests
  the simulator counted;
- `watch --mode heal --log-format json` for `--cycles` cycles at `--interval`, with a full
  refresh every `--full-refresh-every`: each cycle's wall time, the HTTP requests the watch
  sent (token and retries included) and the CPU seconds the watch process spent on it,
  from its log line; the first cycle (specs parsed, the first full refresh) is shown apart;
- the cycle after one spec file changed (a label added to it; heal mode leaves it
  OutOfSync): what reading the folder again costs;
- drift to heal, `--drifts` times: a moment into the interval (spread over it), one
  workload is deleted or PATCHed out of band, and the time until the watch's cycle that
  healed it ends is taken, with that cycle's refresh.

The issue's targets are printed beside the figures: per unchanged cycle at most
ceil(N/500) + one per project + 2 requests and 0.3 CPU-s; drift to heal within interval
+ 2 s. The watch's resident set is read at the end of the cycles `--rss-at` names. A fleet
of 100,000, 100 unchanged cycles: `--n 100000 --cycles 100 --interval 2s
--full-refresh-every 1000 --drifts 0` (one full refresh, the first cycle's). With `--baseline DIR` (a source tree of another version, such as one `git archive`
wrote), that version's watch runs the same cycles first, on the same simulator and state,
and its rows come beside this one's. Callers: people, docs/performance.md and docs/watch.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import specgen  # noqa: E402
from bench import CLIENT_ID, CLIENT_SECRET, Sim  # noqa: E402

from reconciler.watch import intervals  # noqa: E402


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


def _admin_patch(sim: Sim, path: str, body: dict) -> None:
    req = urllib.request.Request(sim.url + path, method="PATCH",
                                 headers={"Content-Type": "application/json"},
                                 data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=60):
        pass


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


def _run(args: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s of the process and its children, exit code) of one CLI run."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", *args], env=env,
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stderr.close()
    return (time.perf_counter() - start, usage.ru_utime + usage.ru_stime,
            os.waitstatus_to_exitcode(status))


def _drift(sim: Sim, specs: Path, i: int) -> str:
    """One drift out of band, by turns a deletion (healed by a create) and a PATCH of an
    Inference's image (healed by a PATCH); what it was."""
    prefix = "*" if i % 2 == 0 else "chat-*"
    name = sorted(specs.glob(f"batch-*/{prefix}.yaml"))[i * 37].stem
    [victim] = _api(sim, "GET", f"/api/v1/workloads?filterBy=name=={name}")["workloads"]
    if i % 2 == 0:
        sim.admin("DELETE", f"/_sim/workloads/{victim['id']}")
        return f"delete of {name}"
    _admin_patch(sim, f"/_sim/workloads/{victim['id']}",
                 {"spec": {"image": "vllm/vllm-openai:drifted"}})
    return f"PATCH of {name} (an Inference's image)"


def _wait_cycles(log: Path, n: int, proc: subprocess.Popen | None = None) -> list[dict]:
    """The cycles' log lines once `n` more than now have ended."""
    start = len(_cycles(log))
    while len(_cycles(log)) < start + n:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.02)
    return _cycles(log)


def _rss_mb(pid: int) -> float:
    """The process's resident set now, MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _watch(argv: list[str], env: dict, log: Path, cwd: Path, specs: Path, cycles: int,
           then=None, rss_at: dict[int, float] | None = None
           ) -> tuple[list[dict], dict, list[dict]]:
    """Run a watch for `cycles` cycles, then edit one spec file (a label added: a spec
    change, left OutOfSync in heal mode) and put it back, then `then(log)`; its first
    `cycles` cycles, the cycle that read the edited folder, and all of them. The watch's
    resident set (MB) goes into `rss_at` at each cycle it names, read as that cycle's log
    line appears (the log is polled every 20 ms)."""
    edited = sorted(specs.glob("batch-*/*.yaml"))[0]
    text = edited.read_text()
    wanted = sorted(rss_at) if rss_at is not None else []
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        try:
            while (done := len(_cycles(log))) < cycles:
                if proc.poll() is not None:
                    raise SystemExit(log.read_text())
                while wanted and done >= wanted[0]:
                    rss_at[wanted.pop(0)] = _rss_mb(proc.pid)
                time.sleep(0.02 if wanted else 0.1)
            for c in wanted:
                rss_at[c] = _rss_mb(proc.pid)
            _wait_cycles(log, 1, proc)  # right after a cycle: the edit lands between two
            edited.write_text(text.replace("  labels:\n", "  labels:\n    - name: edited\n"
                                           "      value: \"yes\"\n", 1))
            edit = _wait_cycles(log, 1, proc)[-1]
            edited.write_text(text)
            _wait_cycles(log, 1, proc)
            if then is not None:
                then(log)
        finally:
            proc.terminate()
            proc.wait(30)
            edited.write_text(text)
    every = _cycles(log)
    return every[:cycles], edit, every


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=50)
    ap.add_argument("--cycles", type=int, default=12)
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--full-refresh-every", type=int, default=10)
    ap.add_argument("--drifts", type=int, default=4)
    ap.add_argument("--rss-at", type=lambda v: [int(c) for c in v.split(",")],
                    default=[1, 10, 50, 100], metavar="C,C,...",
                    help="the cycles at whose end the watch's resident set is read "
                         "(default 1,10,50,100; those past --cycles are left out)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder (specs, state, logs)")
    ap.add_argument("--baseline", metavar="DIR",
                    help="a source tree of another version: its watch's cycles beside")
    args = ap.parse_args(argv)
    interval_s = intervals.parse(args.interval)
    root = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    specs = root / "specs"
    specgen.write_specs(specs, args.n)
    sim = Sim(args.latency_ms, root)
    # The spec cache in the work folder (as bench.py keeps it): none is left behind in the
    # user's cache folder.
    env = dict(os.environ, RUNAI_URL=sim.url, RUNAI_CLIENT_ID=CLIENT_ID,
               RUNAI_CLIENT_SECRET=CLIENT_SECRET, NO_COLOR="1",
               XDG_CACHE_HOME=str(root / "cache"))
    env.pop("RUNAI_TOKEN", None)
    state = ["--state", str(root / "state.json")]
    try:
        wall, _, code = _run(state + ["apply", str(specs), "--auto-approve"], env, root)
        print(f"apply of {args.n}: {wall:.1f} s (exit {code})", file=sys.stderr)
        projects = len({r["projectId"] for r in _api(sim, "GET", "/api/v1/workloads?limit=500")
                        ["workloads"]})
        # A plan of the fleet now, as a cron job runs it; twice, the second one counted
        # (the first after an apply reads what moved since: Creating -> Running).
        _run(state + ["plan", str(specs)], env, root)
        sim.admin("DELETE", "/_sim/requests")
        plan_wall, plan_cpu, code = _run(state + ["plan", str(specs)], env, root)
        plan_requests = sim.request_count()
        watch = [sys.executable, "-m", "reconciler.cli", *state, "watch", str(specs),
                 "--mode", "heal", "--interval", args.interval, "--log-format", "json",
                 "--full-refresh-every", str(args.full_refresh_every), "--listen", "off"]
        baseline, baseline_edit = [], None
        base_rss = {c: 0.0 for c in args.rss_at if c <= args.cycles}
        if args.baseline:
            baseline, baseline_edit, _ = _watch(
                watch, {**env, "PYTHONPATH": str(Path(args.baseline).resolve())},
                root / "baseline.log", root, specs, args.cycles, rss_at=base_rss)
        heals: list[tuple[str, float | None, str | None]] = []

        def drifts(log: Path) -> None:
            for i in range(args.drifts):
                # A moment into the interval after a cycle ends, spread over it.
                _wait_cycles(log, 1)
                time.sleep(interval_s * (i + 0.5) / (args.drifts + 1))
                before = len(_cycles(log))
                t0 = time.monotonic()
                what = _drift(sim, specs, i)
                took = refresh = None
                while time.monotonic() - t0 < 120:
                    done = [c for c in _cycles(log)[before:] if c.get("healed")]
                    if done:
                        took, refresh = time.monotonic() - t0, done[0].get("refresh")
                        break
                    time.sleep(0.02)
                heals.append((what, took, refresh))

        rss_at = {c: 0.0 for c in args.rss_at if c <= args.cycles}
        cycles, edit, _ = _watch(watch, env, root / "watch.log", root, specs, args.cycles,
                                 then=drifts, rss_at=rss_at)
    finally:
        sim.close()
        if args.keep:
            print(f"work folder: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    target_requests = math.ceil(args.n / 500) + projects + 2
    print(f"\nwatch at N = {args.n}, latency {args.latency_ms:g} ms, {projects} projects, "
          f"interval {args.interval}, a full refresh every {args.full_refresh_every} cycles")
    extra = (" baseline requests | baseline CPU s |", "---:|---:|") if baseline else ("", "")
    print(f"\n| run | refresh | wall s | requests (target) | CPU s (target) |{extra[0]}")
    print(f"|---|---|---:|---:|---:|{extra[1]}")
    print(f"| `plan`, whole process (for comparison) | auto | {plan_wall:.2f} | "
          f"{plan_requests} | {plan_cpu:.2f} |{' | |' if baseline else ''}")
    for c in cycles:
        first = " (specs parsed, first refresh)" if c["cycle"] == 1 else ""
        target = (f" ({target_requests})", " (0.3)") if c.get("refresh") == "auto" else ("", "")
        then = next((b for b in baseline if b["cycle"] == c["cycle"]), None)
        was = (f" | {then['requests']} | {then['cpu_s']:.2f}" if then else " | – | –") \
            if baseline else ""
        print(f"| watch cycle {c['cycle']}{first} | {c.get('refresh')} | {c['duration_s']:.2f} | "
              f"{c['requests']}{target[0]} | {c['cpu_s']:.2f}{target[1]}{was} |")
    for name, c in (("baseline", baseline_edit), ("this version", edit)):
        if c is not None:
            print(f"| {name}: the cycle after one spec file changed | {c.get('refresh')} | "
                  f"{c['duration_s']:.2f} | {c['requests']} | {c['cpu_s']:.2f} |"
                  + (" | |" if baseline else ""))
    for name, rows in (("baseline", baseline), ("this version", cycles)):
        auto = [c for c in rows if c.get("refresh") == "auto"]
        if auto:
            cpu = [c["cpu_s"] for c in auto]
            print(f"\n{name}: {len(auto)} auto cycles, requests at most "
                  f"{max(c['requests'] for c in auto)} (target {target_requests}), CPU s median "
                  f"{statistics.median(cpu):.2f}, at most {max(cpu):.2f} (target 0.3)")
    for name, rss in (("baseline", base_rss if baseline else {}), ("this version", rss_at)):
        if rss:
            print(f"\n{name}: the watch's resident set: " + ", ".join(
                f"cycle {c} {mb:.0f} MB" for c, mb in sorted(rss.items())))
    print(f"\n| drift | to heal s (target {interval_s + 2:g}) | healing cycle's refresh |")
    print("|---|---:|---|")
    for what, took, refresh in heals:
        print(f"| {what} | {'not healed' if took is None else f'{took:.2f}'} | {refresh} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
