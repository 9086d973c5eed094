"""Live workloads made outside runai-reconcile, to adopt with `import`: `post_training`
(a training created straight through the API, with a secret variable) and
`examples_live_without_state` (the example specs applied, then the state thrown away).
Used by the e2e import tests and the import onto a PostgreSQL state."""

from __future__ import annotations

from tests.helpers.constants import CLUSTER


TRAININGS = "/api/v1/workloads/trainings"


SECRET = "s3cr3t-value-123"


def post_training(sim_server, name: str = "finetune", **spec) -> str:
    """A training created directly through the API (not by runai-reconcile); its id."""
    body = {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                     "compute": {"gpuDevicesRequest": 1},
                     # keyed list in another order than the spec's
                     "environmentVariables": [{"name": "HF_HOME", "value": "/data/hf"},
                                              {"name": "API_TOKEN", "value": SECRET}],
                     **spec}}
    resp = sim_server.api("POST", TRAININGS, json=body)
    assert resp.status_code == 202, resp.text
    return resp.json()["workloadId"]


def examples_live_without_state(ws) -> dict[str, str]:
    """The example specs applied, then the state thrown away: address -> workload id."""
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    ids = {a: r["workload_id"] for a, r in ws.state()["resources"].items()}
    for p in ws.state_path.parent.glob("state.json*"):
        p.unlink()
    return ids
