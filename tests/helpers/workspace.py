"""The end-to-end tests' world: the simulator's credentials and cluster, `SimServer` (a
`sim serve` process and its admin routes), and `Workspace` (a project folder with specs/ and
state/, and the CLI bound to a simulator). The fixtures `sim_server` and `ws` of
tests/fixtures/sim.py make them; the e2e, drift, masking, saved-plan, reliability, perf and
state tests use them."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import httpx
from click.testing import CliRunner

from reconciler.cli import main
from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET, ROOT


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


def changes_by_address(doc: dict) -> dict[str, dict]:
    return {rc["address"]: rc for rc in doc["resource_changes"]}
