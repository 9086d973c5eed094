"""Department and Project specs as the loader reads them: strict models with `file:line`
errors, no project asked of them (their address holds the cluster), `preventDestroy` on
unless the spec opts out, and folder defaults applied as to workloads."""

from __future__ import annotations

import pytest

from reconciler.desired.loader import load_specs
from reconciler.errors import SpecError
from tests.helpers import organisation
from tests.helpers.organisation import CLUSTER

# The leading blank line is the spec's: the lines named in the errors count it.
PROJECT = "\n" + organisation.project(department="research", pools={
    "a100": "gpu: {deserved: 2, limit: 4}\nmemory: {deserved: 1000, units: MB}"})

def test_a_project_is_read_with_its_address_in_its_cluster_and_protected(specdir):
    specdir.write("org/team-a.yaml", PROJECT)
    [d] = load_specs(specdir.root)
    assert d.address == f"Project/{CLUSTER}/team-a"
    assert d.body["resources"] == {"a100": {"gpu": {"deserved": 2, "limit": 4},
                                            "memory": {"deserved": 1000, "units": "MB"}}}
    assert d.body["department"] == "research"
    assert d.lifecycle.prevent_destroy is True


def test_preventdestroy_false_is_the_opt_out(specdir):
    specdir.write("org/team-a.yaml", PROJECT + "lifecycle: {preventDestroy: false}\n")
    [d] = load_specs(specdir.root)
    assert d.lifecycle.prevent_destroy is False


def test_a_folder_default_gives_the_cluster(specdir):
    specdir.write("org/_defaults.yaml", f"clusterId: {CLUSTER}\n")
    specdir.write("org/research.yaml", """
        kind: Department
        name: research
        resources:
          default:
            gpu: {deserved: 8}
    """)
    [d] = load_specs(specdir.root)
    assert d.address == f"Department/{CLUSTER}/research" and d.lifecycle.prevent_destroy


@pytest.mark.parametrize("replace,line,path,words", [
    ("gpu: {deserved: 2, limit: 4}", 7, "resources.a100.gpu.deserved",
     "required field is missing"),
    ("    memory: {deserved: 1000, units: MB}", 8, "resources.a100.colour", "unknown field"),
    ("department: research", 4, "department", "must be a DNS-1123 label"),
    ("units: MB", 8, "resources.a100.memory.units", "'Mib', 'MB' or 'GB'"),
])
def test_a_bad_field_is_named_with_its_file_and_line(specdir, replace, line, path, words):
    new = {"gpu: {deserved: 2, limit: 4}": "gpu: {limit: 4}",
           "    memory: {deserved: 1000, units: MB}": "    colour: red",
           "department: research": "department: Research Team",
           "units: MB": "units: TB"}[replace]
    spec = specdir.write("org/team-a.yaml", PROJECT.replace(replace, new))
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert problem.startswith(f"{spec}:{line}: {path}: "), problem
    assert words in problem, problem


def test_a_quota_takes_a_rank_in_the_place_of_a_priority(specdir):
    specdir.write("org/team-a.yaml", PROJECT + "    rank: MediumHigh\n")
    [d] = load_specs(specdir.root)
    assert d.body["resources"]["a100"]["rank"] == "MediumHigh"


def test_a_quota_with_both_a_priority_and_a_rank_is_refused_naming_the_rank(specdir):
    spec = specdir.write("org/team-a.yaml", PROJECT + "    priority: High\n    rank: High\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert problem == (f"{spec}:10: resources.a100.rank: is not taken with priority: a "
                       "quota has a priority (Run:ai 2.x) or a rank (3.0), not both"), problem
