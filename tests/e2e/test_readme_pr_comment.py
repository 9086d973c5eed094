"""The pull-request comment of docs/review-and-policy.md (GPU impact and a policy failure)
is the golden `golden/pr-comment.md`, and the golden is what the CLI prints for that
page's steps
against the simulator: the example specs applied, project 7 defined with a GPU quota,
bert-ddp grown to 8 workers, then `plan --policy docs/examples/policy.yaml --format
markdown`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.helpers.constants import CLUSTER, ROOT
from tests.helpers.golden import assert_golden

GOLDEN = Path(__file__).parent / "golden" / "pr-comment.md"
PAGE = ROOT / "docs" / "review-and-policy.md"
# The page quotes the comment between these two lines, each of its lines after "> ".
START = "<!-- pr-comment: tests/e2e/golden/pr-comment.md -->"
END = "<!-- /pr-comment -->"


@pytest.mark.http
def test_the_documented_steps_print_the_golden_comment(ws, sim_server, monkeypatch):
    sim_server.admin.post("/_sim/projects", json={
        "id": "7", "name": "project-7", "clusterId": CLUSTER, "gpuQuota": 96}).raise_for_status()
    ws.copy_examples()
    (ws.root / "docs" / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "examples" / "policy.yaml", ws.root / "docs" / "examples")
    monkeypatch.chdir(ws.root)
    assert ws.cli("apply", "specs", "--auto-approve").exit_code == 0
    spec = ws.specs / "training" / "bert-ddp.yaml"
    spec.write_text(spec.read_text().replace("numWorkers: 4", "numWorkers: 8"))
    sim_server.clear_requests()
    res = ws.cli("plan", "specs", "--policy", "docs/examples/policy.yaml",
                 "--format", "markdown")
    assert res.exit_code == 1, res.output
    assert "breaks 2 deny rules of the policy (gpu-cap, quota)" in res.stderr
    assert sim_server.writes() == []
    assert_golden(GOLDEN, res.stdout)


def test_the_page_shows_the_golden_comment():
    text = PAGE.read_text(encoding="utf-8")
    m = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    assert m, f"{PAGE.relative_to(ROOT)} has no {START} ... {END} block"
    quoted = [line[2:] if line.startswith("> ") else line.lstrip(">")
              for line in m.group(1).splitlines()]
    assert "\n".join(quoted) + "\n" == GOLDEN.read_text(encoding="utf-8")
