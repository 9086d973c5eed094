"""Property tests of the three-way diff over generated create bodies (hypothesis)."""

from __future__ import annotations

import copy

from deepdiff import DeepDiff
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import diff, kinds

from tests.helpers.builders import CLUSTER, DI, DT

# Generating nested bodies is the slow part: small pools of names keep it fast.
FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = st.sampled_from(["data", "ckpt", "team", "bert", "llama-70b", "cache", "logs", "a1"])
ENV_NAMES = st.sampled_from(["HF_HOME", "NCCL_DEBUG", "WANDB_API_KEY", "OMP_NUM_THREADS",
                             "HF_TOKEN", "VLLM_PORT", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"])
TEXT = st.text("abcxyz019-._/", min_size=1, max_size=8)
CAPS = ["SYS_PTRACE", "IPC_LOCK", "NET_ADMIN", "SYS_ADMIN", "CHOWN", "KILL"]


def _unique_by(key):
    return lambda items: len({key(i) for i in items}) == len(items)


env_item = st.one_of(
    st.builds(lambda n, v: {"name": n, "value": v}, ENV_NAMES, TEXT),
    st.builds(lambda n, s: {"name": n, "secret": {"name": s, "key": "token"}}, ENV_NAMES, NAMES),
)
env_list = st.lists(env_item, max_size=6, unique_by=lambda e: e["name"])
label_list = st.lists(st.builds(lambda n, v: {"name": n, "value": v}, NAMES, TEXT),
                      max_size=4, unique_by=lambda e: e["name"])
pvc_list = st.lists(
    st.builds(lambda n, p, ro: {"name": n, "path": "/" + p, "existingPvc": True,
                                "claimName": n + "-pvc", "readOnly": ro},
              NAMES, NAMES, st.booleans()),
    max_size=3, unique_by=lambda e: e["name"])
compute = st.fixed_dictionaries({}, optional={
    "gpuDevicesRequest": st.integers(0, 8),
    "cpuCoreRequest": st.one_of(st.integers(0, 64), st.floats(0, 64, allow_nan=False)),
    "cpuMemoryRequest": st.sampled_from(["16G", "64G", "200Gi"]),
    "largeShmRequest": st.booleans(),
})
container = {
    "image": st.sampled_from(["nvcr.io/nvidia/pytorch:24.05-py3", "vllm/vllm-openai:v0.6.3",
                              "horovod/horovod:0.28.1"]),
    "command": TEXT,
    "compute": compute,
    "environmentVariables": env_list,
    "labels": label_list,
    "nodePools": st.lists(NAMES, max_size=3, unique=True),
    "security": st.fixed_dictionaries({}, optional={
        "capabilities": st.lists(st.sampled_from(CAPS), max_size=4, unique=True),
        "runAsUid": st.integers(0, 2000)}),
}
dt_spec = st.fixed_dictionaries(
    {"image": container["image"]},
    optional={**{k: v for k, v in container.items() if k != "image"},
              "numWorkers": st.integers(1, 16),
              "distributedFramework": st.sampled_from(["PyTorch", "MPI", "TF", "JAX"]),
              "storage": st.fixed_dictionaries({"pvc": pvc_list})})
leader = st.fixed_dictionaries({"image": container["image"]},
                               optional={k: container[k] for k in
                                         ("command", "compute", "environmentVariables")})


@st.composite
def dt_bodies(draw):
    return {"name": draw(NAMES), "projectId": str(draw(st.integers(1, 99))),
            "clusterId": CLUSTER, "spec": draw(dt_spec),
            "masterSpecSameAsWorker": draw(st.booleans())}


@st.composite
def di_bodies(draw):
    spec = {"replicas": draw(st.integers(0, 10)), "workers": draw(st.integers(0, 4)),
            "leader": draw(leader), "servingPort": {"port": draw(st.integers(1, 65535))}}
    if spec["workers"]:
        spec["worker"] = draw(leader)
    return {"name": draw(NAMES), "projectId": "7", "clusterId": CLUSTER, "spec": spec}


bodies = st.one_of(st.tuples(st.just(DT), dt_bodies()), st.tuples(st.just(DI), di_bodies()))


def _containers(body):
    spec = body["spec"]
    return [c for c in (spec, spec.get("leader"), spec.get("worker")) if isinstance(c, dict)]


def _permute_keyed(body, rnd):
    """A copy with every keyed and set-like list shuffled (nodePools left in order)."""
    out = copy.deepcopy(body)
    for c in _containers(out):
        for field in ("environmentVariables", "labels"):
            if field in c:
                rnd.shuffle(c[field])
        if "capabilities" in c.get("security", {}):
            rnd.shuffle(c["security"]["capabilities"])
        if "pvc" in c.get("storage", {}):
            rnd.shuffle(c["storage"]["pvc"])
    return out


def _as_floats(body):
    """A copy with every integer (not boolean) turned into the equal float."""
    if isinstance(body, dict):
        return {k: _as_floats(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_as_floats(v) for v in body]
    if isinstance(body, int) and not isinstance(body, bool):
        return float(body)
    return body


@FAST
@given(bodies)
def test_a_body_diffed_with_itself_is_empty(kb):
    kind, body = kb
    assert diff.diff_workload(kind, body, body, body) == []
    assert diff.diff_workload(kind, body, None, body) == []
    assert diff.diff_workload(kind, body, body, None) == []


@FAST
@given(bodies, st.randoms(use_true_random=False))
def test_reordering_keyed_lists_is_no_change(kb, rnd):
    kind, body = kb
    assert diff.diff_workload(kind, _permute_keyed(body, rnd), body, body) == []
    assert diff.diff_workload(kind, body, body, _permute_keyed(body, rnd)) == []


@FAST
@given(bodies, st.randoms(use_true_random=False))
def test_equal_bodies_after_independent_permutations_give_no_change(kb, rnd):
    kind, body = kb
    d, l, r = (_permute_keyed(body, rnd) for _ in range(3))
    assert diff.diff_workload(kind, d, l, r) == []
    assert diff.diff_workload(kind, d, None, r) == []


@FAST
@given(bodies)
def test_integers_and_equal_floats_are_no_change(kb):
    kind, body = kb
    assert diff.diff_workload(kind, body, body, _as_floats(body)) == []


extra_spec_fields = st.dictionaries(
    st.sampled_from(["backoffLimit", "slotsPerWorker", "restartPolicy", "priorityClass",
                     "workingDir", "startupPolicy", "terminationGracePeriodSeconds"]),
    st.one_of(st.integers(0, 100), TEXT), max_size=4)
read_only = st.fixed_dictionaries({
    "workloadId": st.uuids().map(str), "createdBy": TEXT, "desiredPhase":
    st.sampled_from(["Running", "Stopped"]), "actualPhase": st.sampled_from(
        ["Running", "Pending", "Completed", "Stopped"])})


def _with_server_values(kind, body, ro):
    """`body` as the server answers it: its read-only fields, and the defaults it fills in
    (CONTRACT.md §5: each container's image pull policy by its tag, the workload type's
    priority class and preemptibility)."""
    live = copy.deepcopy(body)
    live.update(ro)
    for c in _containers(live):
        if "image" in c:
            c.setdefault("imagePullPolicy", "Always" if kinds.image_tag(c["image"])[0] ==
                         "latest" else "IfNotPresent")
    live["spec"].setdefault("priorityClass", "train" if kind is DT else "inference")
    return live


@FAST
@given(bodies, read_only)
def test_server_values_only_in_live_never_cause_changes(kb, ro):
    kind, body = kb
    live = _with_server_values(kind, body, ro)
    assert diff.diff_workload(kind, body, body, live) == []
    assert diff.diff_workload(kind, body, None, live) == []
    # the quick path takes it (and the full walk agrees)
    assert diff._quiet(kind, body, body, live) and diff._walk(kind, body, body, live, ()) == []


@FAST
@given(bodies, extra_spec_fields, read_only,
       st.lists(env_item, max_size=2, unique_by=lambda e: e["name"]))
def test_fields_only_in_live_are_additions_and_removing_them_is_no_change(kb, extra, ro,
                                                                          injected):
    """Fields and list items neither the spec nor the state holds, which are not the
    server's, are drift added outside runai-reconcile: each one reported, its path naming
    it, and live without them has no drift. Without a state there is nothing to tell
    them by (first run, lost state): D's paths only."""
    kind, body = kb
    live = _with_server_values(kind, body, ro)
    for k, v in extra.items():
        live["spec"].setdefault(k, v)
    known = {e["name"] for c in _containers(body) for e in c.get("environmentVariables", [])}
    added_env = set()
    for path, c in zip(("spec", "spec.leader", "spec.worker"), _containers(live)):
        new = [e for e in injected if e["name"] not in known]
        c.setdefault("environmentVariables", []).extend(new)
        added_env |= {f"{path}.environmentVariables[{e['name']}]" for e in new}
    changes = diff.diff_workload(kind, body, body, live)
    assert all(c.added and c.drift and c.after is None for c in changes), changes
    assert added_env <= {c.path for c in changes}
    assert diff._quiet(kind, body, body, live) is (not changes)
    assert diff.diff_workload(kind, body, None, live) == []
    cleaned = copy.deepcopy(live)
    for c in changes:
        diff._put(cleaned, diff._segments(c.path), diff._MISSING)
    assert diff.diff_workload(kind, body, body, cleaned) == []


@FAST
@given(bodies, bodies, bodies, st.randoms(use_true_random=False))
def test_the_quick_path_says_unchanged_only_when_the_walk_finds_nothing(kb1, kb2, kb3, rnd):
    """D, L, R drawn apart, or L and R made from D by permuting lists, turning integers
    into floats or booleans into integers: `_quiet` never hides a change the walk sees."""
    kind = kb1[0]
    d = kb1[1]
    pool = [d, _permute_keyed(d, rnd), _as_floats(d), _bools_as_ints(d)]
    pool += [b for k, b in (kb2, kb3) if k is kind]
    for applied in pool:
        for live in pool:
            quiet = diff._quiet(kind, d, applied, live)
            if quiet:
                assert diff._walk(kind, d, applied, live, ()) == []
    assert diff._quiet(kind, d, d, d)


def _bools_as_ints(body):
    if isinstance(body, dict):
        return {k: _bools_as_ints(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_bools_as_ints(v) for v in body]
    return int(body) if isinstance(body, bool) else body


@FAST
@given(bodies, bodies)
def test_changes_reported_are_real_and_outside_ignore(kb1, kb2):
    (kind, d), (_, other) = kb1, kb2
    if kind is not kb2[0]:
        other = d
    ignore = ("spec.environmentVariables", "spec.compute.cpuCoreRequest")
    changes = diff.diff_workload(kind, d, other, other, ignore=ignore)
    paths = [c.path for c in changes]
    assert paths == sorted(paths)
    for c in changes:
        assert not diff.is_ignored(c.path, ignore)
        assert c.before != c.after or c.drift
        assert not c.drift  # L == R: every difference is the user's
    if kind is DI:
        for c in changes:
            assert c.forces_replacement == (c.path != "spec.replicas" or c.after is None)


@FAST
@given(bodies, st.sampled_from(["img:a", "img:b"]))
def test_a_changed_image_is_always_reported(kb, image):
    kind, body = kb
    changed = copy.deepcopy(body)
    target = changed["spec"]["leader"] if kind is DI else changed["spec"]
    old = target["image"]
    target["image"] = image
    path = "spec.leader.image" if kind is DI else "spec.image"
    assert [(c.path, c.before, c.after) for c in
            diff.diff_workload(kind, changed, body, body)] == [(path, old, image)]


# --- DeepDiff as an independent oracle ------------------------------------------------
#
# The walk's own rules restated for DeepDiff, not taken from reconciler.diff: null and
# empty values are absent, numbers compare by value, a keyed list is a map from its item
# key (kinds.item_key) to the item, a set list (capabilities) is a set, an ordered list
# (nodePools) or any other list is one value. DeepDiff's paths are then named as the
# plan names them (spec.environmentVariables[HF_HOME].value).

def _for_deepdiff(field, v):
    if isinstance(v, dict):
        out = {k: _for_deepdiff(k, x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x is not None} or None
    if isinstance(v, list):
        items = [_for_deepdiff(field, x) for x in v]
        if not items:
            return None
        if field in kinds.SET_LISTS:
            return set(items)
        keys = [kinds.item_key(field, x) for x in v]
        if field not in kinds.ORDERED_LISTS and None not in keys and len(set(keys)) == len(keys):
            return {f"[{k}]": x for k, x in zip(keys, items)}
        return items
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _dotted(segments):
    """DeepDiff's path (a list of keys) as the plan's dotted path; a change inside a set
    or a list that is one value is a change of the list."""
    out = ""
    for s in segments:
        if not isinstance(s, str):  # a list index, or None for a set's item
            break
        out += s if s.startswith("[") or not out else "." + s
    return out


def _deepdiff_paths(d, l):
    tree = DeepDiff(_for_deepdiff("", l) or {}, _for_deepdiff("", d) or {}, view="tree",
                    threshold_to_diff_deeper=0)  # never one change for two dicts that differ
    return {_dotted(level.path(output_format="list")) for levels in tree.values()
            for level in levels}


@st.composite
def near_bodies(draw, kb):
    """A body of kb's kind near kb's: its spec members taken from kb's or another body's,
    keyed lists shuffled, integers as floats; or simply another body."""
    kind, d = kb
    other = draw(bodies.filter(lambda b: b[0] is kind))[1]
    rnd = draw(st.randoms(use_true_random=False))
    how = draw(st.sampled_from(["other", "mixed", "permuted", "floats"]))
    if how == "other":
        return other
    if how == "permuted":
        return _permute_keyed(d, rnd)
    if how == "floats":
        return _as_floats(d)
    mixed = copy.deepcopy(d)
    for k in set(d["spec"]) | set(other["spec"]):
        if rnd.random() < 0.3:
            if k in other["spec"]:
                mixed["spec"][k] = copy.deepcopy(other["spec"][k])
            else:
                del mixed["spec"][k]
    return _permute_keyed(mixed, rnd)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_paths_of_d_against_l_are_those_deepdiff_finds(data):
    """With live as last applied (or unknown), the changes are where D and L differ."""
    kind, d = kb = data.draw(bodies)
    l = data.draw(near_bodies(kb))
    expected = _deepdiff_paths(d, l)
    assert {c.path for c in diff.diff_workload(kind, d, l, l)} == expected
    assert {c.path for c in diff.diff_workload(kind, d, l, None)} == expected
