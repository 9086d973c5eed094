"""No accidental mass delete: the state remembers the specs folder it was last applied
from, and plan or apply of another folder refuses to delete what no spec of it names
(`apply sec --auto-approve` of a one-spec subfolder once deleted the 12 other workloads),
unless --specs-moved or --prune-others says it is meant. docs/state-backends.md, "The
specs folder"."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http


def spec(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3") -> str:
    return (f"kind: DistributedTraining\nname: {name}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            f"spec:\n  image: {image}\n  distributedFramework: PyTorch\n  numWorkers: 1\n")


TEAM = [f"job-{i:02d}" for i in range(12)]


@pytest.fixture
def repo(ws):
    """The workspace as a git checkout: specs/team holds 12 specs, specs/sec one."""
    (ws.root / ".git").mkdir(parents=True)
    for n in TEAM:
        ws.write(f"team/{n}.yaml", spec(n))
    ws.write("sec/scanner.yaml", spec("scanner"))
    return ws


def live(sim_server) -> list[str]:
    return sorted(w["name"] for w in sim_server.live() if w["phase"] != "Deleting")


def test_apply_of_a_subfolder_refuses_to_delete_the_others_naming_both_folders(repo, sim_server):
    ws = repo
    assert ws.apply().exit_code == 0
    assert ws.state()["specs_folder"]["git"] == "specs"
    assert ws.state()["version"] == 2
    sim_server.clear_requests()
    sec = str(ws.specs / "sec")
    for command in (["apply", sec, "--auto-approve"], ["plan", sec],
                    ["plan", sec, "--out", str(ws.root / "p.plan")]):
        res = ws.cli(*command)
        assert res.exit_code == 1
        assert "Traceback" not in res.output
        (line,) = res.stderr.splitlines()
        assert line.startswith(f"Error: the state {ws.state_path} was last applied from the "
                               f"specs folder specs (from the git top-level), not {sec} "
                               "(specs/sec): this plan would delete 12 workloads that no spec "
                               f"of {sec} names (DistributedTraining/7/job-00, ")
        assert line.endswith("If the specs folder moved, pass --specs-moved; to delete them, "
                             "--prune-others; to act on some workloads only, --target ADDR")
    assert sim_server.writes() == []
    assert not (ws.root / "p.plan").exists()
    assert len(live(sim_server)) == 13

    # --target is no mass delete: it acts on what it names
    res = ws.cli("plan", sec, "--target", "DistributedTraining/7/scanner")
    assert res.exit_code == 0, res.output
    # the recorded folder, given another way, is the same folder
    res = ws.cli("plan", str(ws.specs / "team" / ".."), "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    res = ws.cli("apply", sec, "--auto-approve", "--prune-others")
    assert res.exit_code == 0, res.output
    assert "12 deleted" in res.output
    assert live(sim_server) == ["scanner"]
    assert ws.state()["specs_folder"]["git"] == "specs/sec"  # the state follows it now
    assert ws.cli("plan", sec, "--detailed-exitcode").exit_code == 0


def test_a_moved_folder_is_refused_until_specs_moved_says_so(repo, sim_server):
    ws = repo
    assert ws.apply().exit_code == 0
    moved = ws.root / "workloads"
    shutil.move(str(ws.specs), moved)
    (moved / "team" / "job-00.yaml").unlink()  # and one spec removed on the way
    res = ws.cli("apply", str(moved), "--auto-approve")
    assert res.exit_code == 1
    assert "last applied from the specs folder specs (from the git top-level)" in res.stderr
    assert "would delete 1 workload that no spec of" in res.stderr
    res = ws.cli("apply", str(moved), "--auto-approve", "--specs-moved")
    assert res.exit_code == 0, res.output
    assert "1 deleted" in res.output
    assert ws.state()["specs_folder"]["git"] == "workloads"
    (moved / "team" / "job-01.yaml").unlink()  # now the state's own folder: no refusal
    res = ws.cli("apply", str(moved), "--auto-approve")
    assert res.exit_code == 0 and "1 deleted" in res.output


def test_a_checkout_moved_to_another_place_is_the_same_folder(repo, sim_server, tmp_path):
    ws = repo
    assert ws.apply().exit_code == 0
    elsewhere = tmp_path / "runner-2" / "checkout"
    shutil.copytree(ws.root, elsewhere)  # another CI runner: the same repository, elsewhere
    (elsewhere / "specs" / "team" / "job-00.yaml").unlink()
    res = ws.cli("plan", str(elsewhere / "specs"), "--format", "json")
    assert res.exit_code == 0, res.output
    deleted = [rc["address"] for rc in json.loads(res.stdout)["resource_changes"]
               if rc["change"]["actions"] == ["delete"]]
    assert deleted == ["DistributedTraining/7/job-00"]


def test_a_state_that_records_no_folder_adopts_the_first_one(repo, sim_server):
    ws = repo
    assert ws.apply().exit_code == 0
    older = ws.state()
    del older["specs_folder"]
    older["version"] = 1  # as an earlier runai-reconcile wrote it
    ws.state_path.write_text(json.dumps(older))
    team = str(ws.specs / "team")
    res = ws.cli("apply", team, "--auto-approve")
    assert res.exit_code == 0, res.output  # no folder to compare with: as before
    assert "1 deleted" in res.output
    assert ws.state()["specs_folder"]["git"] == "specs/team"
    res = ws.cli("plan", str(ws.specs / "sec"))
    assert res.exit_code == 1 and "not " + str(ws.specs / "sec") in res.stderr


def test_a_saved_plan_made_with_prune_others_records_its_folder_when_applied(repo, sim_server):
    ws = repo
    assert ws.apply().exit_code == 0
    sec, saved = str(ws.specs / "sec"), str(ws.root / "p.plan")
    assert ws.cli("plan", sec, "--prune-others", "--out", saved).exit_code == 0
    res = ws.cli("apply", saved, "--prune-others")
    assert res.exit_code == 1 and "cannot be given with a saved plan" in res.stderr
    res = ws.cli("apply", saved)
    assert res.exit_code == 0, res.output
    assert live(sim_server) == ["scanner"]
    assert ws.state()["specs_folder"]["git"] == "specs/sec"


def test_import_of_a_workload_no_spec_names_warns_that_the_next_apply_deletes_it(
        repo, sim_server, monkeypatch):
    ws = repo
    monkeypatch.chdir(ws.root)
    assert ws.apply().exit_code == 0
    other = ws.root / "other"
    other.mkdir()
    (other / "stray.yaml").write_text(spec("stray"))
    elsewhere = ws.root / "state" / "other.json"
    assert ws.cli("--state", str(elsewhere), "apply", str(other), "--auto-approve").exit_code == 0
    wid = json.loads(elsewhere.read_text())["resources"]["DistributedTraining/7/stray"]["workload_id"]

    res = ws.cli("import", "DistributedTraining/7/stray", wid)
    assert res.exit_code == 0, res.output
    assert "Adopted DistributedTraining/7/stray" in res.stdout
    (line,) = res.stderr.splitlines()
    assert line == (f"Warning: no spec in specs names DistributedTraining/7/stray: the next "
                    f"apply of specs would delete workload {wid}; `runai-reconcile export "
                    "--project 7 --kind DistributedTraining --name stray --out specs` writes "
                    "its spec first")

    # with its spec in the folder, no warning
    ws.cli("state", "rm", "DistributedTraining/7/stray")
    ws.write("team/stray.yaml", spec("stray"))
    res = ws.cli("import", "DistributedTraining/7/stray", wid)
    assert res.exit_code == 0 and res.stderr == ""
