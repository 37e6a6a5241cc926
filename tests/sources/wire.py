"""Standard-library HTTP servers that serve a fitted model over MLflow's protocol with each framing
a conforming server may use, and count what they were sent.

``framing`` is one of:

* ``"keep-alive"``: HTTP/1.1, answers with ``Content-Length``, the connection kept open;
* ``"chunked"``: HTTP/1.1, answers with ``Transfer-Encoding: chunked`` (several chunks);
* ``"http/1.0"``: HTTP/1.0, the connection closed after each answer;
* ``"close"``: HTTP/1.1 with ``Connection: close`` on every answer.

The server counts every POST it received and every connection it accepted, so a test can
check that each request was sent exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FRAMINGS = ("keep-alive", "chunked", "http/1.0", "close")


class WireServer:
    """A real server on 127.0.0.1 (an ephemeral port) answering ``POST /invocations``.

    ``delay`` seconds are slept before each answer (a model that takes time); while
    :attr:`down` is set, every connection is closed without an answer.
    """

    def __init__(self, model: Any, framing: str = "keep-alive", delay: float = 0.0, port: int = 0) -> None:
        if framing not in FRAMINGS:
            raise ValueError(framing)
        self.model = model
        self.framing = framing
        self.delay = delay
        self.posts = 0
        self.rows: list[int] = []  # rows in each POST, in the order they came
        self.connections = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.plan: list[int] = []  # statuses to answer before answering properly
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0" if framing == "http/1.0" else "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with server._lock:
                    server.posts += 1
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                    status = server.plan.pop(0) if server.plan else 200
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    if status != 200:
                        self.answer(status, {"message": "busy"})
                        return
                    import pandas as pd

                    split = json.loads(body)["dataframe_split"]
                    with server._lock:
                        server.rows.append(len(split["data"]))
                    frame = pd.DataFrame(split["data"], columns=split["columns"])
                    self.answer(200, {"predictions": server.model.predict(frame).tolist()})
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if framing == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(data)))
                if framing == "close":
                    self.send_header("Connection", "close")
                self.end_headers()
                if framing == "chunked":
                    step = max(1, len(data) // 3)
                    for start in range(0, len(data), step):
                        piece = data[start:start + step]
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(data)
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/invocations"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":  # python wire.py MODEL.joblib PORT [FRAMING]: a server in a process of its own
    import sys

    import joblib

    served = WireServer(joblib.load(sys.argv[1]), sys.argv[3] if len(sys.argv) > 3 else "keep-alive",
                        port=int(sys.argv[2]))
    print(served.url, flush=True)
    served.thread.join()
