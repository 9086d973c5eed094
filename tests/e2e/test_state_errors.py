"""Mistakes with the state through the CLI: one `Error:` line saying what is wrong, exit 1,
never a traceback, nothing written."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

SPEC = f"""\
kind: DistributedTraining
name: bert-ddp
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  distributedFramework: PyTorch
  numWorkers: 2
"""
WORKLOAD_ID = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"


def one_error_line(res) -> str:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize("below", ["state.json", "sub/state.json"])
@pytest.mark.parametrize("command", ["apply", "import", "plan", "state list"])
def test_a_state_path_below_a_file_is_one_error_line(ws, sim_server, command, below):
    ws.write("a.yaml", SPEC)
    afile = ws.root / "afile"
    afile.write_text("not a folder\n")
    args = {"apply": ["apply", str(ws.specs), "--auto-approve"],
            "import": ["import", "DistributedTraining/7/bert-ddp", WORKLOAD_ID],
            "plan": ["plan", str(ws.specs)], "state list": ["state", "list"]}[command]
    ws.state_path = afile / below
    line = one_error_line(ws.cli(*args))
    assert line == (f"Error: --state {afile / below}: {afile} is a file, not a folder; "
                    "nothing was read or written")
    assert afile.read_text() == "not a folder\n"
    assert sim_server.writes() == []


@pytest.mark.parametrize("serial", ["abc", "0", "-1", "1.5"])
def test_state_restore_of_something_not_a_serial_says_what_a_serial_is(ws, serial):
    line = one_error_line(ws.cli("state", "restore", "--", serial))
    assert line == (f"Error: state restore {serial!r}: expected the serial of a version, a "
                    "positive whole number as `state history` lists it (e.g. state restore 6)")


@pytest.mark.parametrize("command", ["show", "rm"])
def test_state_show_and_rm_of_a_malformed_address_say_it_is_malformed(ws, sim_server, command):
    ws.write("a.yaml", SPEC)
    assert ws.apply().exit_code == 0
    line = one_error_line(ws.cli("state", command, "garbage"))
    assert line.startswith("Error: invalid address 'garbage': expected "
                           "<kind>/<projectId>/<name> with kind one of ")
    line = one_error_line(ws.cli("state", command, "DistributedTraining/7/nope"))
    assert line == "Error: no such address in the state: DistributedTraining/7/nope"
