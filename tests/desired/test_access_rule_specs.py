"""AccessRule specs as the loader reads them: a strict model with `file:line` errors, its
address in its cluster under the handle the spec gives it, the role and the scope by
name, a scope required for a project or department and refused for a cluster, not
protected by `preventDestroy`, and folder defaults applied as to workloads."""

from __future__ import annotations

import pytest

from reconciler.desired.loader import load_specs
from reconciler.errors import SpecError
from tests.helpers import organisation
from tests.helpers.organisation import CLUSTER

# The leading blank line is the spec's: the lines named in the errors count it.
RULE = "\n" + organisation.access_rule()

def test_a_rule_is_read_with_its_address_in_its_cluster(specdir):
    specdir.write("org/ml-team.yaml", RULE)
    [d] = load_specs(specdir.root)
    assert d.address == f"AccessRule/{CLUSTER}/ml-team-trains"
    assert d.body == {"name": "ml-team-trains", "projectId": CLUSTER, "clusterId": CLUSTER,
                      "subjectType": "group", "subjectId": "ml-team",
                      "role": "L1 researcher", "scopeType": "project", "scope": "team-a"}
    assert d.lifecycle.prevent_destroy is False


def test_a_cluster_scope_names_nothing_and_a_folder_default_gives_the_cluster(specdir):
    specdir.write("org/_defaults.yaml", f"clusterId: {CLUSTER}\n")
    specdir.write("org/alice.yaml", """
        kind: AccessRule
        name: alice.editor.cluster
        subjectType: user
        subjectId: alice@example.com
        role: Editor
        scopeType: cluster
    """)
    [d] = load_specs(specdir.root)
    assert d.address == f"AccessRule/{CLUSTER}/alice.editor.cluster"
    assert "scope" not in d.body and d.body["scopeType"] == "cluster"


@pytest.mark.parametrize("old,new,line,path,words", [
    ("subjectType: group", "subjectType: team", 4, "subjectType", "'group'"),
    ("scopeType: project", "scopeType: tenant", 7, "scopeType", "'cluster'"),
    ("scope: team-a", "scope: Team A", 8, "scope", "must be a DNS-1123 label"),
    ("scope: team-a\n", "", 1, "scope", "is required: the name of the project"),
    ("scopeType: project\nscope: team-a", "scopeType: cluster\nscope: team-a", 8, "scope",
     "is not taken by a cluster scope"),
    ("role: L1 researcher", "roleId: 5", 6, "roleId", "unknown field (did you mean 'role'?)"),
    ("name: ml-team-trains", "name: ML Team", 2, "name",
     "must be lowercase letters, digits, '-' and '.'"),
])
def test_a_bad_field_is_named_with_its_file_and_line(specdir, old, new, line, path, words):
    spec = specdir.write("org/ml-team.yaml", RULE.replace(old, new))
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    problems = exc.value.problems
    assert any(p.startswith(f"{spec}:{line}: {path}: ") and words in p
               for p in problems), problems
