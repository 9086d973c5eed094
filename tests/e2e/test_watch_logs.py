"""`watch --log-format json` as a log collector reads it: every line it writes to stderr
is one JSON object, its own events and the lines of the libraries under it alike (the API
client's with -v, the HTTP endpoint's uvicorn), and a watch that cannot start says why
as one too."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.helpers.simserve import free_port
from tests.helpers.watchproc import Watch, inference

pytestmark = pytest.mark.http


def _lines(path: Path) -> list[dict]:
    """Every stderr line, each parsed as JSON (a line that is not one fails, named)."""
    out = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        try:
            doc = json.loads(text)
        except ValueError:
            pytest.fail(f"stderr line {number} is not JSON: {text!r}")
        assert isinstance(doc, dict) and doc.get("ts") and doc.get("event"), text
        out.append(doc)
    return out


def test_every_stderr_line_is_one_json_object_uvicorns_included(ws, sim_server):
    ws.write("serve.yaml", inference("llama-serve"))
    assert ws.apply().exit_code == 0
    port = free_port()
    with Watch(ws, "--interval", "300ms", "--listen", f"127.0.0.1:{port}",
               extra_args=("-v",)) as w:
        w.wait_cycles(1)
        # What a port scanner or a TLS client sends: uvicorn logs it as a bad request.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
            conn.recv(1024)
        w.wait_for(lambda: any(e.get("logger") == "uvicorn.error" for e in w.events("log")),
                   what="uvicorn's line")
        assert w.stop() == 0
    lines = _lines(w.log_path)
    events = {e["event"] for e in lines}
    assert {"start", "cycle", "log", "stopped"} <= events
    uvicorn = [e for e in lines if e.get("logger") == "uvicorn.error"]
    assert uvicorn[0]["level"] == "warning"
    assert uvicorn[0]["message"] == "Invalid HTTP request received."
    # -v: the API client logs each request it sends, through the same formatter.
    assert any(e.get("logger") == "reconciler.api" and e["level"] == "info" for e in lines)


def test_a_watch_that_cannot_start_says_so_as_json(ws, sim_server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with Watch(ws, "--listen", f"127.0.0.1:{port}") as w:
            assert w.proc.wait(timeout=30) == 1
    lines = _lines(w.log_path)
    assert [e["event"] for e in lines] == ["error"]
    assert lines[0]["message"].startswith(f"--listen 127.0.0.1:{port}: port {port} is in use")
