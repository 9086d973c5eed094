"""Server defaults through the planner: CONTRACT.md §5's server defaults compare equal to
leaving the field out, in both directions, for every kind and every container. The table
below is this test's own, written from §5 (not read from `kinds`), so it checks the
registry's entries; a last test fails when an entry holds a default the table lacks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler import kinds, planner
from reconciler.plans import Action

from tests.helpers.builders import CLUSTER, desired, live_of, rstate, state_of

T, W, I, D, DI = "Training", "Workspace", "Inference", "DistributedTraining", "DistributedInference"
N = "NIMService"
ALL = (T, W, I, D, DI)
TWD = (T, W, D)

BASE: dict[str, dict[str, Any]] = {
    T: {"spec": {"image": "repo/app:1.0"}},
    W: {"spec": {"image": "repo/app:1.0"}},
    I: {"spec": {"image": "repo/app:1.0", "servingPort": {"container": 8000}}},
    D: {"spec": {"image": "repo/app:1.0", "distributedFramework": "MPI", "numWorkers": 2},
        "masterSpec": {"image": "repo/app:1.0"}, "masterSpecSameAsWorker": False},
    DI: {"spec": {"workers": 1, "servingPort": {"port": 8000},
                  "leader": {"image": "repo/app:1.0"}, "worker": {"image": "repo/app:1.0"}}},
    N: {"spec": {"image": "repo/app:1.0"}},
}
CONTAINERS = {T: ("spec",), W: ("spec",), I: ("spec",), D: ("spec", "masterSpec"),
              DI: ("spec.leader", "spec.worker"), N: ("spec",)}


def _storage(kind: str, item: dict, extra: dict) -> tuple[dict, dict]:
    return {"storage": {kind: [{**item, **extra}]}}, {"storage": {kind: [item]}}


# (kinds, holder: "container" for each container of the kind, else a body path,
#  the holder's fields with the default spelled, and without it)
CASES: list[tuple[tuple[str, ...], str, dict, dict]] = [
    (ALL, "container", {"image": "repo/app:latest", "imagePullPolicy": "Always"},
     {"image": "repo/app:latest"}),
    (ALL, "container", {"image": "repo/app", "imagePullPolicy": "Always"}, {"image": "repo/app"}),
    (ALL, "container", {"image": "repo/app:1.0", "imagePullPolicy": "IfNotPresent"}, {}),
    (ALL, "container", {"image": "repo/app@sha256:0a1b", "imagePullPolicy": "IfNotPresent"},
     {"image": "repo/app@sha256:0a1b"}),
    (ALL, "container", {"security": {"uidGidSource": "fromTheImage"}}, {}),
    (ALL, "container", {"security": {"uidGidSource": "fromTheImage", "runAsNonRoot": True}},
     {"security": {"runAsNonRoot": True}}),
    *((ALL, "container", {key: [{**item, "exclude": False}]}, {key: [item]})
      for key, item in (("annotations", {"name": "a", "value": "1"}),
                        ("imagePullSecrets", {"name": "regcred"}),
                        ("ports", {"container": 8080, "serviceType": "ClusterIP"}),
                        ("relatedUrls", {"type": "docs", "url": "https://x.example"}))),
    (ALL, "container",
     {"probes": {"readiness": {"handler": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}}}}},
     {"probes": {"readiness": {"handler": {"httpGet": {"port": 80}}}}}),
    *((ALL, "container", *_storage(kind, item, {"exclude": False}))
      for kind, item in (("configMapVolume", {"name": "c", "configMap": "cm", "mountPath": "/c"}),
                         ("dataVolume", {"id": "7", "mountPath": "/d"}),
                         ("emptyDirVolume", {"name": "e", "path": "/e"}),
                         ("git", {"name": "g", "repository": "https://g.example", "path": "/g"}),
                         ("hostPath", {"name": "h", "path": "/srv", "mountPath": "/h"}),
                         ("nfs", {"name": "n", "server": "nfs", "path": "/x", "mountPath": "/n"}),
                         ("pvc", {"name": "p", "path": "/p", "existingPvc": True,
                                  "claimName": "mine"}),
                         ("s3", {"name": "s", "bucket": "b", "path": "/s"}),
                         ("secretVolume", {"name": "v", "secret": "s", "mountPath": "/v"}))),
    (ALL, "container", *_storage("hostPath", {"name": "h", "path": "/srv", "mountPath": "/h"},
                                 {"readOnly": True})),
    (ALL, "container", *_storage("nfs", {"name": "n", "server": "nfs", "path": "/x",
                                         "mountPath": "/n"}, {"readOnly": True})),
    (ALL, "container", *_storage("pvc", {"name": "p", "path": "/p", "claimInfo": {"size": "1Gi"}},
                                 {"existingPvc": False, "readOnly": False, "ephemeral": False,
                                  "dataSharing": False})),
    (ALL, "container",
     {"storage": {"pvc": [{"name": "p", "path": "/p", "claimInfo": {
         "size": "1Gi", "volumeMode": "Filesystem", "accessModes": {
             "readWriteOnce": True, "readOnlyMany": False, "readWriteMany": False}}}]}},
     {"storage": {"pvc": [{"name": "p", "path": "/p", "claimInfo": {"size": "1Gi"}}]}}),
    (ALL, "container", *_storage("s3", {"name": "s", "bucket": "b", "path": "/s"}, {
        "url": "https://s3.amazonaws.com", "secretKeyOfAccessKeyId": "AccessKeyId",
        "secretKeyOfSecretKey": "SecretKey"})),
    (ALL, "container", *_storage("git", {"name": "g", "repository": "https://g.example",
                                         "path": "/g"},
                                 {"secretKeyOfUser": "User", "secretKeyOfPassword": "Password"})),
    (TWD, "container", {"security": {"hostIpc": False, "hostNetwork": False}}, {}),
    (TWD, "container", {"backoffLimit": 6, "autoDeletionTimeAfterCompletionSeconds": 2592000}, {}),
    # The workload type's priorityClass and preemptibility: per kind.
    ((T, D), "spec", {"priorityClass": "train", "preemptibility": "preemptible"}, {}),
    ((W,), "spec", {"priorityClass": "build", "preemptibility": "non-preemptible"}, {}),
    ((I, DI), "spec", {"priorityClass": "inference", "preemptibility": "non-preemptible"}, {}),
    ((D,), "spec", {"slotsPerWorker": 1, "sshAuthMountPath": "/root/.ssh"}, {}),
    ((I,), "spec", {"servingPort": {"container": 8000, "protocol": "http",
                                    "authorizationType": "public",
                                    "clusterLocalAccessOnly": False}},
     {"servingPort": {"container": 8000}}),
    ((I,), "spec", {"autoscaling": {"minReplicas": 1, "maxReplicas": 1, "initialReplicas": 1,
                                    "activationReplicas": 1, "metricThresholdPercentage": 70,
                                    "scaleToZeroRetentionSeconds": 0}}, {}),
    ((I,), "spec", {"autoscaling": {"minReplicas": 3, "maxReplicas": 3, "initialReplicas": 3}},
     {"autoscaling": {"minReplicas": 3}}),
    ((I,), "spec", {"autoscaling": {"minReplicas": 0, "maxReplicas": 1, "activationReplicas": 1}},
     {"autoscaling": {"minReplicas": 0}}),
    ((DI,), "spec", {"restartPolicy": "RecreateGroupOnPodRestart", "startupPolicy": "LeaderCreated",
                     "replicas": 1}, {}),
    ((DI,), "spec", {"workers": 0}, {"workers": None}),
    ((DI,), "spec", {"servingPort": {"port": 8000, "protocol": "http", "exposeExternally": True,
                                     "authorizationType": "public"}},
     {"servingPort": {"port": 8000}}),
    # NIM services (nim-services.yml's "default" and "Defaults to" texts).
    ((N,), "spec", {"image": "repo/app:latest", "imagePullPolicy": "Always"},
     {"image": "repo/app:latest"}),
    ((N,), "spec", {"imagePullPolicy": "IfNotPresent"}, {}),
    *(((N,), "spec", {key: [{**item, "exclude": False}]}, {key: [item]})
      for key, item in (("annotations", {"name": "a", "value": "1"}),
                        ("imagePullSecrets", {"name": "ngc"}))),
    ((N,), "spec",
     {"probes": {"readiness": {"handler": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}}}}},
     {"probes": {"readiness": {"handler": {"httpGet": {"port": 80}}}}}),
    ((N,), "spec", {"priorityClass": "inference", "preemptibility": "non-preemptible",
                    "replicas": 1}, {}),
    ((N,), "spec", {"autoscaling": {"minReplicas": 1, "maxReplicas": 1, "scaleWindowSeconds": 300,
                                    "metric": "m", "metricThreshold": 5}},
     {"autoscaling": {"metric": "m", "metricThreshold": 5}}),
    ((N,), "spec", {"autoscaling": {"minReplicas": 3, "maxReplicas": 3, "metric": "m",
                                    "metricThreshold": 5}},
     {"autoscaling": {"minReplicas": 3, "metric": "m", "metricThreshold": 5}}),
    ((N,), "spec", {"servingPort": {"port": 8000, "serviceType": "ClusterIP",
                                    "exposeExternally": True, "exposedProtocol": "http"}},
     {"servingPort": {"port": 8000}}),
    ((N,), "spec", {"servingPort": {"port": 8000, "grpcPort": 8001, "exposedProtocol": "grpc"}},
     {"servingPort": {"port": 8000, "grpcPort": 8001}}),
    ((N,), "spec", {"modelStore": {"pvc": {"claimInfo": {
        "size": "50Gi", "volumeMode": "Filesystem", "accessModes": {
            "readWriteOnce": True, "readOnlyMany": False, "readWriteMany": False}},
        "existingPvc": False, "readOnly": False}}},
     {"modelStore": {"pvc": {"claimInfo": {"size": "50Gi"}}}}),
]


def _merge(into: dict, fields: dict) -> None:
    for key, value in fields.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _body(kind: str, holder: str, fields: dict) -> dict:
    body = {"name": "w", "projectId": "7", "clusterId": CLUSTER, **copy.deepcopy(BASE[kind])}
    node = body
    for seg in holder.split("."):
        node = node[seg]
    _merge(node, fields)
    return body


def _cases():
    for n, (names, where, spelled, omitted) in enumerate(CASES):
        for kind in names:
            for holder in CONTAINERS[kind] if where == "container" else (where,):
                yield pytest.param(kind, holder, spelled, omitted,
                                   id=f"{n}-{kind}-{holder}-{'+'.join(_leaves(spelled))}")


def _leaves(fields: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in fields.items():
        if isinstance(value, dict):
            out += _leaves(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def _plan(kind: str, spec: dict, applied: dict | None, live: dict):
    state = state_of(rstate(applied, kind)) if applied is not None else state_of()
    p = planner.make_plan([desired(spec, kind)], state,
                          {f"{kind}/7/w": live_of(live, defaults=False)})
    return p.changes[0]


@pytest.mark.parametrize("kind,holder,spelled,omitted", list(_cases()))
def test_a_spelled_default_compares_equal_to_leaving_it_out(kind, holder, spelled, omitted):
    with_ = _body(kind, holder, spelled)
    without = _body(kind, holder, omitted)
    # Spelled, applied, then dropped (as export writes it): live holds the default.
    rc = _plan(kind, without, with_, with_)
    assert rc.action is Action.NOOP and rc.changes == [], [c.path for c in rc.changes]
    # Added where the state and live lack it.
    rc = _plan(kind, with_, without, without)
    assert rc.action is Action.NOOP and rc.changes == [], [c.path for c in rc.changes]
    # Added where live has it filled in.
    rc = _plan(kind, with_, without, with_)
    assert rc.action is Action.NOOP and rc.changes == [], [c.path for c in rc.changes]
    # No state (adoption): the spec spells it, live lacks it.
    rc = _plan(kind, with_, None, without)
    assert rc.action is Action.NOOP and rc.changes == [], [c.path for c in rc.changes]


# Not defaults: the action the planner takes when a value like these is dropped.
CONTROLS = [
    (W, "spec", {"priorityClass": "train"}, Action.REPLACE),  # a Training's, not a Workspace's
    (T, "spec", {"image": "repo/app:1.0", "imagePullPolicy": "Always"}, Action.REPLACE),
    (T, "spec", {"image": "repo/app:latest", "imagePullPolicy": "IfNotPresent"}, Action.REPLACE),
    (T, "spec", {"backoffLimit": 3}, Action.REPLACE),
    # A NIM service's spec is updated whole: dropping a value is an update, not a replace.
    (N, "spec", {"replicas": 2}, Action.UPDATE),
    (N, "spec", {"servingPort": {"port": 8000, "grpcPort": 8001, "exposedProtocol": "http"}},
     Action.UPDATE),
    (I, "spec", {"autoscaling": {"minReplicas": 1, "maxReplicas": 2}}, Action.UPDATE),
    (I, "spec", {"autoscaling": {"minReplicas": 2, "metricThresholdPercentage": 80}},
     Action.UPDATE),
    (DI, "spec", {"replicas": 2}, Action.REPLACE),  # removing an updatable field replaces
    (D, "masterSpec", {"ports": [{"container": 22, "exclude": True}]}, Action.REPLACE),
    # A generated value that the user spelled is theirs.
    (T, "spec", {"ports": [{"container": 22, "serviceType": "NodePort", "external": 30022}]},
     Action.REPLACE),
]


@pytest.mark.parametrize("kind,holder,spelled,action", CONTROLS)
def test_dropping_a_value_that_is_not_the_default_is_a_change(kind, holder, spelled, action):
    with_ = _body(kind, holder, spelled)
    without = copy.deepcopy(with_)
    node = without
    for seg in holder.split("."):
        node = node[seg]
    for key in spelled:
        if key != "image":
            node.pop(key)
    if "autoscaling" in spelled:  # keep the autoscaling object, less the non-default key
        node["autoscaling"] = {"minReplicas": spelled["autoscaling"]["minReplicas"]}
    if "ports" in spelled:
        node["ports"] = [{k: v for k, v in spelled["ports"][0].items()
                          if k not in ("exclude", "external")}]
    rc = _plan(kind, without, with_, with_)
    assert rc.action is action, [c.path for c in rc.changes]


def test_every_default_of_every_entry_is_in_the_table():
    """A default an entry holds that the §5 table above does not exercise fails here."""
    missing = []
    for kind in kinds.KINDS.values():
        for holder, values in kind.defaults.items():
            if not holder:
                continue  # the body's own (useGivenNameAsPrefix): not compared by the diff
            for value in values:
                if value.generated:
                    continue
                segs = value.path.replace("[]", ".[]").split(".")
                if not any(_holds(_holder(_body(kind.name, h, spelled), holder), segs,
                                        value.test)
                           for names, where, spelled, _ in CASES if kind.name in names
                           for h in (CONTAINERS[kind.name] if where == "container" else (where,))
                           if h == holder or holder.startswith(h + ".")):
                    missing.append(f"{kind.name} {holder}.{value.path}")
    assert missing == []


def _holder(body: dict, path: str) -> dict:
    node = body
    for seg in path.split("."):
        node = node.get(seg, {})
    return node


def _holds(holder, segments: list[str], test) -> bool:
    """Whether `holder` holds, at `segments` (`[]`: any item of a list), a value `test`
    says is the server's."""
    head, rest = segments[0], segments[1:]
    if head == "[]":
        return isinstance(holder, list) and any(_holds(i, rest, test) for i in holder)
    if not isinstance(holder, dict) or head not in holder:
        return False
    if rest:
        return _holds(holder[head], rest, test)
    return holder[head] is not None and bool(test(holder, holder[head]))
