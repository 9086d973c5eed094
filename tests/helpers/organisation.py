"""The organisation's specs and the simulator's organisation tables, for the tests of
Departments, Projects, AccessRules and Run:ai Policies (e2e, loader, live).

Spec texts are functions whose parameters are where the tests' copies differ (a quota, a
department, `preventDestroy` opted out); each returns the YAML a team would write, key by
key in the same order, so that the `file:line` a test expects stays where it was. The
readers take the shared `sim serve` (`tests.helpers.workspace.SimServer`) and read its
organisation through the API, as the CLI does."""

from __future__ import annotations

from click.testing import CliRunner

from reconciler.cli import main
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER

UNITS = "/api/v1/org-unit"
RULES = "/api/v1/authorization/access-rules"
OPT_OUT = "lifecycle: {preventDestroy: false}\n"


def _indented(text: str, by: int) -> str:
    return "".join(" " * by + line + "\n" for line in text.splitlines())


def _quotas(pools: dict[str, str]) -> str:
    """`resources:` with each node pool's quota (its lines, as written under the pool)."""
    return "resources:\n" + "".join(f"  {pool}:\n" + _indented(quota, 4)
                                    for pool, quota in pools.items())


def project(name: str = "team-a", *, deserved: int = 2, pools: dict[str, str] | None = None,
            department: str | None = None, description: str | None = None,
            destroyable: bool = False, cluster: str = CLUSTER) -> str:
    """A Project spec: the default pool's GPU quota `deserved`, or the quota of each of
    `pools`; `destroyable` opts out of `preventDestroy`."""
    text = f"kind: Project\nname: {name}\nclusterId: {cluster}\n"
    if department:
        text += f"department: {department}\n"
    if description:
        text += f"description: {description}\n"
    text += _quotas(pools or {"default": f"gpu: {{deserved: {deserved}}}"})
    return text + (OPT_OUT if destroyable else "")


def department(name: str = "research", *, deserved: int | None = 8,
               destroyable: bool = False, cluster: str = CLUSTER) -> str:
    """A Department spec: the default pool's GPU quota `deserved` (None: no quota)."""
    text = f"kind: Department\nname: {name}\nclusterId: {cluster}\n"
    if deserved is not None:
        text += _quotas({"default": f"gpu: {{deserved: {deserved}}}"})
    return text + (OPT_OUT if destroyable else "")


def training(name: str = "train-1", *, project: str = "team-a", gpus: int = 1,
             cluster: str = CLUSTER) -> str:
    """A Training in a project named by its name (which the same plan may create)."""
    return (f"kind: Training\nname: {name}\nproject: {project}\nclusterId: {cluster}\n"
            "spec:\n  image: nvcr.io/nvidia/pytorch:24.05-py3\n"
            f"  compute: {{gpuDevicesRequest: {gpus}}}\n")


def access_rule(name: str = "ml-team-trains", *, subject_type: str = "group",
                subject_id: str = "ml-team", role: str = "L1 researcher",
                scope_type: str = "project", scope: str | None = "team-a",
                cluster: str = CLUSTER) -> str:
    """An AccessRule spec binding a subject to a role in a scope (a cluster's names none)."""
    text = (f"kind: AccessRule\nname: {name}\nclusterId: {cluster}\n"
            f"subjectType: {subject_type}\nsubjectId: {subject_id}\nrole: {role}\n"
            f"scopeType: {scope_type}\n")
    return text + (f"scope: {scope}\n" if scope else "")


def policy(workload_type: str, body: str, *, scope: str = "project",
           unit: str | None = "team-a", cluster: str = CLUSTER) -> str:
    """A Run:ai Policy spec of a workload type in a scope (a project or department names
    its `unit`; the tenant's has no cluster), then `body`: its `defaults`, `rules` and the
    like, as YAML."""
    text = f"kind: Policy\nworkloadType: {workload_type}\nscope: {scope}\n"
    if scope in ("project", "department"):
        text += f"{scope}: {unit}\n"
    if scope != "tenant":
        text += f"clusterId: {cluster}\n"
    return text + body


def unit(sim_server, units: str, name: str) -> dict:
    """The organisation unit (`units`: "projects" or "departments") of that name, as the
    API lists it."""
    [found] = [u for u in sim_server.api("GET", f"{UNITS}/{units}").json()[units]
               if u["name"] == name]
    return found


def project_id(sim_server, name: str = "team-a") -> str:
    """The id of the project of that name, as a string (as addresses hold it)."""
    return str(unit(sim_server, "projects", name)["id"])


def access_rules(sim_server) -> list[dict]:
    """The access rules the API lists."""
    return sim_server.api("GET", RULES).json()["accessRules"]


def writes(sim_server) -> list[tuple[str, str]]:
    """The method and path of each write the simulator received, in order."""
    return [(r["method"], r["path"]) for r in sim_server.writes()]


def other_state(ws, *args: str):
    """The CLI on another state file (a fresh adoption), against the same simulator."""
    return CliRunner().invoke(main, ["--state", str(ws.root / "other.json"), *args],
                              env=ws.env, catch_exceptions=False)
