"""RunaiClient against small MockTransport handlers: endpoints, errors, retries."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from reconciler import __version__, kinds
from reconciler.api import RunaiClient, errors
from tests.helpers import simserve
from tests.helpers.api import TOKEN, URL, json_response
from tests.helpers.api import DT, WID, BODY, scripted

pytestmark = pytest.mark.anyio

DI = kinds.DISTRIBUTED_INFERENCE
LIVE = {**BODY, "workloadId": WID, "requestedName": "bert", "createdBy": "me",
        "createdAt": "2026-01-01T00:00:00Z", "desiredPhase": "Running", "actualPhase": "Creating"}


# --- endpoints ----------------------------------------------------------------------

async def test_create_posts_the_body_with_the_bearer_token_and_returns_the_workload(make_client):
    h = scripted(json_response(202, LIVE))
    async with make_client(h) as client:
        assert await client.create(DT, BODY) == LIVE
    (req,) = h.seen
    assert (req.method, req.url.path) == ("POST", "/api/v1/workloads/distributed")
    assert req.headers["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(req.content) == BODY


@pytest.mark.parametrize("call, method, path", [
    (lambda c: c.get(DT, WID), "GET", f"/api/v1/workloads/distributed/{WID}"),
    (lambda c: c.get(DI, WID), "GET", f"/api/v1/workloads/distributed-inferences/{WID}"),
    (lambda c: c.patch(DI, WID, {"spec": {"replicas": 3}}), "PATCH",
     f"/api/v1/workloads/distributed-inferences/{WID}"),
    (lambda c: c.delete(DT, WID), "DELETE", f"/api/v1/workloads/distributed/{WID}"),
    (lambda c: c.suspend(DT, WID), "POST", f"/api/v1/workloads/distributed/{WID}/suspend"),
    (lambda c: c.resume(DT, WID), "POST", f"/api/v1/workloads/distributed/{WID}/resume"),
    (lambda c: c.get_workload_summary(WID), "GET", f"/api/v1/workloads/{WID}"),
])
async def test_each_endpoint_hits_its_path(make_client, call, method, path):
    h = scripted(json_response(202, {"code": 202, "message": "Request has been accepted."}))
    async with make_client(h) as client:
        assert (await call(client))["code"] == 202
    assert [(r.method, r.url.path) for r in h.seen] == [(method, path)]


async def test_requests_name_the_tool_and_ask_for_json_uncompressed(make_client):
    h = scripted(json_response(200, LIVE))
    async with make_client(h) as client:
        await client.get(DT, WID)
    (req,) = h.seen
    assert req.headers["User-Agent"] == f"runai-reconcile/{__version__}"
    assert (req.headers["Accept"], req.headers["Accept-Encoding"]) == ("application/json", "identity")


async def test_patch_sends_the_body(make_client):
    h = scripted(json_response(202, LIVE))
    async with make_client(h) as client:
        await client.patch(DI, WID, {"spec": {"replicas": 3}})
    assert json.loads(h.seen[0].content) == {"spec": {"replicas": 3}}


async def test_kinds_without_the_capability_are_refused_before_sending(make_client):
    h = scripted(json_response(202, {}))
    async with make_client(h) as client:
        with pytest.raises(ValueError, match="cannot be suspended"):
            await client.suspend(DI, WID)
        with pytest.raises(ValueError, match="cannot be resumed"):
            await client.resume(DI, WID)
        with pytest.raises(ValueError, match="cannot be updated"):
            await client.patch(DT, WID, {"spec": {}})
        with pytest.raises(ValueError, match="invalid workload id"):
            await client.get(DT, "../x")
    assert h.seen == []


async def test_list_workloads_sends_filter_limit_offset_and_deleted(make_client):
    h = scripted(json_response(200, {"workloads": [{"id": WID, "name": "bert"}], "next": 1}))
    async with make_client(h) as client:
        page = await client.list_workloads(filter_by=["name==bert", "projectId==7"], limit=10,
                                           offset=20, deleted=True)
    assert page["workloads"][0]["id"] == WID
    q = h.seen[0].url.params
    assert h.seen[0].url.path == "/api/v1/workloads"
    assert q["filterBy"] == "name==bert,projectId==7"
    assert (q["limit"], q["offset"], q["deleted"]) == ("10", "20", "true")


async def test_list_workloads_omits_deleted_and_filter_by_default(make_client):
    h = scripted(json_response(200, {"workloads": []}))
    async with make_client(h) as client:
        await client.list_workloads()
    q = h.seen[0].url.params
    assert "deleted" not in q and "filterBy" not in q and q["limit"] == "500"


async def test_list_workloads_rejects_a_limit_the_api_refuses(make_client):
    async with make_client(scripted(json_response(200, {"workloads": []}))) as client:
        with pytest.raises(ValueError, match="between 1 and 500"):
            await client.list_workloads(limit=501)


async def test_iter_workloads_reads_every_page(make_client):
    items = [{"id": f"id-{i}", "name": f"w{i}"} for i in range(1203)]

    def handler(request):
        handler.offsets.append(int(request.url.params["offset"]))
        off, lim = int(request.url.params["offset"]), int(request.url.params["limit"])
        page = items[off:off + lim]
        body = {"workloads": page}
        if off + lim < len(items):
            body["next"] = off + lim
        return json_response(200, body)
    handler.offsets = []
    async with make_client(handler) as client:
        assert await client.iter_workloads(filter_by=["projectId==7"]) == items
    assert handler.offsets == [0, 500, 1000]


async def test_a_list_answer_without_workloads_is_a_permanent_error(make_client):
    async with make_client(scripted(json_response(200, {"items": []}))) as client:
        with pytest.raises(errors.PermanentError, match="no `workloads` list"):
            await client.list_workloads()


@pytest.mark.parametrize("page, message", [
    (b'<html>proxy</html>', "with a body that is not JSON"),
    (b'{"workloads": [{"id": "w", "gpus": NaN}]}', "NaN, which is not a finite number"),
    (b'{"workloads": [{"id": "w", "gpus": 1e999}]}', "1e999, which is not a finite number"),
    (b'{"workloads": [{"id": "w", "name": "caf\xe9"}]}', "with a body that is not JSON"),
    (b'["w"]', "JSON that is not an object"),
])
async def test_a_list_page_is_refused_as_any_answer_is(make_client, page, message):
    """List pages are decoded by a quicker parser; what it refuses still gets the message
    any other answer gets."""
    async with make_client(scripted(httpx.Response(200, content=page))) as client:
        with pytest.raises(errors.PermanentError, match=message):
            await client.list_workloads()


async def test_a_list_page_reads_as_the_standard_parser_reads_it(make_client):
    text = ('{"workloads": [{"id": "w", "name": "caf\\u00e9 \\ud83d\\ude00", '
            '"projectId": "7", "phase": "Running", "gpus": 0.5, "tiny": 1e-07, "cpu": -3, '
            '"big": 18446744073709551615, "deletedAt": null, "images": ["a:1"], '
            '"preemptible": false, "name": "last"}], "next": 1}')
    async with make_client(scripted(httpx.Response(200, content=text.encode()))) as client:
        page = await client.list_workloads()
    assert page == json.loads(text)
    assert page["workloads"][0]["name"] == "last"  # a repeated key: the last one holds


async def test_a_body_reads_as_the_standard_parser_reads_it(make_client):
    """Bodies are decoded by the quicker parser too, but what it would read otherwise (an
    integer beyond 64 bits, a lone surrogate) is read by the standard one: exactly."""
    for text in (
            '{"name": "caf\\u00e9", "spec": {"gpus": 0.5, "tiny": 1e-07, "cpu": -3, '
            '"big": 18446744073709551615, "images": ["a:1"], "on": false, "off": null}}',
            '{"name": "bert", "spec": {"big": 123456789012345678901, "neg": -9223372036854775809}}',
            '{"name": "bert", "spec": {"args": "\\ud800"}}'):
        async with make_client(scripted(httpx.Response(200, content=text.encode()))) as client:
            body = await client.get(DT, WID)
        assert body == json.loads(text)
        assert [type(v) for v in body["spec"].values()] == \
            [type(v) for v in json.loads(text)["spec"].values()]


async def test_bodies_share_their_keys(make_client):
    """A fleet's answers hold one copy of each key, not one per answer."""
    h = scripted(json_response(200, LIVE), json_response(200, LIVE))
    async with make_client(h) as client:
        one, two = await client.get(DT, WID), await client.get(DT, WID)
    assert one == two and all(a is b for a, b in zip(one, two))


# --- error mapping --------------------------------------------------------------------

async def test_404_is_not_found_quoting_the_api_message_method_and_path(make_client):
    h = scripted(json_response(404, {"code": 404, "message": "Workload not found"}))
    async with make_client(h) as client:
        with pytest.raises(errors.NotFound) as ei:
            await client.get(DT, WID)
    e = ei.value
    assert (e.status, e.method, e.path, e.message) == (
        404, "GET", f"/api/v1/workloads/distributed/{WID}", "Workload not found")
    assert "Workload not found" in str(e) and f"GET /api/v1/workloads/distributed/{WID}" in str(e)


async def test_409_is_conflict(make_client):
    h = scripted(json_response(409, {"code": 409, "message": "name bert already exists in project 7"}))
    async with make_client(h) as client:
        with pytest.raises(errors.Conflict, match="already exists in project 7"):
            await client.create(DT, BODY)
    assert len(h.seen) == 1


async def test_400_is_bad_request_with_the_field_issues(make_client):
    h = scripted(json_response(400, {
        "code": 400, "message": "Invalid workload spec",
        "complianceIssues": [{"field": "spec.numWorkers", "details": "must be >= 1", "rule": "min"}]}))
    async with make_client(h) as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DT, BODY)
    assert ei.value.issues == [{"field": "spec.numWorkers", "details": "must be >= 1", "rule": "min"}]
    assert "spec.numWorkers: must be >= 1" in str(ei.value)
    assert "Invalid workload spec" in str(ei.value)


@pytest.mark.parametrize("status", [401, 403])
async def test_401_and_403_with_a_static_token_are_unauthorized_and_name_the_variable(make_client, status):
    h = scripted(json_response(status, {"code": status, "message": "Issuer is not familiar."}))
    async with make_client(h) as client:
        with pytest.raises(errors.Unauthorized) as ei:
            await client.get(DT, WID)
    assert "Issuer is not familiar." in str(ei.value) and "RUNAI_TOKEN" in str(ei.value)
    assert len(h.seen) == 1


async def test_messages_never_hold_the_token_even_when_the_server_echoes_it(make_client):
    h = scripted(json_response(401, {"code": 401, "message": f"bad token {TOKEN}",
                                     "details": f"Bearer {TOKEN}"}))
    async with make_client(h) as client:
        with pytest.raises(errors.Unauthorized) as ei:
            await client.get(DT, WID)
    assert TOKEN not in str(ei.value) and TOKEN not in ei.value.message
    assert "bad token ***" in str(ei.value)


async def test_an_unexpected_status_is_a_permanent_error(make_client):
    h = scripted(httpx.Response(418, text="I'm a teapot"))
    async with make_client(h) as client:
        with pytest.raises(errors.PermanentError, match="418.*I'm a teapot"):
            await client.get(DT, WID)
    assert len(h.seen) == 1


async def test_a_success_that_is_not_json_is_a_permanent_error(make_client):
    async with make_client(scripted(httpx.Response(200, text="<html>proxy</html>"))) as client:
        with pytest.raises(errors.PermanentError, match="not JSON"):
            await client.get(DT, WID)


async def test_api_errors_are_reconcile_errors_the_cli_prints_as_is():
    from reconciler.errors import ReconcileError
    assert issubclass(errors.ApiError, ReconcileError)
    assert issubclass(errors.ConfigError, ReconcileError)


# --- retries --------------------------------------------------------------------------

@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_reads_are_retried_on_retryable_statuses(make_client, status):
    h = scripted(json_response(status, {"code": status, "message": "busy"}),
                 json_response(200, LIVE))
    async with make_client(h) as client:
        assert await client.get(DT, WID) == LIVE
        assert client.request_count == 2
    assert len(h.seen) == 2


async def test_retry_after_is_honoured(make_client, fake_time):
    h = scripted(json_response(429, {"code": 429, "message": "slow down"}, **{"Retry-After": "7"}),
                 json_response(200, LIVE))
    async with make_client(h) as client:
        await client.get(DT, WID)
    assert fake_time.slept == [7.0]


async def test_backoff_grows_exponentially_with_full_jitter(make_client, fake_time):
    h = scripted(json_response(503, {"code": 503, "message": "down"}))
    async with make_client(h, max_attempts=6, retry_budget_s=1000) as client:
        with pytest.raises(errors.ServerError):
            await client.get(DT, WID)
    assert len(fake_time.slept) == 5
    for n, delay in enumerate(fake_time.slept, start=1):
        assert 0 <= delay <= 0.5 * 2 ** (n - 1)
    assert len(set(fake_time.slept)) == 5  # jittered, not a fixed ladder


async def test_attempts_are_bounded_and_the_error_says_so(make_client):
    h = scripted(json_response(503, {"code": 503, "message": "Service Unavailable"}))
    async with make_client(h, max_attempts=3) as client:
        with pytest.raises(errors.ServerError) as ei:
            await client.get(DT, WID)
        assert client.request_count == 3
    assert ei.value.attempts == 3 and ei.value.status == 503
    assert "gave up after 3 attempts" in str(ei.value)
    assert isinstance(ei.value, errors.RetryableError)


async def test_the_total_budget_bounds_retries_and_no_pointless_sleep(make_client, fake_time):
    h = scripted(json_response(503, {"code": 503, "message": "down"}, **{"Retry-After": "120"}))
    async with make_client(h, retry_budget_s=60) as client:
        with pytest.raises(errors.ServerError):
            await client.get(DT, WID)
    assert len(h.seen) == 1 and fake_time.slept == []


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"),
                                 httpx.RemoteProtocolError("Server disconnected")])
async def test_reads_are_retried_on_network_failures(make_client, exc):
    h = scripted(exc, json_response(200, LIVE))
    async with make_client(h) as client:
        assert await client.get(DT, WID) == LIVE
    assert len(h.seen) == 2


async def test_requests_are_counted_by_answer_for_the_watch_metrics(make_client):
    h = scripted(json_response(503, {"code": 503, "message": "busy"}),
                 httpx.ConnectError("refused"), json_response(200, LIVE))
    async with make_client(h) as client:
        assert await client.get(DT, WID) == LIVE
        assert client.requests_by_status == {"503": 1, "error": 1, "200": 1}
        assert sum(client.requests_by_status.values()) == client.request_count


def refused() -> httpx.ConnectError:
    """What a transport raises when nothing listens at the port: the OS's refusal inside."""
    exc = httpx.ConnectError("Connect call failed")
    exc.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return exc


async def test_a_refused_connection_is_retried_a_few_times_quickly_and_may_recover(make_client, fake_time):
    h = scripted(refused(), refused(), json_response(200, LIVE))
    async with make_client(h) as client:
        assert await client.get(DT, WID) == LIVE
    assert len(h.seen) == 3 and fake_time.slept == [0.2, 0.4]


async def test_a_refusal_that_persists_is_given_up_in_under_a_second_and_said_in_words(make_client, fake_time):
    h = scripted(refused())
    async with make_client(h) as client:
        with pytest.raises(errors.TransportError) as ei:
            await client.get(DT, WID)
    assert len(h.seen) == 3 and sum(fake_time.slept) < 1
    assert str(ei.value).startswith(f"GET /api/v1/workloads/distributed/{WID}: cannot connect to "
                                    "runai.example.test:443: connection refused (nothing listens "
                                    "there")
    assert "gave up after 3 attempts in 0.6 s" in str(ei.value)  # 0.2 s, then 0.4 s


async def test_a_refused_proxy_is_named_as_the_proxy_without_its_url(monkeypatch):
    unused_port = simserve.free_port()  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", f"http://user:proxy-pass@127.0.0.1:{unused_port}")
    async with RunaiClient("http://runai.example.test:8080", token=TOKEN) as client:
        assert client.transport is None  # httpx's own transport: it honours the proxy
        with pytest.raises(errors.TransportError) as ei:
            await client.get(DT, WID)
    assert ("cannot connect to the proxy set in the environment for runai.example.test:8080: "
            "connection refused") in str(ei.value)
    assert "proxy-pass" not in str(ei.value)


async def test_a_network_failure_that_persists_is_a_transport_error(make_client):
    h = scripted(httpx.ReadTimeout("slow"))
    async with make_client(h, max_attempts=2) as client:
        with pytest.raises(errors.TransportError, match="timed out") as ei:
            await client.get(DT, WID)
    assert ei.value.ambiguous is False and len(h.seen) == 2


async def test_every_request_has_a_timeout():
    client = RunaiClient(URL, token=TOKEN, timeout=4.5)
    try:
        t = client._http.timeout
        assert (t.connect, t.read, t.write, t.pool) == (4.5, 4.5, 4.5, 4.5)
    finally:
        await client.aclose()


# --- writes and ambiguity -------------------------------------------------------------

@pytest.mark.parametrize("status", [500, 502, 504])
async def test_an_ambiguous_create_is_not_re_posted_blindly(make_client, status):
    h = scripted(json_response(status, {"code": status, "message": "oops"}), json_response(202, LIVE))
    async with make_client(h) as client:
        with pytest.raises(errors.ServerError) as ei:
            await client.create(DT, BODY)
    assert ei.value.ambiguous is True and len(h.seen) == 1


@pytest.mark.parametrize("exc", [httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped"),
                                 httpx.ReadError("reset")])
async def test_a_create_lost_after_sending_is_ambiguous(make_client, exc):
    h = scripted(exc, json_response(202, LIVE))
    async with make_client(h) as client:
        with pytest.raises(errors.TransportError) as ei:
            await client.create(DT, BODY)
    assert ei.value.ambiguous is True and len(h.seen) == 1


@pytest.mark.parametrize("first", [json_response(503, {"code": 503, "message": "busy"}),
                                   json_response(429, {"code": 429, "message": "slow"}),
                                   httpx.ConnectError("refused")])
async def test_a_create_that_was_not_performed_is_retried(make_client, first):
    h = scripted(first, json_response(202, LIVE))
    async with make_client(h) as client:
        assert await client.create(DT, BODY) == LIVE
    assert [r.method for r in h.seen] == ["POST", "POST"]


async def test_on_ambiguous_finds_the_workload_and_no_second_post_is_sent(make_client):
    h = scripted(httpx.ReadTimeout("slow"), json_response(202, LIVE))
    looked_up = []

    async def lookup():
        looked_up.append("bert")
        return LIVE
    async with make_client(h) as client:
        assert await client.create(DT, BODY, on_ambiguous=lookup) == LIVE
    assert looked_up == ["bert"] and len(h.seen) == 1


async def test_on_ambiguous_finding_nothing_lets_the_create_be_sent_again(make_client):
    h = scripted(json_response(502, {"code": 502, "message": "bad gateway"}), json_response(202, LIVE))

    async def lookup():
        return None
    async with make_client(h) as client:
        assert await client.create(DT, BODY, on_ambiguous=lookup) == LIVE
    assert [r.method for r in h.seen] == ["POST", "POST"]


async def test_a_failing_lookup_keeps_the_create_ambiguous(make_client):
    h = scripted(httpx.ReadTimeout("slow"), json_response(202, LIVE))

    async def lookup():
        raise errors.ServerError("GET /api/v1/workloads: 503", status=503)
    async with make_client(h) as client:
        with pytest.raises(errors.TransportError, match="lookup .* failed too") as ei:
            await client.create(DT, BODY, on_ambiguous=lookup)
    assert ei.value.ambiguous is True and len(h.seen) == 1


async def test_find_live_looks_the_workload_up_by_name_and_project(make_client):
    calls = []

    def handler(request):
        calls.append((request.method, request.url.path, request.url.params.get("filterBy")))
        if request.method == "POST":
            raise httpx.ReadTimeout("slow")
        if request.url.path == "/api/v1/workloads":
            return json_response(200, {"workloads": [{"id": WID, "name": "bert"}]})
        return json_response(200, LIVE)
    async with make_client(handler) as client:
        assert await client.create(DT, BODY, on_ambiguous=lambda: client.find_live(DT, "bert", "7")) == LIVE
    assert calls == [
        ("POST", "/api/v1/workloads/distributed", None),
        ("GET", "/api/v1/workloads", "name==bert,projectId==7"),
        ("GET", f"/api/v1/workloads/distributed/{WID}", None),
    ]


async def test_find_live_skips_workloads_of_another_kind(make_client):
    def handler(request):
        if request.url.path == "/api/v1/workloads":
            return json_response(200, {"workloads": [{"id": "other", "name": "bert"}]})
        return json_response(404, {"code": 404, "message": "not found"})
    async with make_client(handler) as client:
        assert await client.find_live(DT, "bert", "7") is None


@pytest.mark.parametrize("first", [json_response(500, {"code": 500, "message": "x"}),
                                   httpx.ReadTimeout("slow")])
async def test_patch_is_idempotent_and_retried_after_an_ambiguous_failure(make_client, first):
    h = scripted(first, json_response(202, LIVE))
    async with make_client(h) as client:
        assert await client.patch(DI, WID, {"spec": {"replicas": 2}}) == LIVE
    assert len(h.seen) == 2


async def test_a_retried_delete_that_finds_the_workload_gone_is_done(make_client):
    h = scripted(json_response(504, {"code": 504, "message": "gateway timeout"}),
                 json_response(404, {"code": 404, "message": "not found"}))
    async with make_client(h) as client:
        result = await client.delete(DT, WID)
    assert result["code"] == 202 and len(h.seen) == 2


async def test_a_delete_of_an_unknown_workload_is_not_found(make_client):
    h = scripted(json_response(404, {"code": 404, "message": "not found"}))
    async with make_client(h) as client:
        with pytest.raises(errors.NotFound):
            await client.delete(DT, WID)


async def test_a_delete_retried_only_after_503_still_reports_404(make_client):
    h = scripted(json_response(503, {"code": 503, "message": "busy"}),
                 json_response(404, {"code": 404, "message": "not found"}))
    async with make_client(h) as client:
        with pytest.raises(errors.NotFound):
            await client.delete(DT, WID)


async def test_a_write_that_gives_up_after_an_ambiguous_failure_says_so(make_client):
    h = scripted(json_response(500, {"code": 500, "message": "x"}),
                 json_response(503, {"code": 503, "message": "busy"}))
    async with make_client(h, max_attempts=2) as client:
        with pytest.raises(errors.ServerError) as ei:
            await client.suspend(DT, WID)
    assert ei.value.ambiguous is True


# --- construction, TLS, logging -------------------------------------------------------

async def test_verify_false_logs_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="reconciler.api"):
        client = RunaiClient(URL, token=TOKEN, verify=False)
    await client.aclose()
    assert "TLS certificate verification is off" in caplog.text


async def test_verify_true_is_quiet(caplog):
    with caplog.at_level(logging.WARNING, logger="reconciler.api"):
        client = RunaiClient(URL, token=TOKEN)
    await client.aclose()
    assert caplog.text == ""


async def test_logs_never_hold_the_token(make_client, caplog):
    h = scripted(json_response(503, {"code": 503, "message": f"echo {TOKEN}"}), json_response(200, LIVE))
    with caplog.at_level(logging.DEBUG, logger="reconciler.api"):
        async with make_client(h) as client:
            await client.get(DT, WID)
    assert "retrying" in caplog.text and TOKEN not in caplog.text


@pytest.mark.parametrize("env, message", [
    ({}, "no Run:ai URL"),
    ({"RUNAI_URL": URL}, "no Run:ai credentials"),
    ({"RUNAI_URL": URL, "RUNAI_CLIENT_ID": "x"}, "RUNAI_CLIENT_SECRET is not"),
    ({"RUNAI_URL": URL, "RUNAI_CLIENT_SECRET": "hush"}, "RUNAI_CLIENT_ID is not"),
    ({"RUNAI_URL": "runai.example.test", "RUNAI_TOKEN": "t"}, "must start with http"),
])
async def test_from_env_names_what_is_missing(env, message):
    with pytest.raises(errors.ConfigError, match=message) as ei:
        RunaiClient.from_env(None, env=env)
    assert "hush" not in str(ei.value)


async def test_from_env_reads_the_environment(monkeypatch):
    monkeypatch.setenv("RUNAI_URL", URL + "/")
    monkeypatch.setenv("RUNAI_TOKEN", TOKEN)
    seen = []

    def handler(request):
        seen.append((str(request.url), request.headers["Authorization"]))
        return json_response(200, LIVE)
    async with RunaiClient.from_env(None, transport=httpx.MockTransport(handler)) as client:
        await client.get(DT, WID)
    assert seen == [(f"{URL}/api/v1/workloads/distributed/{WID}", f"Bearer {TOKEN}")]


async def test_from_env_prefers_the_given_url(monkeypatch):
    monkeypatch.setenv("RUNAI_URL", "http://ignored.test")
    monkeypatch.setenv("RUNAI_TOKEN", TOKEN)
    client = RunaiClient.from_env("http://given.test")
    await client.aclose()
    assert client.base_url == "http://given.test"


# --- a project's GPU quota ----------------------------------------------------------

def _project(pid: str, *deserved) -> dict:
    return {"id": pid, "name": f"team-{pid}", "resources": [
        {"nodePool": {"id": str(i), "name": f"pool-{i}"}, "gpu": {"deserved": d}}
        for i, d in enumerate(deserved)]}


async def test_the_quotas_of_a_plan_s_projects_one_get_each_and_unreadable_ones_unknown(
        make_client):
    from reconciler.live import projects

    answers = {"7": json_response(200, _project("7", 8, 4)),
               "12": json_response(200, _project("12", 16)),
               "404": json_response(404, {"code": 404, "message": "Project not found"}),
               "403": json_response(403, {"code": 403, "message": "Forbidden"})}
    seen = []

    def handler(request: httpx.Request):
        seen.append((request.method, request.url.path))
        return answers[request.url.path.rsplit("/", 1)[1]]

    async with make_client(handler) as client:
        read = await projects.read_projects(client, {"7", "12", "404", "403"})
    assert {p: r.quota for p, r in read.items()} == {
        "7": 12, "12": 16, "404": None, "403": None}
    assert read["7"].name == "team-7" and read["7"].unknown is None
    # Why each unknown one is: what a policy rule that needs it says.
    assert read["404"].unknown == ("GET /api/v1/org-unit/projects/404 answered 404: no such "
                                   "project")
    assert read["403"].unknown == ("GET /api/v1/org-unit/projects/403 answered 403: not "
                                   "readable with these credentials")
    assert sorted(seen) == sorted(("GET", f"/api/v1/org-unit/projects/{p}") for p in answers)


async def test_a_quota_read_the_api_fails_on_is_an_error_not_a_silent_unknown(make_client):
    from reconciler.live import projects

    h = scripted(json_response(400, {"code": 400, "message": "bad project id"}))
    async with make_client(h) as client:
        with pytest.raises(errors.BadRequest, match="bad project id"):
            await projects.read_projects(client, {"7"})
