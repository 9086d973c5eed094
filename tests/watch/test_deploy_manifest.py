"""docs/deploy-kubernetes.md's manifest parses, and its probes, scrape annotations and
port are the watch's own routes and default port."""

from __future__ import annotations

import pathlib
import re

import yaml

from reconciler.watch import server

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy-kubernetes.md"
BASE = ROOT / "deploy" / "kubernetes"


def _documents() -> list[dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks, "no ```yaml block in docs/deploy-kubernetes.md"
    return [d for block in blocks for d in yaml.safe_load_all(block) if d]


def test_the_manifest_is_a_deployment_of_two_replicas_probed_on_the_watch_routes():
    docs = _documents()
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    [watch] = [c for c in pod["spec"]["containers"] if c["name"] == "watch"]
    port = server.parse_listen(server.DEFAULT_LISTEN)[1]
    assert watch["args"][0] == "watch"
    listen = next(a for a in watch["args"] if a.startswith("--listen="))
    assert server.parse_listen(listen.split("=", 1)[1]) == ("0.0.0.0", port)
    assert [p["containerPort"] for p in watch["ports"]] == [port]
    assert watch["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    assert watch["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    notes = pod["metadata"]["annotations"]
    assert notes == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                     "prometheus.io/path": "/metrics"}
    assert set(watch["resources"]["requests"]) == {"cpu", "memory"}


def test_the_state_url_and_the_credentials_come_from_a_secret():
    docs = _documents()
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [watch] = [c for c in deployment["spec"]["template"]["spec"]["containers"]
               if c["name"] == "watch"]
    env = {e["name"]: e for e in watch["env"]}
    for name in ("RUNAI_RECONCILE_STATE", "RUNAI_CLIENT_ID", "RUNAI_CLIENT_SECRET",
                 "PGPASSWORD"):
        assert "value" not in env[name] and "secretKeyRef" in env[name]["valueFrom"], name
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "runai-reconcile", name
    # the base generates that Secret from credentials.env, the state's URL in it
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    [generator] = kustomization["secretGenerator"]
    assert generator["name"] == "runai-reconcile"
    values = dict(line.split("=", 1) for name in generator["envs"]
                  for line in (BASE / name).read_text().splitlines() if "=" in line)
    assert values["RUNAI_RECONCILE_STATE"].startswith("postgresql://")
    assert set(env) - {"RUNAI_RECONCILE_NOTIFY"} == set(values)
    sidecars = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert "git-sync" in sidecars
