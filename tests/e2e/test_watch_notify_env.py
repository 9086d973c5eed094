"""The watch's alert URLs from the environment (`RUNAI_RECONCILE_NOTIFY`), as the Kubernetes
recipe sets them from an optional Secret: set, a drift is alerted there; unset, the watch
runs without alerts."""

from __future__ import annotations

import pytest

from tests.helpers.receiver import Receiver
from tests.helpers.watchproc import Watch, inference, wait_until

pytestmark = pytest.mark.http


def _applied(ws, sim_server) -> str:
    ws.write("serve.yaml", inference("llama-serve"))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [live] = sim_server.live()
    return live["id"]


def test_a_drift_is_alerted_to_the_url_in_the_environment(ws, sim_server):
    wid = _applied(ws, sim_server)
    with Receiver() as receiver, Watch(ws, "--interval", "300ms",
                                       extra_env={"RUNAI_RECONCILE_NOTIFY": receiver.url}) as w:
        w.wait_cycles(1)
        assert sim_server.admin.patch(f"/_sim/workloads/{wid}",
                                      json={"spec": {"replicas": 5}}).status_code == 200
        wait_until(lambda: any(e["event"] == "drifted" for e in receiver.delivered), 15,
                   "a drifted alert at the receiver")
        assert w.stop() == 0


def test_a_url_in_the_environment_is_checked_as_the_flag_is(ws, sim_server):
    _applied(ws, sim_server)
    with Watch(ws, extra_env={"RUNAI_RECONCILE_NOTIFY": "ftp://hooks.example.com/x"}) as w:
        assert w.proc.wait(timeout=30) == 1
        assert "--notify" in w.log_path.read_text()
