"""The names an organisation spec gives of things on the control plane (a node pool, a
department, a quota's priority) are checked when the plan is made, through the CLI
against `sim serve` over HTTP: one that names nothing fails the plan (exit 1), naming the
spec file, the line and field, and the names there are, every problem at once; nothing is
written. A department the same plan creates is a name that exists."""

from __future__ import annotations

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation

PROJECT = organisation.project(department="research", pools={
    "default": "gpu: {deserved: 4}\npriority: Normal", "a100": "gpu: {deserved: 1}"})
DEPARTMENT = organisation.department(deserved=None)

def test_a_name_that_names_nothing_fails_the_plan_naming_file_line_field_and_known_names(
        ws, sim_server):
    ws.write("team-a.yaml", PROJECT.replace("research", "reserch").replace("a100:", "h100:")
             .replace("Normal", "Urgent"))
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert (f"team-a.yaml:4: department: no department is named 'reserch' in cluster "
            f"{CLUSTER} (there are: default)") in res.output, res.output
    assert (f"team-a.yaml:9: resources.h100: no node pool is named 'h100' in cluster "
            f"{CLUSTER} (there are: a100, default)") in res.output
    assert ("team-a.yaml:8: resources.default.priority: no priority is named 'Urgent' "
            "(there are: High, Low, Normal)") in res.output
    assert "3 problems in the specs" in res.output
    assert "Traceback" not in res.output
    res = ws.apply()
    assert res.exit_code == 1 and "no node pool is named 'h100'" in res.output
    assert sim_server.writes() == []


def test_a_department_the_same_plan_creates_is_a_name_that_exists(ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    res = ws.plan()
    assert res.exit_code == 1 and "no department is named 'research'" in res.output
    ws.write("research.yaml", DEPARTMENT)
    res = ws.plan()
    assert res.exit_code == 0, res.output
