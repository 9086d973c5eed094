"""A sensitive value the spec gets wrong is never quoted in an error,
by validate, plan or apply, in any format."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from reconciler.cli import main

SECRET = "987654321"
HEAD = ("kind: Training\nname: t1\nprojectId: \"1\"\n"
        "clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210\n")

SPECS = {
    "secret-named-variable": HEAD + (
        "spec:\n  image: busybox\n  environmentVariables:\n"
        f"    - name: db_Password\n      value: {SECRET}\n"),
    "lifecycle-sensitive-path": HEAD + (
        "lifecycle:\n  sensitive: [spec.command]\n"
        f"spec:\n  image: busybox\n  command: {SECRET}\n"),
    "sensitive-variable-item": HEAD + (
        "lifecycle:\n  sensitive: ['spec.environmentVariables[PLAIN]']\n"
        "spec:\n  image: busybox\n  environmentVariables:\n"
        f"    - name: PLAIN\n      value: {SECRET}\n"),
    "quoted-by-a-rule": HEAD + (
        "lifecycle:\n  sensitive: [spec.compute.cpuCoreRequest]\n"
        f"spec:\n  image: busybox\n  compute:\n    cpuCoreRequest: {SECRET}\n"
        "    cpuCoreLimit: 1\n"),
}

FORMATS = ("text", "json", "markdown")
COMMANDS = [["validate"]] + [["plan", "--format", f] for f in FORMATS] + [
    ["apply", "--auto-approve", "--format", f] for f in FORMATS]


@pytest.mark.parametrize("case", sorted(SPECS))
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_bad_sensitive_value_is_not_quoted(tmp_path, monkeypatch, case, args):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.yaml").write_text(SPECS[case])
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["--sim", *args, "specs"])
    assert res.exit_code == 1, res.output
    assert "t.yaml" in res.stderr and "(sensitive)" in res.stderr
    assert SECRET not in res.stdout and SECRET not in res.stderr
    assert "Traceback" not in res.stdout + res.stderr
