"""Tests, `--sim` and production send every request through the same client code: one
`httpx.AsyncClient` and one `_send`, over the transport of each (the network's
`AiohttpTransport`, the simulator's ASGI app). The clients are built as the CLI builds
them; what differs is only what moves the bytes."""

from __future__ import annotations

import logging

import httpx
import pytest

from reconciler import kinds
from reconciler.api import RunaiClient, errors
from reconciler.api.transport import AiohttpTransport
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app

pytestmark = [pytest.mark.anyio, pytest.mark.http]

DT = kinds.DISTRIBUTED_TRAINING
DI = kinds.DISTRIBUTED_INFERENCE
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
MISSING = "0b6f2a4e-5d1c-4c47-9b67-3f1e2d7a9c11"
CREDENTIALS = {"RUNAI_CLIENT_ID": DEFAULT_CLIENT_ID, "RUNAI_CLIENT_SECRET": DEFAULT_CLIENT_SECRET}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def production(url: str) -> RunaiClient:
    """As `runai-reconcile --url URL` builds it (cli._client)."""
    return RunaiClient.from_env(url, env=CREDENTIALS, verify=True, max_connections=8)


def in_process() -> RunaiClient:
    """As `runai-reconcile --sim` builds it (cli._client)."""
    return RunaiClient("http://runai-sim", client_id=DEFAULT_CLIENT_ID,
                       client_secret=DEFAULT_CLIENT_SECRET,
                       transport=httpx.ASGITransport(app=create_app()))


def training(name: str) -> dict:
    return {"name": name, "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                     "distributedFramework": "PyTorch", "numWorkers": 2}}


async def _exchange(client: RunaiClient, name: str) -> tuple[str, str]:
    """Create, read back, and read a missing workload: (the phase read, the 404's text)."""
    created = await client.create(DT, training(name))
    live = await client.get(DT, created["workloadId"])
    with pytest.raises(errors.NotFound) as ei:
        await client.get(DT, MISSING)
    return live["desiredPhase"], str(ei.value)


async def test_the_network_and_the_simulator_are_transports_under_one_httpx_client(sim_url, caplog):
    results = {}
    with caplog.at_level(logging.INFO, logger="httpx"):
        for label, client, transport_type in (("network", production(sim_url), AiohttpTransport),
                                              ("sim", in_process(), httpx.ASGITransport)):
            async with client:
                assert isinstance(client.transport, transport_type)
                results[label] = await _exchange(client, f"one-path-{label}")
    # httpx.AsyncClient logs each request it sends: both clients' requests went through it.
    sent = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    for base in (sim_url, "http://runai-sim"):
        assert any(m.startswith(f"HTTP Request: POST {base}/api/v1/token ") for m in sent)
        assert any(m.startswith(f"HTTP Request: GET {base}/api/v1/workloads/distributed/{MISSING} ")
                   and m.endswith(" 404 Not Found\"") for m in sent)
    # And the same client code read the answers: the same result, the same error text.
    assert results["network"] == results["sim"]
    assert results["sim"][1].startswith(f"GET /api/v1/workloads/distributed/{MISSING}: 404 Not Found")


async def test_over_real_http_every_call_goes_through_the_transport_production_uses(sim_url):
    async with production(sim_url) as client:
        assert type(client.transport) is AiohttpTransport
        wl = await client.create(DI, {
            "name": "one-path-inference", "projectId": "7", "clusterId": CLUSTER,
            "spec": {"workers": 1, "replicas": 1,
                     "leader": {"image": "vllm/vllm-openai:v0.6.3"},
                     "worker": {"image": "vllm/vllm-openai:v0.6.3"}}})
        wid = wl["workloadId"]
        assert (await client.patch(DI, wid, {"spec": {"replicas": 2}}))["spec"]["replicas"] == 2
        assert (await client.find_live(DI, "one-path-inference", "7"))["workloadId"] == wid
        assert (await client.get_workload_summary(wid))["id"] == wid
        await client.delete(DI, wid)
        # token, POST, PATCH, list + GET, summary, DELETE: all over the transport's pool
        assert client.request_count == 7
        assert 1 <= client.transport.opened <= 8
