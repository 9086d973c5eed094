"""Known bad inputs give one `Error:` line (or the list of spec problems) and exit 1, never
a traceback. The CLI runs in this process (`invoke`), where an exception it let out would
fail the test; one case runs as a real process too, whose stderr is read for a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[2]
HEAD = ("kind: Training\nname: t1\nprojectId: \"1\"\n"
        "clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210\n")


def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return invoke(cwd, *args, **env)


def run_a_process(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    return subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=cwd,
                          env={**base, "NO_COLOR": "1", **env}, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def one_error(res: subprocess.CompletedProcess) -> str:
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "Traceback" not in out and "set_int_max_str_digits" not in out, out
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, out
    return res.stderr


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_an_integer_too_long_for_python_is_a_spec_error(tmp_path, suffix):
    (tmp_path / "specs").mkdir()
    digits = "9" * 5000
    if suffix == "yaml":
        text = HEAD + f"spec:\n  image: busybox\n  compute:\n    gpuDevicesRequest: {digits}\n"
    else:
        text = ('{"kind": "Training", "name": "t1", "projectId": "1", "clusterId": '
                '"71f69d83-ba66-4822-adf5-55ce55efd210", "spec": {"image": "b", '
                f'"compute": {{"gpuDevicesRequest": {digits}}}}}}}')
    (tmp_path / "specs" / f"t.{suffix}").write_text(text)
    err = one_error(run(tmp_path, "validate", "specs"))
    assert "too long" in err and digits not in err
    if suffix == "yaml":
        assert "specs/t.yaml:8: spec.compute.gpuDevicesRequest: an integer of 5000 digits" in err


def test_a_real_process_prints_one_error_line_and_no_traceback(tmp_path):
    """What only a process shows: its own exit code, and stderr as the terminal gets it."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "t.yaml").write_text(
        HEAD + "spec:\n  image: busybox\n  compute:\n    gpuDevicesRequest: " + "9" * 5000 + "\n")
    err = one_error(run_a_process(tmp_path, "validate", "specs"))
    assert "specs/t.yaml:8: spec.compute.gpuDevicesRequest: an integer of 5000 digits" in err
    shutil.copytree(ROOT / "specs", tmp_path / "specs", dirs_exist_ok=True)
    (tmp_path / "specs" / "t.yaml").unlink()
    assert "Run:ai URL" in one_error(run_a_process(tmp_path, "--url", "http://[::1", "plan",
                                                   RUNAI_TOKEN="t"))


@pytest.mark.parametrize("url", ["http://h:99999", "http://[::1", "http://", "http://h:port",
                                 "https://:443"])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_malformed_url_is_one_error_line(tmp_path, url, how):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    if how == "flag":
        res = run(tmp_path, "--url", url, "plan", RUNAI_TOKEN="t")
    else:
        res = run(tmp_path, "plan", RUNAI_TOKEN="t", RUNAI_URL=url)
    err = one_error(res)
    assert "Run:ai URL" in err and url in err


@pytest.mark.parametrize("damage", ["corrupt", "not-an-object", "a-file"])
def test_broken_sim_data_is_one_error_line(tmp_path, damage):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    sim = tmp_path / ".runai-sim"
    if damage == "a-file":
        sim.write_text("x")
    else:
        sim.mkdir()
        (sim / "data.json").write_text("{bad" if damage == "corrupt" else "[1, 2]")
    err = one_error(run(tmp_path, "--sim", "plan"))
    assert ".runai-sim" in err


def _damaged(doc: dict) -> list[tuple[str, dict]]:
    def change(**fields) -> dict:
        d = json.loads(json.dumps(doc))
        d["changes"][0].update(fields)
        return d

    out = [("resource_changes-null", {**doc, "resource_changes": None}),
           ("changes-null", {**doc, "changes": None}),
           ("live-a-list", {**doc, "live": []}),
           ("address-a-number", change(address=5)),
           ("kind-a-list", change(kind=["x"])),
           ("after-a-string", change(after="x")),
           ("sensitive-numbers", change(sensitive=[1])),
           ("field-path-a-number", change(changes=[{"path": 3, "before": 1, "after": 2}]))]
    return out


def test_a_plan_file_with_wrong_types_is_one_error_line_naming_it(tmp_path):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    made = run(tmp_path, "--sim", "plan", "--out", "plan.json")
    assert made.returncode == 0, made.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    for name, bad in _damaged(doc):
        (tmp_path / f"{name}.json").write_text(json.dumps(bad))
        for args in (["show", f"{name}.json"], ["--sim", "apply", f"{name}.json"]):
            res = run(tmp_path, *args)
            if name == "resource_changes-null":  # an unknown key: the plan still reads
                assert "Traceback" not in res.stdout + res.stderr
                continue
            assert f"{name}.json" in one_error(res), (name, args)


TOO_LONG = "9" * 5000  # beyond Python's 4,300-digit int-to-str limit


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_journal_line_with_an_integer_too_long_for_python_follows_the_journal_rules(tmp_path, where):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    assert run(tmp_path, "--sim", "apply", "--auto-approve").returncode == 0
    state = tmp_path / "state" / "state.json"
    lineage = json.loads(state.read_text())["lineage"]
    lines = [json.dumps({"journal": 1, "lineage": lineage}),
             '{"op": "close", "seq": ' + TOO_LONG + "}"]
    if where == "middle":
        lines.append('{"op": "close", "seq": 3}')
    (tmp_path / "state" / "state.json.journal").write_text("\n".join(lines) + "\n")
    for args in (["state", "list"], ["--sim", "plan"], ["--sim", "drift"]):
        res = run(tmp_path, *args)
        if where == "middle":  # a garbled record before others: the journal is corrupt
            assert "state.json.journal line 2 is corrupt" in one_error(res), args
        else:  # a garbled last line is taken as torn by a crash: ignored
            assert res.returncode == 0, (args, res.stderr)
            assert "Traceback" not in res.stdout + res.stderr
