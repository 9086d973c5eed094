"""The benchmark script runs end to end (sim serve, N=100, 20 ms latency) and its plan of an
unchanged fleet stays within a generous bound: a smoke check for CI, not a measurement
(docs/performance.md holds the measurements)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench  # noqa: E402
import specgen  # noqa: E402

pytestmark = pytest.mark.http


def test_smoke_benchmark(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert bench.main(["--smoke", "--json", str(out)]) == 0
    rows = {r["step"]: r for r in json.loads(out.read_text())}
    # P = 32 as the targets say, and the CLI's default when it differs
    assert set(rows) == {"plan (new fleet)", "apply (N creates)", "plan (unchanged)",
                         "plan --no-refresh", bench.AUTO_STEP, bench.FULL_STEP,
                         bench.AUTO_COLD_STEP, bench.CHANGED_STEP, bench.FLOOR_STEP,
                         bench.APPLY_STEP,
                         bench.RAW_APPLY_STEP} | (
        {bench.DEFAULT_STEP} if bench.DEFAULT_PARALLELISM != 32 else set())
    # --refresh=full: 100 GETs, a token and the GPU quota of each project
    assert rows["plan (unchanged)"]["requests"] == 101 + specgen.PROJECTS
    assert rows[bench.FULL_STEP]["requests"] == 101 + specgen.PROJECTS
    # --refresh=auto: a list page and a quota per project, a token; no GET
    assert rows[bench.AUTO_STEP]["requests"] == 1 + 2 * specgen.PROJECTS
    assert rows[bench.AUTO_STEP]["requests"] <= rows[bench.AUTO_STEP]["requests_limit"]
    assert rows[bench.AUTO_COLD_STEP]["requests"] == rows[bench.AUTO_STEP]["requests"]
    # every spec changed (a new image tag), live untouched: the list refresh alone (each
    # update is planned from the state the list vouches for)
    assert rows[bench.CHANGED_STEP]["requests"] == rows[bench.AUTO_STEP]["requests"]
    assert rows[bench.CHANGED_STEP]["exit_code"] in (0, 2)
    assert rows[bench.FLOOR_STEP]["requests"] == 101  # the token and a GET of each
    if bench.DEFAULT_STEP in rows:
        assert rows[bench.DEFAULT_STEP]["requests"] == 101 + specgen.PROJECTS
        assert rows[bench.DEFAULT_STEP]["parallelism"] == bench.DEFAULT_PARALLELISM
    assert rows["plan --no-refresh"]["requests"] == 0
    # The apply beside the raw client sending the same bodies: a token, then the same
    # creates and suspends (the apply also lists each project before and after, and reads
    # its quota).
    raw, applied = rows[bench.RAW_APPLY_STEP], rows[bench.APPLY_STEP]
    assert raw["requests"] > 100 and raw["cpu_s"] > 0 and applied["cpu_s"] > 0
    assert 0 < applied["requests"] - raw["requests"] <= 3 * specgen.PROJECTS
    assert rows["plan (new fleet)"]["requests"] <= 100 + 10
    # Generous: the bound at N=100, 20 ms, P=32 is 0.06 s; start-up alone is ~0.5 s.
    assert rows["plan (unchanged)"]["wall_s"] < 20
    assert rows["apply (N creates)"]["wall_s"] < 40
    printed = capsys.readouterr().out
    assert "| plan (unchanged) | 100 |" in printed
    # The timeline of one auto plan with the spec cache and one without: every phase
    # timed, in seconds since the process started.
    assert bench.TIMELINE_HEADER in printed
    timeline = printed.split(bench.TIMELINE_HEADER, 1)[1].split("\n\n", 1)[0]
    for step in (bench.AUTO_STEP, bench.AUTO_COLD_STEP):
        row = next(line for line in timeline.splitlines()
                   if line.startswith(f"| {step} | 100 | "))
        cells = [c.strip() for c in row.strip("|").split("|")][2:]
        assert len(cells) == len(bench.PHASES) + 1 and "–" not in cells, row
        assert cells[0].startswith("0.00–")  # import: from the process's start
