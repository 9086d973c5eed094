"""Bad specs through the CLI: exit 1, the file and the field path named, nothing sent to the
API, nothing written to state."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER, ROOT

pytestmark = pytest.mark.http

BASE = {
    "kind": "DistributedTraining", "name": "bert-ddp", "projectId": '"7"', "clusterId": CLUSTER,
}


def training(spec: str = "", top: str = "", **meta: str) -> str:
    m = {**BASE, **meta}
    head = "".join(f"{k}: {v}\n" for k, v in m.items() if v is not None)
    body = spec or "  image: nvcr.io/nvidia/pytorch:24.05-py3\n  distributedFramework: PyTorch\n  numWorkers: 2\n"
    return head + top + "spec:\n" + body


def inference(spec: str) -> str:
    return (f"kind: DistributedInference\nname: serve\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            "spec:\n" + spec)


IMG = "  image: nvcr.io/nvidia/pytorch:24.05-py3\n  distributedFramework: PyTorch\n"
LEADER = "  leader:\n    image: vllm/vllm-openai:v0.6.3\n"

CASES = [
    ("unknown-spec-field", training(IMG + "  numWorkers: 2\n  imagePullPolcy: Always\n"), "spec.imagePullPolcy"),
    ("unknown-top-field", training(top="masterSpecSameAsWorkr: true\n"), "masterSpecSameAsWorkr"),
    ("unknown-kind", training(kind="DistributedTrainin"), "kind"),
    ("missing-kind", training(kind=None), "kind"),
    ("missing-name", training(name=None), "name"),
    ("name-not-dns", training(name="Bert_DDP"), "name"),
    ("missing-project", training(projectId=None), "projectId"),
    ("project-not-digits", training(projectId="proj-7"), "projectId"),
    ("cluster-not-uuid", training(clusterId="not-a-uuid"), "clusterId"),
    ("num-workers-zero", training(IMG + "  numWorkers: 0\n"), "spec.numWorkers"),
    ("num-workers-string", training(IMG + "  numWorkers: many\n"), "spec.numWorkers"),
    ("framework-enum", training("  image: x:1\n  distributedFramework: Horovod\n  numWorkers: 1\n"),
     "spec.distributedFramework"),
    ("pull-policy-enum", training(IMG + "  numWorkers: 2\n  imagePullPolicy: Sometimes\n"), "spec.imagePullPolicy"),
    ("empty-image", training("  image: ''\n  distributedFramework: PyTorch\n  numWorkers: 2\n"), "spec.image"),
    ("negative-gpus", training(IMG + "  numWorkers: 2\n  compute:\n    gpuDevicesRequest: -1\n"),
     "spec.compute.gpuDevicesRequest"),
    ("bad-quantity", training(IMG + "  numWorkers: 2\n  compute:\n    cpuMemoryRequest: lots\n"),
     "spec.compute.cpuMemoryRequest"),
    ("env-value-and-secret", training(IMG + "  numWorkers: 2\n  environmentVariables:\n"
                                      "    - name: A\n      value: x\n      secret:\n        name: s\n        key: k\n"),
     "spec.environmentVariables"),
    ("env-duplicate-name", training(IMG + "  numWorkers: 2\n  environmentVariables:\n"
                                    "    - name: A\n      value: x\n    - name: A\n      value: y\n"),
     "spec.environmentVariables[1].name"),
    ("port-out-of-range", training(IMG + "  numWorkers: 2\n  ports:\n    - container: 70000\n"),
     "spec.ports"),
    ("gpu-portion-without-type", training(IMG + "  numWorkers: 2\n  compute:\n    gpuRequestType: portion\n"),
     "spec.compute"),
    ("master-spec-and-same", training(top="masterSpecSameAsWorker: true\nmasterSpec:\n  image: x:1\n"), "masterSpec"),
    ("prefix-name", training(top="useGivenNameAsPrefix: true\n"), "useGivenNameAsPrefix"),
    ("phase-enum", training(top="desiredPhase: Paused\n"), "desiredPhase"),
    ("di-no-leader", inference("  replicas: 1\n"), "spec.leader"),
    ("di-worker-missing", inference(LEADER + "  workers: 2\n"), "spec.worker"),
    ("di-replicas-range", inference(LEADER + "  replicas: 5000\n"), "spec.replicas"),
    ("di-stopped", inference(LEADER).replace("spec:\n", "desiredPhase: Stopped\nspec:\n"), "desiredPhase"),
    ("di-unknown-leader-field", inference(LEADER + "    imagePullPolcy: Always\n"), "spec.leader.imagePullPolcy"),
    ("lifecycle-unknown", training(top="lifecycle:\n  preventDestroi: true\n"), "lifecycle.preventDestroi"),
    ("yaml-syntax", "kind: DistributedTraining\nname: [unclosed\n", "bad.yaml:"),
]


@pytest.mark.parametrize("case,text,field", CASES, ids=[c[0] for c in CASES])
def test_bad_spec_exits_1_naming_file_and_field_and_sends_nothing(ws, sim_server, case, text, field):
    ws.write("team/bad.yaml", text)
    sim_server.clear_requests()
    for command in (("plan", str(ws.specs)), ("apply", str(ws.specs), "--auto-approve")):
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        assert "bad.yaml" in res.stderr
        assert field.lower() in res.stderr.lower(), res.stderr
    assert sim_server.requests(api_only=False) == []
    assert not ws.state_path.exists()


def test_all_problems_reported_at_once_across_files(ws, sim_server):
    ws.write("a.yaml", training(IMG + "  numWorkers: 0\n"))
    ws.write("b.yaml", training(name="other", clusterId="nope"))
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1
    assert "a.yaml" in res.stderr and "spec.numWorkers" in res.stderr
    assert "b.yaml" in res.stderr and "clusterId" in res.stderr


def test_duplicate_address_names_both_files(ws, sim_server):
    ws.write("a.yaml", training())
    ws.write("sub/b.yaml", training())
    res = ws.cli("plan", str(ws.specs))
    assert res.exit_code == 1
    assert "a.yaml" in res.stderr and "b.yaml" in res.stderr
    assert sim_server.requests(api_only=False) == []


def test_bad_target_address_is_a_clear_error(ws, sim_server):
    ws.write("a.yaml", training())
    res = ws.cli("plan", str(ws.specs), "--target", "Nope/7/x")
    assert res.exit_code == 1 and "--target" in res.stderr


def test_missing_credentials_is_a_clear_error(ws, sim_server):
    ws.write("a.yaml", training())
    ws.env = {"RUNAI_URL": sim_server.url, "RUNAI_CLIENT_ID": None, "RUNAI_CLIENT_SECRET": None,
              "RUNAI_TOKEN": None}
    res = ws.cli("plan", str(ws.specs))
    assert res.exit_code == 1
    assert "RUNAI_TOKEN" in res.stderr or "RUNAI_CLIENT_ID" in res.stderr
    assert "Traceback" not in res.output


def test_corrupt_state_is_refused_and_kept(ws, sim_server):
    ws.write("a.yaml", training())
    ws.state_path.parent.mkdir(parents=True)
    ws.state_path.write_text('{"version": 1, "lineage": ')
    res = ws.cli("apply", str(ws.specs), "--auto-approve")
    assert res.exit_code == 1 and "state.json" in res.stderr
    assert ws.state_path.read_text() == '{"version": 1, "lineage": '
    assert sim_server.writes() == []


def test_a_bad_spec_among_many_stops_the_plan_with_nothing_written(ws, sim_server):
    """From 100 spec files to load on, the specs load on the other core while the state
    and the live workloads are read: a bad spec then still exits 1 naming it, after those
    reads, with no write to the API and the state untouched. With the spec cache on disk
    the same, whether or not a read was sent: its work (hashing, reading it, loading the
    one changed file) is a child's, beside the reads, and may end before the first."""
    specgen = _specgen()
    specgen.write_specs(ws.specs, 120)
    assert ws.apply().exit_code == 0
    before = ws.state_path.read_bytes()
    bad = sorted(ws.specs.rglob("*.yaml"))[57]
    bad.write_text(bad.read_text().replace("spec:\n", "spec:\n  imagePullPolcy: Always\n", 1))
    for cache in ("off", "on"):
        sim_server.clear_requests()
        ws.env = {**ws.env, "RUNAI_RECONCILE_SPEC_CACHE": "off" if cache == "off" else None}
        for command in ("plan", "apply"):
            res = ws.cli(command, str(ws.specs),
                         *(["--auto-approve"] if command == "apply" else []))
            assert res.exit_code == 1
            assert bad.name in res.output and "imagePullPolcy" in res.output
            assert "Traceback" not in res.output
        assert sim_server.writes() == []
        if cache == "off":  # 120 files to parse: the reads went out meanwhile
            assert [r for r in sim_server.requests() if r["method"] == "GET"]
    assert ws.state_path.read_bytes() == before


def _specgen():
    import importlib.util

    spec = importlib.util.spec_from_file_location("specgen", ROOT / "benchmarks" / "specgen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
