"""Runs the reliability suites and writes docs/reliability.md's table from their own figures.

    python benchmarks/reliability_report.py            # runs tests/reliability, rewrites the doc
    python benchmarks/reliability_report.py --from F   # uses figures already in F (JSON lines)

The chaos tests append one JSON line per scenario to $RELIABILITY_REPORT (see
tests/reliability/conftest.py); this script sets it, runs pytest, groups the lines by
scenario and replaces the table between the markers in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def run_suites(out: pathlib.Path) -> int:
    env = dict(os.environ, RELIABILITY_REPORT=str(out))
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "tests/reliability"],
                           cwd=ROOT, env=env)


def table(lines: list[dict]) -> str:
    groups: dict[tuple[str, str], list[dict]] = collections.OrderedDict()
    for rec in lines:
        groups.setdefault((rec["suite"], rec["faults"]), []).append(rec)
    rows = ["| scenario | faults injected | trials | runs | workloads | duplicates | lost "
            "| recoveries | time to converge (s) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (suite, faults), recs in groups.items():
        secs = [r["seconds"] for r in recs]
        when = f"{max(secs):.1f}" if len(secs) == 1 else f"{min(secs):.1f}–{max(secs):.1f}"
        rows.append(
            f"| {suite} | {faults} | {len(recs)} | {sum(r['runs'] for r in recs)} "
            f"| {sum(r['workloads'] for r in recs)} | {sum(r['duplicates'] for r in recs)} "
            f"| {sum(r['lost'] for r in recs)} | {sum(r['recoveries'] for r in recs)} | {when} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=pathlib.Path,
                        help="figures already recorded (JSON lines) instead of a new run")
    args = parser.parse_args()
    if args.source:
        source, code = args.source, 0
    else:
        source = pathlib.Path(tempfile.mkdtemp()) / "figures.jsonl"
        code = run_suites(source)
    if not source.exists():
        print("no figures were recorded", file=sys.stderr)
        return 1
    lines = [json.loads(x) for x in source.read_text().splitlines() if x.strip()]
    doc = DOC.read_text(encoding="utf-8")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    status = "all passed" if code == 0 else f"pytest exited {code}: some suites failed"
    DOC.write_text(f"{head}{BEGIN}\n{table(lines)}\n\nSuites: {status}.\n{END}{tail}",
                   encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} from {len(lines)} recorded scenarios")
    return code


if __name__ == "__main__":
    sys.exit(main())
