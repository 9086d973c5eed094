"""`export` writes the organisation as a team keeps it, through the CLI against `sim serve`
over HTTP: a folder per department under `organisation/`, the department as
`<department>.yaml` and its projects beside it, each access rule and Run:ai policy
beside the unit it scopes (`<unit>.access-<subject>.<role>.yaml`,
`<unit>.policy-<type>.yaml`), the cluster's at `organisation/`'s top.
The examples' organisation exported looks like `specs/organisation/`; `import --all` of
it and the next plan are clean."""

from __future__ import annotations

import json

import yaml

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.constants import ROOT
from tests.helpers.organisation import other_state as _other_state

ORG_KINDS = ("--kind", "Department", "--kind", "Project", "--kind", "AccessRule",
             "--kind", "Policy")


def _files(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.yaml"))


def test_the_examples_organisation_exports_as_its_folder_and_plans_clean(ws, sim_server):
    examples = ROOT / "specs" / "organisation"
    for path in examples.rglob("*.yaml"):
        ws.write(f"organisation/{path.relative_to(examples).as_posix()}", path.read_text())
    res = ws.apply()
    assert res.exit_code == 0, res.output

    out = ws.root / "exported"
    res = _other_state(ws, "export", *ORG_KINDS, "--defaults", "--out", str(out))
    assert res.exit_code == 0, res.output
    # The examples' files, and the seeded department "default" in a folder of its own;
    # the cluster shared by all of them in one `_defaults.yaml`, at the top.
    assert _files(out) == sorted(
        ["_defaults.yaml", "organisation/default/default.yaml",
         *(f"organisation/{f}" for f in _files(examples) if f != "_defaults.yaml")])
    assert yaml.safe_load((out / "_defaults.yaml").read_text()) == {"clusterId": CLUSTER}
    for rel in _files(examples):
        if rel == "_defaults.yaml":
            continue
        example = yaml.safe_load((examples / rel).read_text())
        exported = yaml.safe_load((out / "organisation" / rel).read_text())
        if example["kind"] == "AccessRule":  # the server keeps no handle: its identity's
            assert exported.pop("name") == "nlp-researchers.l1-researcher.project-team-nlp"
            example.pop("name")
        assert exported == example, rel

    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    adopted = json.loads((ws.root / "other.json").read_text())["resources"]
    assert len(adopted) == 6, sorted(adopted)
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes" in res.output


CLUSTER_RULE = organisation.access_rule(
    "admins", subject_id="Platform Admins", role="Editor", scope_type="cluster", scope=None)
DEPARTMENT_POLICY = organisation.policy("workspace", """\
defaults:
  imagePullPolicy: IfNotPresent
""", scope="department", unit="research")
CLUSTER_POLICY = organisation.policy("training", """\
rules:
  compute:
    gpuDevicesRequest: {max: 16}
""", scope="cluster")
PROJECT = organisation.project(deserved=1, department="research", destroyable=True)
DEPARTMENT = organisation.department(deserved=4, destroyable=True)
PROJECT_RULE = organisation.access_rule(
    "team-a-researchers", subject_type="user", subject_id="jane@example.com")

def test_rules_and_policies_alone_are_placed_beside_their_units(ws, sim_server):
    ws.write("research.yaml", DEPARTMENT)
    ws.write("team-a.yaml", PROJECT)
    ws.write("rule.yaml", PROJECT_RULE)
    ws.write("admins.yaml", CLUSTER_RULE)
    ws.write("research-policy.yaml", DEPARTMENT_POLICY)
    ws.write("cluster-policy.yaml", CLUSTER_POLICY)
    res = ws.apply()
    assert res.exit_code == 0, res.output

    # Only the rules and the policies are exported, yet each goes to its unit's folder
    # (the units' collections are read to place them); the cluster's at the top.
    out = ws.root / "exported"
    res = _other_state(ws, "export", "--kind", "AccessRule", "--kind", "Policy",
                       "--out", str(out))
    assert res.exit_code == 0, res.output
    assert _files(out) == [
        "organisation/cluster.access-platform-admins.editor.yaml",
        "organisation/cluster.policy-training.yaml",
        "organisation/research/research.policy-workspace.yaml",
        "organisation/research/team-a.access-jane-example-com.l1-researcher.yaml"]
    rule = yaml.safe_load((out / "organisation" / "research" /
                           "team-a.access-jane-example-com.l1-researcher.yaml").read_text())
    assert (rule["subjectId"], rule["scope"]) == ("jane@example.com", "team-a")

    # With the units: one folder, and the whole of it imports and plans clean.
    res = _other_state(ws, "export", *ORG_KINDS, "--out", str(out), "--force")
    assert res.exit_code == 0, res.output
    assert {"organisation/research/research.yaml", "organisation/research/team-a.yaml"} <= \
        set(_files(out))
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_two_rules_that_would_share_a_file_are_refused_and_nothing_is_written(ws, sim_server):
    ws.write("team-a.yaml", PROJECT.replace("department: research\n", ""))
    ws.write("spaced.yaml", PROJECT_RULE.replace("team-a-researchers", "spaced").replace(
        "subjectType: user\nsubjectId: jane@example.com", "subjectType: group\nsubjectId: ML Team"))
    ws.write("dashed.yaml", PROJECT_RULE.replace("team-a-researchers", "dashed").replace(
        "subjectType: user\nsubjectId: jane@example.com", "subjectType: group\nsubjectId: ml-team"))
    res = ws.apply()
    assert res.exit_code == 0, res.output

    out = ws.root / "exported"
    res = _other_state(ws, "export", *ORG_KINDS, "--out", str(out))
    assert res.exit_code == 1, res.output
    path = out / "organisation" / "default" / "team-a.access-ml-team.l1-researcher.yaml"
    assert f"would both be written to {path}; nothing was written" in res.output, res.output
    assert "Traceback" not in res.output
    assert not out.exists() or not list(out.rglob("*.yaml"))
