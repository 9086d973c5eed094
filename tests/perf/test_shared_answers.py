"""A GET answer takes the parts equal to the state's applied body for its own
(`reads.share_alike`), so that a full refresh of a fleet does not hold a second copy of
every spec: the answer reads exactly as answered, the state's body is untouched, and a
drift deep in a shared body is planned, healed and kept out of the state."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import kinds
from reconciler.live.reads import share_alike

from tests.helpers.workspace import changes_by_address

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import specgen  # noqa: E402

SCALARS = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b", "0.5"])
           | st.sampled_from([0.0, -0.0, 1.0, 2 ** 70]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
                    max_leaves=12)


def _shared(body, like, out: list) -> list:
    """The parts of `body` that are `like`'s own objects (containers only)."""
    if body is like and isinstance(body, (dict, list)):
        out.append(body)
    elif isinstance(body, dict) and isinstance(like, dict):
        for k, v in body.items():
            _shared(v, like.get(k), out)
    elif isinstance(body, list) and isinstance(like, list):
        for v, w in zip(body, like):
            _shared(v, w, out)
    return out


@settings(max_examples=300, deadline=None)
@given(JSON, JSON)
def test_an_answer_reads_as_answered_and_the_state_s_body_is_untouched(answer, applied):
    body, like = copy.deepcopy(answer), copy.deepcopy(applied)
    share_alike(body, like, {})
    assert body == answer
    assert like == applied
    assert json.dumps(body, sort_keys=True) == json.dumps(answer, sort_keys=True)  # 0 not false


def test_what_stays_the_answer_s_own_is_held_small():
    """Its short strings are one object across a refresh's answers; a dict of many keys
    (orjson sizes it for more) is sized as `json` would size it."""
    strings: dict[str, str] = {}
    text = json.dumps({"name": "w", "actualPhase": "Running", "workloadId": "x" * 36,
                       **{f"k{i}": i for i in range(12)}}).encode()
    one, two = orjson.loads(text), orjson.loads(text)
    share_alike(one, {"name": "w"}, strings)
    share_alike(two, {"name": "w"}, strings)
    assert one == two == json.loads(text) and list(one) == list(json.loads(text))
    assert one["actualPhase"] is two["actualPhase"]
    assert one["workloadId"] is not two["workloadId"]  # long: most likely its own
    assert sys.getsizeof(one) == sys.getsizeof(json.loads(text))


def test_an_unchanged_spec_s_parts_are_the_state_s_own():
    applied = {"name": "w", "spec": {"image": "a:1", "compute": {"gpuDevicesRequest": 1},
                                     "environmentVariables": [{"name": "A", "value": "1"},
                                                              {"name": "B", "value": "2"}]}}
    answer = copy.deepcopy(applied)
    answer["spec"]["compute"]["cpuCoreRequest"] = 0.5  # a default the server fills in
    answer["spec"]["environmentVariables"][1]["value"] = "drifted"
    answer["workloadId"] = "w-1"
    share_alike(answer, applied)
    assert answer["spec"] is not applied["spec"]
    assert answer["spec"]["environmentVariables"][0] is applied["spec"]["environmentVariables"][0]
    assert answer["spec"]["environmentVariables"][1] is not applied["spec"]["environmentVariables"][1]
    assert answer["spec"]["environmentVariables"][1]["value"] == "drifted"
    assert applied["spec"]["environmentVariables"][1]["value"] == "2"
    assert answer["spec"]["compute"]["cpuCoreRequest"] == 0.5
    assert "cpuCoreRequest" not in applied["spec"]["compute"]


@pytest.mark.http
def test_a_drift_deep_in_a_shared_body_is_planned_healed_and_kept_out_of_the_state(
        ws, sim_server):
    specgen.write_specs(ws.specs, 8)
    assert ws.apply().exit_code == 0
    before = ws.state()["resources"]
    address, record = next((a, r) for a, r in sorted(before.items())
                           if len(r["applied"].get("spec", {}).get("environmentVariables") or ()) > 2)
    env = copy.deepcopy(record["applied"]["spec"]["environmentVariables"])
    env[1] = {**env[1], "value": "changed-outside"}
    sim_server.admin.patch(f"/_sim/workloads/{record['workload_id']}",
                           json={"spec": {"environmentVariables": env}}).raise_for_status()

    doc = ws.plan_json("--refresh=full")
    acted = {a: c for a, c in changes_by_address(doc).items() if c["action"] != "no-op"}
    assert list(acted) == [address]
    assert [(c["path"], c["before"], c["after"], c["drift"])
            for c in acted[address]["changed_paths"]] == [
        (f"spec.environmentVariables[{env[1]['name']}].value", "changed-outside",
         record["applied"]["spec"]["environmentVariables"][1]["value"], True)]

    assert ws.apply("--refresh=full").exit_code == 0
    after = ws.state()["resources"][address]
    assert after["applied"] == record["applied"]
    path = f"{kinds.get(record['kind']).api_path}/{after['workload_id']}"
    assert sim_server.api("GET", path).json()["spec"]["environmentVariables"] == \
        record["applied"]["spec"]["environmentVariables"]
    doc = ws.plan_json("--refresh=full")
    assert {c["action"] for c in doc["resource_changes"]} == {"no-op"}
