"""A spec path that is a FIFO, a device or a file over the documented 10 MB is refused
with its path, before it is read whole; hidden files and folders are skipped; a symbolic
link that leads outside the specs folder is refused, naming it and where it leads, unless
RUNAI_RECONCILE_FOLLOW_LINKS_OUTSIDE allows it (docs/specs.md, "Spec files")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.desired import sources

GOOD = ("kind: Training\nname: {name}\nprojectId: \"1\"\n"
        "clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210\nspec:\n  image: busybox\n")


def validate(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")} | extra
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
        os.symlink("/dev/zero", bad)  # reading it would never end
    else:
        with bad.open("wb") as f:
            f.write(b"# " + b"x" * sources.MAX_FILE_BYTES + b"\n")
    # the link to /dev/zero is let through the folder's bounds, to meet the file checks
    res = validate(tmp_path, "specs", **{sources.FOLLOW_ENV: "1"})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    line = next(x for x in res.stderr.splitlines() if x.startswith("specs/b.yaml"))
    assert ("not a regular file" in line) if special != "too-big" else ("10 MB" in line)


def test_a_fifo_given_as_the_specs_path_is_refused(tmp_path):
    os.mkfifo(tmp_path / "specs.yaml")
    res = validate(tmp_path, "specs.yaml")
    assert res.returncode == 1 and "specs.yaml: is not a regular file" in res.stderr


def _linked_folder(tmp_path: Path) -> Path:
    """specs/ with a good spec, hidden files, a link to a spec file outside and a link to
    a folder outside; and links that stay inside (a file, a folder)."""
    specs, elsewhere = tmp_path / "specs", tmp_path / "elsewhere"
    specs.mkdir()
    elsewhere.mkdir()
    (specs / "own.yaml").write_text(GOOD.format(name="own"))
    (elsewhere / "x.yaml").write_text(GOOD.format(name="linked-file"))
    (elsewhere / "dir").mkdir()
    (elsewhere / "dir" / "y.yaml").write_text(GOOD.format(name="in-linked-folder"))
    (specs / "x.yaml").symlink_to(elsewhere / "x.yaml")
    (specs / "folder").symlink_to(elsewhere / "dir", target_is_directory=True)
    (specs / "team").mkdir()
    (specs / "team" / "t.yaml").write_text(GOOD.format(name="team"))
    (specs / "team-again").symlink_to(specs / "team", target_is_directory=True)
    (specs / ".hidden").mkdir()
    (specs / ".hidden" / "z.yaml").write_text("not: [valid")
    (specs / ".h.yaml").write_text("not: [valid")
    return specs


def test_a_link_leading_outside_the_specs_folder_is_refused_naming_it(tmp_path):
    specs = _linked_folder(tmp_path)
    (specs / "shadow.yaml").symlink_to("/etc/shadow")
    res = validate(tmp_path, "specs")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    elsewhere = os.path.realpath(tmp_path / "elsewhere")
    for link, target in [("specs/folder", os.path.join(elsewhere, "dir")),
                         ("specs/shadow.yaml", "/etc/shadow"),
                         ("specs/x.yaml", os.path.join(elsewhere, "x.yaml"))]:
        (line,) = [x for x in lines if x.startswith(f"{link} -> ")]
        assert line.startswith(f"{link} -> {target}: the link leads outside the specs folder")
        assert f"{sources.FOLLOW_ENV}=1 allows it" in line
    assert lines[-1].startswith("Error: 3 problems in the specs; 2 specs valid")
    assert "linked-file" not in res.stderr and "root:" not in res.stderr  # nothing read


def test_links_outside_are_followed_when_allowed_and_links_inside_as_before(tmp_path):
    """Allowed, the linked file and the linked folder's spec are read; a link to a folder
    inside is not walked (its specs are read where they are), hidden files are skipped."""
    specs = _linked_folder(tmp_path)
    res = validate(tmp_path, "specs", **{sources.FOLLOW_ENV: "1"})
    assert res.returncode == 0, res.stderr
    assert "4 specs valid" in res.stdout + res.stderr
