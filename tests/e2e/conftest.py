"""End-to-end fixtures: a `runai-reconcile sim serve` process over real HTTP, spec folders,
and a CLI runner pointed at them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests import simserve

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "runai-sim"
CLIENT_SECRET = "runai-sim-secret"
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


class SimServer:
    def __init__(self, url: str, proc: subprocess.Popen):
        self.url = url
        self.proc = proc
        self.admin = httpx.Client(base_url=url, timeout=10)

    def requests(self, *, api_only: bool = True) -> list[dict]:
        reqs = self.admin.get("/_sim/requests").json()["requests"]
        return [r for r in reqs if not api_only or r["path"] != "/api/v1/token"]

    def clear_requests(self) -> None:
        self.admin.delete("/_sim/requests")

    def writes(self) -> list[dict]:
        return [r for r in self.requests() if r["method"] != "GET"]

    def token(self) -> str:
        r = self.admin.post("/api/v1/token", json={"grantType": "client_credentials",
                                                   "clientID": CLIENT_ID, "clientSecret": CLIENT_SECRET})
        return r.json()["accessToken"]

    def api(self, method: str, path: str, **kw) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token()}"}
        return self.admin.request(method, path, headers=headers, **kw)

    def live(self) -> list[dict]:
        return self.api("GET", "/api/v1/workloads", params={"limit": 500}).json()["workloads"]


@pytest.fixture(scope="session")
def _sim_process(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("sim")
    with simserve.sim_serve(tmp_path, "--data", str(tmp_path / "sim.json"),
                            "--phase-seconds", "0.2") as served:
        server = SimServer(served.url, served.proc)
        yield server
        server.admin.close()


@pytest.fixture
def sim_server(_sim_process):
    """The session's `sim serve` as it started: no workloads, every fault setting back to
    its start-up value, an empty request log (`simserve.reset`)."""
    simserve.reset(_sim_process.admin)
    return _sim_process


class Workspace:
    """A project folder: specs/ and state/, and a CLI bound to a simulator."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.specs = root / "specs"
        self.specs.mkdir(parents=True, exist_ok=True)
        self.state_path = root / "state" / "state.json"
        self.env = env

    def write(self, rel: str, text: str) -> Path:
        p = self.specs / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
        return p

    def copy_examples(self) -> None:
        shutil.copytree(ROOT / "specs", self.specs, dirs_exist_ok=True)

    def cli(self, *args: str, input: str | None = None):
        runner = CliRunner()
        return runner.invoke(main, ["--state", str(self.state_path), *args[:1], *args[1:]],
                             env=self.env, input=input, catch_exceptions=False)

    def plan(self, *extra: str):
        return self.cli("plan", str(self.specs), *extra)

    def plan_json(self, *extra: str) -> dict:
        res = self.cli("plan", str(self.specs), "--format", "json", *extra)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    def apply(self, *extra: str):
        res = self.cli("apply", str(self.specs), "--auto-approve", *extra)
        return res

    def state(self) -> dict:
        return json.loads(self.state_path.read_text())


@pytest.fixture
def ws(tmp_path, sim_server):
    env = {"RUNAI_URL": sim_server.url, "RUNAI_CLIENT_ID": CLIENT_ID,
           "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None, "NO_COLOR": "1"}
    return Workspace(tmp_path / "project", env)


def changes_by_address(doc: dict) -> dict[str, dict]:
    return {rc["address"]: rc for rc in doc["resource_changes"]}


os.environ.pop("RUNAI_TOKEN", None)
