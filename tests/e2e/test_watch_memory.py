"""A long-lived `watch` keeps its memory flat: 200 cycles over unchanged workloads, the
process's resident set measured after a warm-up and at the end (issue 22).

The fleet and the interval are sized for CI's time budget (docs/watch.md says what was
chosen and what the full-size run measured): each cycle here refreshes in full.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.watchproc import Watch

pytestmark = pytest.mark.http

WORKLOADS = 50
CYCLES = 200
WARM_UP = 20  # cycles before the first measurement (imports, caches, the pool filled)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_200_cycles_over_unchanged_workloads_keep_rss_within_5_percent(ws, sim_server):
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
    with Watch(ws, "--mode", "heal", "--interval", "50ms",
               "--max-cycles", str(CYCLES)) as w:
        w.wait_for(lambda: len(w.cycles()) >= WARM_UP, 120, f"{WARM_UP} cycles")
        before = rss_kib(w.proc.pid)
        w.wait_for(lambda: len(w.cycles()) >= CYCLES - 1, 600, f"{CYCLES} cycles")
        after = rss_kib(w.proc.pid)
        assert w.proc.wait(timeout=60) == 0
    cycles = w.cycles()
    assert len(cycles) == CYCLES and all(c["result"] == "ok" for c in cycles)
    assert sum(c.get("healed", 0) for c in cycles) == 0  # unchanged: nothing to do
    assert after <= before * 1.05, (before, after)
    print(f"RSS {before} KiB after {WARM_UP} cycles, {after} KiB after {CYCLES}; cycles "
          f"took {sum(c['duration_s'] for c in cycles) / len(cycles):.3f} s on average")
