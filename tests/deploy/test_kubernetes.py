"""The Kubernetes recipe: the kustomize base in deploy/kubernetes renders offline
(`kubectl kustomize`), and it, docs/ci/*.yaml and every Kubernetes document fenced in
docs/*.md pass `kubernetes-validate --strict` and checkov's Kubernetes checks (skips only
in `checkov.io/skip` annotations, with a reason). Its pods meet the "restricted" Pod
Security profile, start (every Secret they read is created or optional, git-sync has a
writable /tmp) and run the image the Containerfile builds."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess

import pytest
import yaml

from tests.helpers.validators import tool

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes"
DOCS = ROOT / "docs"
WORKLOADS = {"Deployment", "CronJob"}


def _doc_manifests() -> dict[str, str]:
    """name -> YAML text of every Kubernetes document in docs/: docs/ci/*.yaml, and the
    ```yaml fences of docs/*.md that hold an apiVersion and a kind."""
    found = {p.name: p.read_text() for p in sorted((DOCS / "ci").glob("*.yaml"))}
    for page in sorted(DOCS.glob("*.md")):
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", page.read_text(), re.DOTALL)):
            if not re.search(r"^apiVersion: ", block, re.MULTILINE):
                continue  # a spec or a config, not a Kubernetes document
            docs = [d for d in yaml.safe_load_all(block) if isinstance(d, dict)]
            if docs and all("apiVersion" in d and "kind" in d for d in docs):
                found[f"{page.stem}-{i}.yaml"] = block
    return found


@pytest.fixture(scope="module")
def rendered() -> str:
    done = subprocess.run([tool("kubectl"), "kustomize", str(BASE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def manifests(rendered, tmp_path_factory) -> pathlib.Path:
    """A folder of every manifest the tests hold to the validators."""
    folder = tmp_path_factory.mktemp("manifests")
    (folder / "deploy-kubernetes-base.yaml").write_text(rendered)
    for name, text in _doc_manifests().items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def checkov(manifests) -> dict:
    """One checkov run (its Kubernetes framework, offline) over every manifest."""
    done = subprocess.run([tool("checkov"), "--directory", str(manifests), "--framework",
                           "kubernetes", "--skip-download", "--output", "json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1) and done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    return report[0] if isinstance(report, list) else report


def _rendered_docs(rendered: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(rendered) if d]


def _pod_specs(doc: dict) -> dict | None:
    if doc["kind"] == "Deployment":
        return doc["spec"]["template"]["spec"]
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


def _all_docs(rendered: str) -> list[dict]:
    docs = _rendered_docs(rendered)
    for text in _doc_manifests().values():
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def test_the_base_renders_the_namespace_its_secret_and_both_workloads(rendered):
    kinds = sorted(d["kind"] for d in _rendered_docs(rendered))
    assert kinds == ["CronJob", "Deployment", "Namespace", "NetworkPolicy", "Secret",
                     "Service", "ServiceAccount"]


def test_every_manifest_validates_strictly(manifests):
    files = sorted(str(p) for p in manifests.iterdir())
    assert len(files) >= 3  # the base, the CronJob recipe, the Deployment in the docs
    done = subprocess.run([tool("kubernetes-validate"), "--strict", "--quiet", *files],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_checkov_fails_nothing_and_skips_only_with_a_reason(checkov):
    assert checkov["check_type"] == "kubernetes"
    failed = [(c["check_id"], c["resource"], c["file_path"])
              for c in checkov["results"]["failed_checks"]]
    assert failed == []
    assert checkov["summary"]["parsing_errors"] == 0
    checked = {c["resource"].split(".")[0] for c in checkov["results"]["passed_checks"]}
    assert WORKLOADS <= checked
    for skip in checkov["results"]["skipped_checks"]:
        reason = (skip.get("check_result") or {}).get("suppress_comment") or ""
        assert len(reason) > 20, skip["check_id"]


def test_every_pod_meets_the_restricted_profile(rendered):
    pods = [(d["metadata"]["name"], _pod_specs(d)) for d in _all_docs(rendered)
            if _pod_specs(d) is not None]
    assert {name for name, _ in pods} == {"runai-reconcile-watch", "runai-reconcile-drift"}
    for name, pod in pods:
        assert pod["automountServiceAccountToken"] is False, name
        ctx = pod["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"] + pod.get("initContainers", []):
            where = f"{name}/{c['name']}"
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), where
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], f"{where}: no writable /tmp"
        if name == "runai-reconcile-watch":  # a run-to-completion job is not probed
            for c in pod["containers"]:
                assert "livenessProbe" in c and "readinessProbe" in c, c["name"]


def test_every_secret_read_is_created_or_optional_and_so_is_the_namespace(rendered):
    # the base and the recipe that stands alone (the guide's Deployment is the base's)
    recipes = [(DOCS / "ci" / p.name).read_text() for p in sorted((DOCS / "ci").glob("*.yaml"))]
    for docs in [_rendered_docs(rendered)] + [
            [d for d in yaml.safe_load_all(text) if d] for text in recipes]:
        secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
        namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
        for doc in docs:
            if doc["kind"] in WORKLOADS and "namespace" in doc["metadata"]:
                assert doc["metadata"]["namespace"] in namespaces, doc["metadata"]["name"]
            pod = _pod_specs(doc)
            for c in (pod or {}).get("containers", []) + (pod or {}).get("initContainers", []):
                for env in c.get("env", []):
                    ref = env.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        assert ref["name"] in secrets or ref.get("optional") is True, env["name"]


def test_the_pods_run_the_image_the_containerfile_builds(rendered):
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    [image] = [i for i in kustomization["images"] if i["name"].endswith("/runai-reconcile")]
    built = f"{image['newName']}:{image['newTag']}"
    for doc in _rendered_docs(rendered):
        pod = _pod_specs(doc)
        if pod:
            ours = [c for c in pod["containers"] if "runai-reconcile" in c["image"]]
            assert [c["image"] for c in ours] == [built]
            assert "command" not in ours[0]  # the image's ENTRYPOINT is runai-reconcile
    guide = (DOCS / "deploy-kubernetes.md").read_text()
    assert "docker build -t <your-registry>/runai-reconcile:<version>" in guide
    assert "-f Containerfile ." in guide and (ROOT / "Containerfile").exists()


def test_the_guide_shows_the_deployment_the_base_holds():
    blocks = re.findall(r"```yaml\n(.*?)```", (DOCS / "deploy-kubernetes.md").read_text(),
                        re.DOTALL)
    shown = [d for b in blocks for d in yaml.safe_load_all(b) if d and d.get("kind") == "Deployment"]
    assert shown == [yaml.safe_load((BASE / "deployment.yaml").read_text())]
