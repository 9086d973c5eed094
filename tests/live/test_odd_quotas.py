"""Odd answers to the project quota read (GET /api/v1/org-unit/projects/{id}): a quota as
a string, numbers too large for a float or for Python, NaN, no resources, not an object, a
500, a timeout. The plan is made all the same, with the quota unknown, its JSON is strict
JSON, and a warning says which project's quota could not be read and why. The real client
against the simulator in process, the project route answered by the test."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest

from reconciler import operations
from reconciler.api import RunaiClient
from reconciler.render import json as json_render
from reconciler.render import markdown as markdown_render
from reconciler.render import text as text_render
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore

PROJECT = "/api/v1/org-unit/projects/"
SPEC = """\
kind: Training
name: t1
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  compute: {gpuDevicesRequest: 2}
"""


def _body(deserved: str) -> str:
    return '{"id": "7", "name": "team-a", "resources": [{"gpu": {"deserved": ' + deserved + "}}]}"


# name -> (status, body, the words of the warning)
ANSWERS = {
    "a-string": (200, _body('"8"'), "resources[0].gpu.deserved is not a number"),
    "too-large-for-a-float": (200, _body("1e400"), "is not a finite number"),
    "nan": (200, _body("NaN"), "is not a finite number"),
    "sums-past-a-float": (200, '{"resources": [{"gpu": {"deserved": 1e308}}, '
                               '{"gpu": {"deserved": 1e308}}]}', "is not a finite number"),
    "too-long-for-python": (200, _body("9" * 5000), "a body that is not JSON"),
    "not-an-object": (200, "[1]", "JSON that is not an object"),
    "resources-not-a-list": (200, '{"id": "7", "resources": {"gpu": 8}}',
                             "resources is not a list"),
    "server-error": (500, '{"code": 500, "message": "boom"}', "500 Internal Server Error"),
    "timeout": (None, "", "timed out"),
}


def _serving(answer):
    app = create_app()
    status, body, _ = answer

    async def outer(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(PROJECT):
            if status is None:
                raise httpx.ReadTimeout("timed out")
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await app(scope, receive, send)

    def connect():
        return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET, max_attempts=1,
                           transport=httpx.ASGITransport(app=outer))
    return connect


def _strict(text: str) -> dict:
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("name", list(ANSWERS))
def test_an_odd_quota_answer_leaves_the_quota_unknown_and_says_why(tmp_path, caplog, name):
    (tmp_path / "t.yaml").write_text(SPEC)
    with caplog.at_level(logging.WARNING):
        result = operations.plan(str(tmp_path), MemoryStore(), _serving(ANSWERS[name]),
                                 operations.PlanOptions())
    plan = result.plan
    assert plan.gpu_quotas == {"7": None}
    assert plan.counts()["create"] == 1
    doc = _strict(json_render.render_plan(plan))
    [project] = doc["gpu_impact"]["projects"]
    assert project["quota"] is None
    # (With the project's name, when the answer gave one it could read.)
    assert re.search(r"project 7( \(team-a\))?: 0 -> 2 \(\+2\), quota unknown",
                     text_render.render_plan(plan))
    assert "Traceback" not in markdown_render.render_plan(plan)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
                 and "quota" in r.getMessage()]
    assert "project 7's GPU quota could not be read" in warning
    assert ANSWERS[name][2] in warning, warning
    assert "unknown in this plan" in warning


def test_a_quota_the_api_does_not_give_is_unknown_without_a_warning(tmp_path, caplog):
    (tmp_path / "t.yaml").write_text(SPEC)
    with caplog.at_level(logging.WARNING):
        result = operations.plan(str(tmp_path), MemoryStore(),
                                 _serving((200, '{"id": "7", "resources": []}', "")),
                                 operations.PlanOptions())
    assert result.plan.gpu_quotas == {"7": None}
    assert not [r for r in caplog.records if "quota" in r.getMessage()]


def test_a_huge_quota_that_is_a_number_is_read_as_it_is(tmp_path):
    (tmp_path / "t.yaml").write_text(SPEC)
    result = operations.plan(str(tmp_path), MemoryStore(),
                             _serving((200, _body("9" * 40), "")), operations.PlanOptions())
    assert result.plan.gpu_quotas == {"7": int("9" * 40)}
    assert _strict(json_render.render_plan(result.plan))["gpu_impact"]["projects"][0]["quota"]
