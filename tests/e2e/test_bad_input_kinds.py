"""Bad Training, Workspace and Inference specs through the CLI: exit 1, the file, line and
field path named, nothing sent to the API, nothing written to state."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http


def doc(kind: str, spec: str, top: str = "", image: str = "  image: nvcr.io/nvidia/pytorch:24.05-py3\n") -> str:
    return (f"kind: {kind}\nname: job-a\nprojectId: \"7\"\nclusterId: {CLUSTER}\n" + top
            + "spec:\n" + image + spec)


def training(spec: str = "", top: str = "", **kw) -> str:
    return doc("Training", spec, top, **kw)


def workspace(spec: str = "", top: str = "", **kw) -> str:
    return doc("Workspace", spec, top, **kw)


def inference(spec: str = "", top: str = "", **kw) -> str:
    return doc("Inference", spec, top, **kw)


def scaling(lines: str) -> str:
    return "  autoscaling:\n" + "".join(f"    {line}\n" for line in lines.split(";"))


# (case, text, the field path named, the line it is reported at)
CASES = [
    ("t-unknown-field", training("  imagePullPolcy: Always\n"), "spec.imagePullPolcy", 7),
    ("t-distributed-field", training("  numWorkers: 2\n"), "spec.numWorkers", 7),
    ("t-no-image", training(image=""), "spec.image", 5),
    ("t-completions-negative", training("  completions: -1\n"), "spec.completions", 7),
    ("t-parallelism-string", training("  parallelism: two\n"), "spec.parallelism", 7),
    ("t-restart-enum", training("  restartPolicy: Sometimes\n"), "spec.restartPolicy", 7),
    ("t-tty-without-stdin", training("  tty: true\n"), "spec.tty", 7),
    ("t-bad-quantity", training("  compute:\n    cpuMemoryRequest: lots\n"),
     "spec.compute.cpuMemoryRequest", 8),
    ("t-limit-below-request", training("  compute:\n    cpuCoreRequest: 8\n    cpuCoreLimit: 4\n"),
     "spec.compute.cpuCoreLimit", 9),
    ("t-phase-enum", training(top="desiredPhase: Paused\n"), "desiredPhase", 5),
    ("t-env-duplicate", training("  environmentVariables:\n    - name: A\n      value: x\n"
                                 "    - name: A\n      value: y\n"),
     "spec.environmentVariables[1].name", 10),
    ("w-unknown-field", workspace("  completions: 1\n"), "spec.completions", 7),
    ("w-port-range", workspace("  ports:\n    - container: 70000\n      serviceType: ClusterIP\n"),
     "spec.ports[0].container", 8),
    ("w-port-service-enum", workspace("  ports:\n    - container: 8888\n      serviceType: Ingress\n"),
     "spec.ports[0].serviceType", 9),
    ("w-exposed-users-and-groups", workspace(
        "  exposedUrls:\n    - container: 8888\n      authorizedUsers: [ana]\n"
        "      authorizedGroups: [research]\n"), "spec.exposedUrls[0].authorizedGroups", 10),
    ("w-pvc-without-size", workspace("  storage:\n    pvc:\n      - path: /home\n"),
     "spec.storage.pvc[0].claimInfo", 9),
    ("w-uid-from-image", workspace("  security:\n    uidGidSource: fromTheImage\n    runAsUid: 1000\n"),
     "spec.security.runAsUid", 9),
    ("w-prefix-name", workspace(top="useGivenNameAsPrefix: true\n"), "useGivenNameAsPrefix", 5),
    ("i-stopped", inference(top="desiredPhase: Stopped\n"), "desiredPhase", 5),
    ("i-training-field", inference("  backoffLimit: 3\n"), "spec.backoffLimit", 7),
    ("i-privileged", inference("  security:\n    hostNetwork: true\n"), "spec.security.hostNetwork", 8),
    ("i-s3-storage", inference("  storage:\n    s3:\n      - bucket: b\n        path: /d\n"),
     "spec.storage.s3", 8),
    ("i-ephemeral-pvc", inference("  storage:\n    pvc:\n      - path: /m\n        ephemeral: true\n"
                                  "        claimInfo:\n          size: 1Gi\n"),
     "spec.storage.pvc[0].ephemeral", 10),
    ("i-serving-port-range", inference("  servingPort:\n    container: 0\n"),
     "spec.servingPort.container", 8),
    ("i-serving-protocol-enum", inference("  servingPort:\n    container: 8000\n    protocol: tcp\n"),
     "spec.servingPort.protocol", 9),
    ("i-serving-port-unknown", inference("  servingPort:\n    port: 8000\n"),
     "spec.servingPort.port", 8),
    ("i-min-above-max", inference(scaling("minReplicas: 4;maxReplicas: 2;metric: concurrency;"
                                          "metricThreshold: 8")),
     "spec.autoscaling.maxReplicas", 9),
    ("i-metric-required", inference(scaling("minReplicas: 1;maxReplicas: 4")),
     "spec.autoscaling.metric", 7),
    ("i-threshold-with-metric", inference(scaling("minReplicas: 1;maxReplicas: 4;metric: concurrency")),
     "spec.autoscaling.metricThreshold", 7),
    ("i-scale-to-zero-not-zero", inference(scaling("minReplicas: 1;scaleToZeroRetentionSeconds: 60")),
     "spec.autoscaling.scaleToZeroRetentionSeconds", 9),
    ("i-scale-to-zero-default-min", inference(scaling("scaleToZeroRetentionSeconds: 60")),
     "spec.autoscaling.scaleToZeroRetentionSeconds", 8),
    ("i-delay-range", inference(scaling("scaleDownDelaySeconds: 7200")),
     "spec.autoscaling.scaleDownDelaySeconds", 8),
    ("i-percentage-range", inference(scaling("metricThresholdPercentage: 150")),
     "spec.autoscaling.metricThresholdPercentage", 8),
    ("i-metric-pattern", inference(scaling("minReplicas: 1;maxReplicas: 2;metric: 9-requests;"
                                           "metricThreshold: 4")),
     "spec.autoscaling.metric", 10),
    ("i-max-zero", inference(scaling("minReplicas: 0;maxReplicas: 0")),
     "spec.autoscaling.maxReplicas", 9),
    ("i-request-timeout-zero", inference("  servingConfiguration:\n    requestTimeoutSeconds: 0\n"),
     "spec.servingConfiguration.requestTimeoutSeconds", 8),
    ("i-unknown-autoscaling", inference(scaling("maxReplica: 3")), "spec.autoscaling.maxReplica", 8),
]


@pytest.mark.parametrize("case,text,field,line", CASES, ids=[c[0] for c in CASES])
def test_bad_spec_exits_1_naming_file_line_and_field_and_sends_nothing(
        ws, sim_server, case, text, field, line):
    ws.write("team/bad.yaml", text)
    sim_server.clear_requests()
    for command in (("validate", str(ws.specs)), ("plan", str(ws.specs)),
                    ("apply", str(ws.specs), "--auto-approve")):
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        assert f"bad.yaml:{line}: {field}" in res.stderr, res.stderr
    assert sim_server.requests(api_only=False) == []
    assert not ws.state_path.exists()


def test_every_problem_of_the_three_kinds_at_once(ws, sim_server):
    ws.write("t.yaml", training("  completions: -1\n  parallelism: x\n"))
    ws.write("i.yaml", inference(scaling("minReplicas: 1;maxReplicas: 4") + "  ports:\n"
                                 "    - container: 0\n      serviceType: ClusterIP\n"))
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1
    for expected in ("t.yaml:7: spec.completions", "t.yaml:8: spec.parallelism",
                     "i.yaml:7: spec.autoscaling", "i.yaml:11: spec.ports[0].container"):
        assert expected in res.stderr, res.stderr


def test_did_you_mean_for_a_new_kind(ws, sim_server):
    ws.write("bad.yaml", inference("  servingConfiguraton:\n    requestTimeoutSeconds: 30\n"))
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1
    assert "did you mean 'servingConfiguration'" in res.stderr, res.stderr
    ws.write("bad.yaml", doc("Inferense", ""))
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1 and "Inference" in res.stderr, res.stderr
