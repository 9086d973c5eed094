"""The CI recipes in docs/ci keep the state in PostgreSQL: the URL from a secret, no state
file copied in or out, the apply waiting for the database's lock."""

from __future__ import annotations

import pathlib

import yaml

CI = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ci"


def test_the_github_workflows_take_the_state_url_from_a_secret_and_copy_no_state_file():
    for name in ("github-plan.yml", "github-apply.yml", "github-drift.yml"):
        text = (CI / name).read_text()
        doc = yaml.safe_load(text)
        assert doc["env"]["RUNAI_RECONCILE_STATE"] == "${{ secrets.RUNAI_RECONCILE_STATE }}", name
        assert "aws s3" not in text and "state.json" not in text and "--state " not in text, name
        assert "/runai-reconcile@v" in text, name  # its action installs the postgres extra
    apply = (CI / "github-apply.yml").read_text()
    assert "concurrency:" not in apply  # the database's lock is the lock
    assert "--lock-timeout 900 apply plan.json" in apply


def test_the_cronjob_takes_the_state_url_from_a_secret_and_mounts_no_state_volume():
    [cron] = [d for d in yaml.safe_load_all((CI / "k8s-drift-cronjob.yaml").read_text())
              if d["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [drift] = pod["containers"]
    env = {e["name"]: e for e in drift["env"]}
    assert env["RUNAI_RECONCILE_STATE"]["valueFrom"]["secretKeyRef"] == {
        "name": "runai-reconcile", "key": "RUNAI_RECONCILE_STATE"}
    assert "--state" not in drift["args"]
    # the specs' checkout and /tmp, both emptyDir: no volume holds a state
    assert [(v["name"], list(v)) for v in pod["volumes"]] == [
        ("specs", ["name", "emptyDir"]), ("tmp", ["name", "emptyDir"])]
