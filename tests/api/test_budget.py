"""At the client: one retry budget (`retry_budget_s`, the CLI's --timeout)
shared by every request of a client, and what a spent budget means for a create in
flight; a request body's secret values masked in the error quoting them."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from reconciler import kinds
from reconciler.api import errors
from tests.helpers.api import json_response
from tests.helpers.api import BODY, DT, WID, scripted

pytestmark = pytest.mark.anyio

DOWN = json_response(503, {"code": 503, "message": "down"}, **{"Retry-After": "4"})


async def test_requests_one_after_another_share_one_budget(make_client, fake_time):
    h = scripted(DOWN)
    async with make_client(h, retry_budget_s=10, max_attempts=100) as client:
        with pytest.raises(errors.ServerError) as first:
            await client.get(DT, WID)
        assert first.value.final and "the --timeout of 10 s" in str(first.value)
        sent = len(h.seen)
        with pytest.raises(errors.NotSent) as second:  # the budget is spent: nothing sent
            await client.get(DT, "another-id")
    assert len(h.seen) == sent
    assert "not sent, the command gave up on the API" in str(second.value)
    assert sum(fake_time.slept) <= 10


async def test_concurrent_requests_end_together_at_the_deadline(make_client, fake_time):
    h = scripted(DOWN)
    async with make_client(h, retry_budget_s=10, max_attempts=100) as client:
        results = await asyncio.gather(*(client.get(DT, f"id-{i}") for i in range(5)),
                                       return_exceptions=True)
    assert all(isinstance(r, errors.RetryableError) and r.final for r in results)
    assert fake_time.now - 1000 <= 10


async def test_an_answer_between_failures_restarts_the_clock(make_client, fake_time):
    """A flaky API that keeps answering is not given up on: the budget bounds waiting for
    an API that fails, not the work of a long apply."""
    answers = []
    for _ in range(6):
        answers += [DOWN, DOWN, json_response(200, {"workloadId": WID})]
    h = scripted(*answers)
    async with make_client(h, retry_budget_s=10, max_attempts=100) as client:
        for i in range(6):
            assert (await client.get(DT, f"id-{i}"))["workloadId"] == WID
    assert sum(fake_time.slept) == 6 * 8  # 48 s of retries in all, none past 10 s in a row


async def test_a_create_whose_lookup_is_cut_by_the_deadline_stays_ambiguous(make_client):
    """The write may have happened: the error says so (the executor records it as "may
    exist", the next run looks it up by name), and nothing is sent again."""
    h = scripted(json_response(500, {"code": 500, "message": "boom"}))
    async with make_client(h, retry_budget_s=10, max_attempts=100) as client:
        async def lookup():
            return await client.find_live(DT, "bert", "7")
        with pytest.raises(errors.RetryableError) as ei:
            await client.create(DT, BODY, on_ambiguous=lookup)
    assert ei.value.ambiguous and ei.value.final
    assert [r.method for r in h.seen].count("POST") == 1


async def test_a_secret_value_of_the_body_is_masked_in_the_error_quoting_it(make_client):
    value = "s3cr3t-value-42"
    body = {**BODY, "spec": {**BODY["spec"], "environmentVariables": [
        {"name": "API_TOKEN", "value": value}, {"name": "MODE", "value": "fast"}]}}
    h = scripted(json_response(400, {"code": 400, "message": f"{value} is not allowed for fast",
                                     "complianceIssues": [{"field": "spec", "details": value}]}))
    async with make_client(h) as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DT, body)
    assert value not in str(ei.value) and "*** is not allowed for fast" in str(ei.value)


async def test_a_nan_in_an_answer_is_refused(make_client):
    h = scripted(httpx.Response(200, content=b'{"workloadId": "w", "x": NaN}'))
    async with make_client(h) as client:
        with pytest.raises(errors.PermanentError, match="NaN, which is not a finite number"):
            await client.get(DT, WID)


async def test_a_value_at_a_sensitive_path_is_masked_in_the_error_quoting_it(make_client):
    body = {**BODY, "spec": {**BODY["spec"], "command": "run --key=987654321"}}
    h = scripted(json_response(400, {"code": 400,
                                     "message": "command 'run --key=987654321' is invalid"}))
    async with make_client(h) as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DT, body, sensitive=("spec.command",))
    assert "987654321" not in str(ei.value) and "command '***' is invalid" in str(ei.value)


async def test_a_back_off_that_wakes_past_the_deadline_still_names_the_failure(make_client,
                                                                               fake_time):
    """On a loaded machine a retry's sleep can end after the deadline: the request is not
    sent again, and the error still says what the API answered, not only that time ran out."""
    async def late_sleep(seconds):
        await fake_time.sleep(seconds + 10)  # woken 10 s late

    h = scripted(json_response(500, {"code": 500, "message": "internal error"}))
    async with make_client(h, retry_budget_s=10, max_attempts=100, sleep=late_sleep) as client:
        with pytest.raises(errors.NotSent) as ei:
            await client.get(DT, WID)
    assert len(h.seen) == 1
    assert "the --timeout of 10 s ran out" in str(ei.value)
    assert f"the last answer: GET /api/v1/workloads/distributed/{WID}: 500 Internal Server " \
           "Error: internal error" in str(ei.value)


async def test_a_control_plane_that_does_not_answer_is_given_up_at_the_deadline(make_client,
                                                                               fake_time):
    """Each attempt waits no longer than what is left of the budget: one attempt, cut at
    1.5 s, said with the time it took (the fake clock's: exact)."""
    def silent(request: httpx.Request):
        fake_time.advance(request.extensions["timeout"]["read"])  # waited, no answer
        raise httpx.ReadTimeout("timed out", request=request)

    async with make_client(silent, retry_budget_s=1.5, timeout=30) as client:
        with pytest.raises(errors.TransportError) as ei:
            await client.get(DT, WID)
    assert ei.value.final
    assert str(ei.value).endswith("(gave up after 1 attempt in 1.5 s: the --timeout of 1.5 s "
                                  "ran out)"), str(ei.value)
    assert fake_time.now - 1000 == 1.5
