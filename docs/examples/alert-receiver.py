"""A stand-in for a Slack webhook, to try `runai-reconcile watch --notify` on one machine:
listens on 127.0.0.1:PORT (9099 unless given) and prints each alert POSTed to it as one
line, `<event>: <text>`, answering 204. Used by the tour in docs/watch.md.

    python3 docs/examples/alert-receiver.py 9099 &
"""

import http.server
import json
import sys


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        alert = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = alert["text"].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        print(f"{alert['event']}: {text}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 9099
http.server.HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
