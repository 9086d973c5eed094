"""Exit codes: 2 means "changes" under --detailed-exitcode, so usage errors must be 1."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from reconciler.cli import main


@pytest.mark.parametrize("args", [
    ["plan", "--detailed-exitcode", "--formt", "json"],
    ["plan", "--format", "yaml"],
    ["drift", "--detailed-exitcode", "--no-such-flag"],
    ["--parallelism", "0", "plan"],
    ["state"],
    ["no-such-command"],
    ["state", "show"],
])
def test_usage_errors_exit_1_not_2(tmp_path, args):
    res = CliRunner().invoke(main, ["--state", str(tmp_path / "s.json"), *args])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["plan", "--help"], ["sim", "serve", "--help"]])
def test_help_and_version_exit_0(args):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
