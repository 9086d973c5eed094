"""A secret the client knows (its client secret, a body's secret value) quoted in an API
error in another encoding (JSON-escaped, URL-encoded, base64) is masked like a plain one."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from reconciler.api import errors
from tests.helpers.api import BODY, DT, WID, json_response, scripted

pytestmark = pytest.mark.anyio

SECRET = 'pa"ss\\wo/rd-42'
ENCODINGS = {
    "raw": SECRET,
    "json-escaped": json.dumps(SECRET)[1:-1],
    "url-encoded": urllib.parse.quote(SECRET, safe=""),
    "form-encoded": urllib.parse.quote_plus(SECRET),
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "base64-urlsafe": base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
async def test_the_client_secret_quoted_by_the_token_endpoint_is_masked(make_client, encoding):
    quoted = ENCODINGS[encoding]
    h = scripted(json_response(400, {"code": 400,
                                     "message": f"bad request body {{\"clientSecret\": \"{quoted}\"}}"}))
    async with make_client(h, client_id="ci-bot", client_secret=SECRET) as client:
        with pytest.raises(errors.ReconcileError) as ei:
            await client.get(DT, WID)
    text = str(ei.value)
    assert quoted not in text and "***" in text, text


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
async def test_a_secret_value_of_the_body_quoted_in_an_error_is_masked(make_client, encoding):
    quoted = ENCODINGS[encoding]
    body = {**BODY, "spec": {**BODY["spec"], "environmentVariables": [
        {"name": "API_TOKEN", "value": SECRET}]}}
    h = scripted(json_response(400, {"code": 400, "message": f"env value {quoted} refused"}))
    async with make_client(h) as client:
        with pytest.raises(errors.BadRequest) as ei:
            await client.create(DT, body)
    assert str(ei.value).endswith("env value *** refused"), str(ei.value)
