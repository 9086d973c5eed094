"""docs/adoption.md's walk-through runs as written: someone else's workloads created on
the simulator with another state, exported (the secret withheld, and refused by
`validate` until it is put back), adopted by one apply without an API write, then a
clean plan and no drift. The page's `sh` block is run by bash in a fresh folder holding
the example specs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from tests.helpers.constants import ROOT

PAGE = ROOT / "docs" / "adoption.md"


def test_the_adoption_walkthrough_runs_as_written(tmp_path):
    script = re.search(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S).group(1)
    work = tmp_path / "work"
    shutil.copytree(ROOT / "specs", work / "specs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "runai-reconcile").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m reconciler.cli "$@"\n')
    (bin_dir / "runai-reconcile").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update(NO_COLOR="1", PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # As a reader pastes it: no `set -e`, the first `validate` is meant to fail.
    res = subprocess.run(["bash", "-c", script], cwd=work, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=240)
    out = res.stdout
    assert res.returncode == 0, out
    assert "Exported 10 workloads to adopted/ (no API write)." in out
    assert "is a secret that export did not write" in out
    assert "10 specs valid in adopted." in out
    assert "0 to create, 0 to update, 0 to replace, 0 to delete, 0 to suspend, 0 to resume, 10 to adopt." in out
    assert "10 adopted." in out
    assert out.rstrip().endswith("No drift. Live workloads match the state.")
