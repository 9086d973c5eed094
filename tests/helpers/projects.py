"""Projects by name: `serve` (a DistributedInference spec naming its project) and `define`
(a project defined in the shared `sim serve`). Used by the e2e tests of project names and
of spec findings."""

from __future__ import annotations

from tests.helpers.constants import CLUSTER


def serve(name: str = "serve", project: str | None = "project: team-a",
          cluster: str = CLUSTER, replicas: int = 1) -> str:
    head = f"kind: DistributedInference\nname: {name}\n"
    if project:
        head += project + "\n"
    return (head + f"clusterId: {cluster}\nspec:\n  replicas: {replicas}\n"
            "  leader:\n    image: vllm/vllm-openai:v0.6.3\n")


def define(sim_server, pid: str, name: str, cluster: str = CLUSTER) -> None:
    sim_server.admin.post("/_sim/projects", json={"id": pid, "name": name, "clusterId": cluster,
                                                  "gpuQuota": 16}).raise_for_status()
