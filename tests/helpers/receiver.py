"""A tiny alert receiver on loopback for the notifier's tests: http.server in a thread,
recording each POST's JSON body and answering from a script of status codes (the last
one repeats). `hanging()` is a socket that listens and never answers."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time


class Receiver:
    def __init__(self, statuses=(200,)) -> None:
        self.statuses = list(statuses)
        self.bodies: list[dict] = []  # every POST, answered 2xx or not
        self.delivered: list[dict] = []  # those answered 2xx
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._lock:
                    status = (receiver.statuses.pop(0) if len(receiver.statuses) > 1
                              else receiver.statuses[0])
                    receiver.bodies.append(body)
                    receiver.paths.append(self.path)
                    if status < 300:
                        receiver.delivered.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks/T0/B0/token-xyz"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "Receiver":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, n: int, timeout: float = 10.0) -> list[dict]:
        """The delivered events once there are `n` of them (or what came by the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.delivered) < n:
            time.sleep(0.02)
        return list(self.delivered)


@contextlib.contextmanager
def hanging():
    """A URL whose server accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hooks/T0/B0/hidden-token"
    finally:
        sock.close()


def dead_url() -> str:
    """A loopback URL nobody listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/T0/B0/dead-token"
