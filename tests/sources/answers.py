"""A real HTTP server on 127.0.0.1 whose answers a test writes: the served-model contract's faults
(malformed answers, wrong types, huge or slow answers, hostile error messages).

``Answers(reply)`` calls ``reply(path, payload)`` for each request, which returns the body (bytes,
or a value sent as JSON) or a :class:`Reply` for a status, headers or a trickle.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: seconds between bytes (0: all at once)
    trickle: float = 0.0
    #: send this Content-Length instead of the body's
    length: int | None = None


class Answers:
    """A server that answers what ``reply`` says; ``requests`` counts the requests it got."""

    def __init__(self, reply: Callable[[str, Any], Any]) -> None:
        self.reply = reply
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # the headers and the body go in two writes: with Nagle's algorithm each answer on a kept-alive
            # connection waits for the client's delayed ACK (40 ms)
            disable_nagle_algorithm = True

            def _answer(self, payload: Any) -> None:
                owner.requests += 1
                got = owner.reply(self.path, payload)
                reply = got if isinstance(got, Reply) else Reply(got)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    if "Content-Type" not in reply.headers:
                        self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(reply.length if reply.length is not None else len(data)))
                    self.end_headers()
                    if reply.trickle:
                        for i in range(len(data)):
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up
                    self.close_connection = True

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer(json.loads(body) if body else None)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(None)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:  # a client that left: not news
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.base + "/invocations"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def rows_of(payload: Any) -> list[dict[str, Any]]:
    """The records of an MLflow ``dataframe_split`` request."""
    split = payload["dataframe_split"]
    return [dict(zip(split["columns"], row)) for row in split["data"]]
