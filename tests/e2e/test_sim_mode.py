"""The README's first command: `--sim` in a fresh folder, as a new user runs it (in this
process, `invoke`: the README's words in bash, as processes, are test_readme_tour.py's and
.ci/run's); and one data file with one owner, between processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.cli import invoke
from tests.helpers.simserve import sim_serve

ROOT = Path(__file__).resolve().parents[2]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI as a process of its own: a second `sim serve` on a file in use is refused,
    and one that was not would serve until stopped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_sim_apply_then_plan_has_no_changes(tmp_path):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    first = invoke(tmp_path, "--sim", "plan", "--detailed-exitcode")
    assert first.returncode == 2, first.stderr
    # The GPUs the examples take, and no quota flag for the projects nobody defined.
    assert "GPU impact" in first.stdout and "project 7 (project-7): 0 -> " in first.stdout
    assert "over quota" not in first.stdout, first.stdout
    res = invoke(tmp_path, "--sim", "apply", "--auto-approve")
    assert res.returncode == 0, res.stderr
    assert "Apply complete!" in res.stdout
    assert (tmp_path / ".runai-sim").is_dir() and (tmp_path / "state" / "state.json").is_file()
    again = invoke(tmp_path, "--sim", "plan", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "No changes" in again.stdout
    listed = invoke(tmp_path, "--sim", "state", "list").stdout.split()
    assert len(listed) >= 3


def test_sim_validate_examples(tmp_path):
    res = invoke(ROOT, "validate")
    assert res.returncode == 0, res.stderr


def test_one_data_file_has_one_owner_and_the_second_is_told_who(tmp_path):
    """`sim serve --data .runai-sim/data.json` and `--sim` (which uses that file) would
    each write it whole and undo the other's writes: while the server runs, `--sim` and a
    second server on the file are refused, naming the server's pid and command (its
    secret not shown); once it stops, `--sim` runs, and runs one after another share it."""
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    data = ".runai-sim/data.json"
    with sim_serve(tmp_path, "--data", data, "--client-secret", "hush-hush") as server:
        pid = server.proc.pid
        refused = invoke(tmp_path, "--sim", "apply", "--auto-approve")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        (line,) = refused.stderr.splitlines()
        assert line.startswith(f"Error: simulator data {data} is in use by process {pid} (")
        assert f"sim serve --port {server.port}" in line and f"--data {data}" in line
        assert "hush-hush" not in line and "--client-secret ***" in line
        assert not (tmp_path / "state" / "state.json").exists()
        second = run(tmp_path, "sim", "serve", "--port", "0", "--data", data)
        assert second.returncode == 1 and f"in use by process {pid}" in second.stderr
        assert server.proc.poll() is None
    for _ in range(2):  # in this process: one run's hold on the file ends with it
        done = invoke(tmp_path, "--sim", "apply", "--auto-approve")
        assert done.returncode == 0, done.stderr
    assert "No changes" in invoke(tmp_path, "--sim", "plan").stdout
