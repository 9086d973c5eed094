"""docs/onboarding.md (onboarding a team as one pull request) prints what it shows: from
what the README's first command leaves, in a fresh folder holding the example specs in
git, the page's files are written and its console blocks run in order, in one bash; each
block's output (stdout and stderr, as a terminal shows them) must be the lines the page
gives under it. `sim serve` gets a free port instead of 8080 (put back in the output),
and the `sleep 2` that waits for it polls until it answers."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers import console_page
from tests.helpers.constants import ROOT
from tests.helpers.simserve import free_port

PAGE = ROOT / "docs" / "onboarding.md"


@pytest.mark.http
def test_the_onboarding_page_prints_what_it_shows(tmp_path):
    page = console_page.blocks(PAGE.read_text(encoding="utf-8"))
    files = [b.path for b in page if b.path]
    assert files == ["specs/vision/vit-pretrain.yaml",
                     "specs/organisation/research/team-speech.yaml",
                     "specs/organisation/research/speech-researchers.yaml",
                     "specs/organisation/research/team-speech-training-policy.yaml",
                     "specs/speech/whisper-finetune.yaml", "review-policy.yaml",
                     "specs/organisation/research/team-vision.yaml",
                     "specs/organisation/research/team-vision.yaml",
                     "specs/organisation/research/research.yaml"]
    consoles = [b for b in page if not b.path]
    assert len(consoles) == 7

    work = tmp_path / "work"
    shutil.copytree(ROOT / "specs", work / "specs")
    env = console_page.cli_env(tmp_path, ROOT)
    start = console_page.readme_first_run((ROOT / "README.md").read_text(encoding="utf-8"))
    res = subprocess.run(
        ["bash", "-c", f"git init -q . && git add specs && git commit -qm specs "
                       f"&& {start}"],
        cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.endswith("No changes. Live workloads match the specs.\n")

    port = free_port()
    outputs = console_page.run(page, work, env, edit=lambda script: script.replace(
        "8080", str(port)).replace("sleep 2", console_page.wait_for_port(port)))
    assert len(outputs) == len(consoles)
    for block, output in zip(consoles, outputs):
        assert output.replace(str(port), "8080") == block.expected, f"$ {block.commands[0]}"
