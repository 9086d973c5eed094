"""A quota's order names a priority (Run:ai 2.x: `GET /api/v1/org-unit/priorities`) or a
rank (3.0: `GET /api/v1/org-unit/ranks`, and no priorities route). The plan checks each
against the collection it names, and a control plane that does not serve it fails the
plan saying which word it takes. The real client against the simulator in process,
as a 3.0 control plane and as 2.24."""

from __future__ import annotations

import httpx
import pytest

from reconciler import errors, operations
from reconciler.api import RunaiClient
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore
from tests.helpers import organisation

PRIORITIES = "/api/v1/org-unit/priorities"
RANKS = "/api/v1/org-unit/ranks"


def _spec(order: str) -> str:
    return organisation.project(pools={"default": f"gpu: {{deserved: 4}}\n{order}"})


def _connect(control_plane: str):
    app = create_app(control_plane=control_plane)
    asked: list[str] = []

    async def outer(scope, receive, send):
        if scope["type"] == "http":
            asked.append(scope["path"])
        await app(scope, receive, send)

    def connect():
        return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET, max_attempts=1,
                           transport=httpx.ASGITransport(app=outer))
    return connect, asked


def _problem(tmp_path, control_plane: str, order: str) -> tuple[str, list[str]]:
    (tmp_path / "team-a.yaml").write_text(_spec(order))
    connect, asked = _connect(control_plane)
    with pytest.raises(errors.SpecError) as exc:
        operations.plan(str(tmp_path), MemoryStore(), connect, operations.PlanOptions())
    [problem] = exc.value.problems
    return problem, asked


def _creates(tmp_path, control_plane: str, order: str) -> int:
    (tmp_path / "team-a.yaml").write_text(_spec(order))
    result = operations.plan(str(tmp_path), MemoryStore(), _connect(control_plane)[0],
                             operations.PlanOptions())
    return result.plan.counts()["create"]


def test_a_rank_is_checked_against_the_ranks_of_a_3_0_control_plane(tmp_path):
    assert _creates(tmp_path, "3.0", "rank: MediumLow") == 1
    problem, asked = _problem(tmp_path, "3.0", "rank: Normal")
    assert problem.startswith(f"{tmp_path / 'team-a.yaml'}:7: resources.default.rank: "
                              "no rank is named 'Normal' (there are: "), problem
    assert "MediumLow" in problem and "VeryHigh" in problem
    assert RANKS in asked and PRIORITIES not in asked


def test_a_priority_on_a_3_0_control_plane_fails_the_plan_saying_to_write_rank(tmp_path):
    problem, asked = _problem(tmp_path, "3.0", "priority: Normal")
    assert problem == (
        f"{tmp_path / 'team-a.yaml'}:7: resources.default.priority: the control plane "
        f"serves no priority (GET {PRIORITIES} answers 404): a Run:ai 3.0 control plane "
        "ranks its units instead: write `rank`"), problem
    assert PRIORITIES in asked


def test_a_priority_is_checked_against_the_priorities_of_a_2_24_control_plane(tmp_path):
    assert _creates(tmp_path, "2.24", "priority: High") == 1
    problem, asked = _problem(tmp_path, "2.24", "priority: MediumLow")
    assert problem.startswith(f"{tmp_path / 'team-a.yaml'}:7: resources.default.priority: "
                              "no priority is named 'MediumLow' (there are: High, Low, "
                              "Normal)"), problem
    assert RANKS not in asked
