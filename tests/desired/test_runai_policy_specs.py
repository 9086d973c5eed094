"""Run:ai policy specs (`kind: Policy`, not this tool's --policy rules) as the loader
reads them: addressed by scope and workload type, their department or project by name,
strict at the top and one level into `defaults` and `rules` (the workload type's fields,
with a did-you-mean), each error naming the file, line and field."""

from __future__ import annotations

import pytest

from reconciler.desired.loader import load_specs
from reconciler.errors import SpecError
from tests.helpers import organisation
from tests.helpers.organisation import CLUSTER

UUID = "11111111-2222-4333-8444-555555555555"
# The leading blank line is the spec's: the lines named in the errors count it.
POLICY = "\n" + organisation.policy("training", f"""\
defaults:
  compute: {{gpuDevicesRequest: 1}}
rules:
  compute:
    gpuDevicesRequest: {{min: 1, max: 4}}
imposedAssets: [{UUID}]
""")

def test_a_project_policy_is_addressed_by_its_scope_and_type(specdir):
    specdir.write("team-a/policy.yaml", POLICY)
    [d] = load_specs(specdir.root)
    assert d.address == "Policy/project:team-a/training"
    assert d.body == {"name": "training", "projectId": "project:team-a", "clusterId": CLUSTER,
                      "defaults": {"compute": {"gpuDevicesRequest": 1}},
                      "rules": {"compute": {"gpuDevicesRequest": {"min": 1, "max": 4}}},
                      "imposedAssets": [UUID]}
    # Not protected by default (deleting a policy takes nothing with it).
    assert d.lifecycle.prevent_destroy is False


@pytest.mark.parametrize("doc,address", [
    ("kind: Policy\nworkloadType: workspace\nscope: tenant\n", "Policy/tenant/workspace"),
    (f"kind: Policy\nworkloadType: inference\nscope: cluster\nclusterId: {CLUSTER}\n",
     f"Policy/cluster:{CLUSTER}/inference"),
    (f"kind: Policy\nworkloadType: distributed\nscope: department\ndepartment: research\n"
     f"clusterId: {CLUSTER}\ndefaults: {{worker: {{numWorkers: 2}}, master: {{}}}}\n"
     f"imposedAssets: {{master: [{UUID}]}}\n",
     "Policy/department:research/distributed"),
])
def test_every_scope_has_its_address(specdir, doc, address):
    specdir.write("p.yaml", doc)
    [d] = load_specs(specdir.root)
    assert d.address == address


@pytest.mark.parametrize("replace,new,line,path,words", [
    ("defaults:", "defualts:", 6, "defualts", "unknown field (did you mean 'defaults'?)"),
    ("  compute: {gpuDevicesRequest: 1}", "  compte: {gpuDevicesRequest: 1}", 7,
     "defaults.compte", "not a field this workload type's policy sets (did you mean "
     "'compute'?)"),
    ("  compute:\n    gpuDevicesRequest: {min: 1, max: 4}", "  compute: 4", 9,
     "rules.compute", "must be a mapping of rules"),
    ("workloadType: training", "workloadType: job", 2, "workloadType", "must be one of"),
    ("project: team-a", "project: Team A", 4, "project", "DNS-1123"),
    # A field that is missing is named at its document's first line.
    (f"clusterId: {CLUSTER}\n", "", 1, "clusterId", "is required with scope project"),
    ("project: team-a\n", "", 1, "project", "is required with scope project"),
    ("scope: project", "scope: cluster", 4, "project", "is only for scope project"),
    (f"imposedAssets: [{UUID}]", f"imposedAssets: {{worker: [{UUID}]}}", 11, "imposedAssets",
     "must be a list of data source ids"),
    (f"imposedAssets: [{UUID}]", "imposedAssets: [not-a-uuid]", 11, "imposedAssets[0]",
     "must be a data source's id (a UUID), got 'not-a-uuid'"),
])
def test_a_bad_field_is_named_with_its_file_and_line(specdir, replace, new, line, path, words):
    assert replace in POLICY
    spec = specdir.write("team-a/policy.yaml", POLICY.replace(replace, new))
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert problem.startswith(f"{spec}:{line}: {path}: "), problem
    assert words in problem, problem


def test_a_distributed_policy_checks_its_master_and_worker_fields(specdir):
    spec = specdir.write("p.yaml", f"""
        kind: Policy
        workloadType: distributed
        scope: cluster
        clusterId: {CLUSTER}
        rules:
          worker:
            numWorkrs: {{max: 8}}
    """)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert problem.startswith(f"{spec}:") and "rules.worker.numWorkrs" in problem, problem
    assert "did you mean 'numWorkers'?" in problem, problem


def test_a_nim_policy_imposes_no_assets(specdir):
    specdir.write("p.yaml", f"kind: Policy\nworkloadType: nimService\nscope: tenant\n"
                            f"imposedAssets: [{UUID}]\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert "imposedAssets: is not set by a nimService policy" in problem, problem


def test_every_unknown_field_of_defaults_and_rules_is_reported_at_once(specdir):
    spec = specdir.write("p.yaml", f"""
        kind: Policy
        workloadType: workspace
        scope: cluster
        clusterId: {CLUSTER}
        defaults:
          imagePulPolicy: Always
          compute: {{gpuDevicesRequest: 1}}
        rules:
          imag: {{required: true}}
          compute: 4
    """)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f"{spec}:6: defaults.imagePulPolicy: is not a field this workload type's policy "
        "sets (did you mean 'imagePullPolicy'?)",
        f"{spec}:9: rules.imag: is not a field this workload type's policy sets (did you "
        "mean 'image'?)",
        f"{spec}:10: rules.compute: must be a mapping of rules (required, canEdit, min, "
        "max, ...)"]
