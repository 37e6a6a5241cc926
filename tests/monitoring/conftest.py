"""Real monitoring components on 127.0.0.1: Debian's prometheus, prometheus-pushgateway and promtool.

Each is started in its own temporary folder on a free port, polled until ready with a bounded
loop, and killed at the end. A test that needs one skips, saying why, where it is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
HGB = str(SAMPLE / "agrawal_hgb.joblib")


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed (Debian: apt-get install prometheus prometheus-pushgateway; "
                    ".ci/run does it)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: str, log: Path | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, ValueError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(0.2)
    tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})\n{tail}")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class Server:
    """A process in its own process group, killed (the group) by :meth:`stop`."""

    def __init__(self, args: list[str], log: Path, cwd: Path) -> None:
        self.log = log
        self._file = open(log, "wb")
        self.process = subprocess.Popen(args, stdout=self._file, stderr=subprocess.STDOUT, cwd=cwd,
                                        start_new_session=True)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._file.close()


class Prometheus(Server):
    def __init__(self, folder: Path, scrape_targets: dict[str, str], rule_files: list[str]) -> None:
        binary = need("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        jobs = "\n".join(
            f"  - job_name: {name}\n    static_configs:\n      - targets: ['{target}']\n"
            f"        labels: {{stream: {name}}}"
            for name, target in scrape_targets.items())
        rules = "".join(f"\n  - {path}" for path in rule_files)
        config = folder / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          f"rule_files:{rules or ' []'}\nscrape_configs:\n{jobs}\n")
        super().__init__([binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                         folder / "prometheus.log", folder)
        wait_for(lambda: urllib.request.urlopen(self.url + "/-/ready", timeout=2).status == 200, 60,
                 "prometheus to be ready", self.log)

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = get_json(f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}")
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(get_json(f"{self.url}/api/v1/alerts")["data"]["alerts"])


@pytest.fixture
def pushgateway(tmp_path) -> Iterator[str]:
    binary = need("prometheus-pushgateway")
    port = free_port()
    # its own persistence file: Debian's build persists to /var/lib/prometheus by default
    server = Server([binary, f"--web.listen-address=127.0.0.1:{port}", f"--persistence.file={tmp_path / 'pg.data'}"],
                    tmp_path / "pushgateway.log", tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: urllib.request.urlopen(url + "/-/ready", timeout=2).status == 200, 30,
                 "the pushgateway to be ready", server.log)
        yield url
    finally:
        server.stop()


def ipfi(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the command in a subprocess (as a user would)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "ipfi_cli", *args], capture_output=True, text=True, env=env,
                          timeout=kwargs.pop("timeout", 300), **kwargs)


def ipfi_process(*args: str, stderr: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-m", "ipfi_cli", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=open(stderr, "wb"), env=env)


def sample_lines(name: str) -> list[str]:
    return (SAMPLE / name).read_text().splitlines()


class Receiver:
    """A webhook receiver (standard library) on 127.0.0.1: it records every POST (or PUT) body it accepts.

    ``fail_first``: answer the first N attempts of each body with 503; ``status``: answer with
    this status always (``reason``: with this reason phrase); ``gate``: an Event each request waits
    for (a receiver that hangs); ``path``: the URL's path; ``authorization``: answer 401 to a request
    without this Authorization header (every request's is kept in ``authorizations``)."""

    def __init__(self, *, fail_first: int = 0, status: int = 200, delay: float = 0.0, reason: str | None = None,
                 path: str = "/hook", authorization: str | None = None) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies: list[bytes] = []
        self.authorizations: list[str | None] = []
        self.paths: list[str] = []  # each request's method, path and query
        self.attempts: dict[bytes, int] = {}
        self.gate = threading.Event()
        self.gate.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.authorizations.append(self.headers.get("Authorization"))
                receiver.paths.append(f"{self.command} {self.path}")
                if authorization is not None and self.headers.get("Authorization") != authorization:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver.gate.wait(30)
                if delay:
                    time.sleep(delay)
                seen = receiver.attempts[body] = receiver.attempts.get(body, 0) + 1
                code = 503 if seen <= fail_first else status
                if code == 200:
                    receiver.bodies.append(body)
                self.send_response(code, reason if code == status else None)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_POST  # noqa: N815 - a Pushgateway push (replacing its group) is a PUT

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[Any]:
        return [json.loads(body) for body in self.bodies]

    def stop(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(**kwargs: Any) -> Receiver:
        made.append(Receiver(**kwargs))
        return made[-1]

    yield make
    for receiver in made:
        receiver.stop()
