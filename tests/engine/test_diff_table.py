"""Table-driven tests of the three-way diff: each row is D, L, R and the field changes a
user would see in the plan (path, before, after, drift, forces replacement)."""

from __future__ import annotations

import time

import pytest

from reconciler import diff

from tests.helpers.builders import DI, DT, di_body, dt_body, edit, live_of, set_path

B = dt_body()
I = di_body()  # noqa: E741
LB = live_of(B)
LI = live_of(I)

ENV = "spec.environmentVariables"
OMP = {"name": "OMP_NUM_THREADS", "value": "8"}
NCCL = {"name": "NCCL_DEBUG", "value": "INFO"}
TPL = "0d3f4a5b-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
LD_PRELOAD = {"name": "LD_PRELOAD", "value": "/tmp/hook.so"}


def _reverse_env(b):
    b["spec"]["environmentVariables"].reverse()


def _env_set(name, **fields):
    def fn(b):
        for item in b["spec"]["environmentVariables"]:
            if item["name"] == name:
                item.clear()
                item.update({"name": name, **fields})
    return fn


def _env_drop(name):
    def fn(b):
        b["spec"]["environmentVariables"] = [
            e for e in b["spec"]["environmentVariables"] if e["name"] != name]
    return fn


def _env_add(item):
    def fn(b):
        b["spec"]["environmentVariables"].append(dict(item))
    return fn


def _caps(*caps):
    return lambda b: b["spec"]["security"].__setitem__("capabilities", list(caps))


def _without_security(b):
    return edit(b, lambda x: x["spec"].pop("security"))


def _match_values(*values):
    def fn(b):
        b["spec"]["nodeAffinityRequired"]["nodeSelectorTerms"][0]["matchExpressions"][0][
            "values"] = list(values)
    return fn


def _add_toleration(b):
    b["spec"]["tolerations"].append({"key": "dedicated", "operator": "Equal",
                                     "value": "training", "effect": "NoExecute"})


def _rev_tolerations(b):
    b["spec"]["tolerations"].reverse()


def _leader_env(name, value):
    def fn(b):
        for item in b["spec"]["leader"]["environmentVariables"]:
            if item["name"] == name:
                item["value"] = value
    return fn


B_TOL = edit(B, _add_toleration)
TERMS = B["spec"]["nodeAffinityRequired"]["nodeSelectorTerms"]
NEW_TERMS = [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                    "values": ["H100-SXM"]}]}]

# (id, kind, D, L, R, ignore, expected [(path, before, after, drift, forces)])
ROWS = [
    ("dt-identical-with-server-defaults", DT, B, B, LB, (), []),
    ("di-identical-with-server-defaults", DI, I, I, LI, (), []),
    ("dt-identical-live-without-defaults", DT, B, B, live_of(B, defaults=False), (), []),
    ("dt-read-only-fields-differ", DT, B, B,
     {**LB, "createdBy": "someone-else", "actualPhase": "Pending", "workloadId": "other",
      "createdAt": "2025-01-01T00:00:00Z", "phaseMessage": "x"}, (), []),
    ("dt-image-user-change", DT, set_path(B, "spec.image", "nvcr.io/nvidia/pytorch:24.10-py3"),
     B, LB, (), [("spec.image", "nvcr.io/nvidia/pytorch:24.05-py3",
                  "nvcr.io/nvidia/pytorch:24.10-py3", False, True)]),
    ("dt-image-drift", DT, B, B, set_path(LB, "spec.image", "nvcr.io/nvidia/pytorch:23.12-py3"),
     (), [("spec.image", "nvcr.io/nvidia/pytorch:23.12-py3",
           "nvcr.io/nvidia/pytorch:24.05-py3", True, True)]),
    ("dt-image-user-change-over-drift-reports-live-before", DT,
     set_path(B, "spec.image", "img:new"), B, set_path(LB, "spec.image", "img:drifted"), (),
     [("spec.image", "img:drifted", "img:new", False, True)]),
    ("dt-user-change-live-already-matches", DT, set_path(B, "spec.image", "img:new"), B,
     set_path(LB, "spec.image", "img:new"), (), []),
    ("dt-numworkers-change-forces", DT, set_path(B, "spec.numWorkers", 8), B, LB, (),
     [("spec.numWorkers", 4, 8, False, True)]),
    ("di-replicas-user-change-updatable", DI, set_path(I, "spec.replicas", 4), I, LI, (),
     [("spec.replicas", 2, 4, False, False)]),
    ("di-replicas-drift-updatable", DI, I, I, set_path(LI, "spec.replicas", 3), (),
     [("spec.replicas", 3, 2, True, False)]),
    ("di-replicas-removed-forces", DI, set_path(I, "spec.replicas", None), I, LI, (),
     [("spec.replicas", 2, None, False, True)]),
    ("di-replicas-int-vs-float", DI, I, I, set_path(LI, "spec.replicas", 2.0), (), []),
    ("di-workers-change-forces", DI, set_path(I, "spec.workers", 2), I, LI, (),
     [("spec.workers", 1, 2, False, True)]),
    ("di-leader-image-forces", DI, set_path(I, "spec.leader.image", "vllm/vllm-openai:v0.6.4"),
     I, LI, (), [("spec.leader.image", "vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.6.4",
                  False, True)]),
    ("di-leader-env-value-keyed-path", DI, edit(I, _leader_env("VLLM_PORT", "8001")), I, LI, (),
     [("spec.leader.environmentVariables[VLLM_PORT].value", "8000", "8001", False, True)]),
    ("di-server-filled-serving-port-ignored", DI, I, I,
     set_path(LI, "spec.servingPort.exposedUrl", "https://other.example.com"), (), []),
    ("env-reordered-in-spec", DT, edit(B, _reverse_env), B, LB, (), []),
    ("env-reordered-in-live", DT, B, B, edit(LB, _reverse_env), (), []),
    ("env-item-value-changed", DT, edit(B, _env_set("NCCL_DEBUG", value="WARN")), B, LB, (),
     [(f"{ENV}[NCCL_DEBUG].value", "INFO", "WARN", False, True)]),
    ("env-item-added-one-change-at-item", DT, edit(B, _env_add(OMP)), B, LB, (),
     [(f"{ENV}[OMP_NUM_THREADS]", None, OMP, False, True)]),
    ("env-item-removed", DT, edit(B, _env_drop("NCCL_DEBUG")), B, LB, (),
     [(f"{ENV}[NCCL_DEBUG]", NCCL, None, False, True)]),
    ("env-item-removed-in-live-is-drift", DT, B, B, edit(LB, _env_drop("NCCL_DEBUG")), (),
     [(f"{ENV}[NCCL_DEBUG]", None, NCCL, True, True)]),
    ("env-item-secret-to-value", DT, edit(B, _env_set("WANDB_API_KEY", value="k")), B, LB, (),
     [(f"{ENV}[WANDB_API_KEY].secret", {"name": "wandb", "key": "api-key"}, None, False, True),
      (f"{ENV}[WANDB_API_KEY].value", None, "k", False, True)]),
    # Neither the spec nor the state holds it, and it is not the server's: added outside
    # (by hand, or a policy that injects it: `ignoreChanges` accepts those).
    ("env-item-only-in-live-is-an-addition", DT, B, B, edit(LB, _env_add(LD_PRELOAD)), (),
     [(f"{ENV}[LD_PRELOAD]", LD_PRELOAD, None, True, True)]),
    ("env-item-only-in-live-ignored-by-path", DT, B, B, edit(LB, _env_add(LD_PRELOAD)),
     (ENV,), []),
    ("env-item-only-in-live-ignored-by-item", DT, B, B,
     edit(edit(LB, _env_add(LD_PRELOAD)), _env_add(OMP)), (f"{ENV}[LD_PRELOAD]",),
     [(f"{ENV}[OMP_NUM_THREADS]", OMP, None, True, True)]),
    ("key-only-in-live-is-an-addition", DT, edit(B, lambda b: b["spec"].pop("command")),
     edit(B, lambda b: b["spec"].pop("command")), LB, (),
     [("spec.command", "torchrun", None, True, True)]),
    ("di-env-only-in-live-is-an-addition", DI, I, I,
     edit(LI, lambda b: b["spec"]["worker"].setdefault("environmentVariables", []).append(
         LD_PRELOAD)), (),
     [("spec.worker.environmentVariables[LD_PRELOAD]", LD_PRELOAD, None, True, True)]),
    ("template-made-live-extra-item-not-an-addition", DT, {**B, "templateId": TPL},
     {**B, "templateId": TPL}, edit(LB, _env_add(LD_PRELOAD)), (), []),
    ("labels-item-value-changed", DT,
     set_path(B, "spec.labels", [{"name": "team", "value": "vision"}]), B, LB, (),
     [("spec.labels[team].value", "nlp", "vision", False, True)]),
    ("labels-removed-in-live-one-drift-at-root", DT, B, B, set_path(LB, "spec.labels", None),
     (), [("spec.labels", None, [{"name": "team", "value": "nlp"}], True, True)]),
    ("nodepools-order-matters", DT, set_path(B, "spec.nodePools", ["a100", "h100"]), B, LB, (),
     [("spec.nodePools", ["h100", "a100"], ["a100", "h100"], False, True)]),
    ("nodepools-reordered-in-live-is-drift", DT, B, B,
     set_path(LB, "spec.nodePools", ["a100", "h100"]), (),
     [("spec.nodePools", ["a100", "h100"], ["h100", "a100"], True, True)]),
    ("capabilities-order-does-not-matter-spec", DT, edit(B, _caps("IPC_LOCK", "SYS_PTRACE")),
     B, LB, (), []),
    ("capabilities-order-does-not-matter-live", DT, B, B,
     edit(LB, _caps("IPC_LOCK", "SYS_PTRACE")), (), []),
    ("capabilities-added", DT, edit(B, _caps("SYS_PTRACE", "IPC_LOCK", "NET_ADMIN")), B, LB, (),
     [("spec.security.capabilities", ["SYS_PTRACE", "IPC_LOCK"],
       ["SYS_PTRACE", "IPC_LOCK", "NET_ADMIN"], False, True)]),
    ("match-expression-values-are-a-set", DT, edit(B, _match_values("A100-SXM", "H100-SXM")),
     B, LB, (), []),
    ("node-selector-terms-whole-value", DT,
     set_path(B, "spec.nodeAffinityRequired.nodeSelectorTerms", NEW_TERMS), B, LB, (),
     [("spec.nodeAffinityRequired.nodeSelectorTerms", TERMS, NEW_TERMS, False, True)]),
    ("tolerations-by-tuple-reordered", DT, edit(B_TOL, _rev_tolerations), B_TOL,
     live_of(B_TOL), (), []),
    ("storage-pvc-server-fields-ignored", DT, B, B,
     edit(LB, lambda b: b["spec"]["storage"]["pvc"][0].update(dataSharing=False)), (), []),
    ("ports-external-generated-ignored", DT, B, B,
     edit(LB, lambda b: b["spec"]["ports"][0].update(external=31000)), (), []),
    ("numbers-by-value-live-float", DT, B, B, set_path(LB, "spec.numWorkers", 4.0), (), []),
    ("numbers-by-value-state-float", DT, set_path(B, "spec.numWorkers", 4.0), B, LB, (), []),
    ("numbers-different-value", DT, set_path(B, "spec.compute.cpuCoreRequest", 16.5), B, LB, (),
     [("spec.compute.cpuCoreRequest", 16, 16.5, False, True)]),
    ("bool-is-not-a-number", DT, B, B, set_path(LB, "spec.compute.largeShmRequest", 1), (),
     [("spec.compute.largeShmRequest", 1, True, True, True)]),
    ("string-digits-not-a-number", DT, B, B, set_path(LB, "spec.numWorkers", "4"), (),
     [("spec.numWorkers", "4", 4, True, True)]),
    ("null-equals-absent-in-spec", DT, set_path(B, "spec.workingDir", None), B, LB, (), []),
    ("explicit-null-in-spec-equals-absent", DT,
     edit(B, lambda b: b["spec"].update(workingDir=None, tty=None)), B, LB, (), []),
    ("empty-list-equals-absent", DT, edit(B, lambda b: b["spec"].update(imagePullSecrets=[])),
     B, LB, (), []),
    ("null-in-spec-removes-applied-field", DT, edit(B, lambda b: b["spec"].update(command=None)),
     B, LB, (), [("spec.command", "torchrun", None, False, True)]),
    # The pull policy the server chose for the image it was created with stays its own when
    # the image changes outside: the image is the drift.
    ("default-filled-for-the-applied-image-not-an-addition", DT, B, B,
     set_path(LB, "spec.image", "nvcr.io/nvidia/pytorch:latest"), (),
     [("spec.image", "nvcr.io/nvidia/pytorch:latest", "nvcr.io/nvidia/pytorch:24.05-py3",
       True, True)]),
    # A workload type's defaults are the cluster's to set: any value the spec leaves out.
    ("workload-type-default-of-this-cluster-not-an-addition", DT, B, B,
     set_path(LB, "spec.priorityClass", "high-priority-train"), (), []),
    ("server-default-value-in-live-ignored", DT, B, B, set_path(LB, "spec.backoffLimit", 6),
     (), []),
    ("other-value-at-a-server-default-is-an-addition", DT, B, B,
     set_path(LB, "spec.backoffLimit", 10), (), [("spec.backoffLimit", 10, None, True, True)]),
    ("user-sets-field-server-defaulted", DT, set_path(B, "spec.backoffLimit", 3), B, LB, (),
     [("spec.backoffLimit", 6, 3, False, True)]),
    ("whole-object-added-one-change", DT,
     set_path(B, "spec.probes", {"readiness": {"initialDelaySeconds": 10}}), B, LB, (),
     [("spec.probes", None, {"readiness": {"initialDelaySeconds": 10}}, False, True)]),
    ("whole-object-removed-one-change", DT, set_path(B, "spec.storage", None), B, LB, (),
     [("spec.storage", {"pvc": [{"name": "datasets", "path": "/data", "existingPvc": True,
                                 "claimName": "datasets-pvc", "readOnly": False,
                                 "ephemeral": False}]}, None, False, True)]),
    ("project-id-number-in-live", DT, B, B, {**LB, "projectId": 7}, (), []),
    ("master-spec-added", DT,
     edit(B, lambda b: b.update(masterSpecSameAsWorker=False,
                                masterSpec={"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                            "compute": {"cpuCoreRequest": 4}})), B, LB, (),
     [("masterSpec", None, {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                            "compute": {"cpuCoreRequest": 4}}, False, True),
      ("masterSpecSameAsWorker", True, False, False, True)]),
    ("template-id-write-only-unchanged", DT, {**B, "templateId": TPL}, {**B, "templateId": TPL},
     LB, (), []),
    ("template-id-changed-compares-with-state", DT, {**B, "templateId": TPL}, B, LB, (),
     [("templateId", None, TPL, False, True)]),
    ("template-id-without-state-not-compared", DT, {**B, "templateId": TPL}, None, LB, (), []),
    ("ignore-user-change", DT, set_path(B, "spec.numWorkers", 8), B, LB, ("spec.numWorkers",),
     []),
    ("ignore-drift-under-path", DT, B, B, edit(LB, _env_drop("NCCL_DEBUG")), (ENV,), []),
    ("ignore-keeps-other-paths", DT, set_path(set_path(B, "spec.image", "img:2"),
                                              "spec.numWorkers", 8), B, LB, ("spec.numWorkers",),
     [("spec.image", "nvcr.io/nvidia/pytorch:24.05-py3", "img:2", False, True)]),
    ("ignore-one-keyed-item", DT,
     edit(edit(B, _env_set("HF_HOME", value="/x")), _env_set("NCCL_DEBUG", value="WARN")), B,
     LB, (f"{ENV}[HF_HOME]",),
     [(f"{ENV}[NCCL_DEBUG].value", "INFO", "WARN", False, True)]),
    ("ignore-is-not-a-string-prefix", DT, set_path(B, "spec.numWorkers", 8), B, LB,
     ("spec.num",), [("spec.numWorkers", 4, 8, False, True)]),
    ("no-state-adopt-identical-with-defaults", DT, B, None, LB, (), []),
    ("no-state-adopt-image-differs-not-drift", DT, set_path(B, "spec.image", "img:2"), None, LB,
     (), [("spec.image", "nvcr.io/nvidia/pytorch:24.05-py3", "img:2", False, True)]),
    ("no-state-live-extra-item-ignored", DT, B, None, edit(LB, _env_add(OMP)), (), []),
    ("no-state-spec-extra-item", DT, edit(B, _env_add(OMP)), None, LB, (),
     [(f"{ENV}[OMP_NUM_THREADS]", None, OMP, False, True)]),
    ("no-state-di-replicas", DI, set_path(I, "spec.replicas", 5), None, LI, (),
     [("spec.replicas", 2, 5, False, False)]),
    # An imported workload's L leaves server defaults out; a spec that spells one inside a
    # subtree L lacks (security here) is matched by live on every path it sets.
    ("state-lacks-subtree-live-has-it-and-defaults", DT,
     set_path(B, "spec.security", {"capabilities": ["SYS_PTRACE", "IPC_LOCK"], "hostIpc": False}),
     _without_security(B), LB, (), []),
    ("state-lacks-subtree-live-differs-on-a-path", DT,
     set_path(B, "spec.security", {"capabilities": ["SYS_PTRACE", "IPC_LOCK"], "hostIpc": True}),
     _without_security(B), LB, (),
     [("spec.security", LB["spec"]["security"],
       {"capabilities": ["SYS_PTRACE", "IPC_LOCK"], "hostIpc": True}, False, True)]),
    ("not-refreshed-user-change-before-from-state", DT, set_path(B, "spec.image", "img:2"), B,
     None, (), [("spec.image", "nvcr.io/nvidia/pytorch:24.05-py3", "img:2", False, True)]),
    ("not-refreshed-unchanged", DT, B, B, None, (), []),
]


def _rows(changes):
    return [(c.path, c.before, c.after, c.drift, c.forces_replacement) for c in changes]


@pytest.mark.parametrize("kind,d,l,r,ignore,expected",
                         [pytest.param(*row[1:], id=row[0]) for row in ROWS])
def test_diff(kind, d, l, r, ignore, expected):
    changes = diff.diff_workload(kind, d, l, r, ignore=ignore)
    assert _rows(changes) == expected
    # An addition is drift whose value live alone holds: only a row whose spec and state
    # lack the path has one.
    assert [c.path for c in changes if c.added] == [
        path for path, _, after, drift, _ in expected if drift and after is None
        and diff._get(d, diff._segments(path)) is diff._MISSING
        and diff._get(l, diff._segments(path)) is diff._MISSING]


def test_table_is_large():
    assert len(ROWS) >= 40


def test_inputs_are_not_mutated():
    d = edit(B, _env_add(OMP))
    snapshot = repr((d, B, LB))
    diff.diff_workload(DT, d, B, LB)
    assert repr((d, B, LB)) == snapshot


def test_reported_values_are_copies():
    d = edit(B, _env_add(OMP))
    [change] = diff.diff_workload(DT, d, B, LB)
    change.after["value"] = "changed"
    assert d["spec"]["environmentVariables"][-1]["value"] == "8"


def test_one_workload_diff_is_far_under_a_millisecond():
    d = edit(set_path(B, "spec.image", "img:2"), _env_set("HF_HOME", value="/x"))
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        diff.diff_workload(DT, d, B, LB)
    assert (time.perf_counter() - start) / n < 0.001
