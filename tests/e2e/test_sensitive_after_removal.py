"""lifecycle.sensitive paths stay masked when the spec is gone (the state remembers them)."""

from __future__ import annotations

import pytest

from tests.helpers.specs import INFERENCE, TRAINING

pytestmark = pytest.mark.http

SECRET = "--api-key=SUPERSECRET-ARGS"


def test_sensitive_paths_masked_in_delete_and_destroy_plans_in_every_format(ws, sim_server):
    spec = TRAINING.replace("spec:\n", "lifecycle:\n  sensitive: [spec.args]\nspec:\n", 1).replace(
        "args: --nproc_per_node=8 train.py", f"args: {SECRET}")
    ws.write("train.yaml", spec)
    ws.write("serve.yaml", INFERENCE)  # stays: removing every spec is refused
    assert ws.apply().exit_code == 0
    assert ws.state()["resources"]["DistributedTraining/7/bert-ddp"]["sensitive"] == ["spec.args"]
    for fmt in ("text", "json", "markdown"):
        res = ws.plan("--destroy", "--format", fmt)
        assert res.exit_code == 0 and SECRET not in res.output, fmt
    (ws.specs / "train.yaml").unlink()
    for fmt in ("text", "json", "markdown"):
        res = ws.plan("--format", fmt)
        assert res.exit_code == 0, res.output
        assert SECRET not in res.output, fmt
    assert "(sensitive)" in ws.plan("--format", "json").output
