"""The README's first command: `--sim` in a fresh folder, as a new user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_sim_apply_then_plan_has_no_changes(tmp_path):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    first = run(tmp_path, "--sim", "plan", "--detailed-exitcode")
    assert first.returncode == 2, first.stderr
    # The GPUs the examples take, and no quota flag for the projects nobody defined.
    assert "GPU impact" in first.stdout and "project 7 (project-7): 0 -> " in first.stdout
    assert "over quota" not in first.stdout, first.stdout
    res = run(tmp_path, "--sim", "apply", "--auto-approve")
    assert res.returncode == 0, res.stderr
    assert "Apply complete!" in res.stdout
    assert (tmp_path / ".runai-sim").is_dir() and (tmp_path / "state" / "state.json").is_file()
    again = run(tmp_path, "--sim", "plan", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "No changes" in again.stdout
    listed = run(tmp_path, "--sim", "state", "list").stdout.split()
    assert len(listed) >= 3


def test_sim_validate_examples(tmp_path):
    res = run(ROOT, "validate")
    assert res.returncode == 0, res.stderr
