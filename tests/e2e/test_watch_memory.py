"""A long-lived `watch` keeps its memory flat: 105 cycles over 500 unchanged workloads,
the resident set judged on the late cycles, compared one window against the next.

A 20 ms interval keeps it quick: the cycles run back to back (most list the fleet and
plan nothing new; one in 15 reads all 500 by GET, as a full refresh does). The resident
set is sampled while the cycles run and the medians of two windows of 30 cycles compared,
each holding two full refreshes, both after the warm-up (three full refreshes): the
allocator reaches its plateau after a few full refreshes and then moves by a few per cent
from one cycle to the next, so a single sample would measure where it happened to be.
docs/watch.md gives the figures.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.watchproc import Watch

pytestmark = pytest.mark.http

WORKLOADS = 500
CYCLES = 105
FULL_EVERY = 15
EARLY = range(45, 75)  # the cycles of each window (numbers of cycles ended)
LATE = range(75, 105)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_cycles_over_500_unchanged_workloads_keep_rss_within_5_percent(ws, sim_server):
    docs = [f"""kind: DistributedInference
name: serve-{i:04d}
projectId: "{7 + i % 3}"
clusterId: {CLUSTER}
spec:
  replicas: 1
  workers: 1
  servingPort: {{port: 8000}}
  leader: {{image: "vllm/vllm-openai:v0.6.3", compute: {{gpuDevicesRequest: 1}}}}
  worker: {{image: "vllm/vllm-openai:v0.6.3", compute: {{gpuDevicesRequest: 1}}}}
""" for i in range(WORKLOADS)]
    ws.specs.mkdir(parents=True, exist_ok=True)
    (ws.specs / "fleet.yaml").write_text("---\n".join(docs))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    early, late = [], []
    with Watch(ws, "--mode", "heal", "--interval", "20ms", "--full-refresh-every",
               str(FULL_EVERY), "--max-cycles", str(CYCLES)) as w:
        deadline = time.monotonic() + 600
        while w.proc.poll() is None and time.monotonic() < deadline:
            ended = len(w.cycles())
            for window, found in ((EARLY, early), (LATE, late)):
                if ended in window:
                    try:
                        found.append(rss_kib(w.proc.pid))
                    except (FileNotFoundError, ProcessLookupError):
                        pass
            time.sleep(0.05)
        assert w.proc.wait(timeout=60) == 0
    cycles = w.cycles()
    assert len(cycles) == CYCLES and all(c["result"] == "ok" for c in cycles)
    assert [c["refresh"] for c in cycles].count("full") == CYCLES // FULL_EVERY
    assert sum(c.get("healed", 0) for c in cycles) == 0  # unchanged: nothing to do
    assert len(early) >= 10 and len(late) >= 10, (len(early), len(late))
    before, after = sorted(early)[len(early) // 2], sorted(late)[len(late) // 2]
    assert after <= before * 1.05, (before, after)
    auto = sorted(c["cpu_s"] for c in cycles if c["refresh"] == "auto")
    print(f"\nRSS median {before} KiB over cycles {EARLY.start}-{EARLY.stop}, {after} KiB over "
          f"{LATE.start}-{LATE.stop} ({(after / before - 1) * 100:+.1f} %); an unchanged "
          f"cycle's CPU: median {auto[len(auto) // 2]:.3f} s")
