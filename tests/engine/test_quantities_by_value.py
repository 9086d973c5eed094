"""Quantities compare by value in every kind: each field NVIDIA's schemas document as a
Kubernetes quantity, in every container of every kind (the kinds registry's
`quantities`), and a manifest's resources and emptyDir sizes. Another spelling of the
same value (`262144Mi`, `0.25Ti` for `256Gi`) plans nothing; another value plans the
change the user wrote, in the spellings written."""

from __future__ import annotations

import copy

import pytest
import yaml

from reconciler import diff, kinds, quantities

# A keyed list item: keyed by `name` (storage), or `resource` (extendedResources).
ITEM = {"name": "item", "resource": "item", "path": "/item"}
ITEM_KEY = "item"


def _body(holder: str, path: str, value: str) -> dict:
    """A body with `value` at `path` under the container at `holder`."""
    body: dict = {}
    node = body
    segs = (holder.split(".") if holder else []) + path.split(".")
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg.endswith("[]"):
            item = dict(ITEM)
            node[seg[:-2]] = [item]
            node = item
        elif last:
            node[seg] = value
        else:
            node = node.setdefault(seg, {})
    return body


def _diff_path(holder: str, path: str) -> str:
    return ".".join(([holder] if holder else []) + [path]).replace("[]", f"[{ITEM_KEY}]")


ROWS = [(name, holder, path)
        for name, kind in sorted(kinds.KINDS.items())
        for holder, paths in kind.quantities.items() for path in paths]


def _manifest(memory: str, init_cpu: str, shm: str) -> dict:
    pod = {"initContainers": [{"name": "fetch", "image": "busybox:1.36",
                               "resources": {"limits": {"cpu": init_cpu}}}],
           "containers": [{"name": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                           "resources": {"requests": {"memory": memory},
                                         "limits": {"memory": memory, "nvidia.com/gpu": 8}}}],
           "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}]}
    return {"priority": "medium", "manifest": {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "gpt"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": pod}}}}}}


def test_every_container_of_every_flat_kind_has_its_quantities():
    for kind in kinds.KINDS.values():
        if not kind.containers:  # a manifest's are its pod templates'
            continue
        assert set(kind.quantities) == set(kind.containers), kind.name
        assert all(kind.quantities[c] for c in kind.containers), kind.name


def test_the_quantity_fields_are_those_nvidia_s_schemas_document(shared_api_dir):
    """Every property whose schema has the API's quantity pattern, in every workload kind's
    OpenAPI, is a field the registry lists; and it lists no other."""
    pattern = "^([+]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
    found = set()
    for file in ("distributed.yml", "distributed-inferences.yml", "trainings.yml",
                 "workspaces.yml", "inferences.yml", "nim-services.yml"):
        schemas = yaml.safe_load((shared_api_dir / file).read_text())["components"]["schemas"]

        def holds_quantity(prop: dict) -> bool:
            ref = prop.get("$ref", "")
            target = schemas.get(ref.rsplit("/", 1)[-1], {}) if ref else prop
            return target.get("pattern") == pattern

        def walk(node):
            if isinstance(node, dict):
                for name, prop in (node.get("properties") or {}).items():
                    if isinstance(prop, dict) and holds_quantity(prop):
                        found.add(name)
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(schemas)
    listed = {p.rsplit(".", 1)[-1] for p in quantities.FIELDS + quantities.NIM_FIELDS}
    assert found == listed
    assert listed <= kinds.QUANTITY_FIELDS


@pytest.mark.parametrize("name,holder,path", ROWS)
@pytest.mark.parametrize("spelling", ["262144Mi", "0.25Ti", "274877906944", "256Gi "])
def test_another_spelling_of_a_quantity_plans_nothing(name, holder, path, spelling):
    kind = kinds.get(name)
    was, now = _body(holder, path, "256Gi"), _body(holder, path, spelling)
    # The spec respelt, the state and live as applied.
    assert diff.diff_workload(kind, now, was, copy.deepcopy(was)) == []
    # No state (an import, a lost state): the spec against live.
    assert diff.diff_workload(kind, now, None, copy.deepcopy(was)) == []
    # Live respelt by the server: no drift.
    assert diff.diff_workload(kind, was, copy.deepcopy(was), now) == []
    # Without a refresh.
    assert diff.diff_workload(kind, now, was, None) == []


@pytest.mark.parametrize("name,holder,path", ROWS)
def test_another_value_plans_the_change_as_written(name, holder, path):
    kind = kinds.get(name)
    was, now = _body(holder, path, "256Gi"), _body(holder, path, "300Gi")
    changes = diff.diff_workload(kind, now, was, copy.deepcopy(was))
    assert [(c.path, c.before, c.after, c.drift) for c in changes] == [
        (_diff_path(holder, path), "256Gi", "300Gi", False)]
    assert changes[0].forces_replacement == (not kind.is_updatable(changes[0].path))
    # Live changed behind the reconciler's back: drift, in live's own spelling.
    changes = diff.diff_workload(kind, was, copy.deepcopy(was), _body(holder, path, "0.3Ti"))
    assert [(c.before, c.after, c.drift) for c in changes] == [("0.3Ti", "256Gi", True)]


def test_a_whole_compute_added_compares_its_quantities_by_value():
    kind = kinds.TRAINING
    was = {"spec": {"image": "busybox:1.36"}}
    live = {"spec": {"image": "busybox:1.36", "compute": {"cpuMemoryRequest": "1Gi"}}}
    now = {"spec": {"image": "busybox:1.36", "compute": {"cpuMemoryRequest": "1024Mi"}}}
    # The user adds what live already has (in another spelling): nothing to send.
    assert diff.diff_workload(kind, now, was, live) == []


def test_text_that_is_not_a_quantity_compares_as_text():
    kind = kinds.TRAINING
    was = _body("spec", "compute.cpuMemoryRequest", "1Gi")
    now = _body("spec", "compute.cpuMemoryRequest", "1GI")
    assert [c.after for c in diff.diff_workload(kind, now, was, copy.deepcopy(was))] == ["1GI"]


@pytest.mark.parametrize("memory,init_cpu,shm", [
    ("64Gi", "500m", "8Gi"), ("65536Mi", "0.5", "8192Mi"), ("0.0625Ti", "5e-1", "8589934592")])
def test_a_manifest_s_quantities_compare_by_value(memory, init_cpu, shm):
    was = _manifest("64Gi", "500m", "8Gi")
    now = _manifest(memory, init_cpu, shm)
    assert diff.diff_workload(kinds.MANIFEST, now, was, copy.deepcopy(was)) == []
    assert diff.diff_workload(kinds.MANIFEST, was, copy.deepcopy(was), now) == []


def test_a_manifest_s_changed_quantity_is_shown_as_written():
    was = _manifest("64Gi", "500m", "8Gi")
    now = _manifest("64Gi", "500m", "16Gi")
    changes = diff.diff_workload(kinds.MANIFEST, now, was, copy.deepcopy(was))
    assert [(c.path, c.before, c.after) for c in changes] == [(
        "manifest.spec.pytorchReplicaSpecs.Worker.template.spec.volumes[shm].emptyDir.sizeLimit",
        "8Gi", "16Gi")]


@pytest.mark.parametrize("text,expected", [
    ("256Gi", 256 * 2**30), ("262144Mi", 256 * 2**30), ("0.25Ti", 256 * 2**30),
    ("1500m", 1.5), ("2e3", 2000), ("1E-3", 0.001), (".5", 0.5), ("5.", 5), ("+1k", 1000),
    ("100n", 1e-7), ("-8Gi", -8 * 2**30), (8, 8), (0.5, 0.5)])
def test_the_grammar_reads_kubernetes_quantities(text, expected):
    assert quantities.value(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", [
    "8gi", "NaN", "1.5.5Gi", "0x10", "1K", "Gi", "", "1 Gi", "1Gii", "1e", "lots", "inf",
    True, None, float("nan"), [1]])
def test_the_grammar_refuses_what_kubernetes_refuses(text):
    assert quantities.value(text) is None
