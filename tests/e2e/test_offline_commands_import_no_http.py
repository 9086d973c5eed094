"""A command that sends no request starts without the HTTP stack: `validate`, `plan
--no-refresh` of specs that name their projects by id (and its `--out`), `show` of the
saved plan and `state list` never import aiohttp (whose import alone builds two TLS
contexts) nor httpx. One fresh interpreter runs them all in turn, as the program would."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = (ROOT / "specs" / "training" / "bert-ddp.yaml").read_text()

_PROBE = r"""
import json, sys
from reconciler import cli
loaded = {}
for args in json.loads(sys.argv[1]):
    try:
        cli.main(args, standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    loaded[args[0]] = sorted(m for m in ("aiohttp", "httpx") if m in sys.modules)
print(json.dumps(loaded))
"""


def test_offline_commands_load_no_http_client(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    assert "projectId:" in SPEC and "project:" not in SPEC  # nothing to resolve by name
    (specs / "bert.yaml").write_text(SPEC)
    state, saved = str(tmp_path / "state.json"), str(tmp_path / "plan.json")
    commands = [["validate", str(specs)],
                ["plan", str(specs), "--no-refresh", "--state", state, "--out", saved],
                ["show", saved],
                ["state", "list", "--state", state]]
    env = dict(os.environ, RUNAI_URL="http://127.0.0.1:9", RUNAI_CLIENT_ID="x",
               RUNAI_CLIENT_SECRET="y", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(commands)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {"validate": [], "plan": [], "show": [], "state": []}
    assert pathlib.Path(saved).is_file()
