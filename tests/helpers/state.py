"""State records built by hand for the state store tests."""

from __future__ import annotations

from reconciler.state import ResourceState


def resource(name: str = "bert-ddp", *, project: str = "7", image: str = "img:1",
             workload_id: str | None = "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01") -> ResourceState:
    return ResourceState(
        kind="DistributedTraining", name=name, project_id=project,
        cluster_id="71f69d83-ba66-4822-adf5-55ce55efd210", workload_id=workload_id,
        applied={"name": name, "projectId": project,
                 "clusterId": "71f69d83-ba66-4822-adf5-55ce55efd210",
                 "spec": {"image": image, "numWorkers": 2}},
        last_phase="Running")
