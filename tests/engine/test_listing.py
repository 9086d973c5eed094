"""`listing`, what the list-first refresh decides from the workload list: which scopes to
list (a kind's list scope as the caller says it), what the list vouches for, what must be
read by GET and what is gone, and what of a list item its fingerprint holds."""

from __future__ import annotations

from types import SimpleNamespace

from reconciler import listing


def _known(kind="Training", project="7", cluster="c1", workload_id="w1", listed=None):
    return SimpleNamespace(kind=kind, project_id=project, cluster_id=cluster,
                           workload_id=workload_id, listed=listed)


def _wanted(address, cluster="c1"):
    kind, project, name = address.split("/")
    return SimpleNamespace(address=address, kind=kind, name=name, project_id=project,
                           cluster_id=cluster, listed_name=name)


def _item(workload_id, name, phase="Running", project="7", **more):
    return {"id": workload_id, "name": name, "projectId": project, "phase": phase,
            "updatedAt": "2026-01-01T00:00:00Z", **more}


def _by_project(kind: str, project_id: str, cluster_id: str | None) -> tuple[str, str]:
    """A list scope as the registry gives it: NIM services are listed by project alone."""
    return project_id, "" if kind == "NIMService" else (cluster_id or "")


def test_the_scopes_follow_the_kinds_list_scope_and_new_ones_come_second():
    known = [_known(), _known(workload_id="w2"), _known(kind="NIMService", cluster="c9"),
             _known(project="8", cluster="c2")]
    wanted = [_wanted("Training/7/a"), _wanted("NIMService/7/n", cluster="c3"),
              _wanted("Training/9/b", cluster="c1")]
    first, more = listing.scopes(known, wanted, _by_project)
    assert first == {("7", "c1"): 2, ("7", ""): 1, ("8", "c2"): 1}
    assert more == {("9", "c1"): 1}  # the NIM service's scope is already listed


def test_a_known_workload_is_vouched_for_read_or_gone_by_its_list_item():
    items = [_item("w1", "same"), _item("w2", "moved"), _item("w3", "deleting", "Deleting"),
             _item("w9", "other")]
    fp = {i["id"]: listing.fingerprint(i) for i in items}
    known = {"Training/7/same": _known(workload_id="w1", listed=fp["w1"]),
             "Training/7/moved": _known(workload_id="w2", listed="an older one"),
             "Training/7/deleting": _known(workload_id="w3", listed=fp["w3"]),
             "Training/7/missing": _known(workload_id="w4", listed="x")}
    choice = listing.choose(known, items)
    assert choice.vouched == {"Training/7/same": "Running"}
    assert choice.read == [listing.Read("Training/7/moved", "Training", "w2", "Running")]
    assert sorted(choice.gone) == ["Training/7/deleting", "Training/7/missing"]
    assert choice.fingerprints == {"Training/7/same": fp["w1"], "Training/7/moved": fp["w2"]}


def test_a_new_address_is_read_when_the_list_holds_its_name_else_gone():
    items = [_item("w5", "found", "Pending"), _item("w6", "leaving", "Deleting"),
             _item("w7", "found", project="8")]
    wanted = {a: _wanted(a) for a in ("Workspace/7/found", "Workspace/7/leaving",
                                      "Workspace/7/absent")}
    known = {"Training/7/lost": _known(workload_id=None)}  # in the state, no id, no spec
    choice = listing.choose(known, items, wanted)
    assert choice.read == [listing.Read("Workspace/7/found", "Workspace", "w5", "Pending")]
    assert choice.found == {"Workspace/7/found": "w5"}
    assert sorted(choice.gone) == ["Training/7/lost", "Workspace/7/absent",
                                   "Workspace/7/leaving"]
    assert set(choice.fingerprints) == {"Workspace/7/found"} and not choice.vouched


def test_the_fingerprint_ignores_the_phase_and_moves_with_updated_at_and_images():
    item = {"id": "w1", "updatedAt": "2026-01-01T00:00:00.000Z", "images": ["a:1"],
            "phase": "Creating", "runningPods": 0}
    fp = listing.fingerprint(item)
    assert listing.fingerprint(dict(item, phase="Running", runningPods=2)) == fp
    assert listing.fingerprint(dict(item, updatedAt="2026-01-01T00:00:00.001Z")) != fp
    assert listing.fingerprint(dict(item, images=["a:2"])) != fp
    assert listing.fingerprint(dict(item, id="w2")) != fp


def test_fingerprints_recorded_by_an_earlier_version_still_vouch():
    """Items of every shape the API answers keep the fingerprint the state recorded before
    orjson wrote the text (json.dumps, keys sorted, compact, ASCII): an upgrade does not
    send a GET for every workload."""
    import hashlib
    import json

    items = [
        _item("w1", "train-1", images=["nvcr.io/nvidia/pytorch:24.05-py3"], priority=None,
              podsRequestedResources={"gpu": {"request": 8}, "cpuMemory": {"request": "256Gi"}},
              preemptible=False, allocatedGPU=0.5, labels=[{"z": 1, "a": [True, None]}]),
        _item("w2", "déjà-vu", description="naïve – “quoted”"),  # not ASCII
        _item("w3", "escapes", note='tab\t "quote" back\\slash \u0001 \u2028'),
        _item("w4", "big", tenantId=2**70, floor=-(2**63) - 1),  # beyond 64 bits
        _item("w5", "floats", a=1e16, b=123456.789, c=1e22),
    ]
    for item in items:
        kept = {k: v for k, v in item.items() if k not in listing.VOLATILE}
        text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
        assert listing.fingerprint(item) == hashlib.blake2b(
            text.encode(), digest_size=16).hexdigest(), item["id"]


def test_items_cut_as_they_arrive_give_the_same_choice_as_whole_ones():
    """`cut_to`: the state's workloads' items are held at a few fields (not the whole
    item, images and all), and `choose` decides from them as from the whole items; an item
    the state does not know is kept whole (a new spec may be found in it by name)."""
    images = {"images": ["nvcr.io/nvidia/pytorch:24.05-py3"], "category": "Train"}
    items = [_item("w1", "same", **images), _item("w2", "moved", **images),
             _item("w3", "deleting", "Deleting"), _item("w5", "found", "Pending", **images)]
    fp = {i["id"]: listing.fingerprint(i) for i in items}
    known = {"Training/7/same": _known(workload_id="w1", listed=fp["w1"]),
             "Training/7/moved": _known(workload_id="w2", listed="an older one"),
             "Training/7/deleting": _known(workload_id="w3", listed=fp["w3"]),
             "Training/7/lost": _known(workload_id=None)}
    wanted = {"Training/7/found": _wanted("Training/7/found")}
    cut = listing.cut_to(known.values())
    held = [cut(i) for i in items]
    assert [set(h) for h in held[:3]] == [{"id", "name", "projectId", "phase"}] * 3
    assert held[3] is items[3]
    assert listing.choose(known, held, wanted) == listing.choose(known, items, wanted)
    assert listing.choose(known, held, wanted).fingerprints["Training/7/moved"] == fp["w2"]


def test_a_remembered_fingerprint_is_the_one_the_item_has():
    """`cut_to(remember=)` (a watch's cycles over one state): an item whose text less its
    volatile fields is the last list's takes the fingerprint remembered; one that moved,
    or came with its keys in another order, has its own made again; at most one entry an
    id of the state."""
    images = {"images": ["nvcr.io/nvidia/pytorch:24.05-py3"], "tenantId": 2 ** 70}
    items = [_item("w1", "same", runningPods=1, totalRunningTimeSeconds=10),
             _item("w2", "moved"), _item("w3", "big", **images), _item("w9", "other")]
    known = [_known(workload_id=w) for w in ("w1", "w2", "w3")]
    remember: dict = {}
    cut = listing.cut_to(known, remember=remember)
    first = [cut(dict(i)) for i in items]
    assert set(remember) == {"w1", "w2"}  # w3's integer beyond 64 bits: made each time
    later = [dict(items[0], runningPods=2, totalRunningTimeSeconds=12, phase="Pending"),
             dict(items[1], updatedAt="2026-01-02T00:00:00Z"),
             dict(items[2]), dict(items[3])]
    again = [cut(dict(i)) for i in later]
    assert [h.fingerprint for h in first[:3]] == [listing.fingerprint(i) for i in items[:3]]
    assert [h.fingerprint for h in again[:3]] == [listing.fingerprint(i) for i in later[:3]]
    assert again[0].fingerprint == first[0].fingerprint and again[0]["phase"] == "Pending"
    assert again[1].fingerprint != first[1].fingerprint
    reordered = dict(reversed(list(later[1].items())))
    assert cut(reordered).fingerprint == listing.fingerprint(later[1])
    assert set(remember) == {"w1", "w2"}
