"""A Manifest's workload type checked against the control plane: plan, apply
and watch read `GET /api/v1/workload-types` once, only when a Manifest spec exists, and
refuse a manifest whose apiVersion/kind it does not list, naming the spec file, the line
of `manifest.kind` and the field, exit 1, nothing written; `validate` (offline) only
warns of a type outside its table. A list that cannot be read is a warning, and the
plan goes on. The CLI against `sim serve` over HTTP; `/_sim/workload-types` sets what the
simulated control plane registers."""

from __future__ import annotations

import logging

import pytest

pytestmark = pytest.mark.http

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
TYPES = "/api/v1/workload-types"


def manifest(api_version: str, kind: str, name: str = "odd") -> str:
    # `kind:` of the manifest is on line 9 of this document.
    return f"""\
kind: Manifest
name: {name}
projectId: "7"
clusterId: {CLUSTER}
category: Train
manifest:
  apiVersion: {api_version}
  metadata: {{name: {name}}}
  kind: {kind}
  spec:
    template:
      spec:
        containers:
          - name: main
            image: busybox:1.36
"""


TRAINING = f"""\
kind: Training
name: plain
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: busybox:1.36
"""


@pytest.fixture
def types(sim_server):
    """Sets what the simulator registers; puts its own list back afterwards."""
    def put(**body):
        r = sim_server.admin.put("/_sim/workload-types", json=body)
        assert r.status_code == 200, r.text
    yield put
    sim_server.admin.delete("/_sim/workload-types").raise_for_status()


def _type_reads(sim) -> int:
    return sum(1 for r in sim.requests() if r["path"] == TYPES)


def test_a_type_the_control_plane_does_not_list_is_an_error_online_and_a_warning_offline(
        ws, sim_server):
    path = ws.write("team/odd.yaml", manifest("example.com/v1", "Widget"))
    shown = str(path)

    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert f"{shown}:9: manifest.kind:" in res.stderr and "Warning" in res.stderr

    for command in (("plan", str(ws.specs)), ("apply", str(ws.specs), "--auto-approve")):
        sim_server.clear_requests()
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert f"{shown}:9: manifest.kind: 'Widget' (apiVersion 'example.com/v1') is not a " \
               "workload type the control plane has registered" in res.stderr, res.stderr
        assert "Traceback" not in res.output
        assert _type_reads(sim_server) == 1
        assert sim_server.writes() == []
    assert not ws.state_path.exists()


def test_a_known_type_the_control_plane_does_not_register_is_refused(ws, sim_server, types):
    """PyTorchJob is in the offline table, but this control plane has only Jobs; a second
    Job document is fine, the PyTorchJob is refused, and a kind registered under another
    group says which."""
    types(types=[{"name": "Job", "group": "batch"},
                 {"name": "PyTorchJob", "group": "training.example.com"}])
    ws.write("job.yaml", manifest("batch/v1", "Job", "fine"))
    path = ws.write("pt.yaml", manifest("kubeflow.org/v1", "PyTorchJob", "pt"))
    assert "Warning" not in ws.cli("validate", str(ws.specs)).stderr
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert f"{path}:9: manifest.kind: 'PyTorchJob'" in res.stderr
    assert "registers PyTorchJob only as PyTorchJob (training.example.com)" in res.stderr
    assert "job.yaml" not in res.stderr


def test_a_registered_type_outside_the_offline_table_plans_and_applies(ws, sim_server, types):
    types(types=[{"name": "Widget", "group": "example.com", "categoryName": "Deploy"}])
    ws.write("odd.yaml", manifest("example.com/v1", "Widget"))
    ws.write("plain.yaml", TRAINING)
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert _type_reads(sim_server) == 1  # one read for the whole command
    assert [(r["method"], r["path"]) for r in sim_server.writes()
            if r["path"].startswith("/api/v2/")] == [("POST", "/api/v2/workloads")]
    sim_server.clear_requests()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert _type_reads(sim_server) == 1


def test_without_a_manifest_spec_the_types_are_not_read(ws, sim_server):
    ws.write("plain.yaml", TRAINING)
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert _type_reads(sim_server) == 0


@pytest.mark.parametrize("status", [403, 404])
def test_a_list_that_cannot_be_read_is_a_warning_and_the_plan_goes_on(
        ws, sim_server, types, status, caplog):
    types(status=status)
    ws.write("odd.yaml", manifest("kubeflow.org/v1", "PyTorchJob", "pt"))
    with caplog.at_level(logging.WARNING, logger="reconciler.live"):
        res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output  # planned: one to create
    assert f"GET {TYPES} failed" in caplog.text and f"{status}" in caplog.text
    assert "were not checked" in caplog.text
    assert "1 to create" in res.stdout


def test_watch_refuses_it_in_its_cycle_and_reports_why(ws, sim_server):
    path = ws.write("odd.yaml", manifest("example.com/v1", "Widget"))
    sim_server.clear_requests()
    res = ws.cli("watch", str(ws.specs), "--mode", "sync", "--listen", "off",
                 "--interval", "10ms", "--max-cycles", "2")
    assert f"{path}:9: manifest.kind: 'Widget'" in res.stderr, res.stderr
    assert _type_reads(sim_server) == 2  # one per cycle
    assert sim_server.writes() == []
