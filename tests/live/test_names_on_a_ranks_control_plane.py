"""A quota's `priority` on a control plane that serves ranks, not priorities (Run:ai 3.0:
`GET /api/v1/org-unit/priorities` answers 404): the plan checks it against
`GET /api/v1/org-unit/ranks` instead. The real client against the simulator in process,
the priorities route answered 404 by the test."""

from __future__ import annotations

import httpx
import pytest

from reconciler import errors, operations
from reconciler.api import RunaiClient
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from reconciler.state import MemoryStore

PRIORITIES = "/api/v1/org-unit/priorities"


def _spec(priority: str) -> str:
    return f"""\
kind: Project
name: team-a
clusterId: {CLUSTER}
resources:
  default:
    gpu: {{deserved: 4}}
    priority: {priority}
"""


def _ranks_only():
    app = create_app()
    asked: list[str] = []

    async def outer(scope, receive, send):
        if scope["type"] == "http":
            asked.append(scope["path"])
        if scope["type"] == "http" and scope["path"] == PRIORITIES:
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body",
                        "body": b'{"code": 404, "message": "not found"}'})
            return
        await app(scope, receive, send)

    def connect():
        return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET, max_attempts=1,
                           transport=httpx.ASGITransport(app=outer))
    return connect, asked


def test_a_priority_is_checked_against_the_ranks_when_priorities_are_not_served(tmp_path):
    (tmp_path / "team-a.yaml").write_text(_spec("Normal"))
    connect, asked = _ranks_only()
    with pytest.raises(errors.SpecError) as exc:
        operations.plan(str(tmp_path), MemoryStore(), connect, operations.PlanOptions())
    [problem] = exc.value.problems
    assert problem.startswith(f"{tmp_path / 'team-a.yaml'}:7: resources.default.priority: "
                              "no priority is named 'Normal' (there are: "), problem
    assert "MediumLow" in problem and "VeryHigh" in problem
    assert PRIORITIES in asked and "/api/v1/org-unit/ranks" in asked

    (tmp_path / "team-a.yaml").write_text(_spec("MediumLow"))
    result = operations.plan(str(tmp_path), MemoryStore(), _ranks_only()[0],
                             operations.PlanOptions())
    assert result.plan.counts()["create"] == 1
