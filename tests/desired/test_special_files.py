"""Issue 11 item 3: a spec path that is a FIFO, a device or a file over the documented
10 MB is refused with its path, before it is read whole; hidden files and folders and
symlinked folders are skipped, symlinked files followed (docs/specs.md, "Spec files")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.desired import sources

GOOD = ("kind: Training\nname: {name}\nprojectId: \"1\"\n"
        "clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210\nspec:\n  image: busybox\n")


def validate(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    return subprocess.run([sys.executable, "-m", "reconciler.cli", "validate", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("special", ["fifo", "device", "too-big"])
def test_a_special_or_huge_spec_file_is_refused_with_its_path(tmp_path, special):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "a.yaml").write_text(GOOD.format(name="a"))
    bad = specs / "b.yaml"
    if special == "fifo":
        os.mkfifo(bad)  # reading it would block for ever
    elif special == "device":
        bad.symlink_to("/dev/zero")  # reading it would never end
    else:
        with bad.open("wb") as f:
            f.write(b"# " + b"x" * sources.MAX_FILE_BYTES + b"\n")
    res = validate(tmp_path, "specs")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    line = next(x for x in res.stderr.splitlines() if x.startswith("specs/b.yaml"))
    assert ("not a regular file" in line) if special != "too-big" else ("10 MB" in line)


def test_a_fifo_given_as_the_specs_path_is_refused(tmp_path):
    os.mkfifo(tmp_path / "specs.yaml")
    res = validate(tmp_path, "specs.yaml")
    assert res.returncode == 1 and "specs.yaml: is not a regular file" in res.stderr


def test_hidden_and_symlinked_folders_are_skipped_symlinked_files_followed(tmp_path):
    specs, elsewhere = tmp_path / "specs", tmp_path / "elsewhere"
    specs.mkdir()
    elsewhere.mkdir()
    (elsewhere / "x.yaml").write_text(GOOD.format(name="linked-file"))
    (elsewhere / "y.yaml").write_text(GOOD.format(name="in-linked-folder"))
    (specs / "x.yaml").symlink_to(elsewhere / "x.yaml")
    (specs / "folder").symlink_to(elsewhere, target_is_directory=True)
    (specs / ".hidden").mkdir()
    (specs / ".hidden" / "z.yaml").write_text("not: [valid")
    (specs / ".h.yaml").write_text("not: [valid")
    res = validate(tmp_path, "specs")
    assert res.returncode == 0, res.stderr
    assert "1 workload" in res.stdout + res.stderr
