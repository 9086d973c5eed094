"""The API client tests' materials: a static token, client credentials and a base URL
(not the simulator's), JWTs built by hand, scripted `httpx.MockTransport` handlers and
their answers, a training body, and `sim_serve` yielding a `sim serve` URL."""

from __future__ import annotations

import base64
import contextlib
import json
import pathlib

import httpx

from reconciler import kinds
from tests.helpers import simserve


TOKEN = "static-token-s3cr3t"


CLIENT_ID = "ci-bot"


CLIENT_SECRET = "client-secret-XYZ"


URL = "https://runai.example.test"


def make_jwt(exp: float, **claims) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'exp': int(exp), **claims})}.sig"


def json_response(status: int, body, **headers) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


@contextlib.contextmanager
def sim_serve(tmp_dir: pathlib.Path, *flags: str):
    """Run `runai-reconcile sim serve` on a free loopback port; yields its base URL."""
    with simserve.sim_serve(tmp_dir, *flags) as served:
        yield served.url


DT = kinds.DISTRIBUTED_TRAINING


WID = "0b6f2a4e-5d1c-4c47-9b67-3f1e2d7a9c11"


BODY = {"name": "bert", "projectId": "7", "clusterId": "71f69d83-ba66-4822-adf5-55ce55efd210",
        "spec": {"image": "pytorch:24.05", "numWorkers": 2}}


def scripted(*answers):
    """A handler answering each request with the next answer (a Response or an
    exception to raise); records the requests in `.seen`."""
    queue = list(answers)

    def handler(request: httpx.Request):
        handler.seen.append(request)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer
    handler.seen = []
    return handler
