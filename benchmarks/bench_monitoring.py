"""The cost of ``--metrics-port`` and ``--webhook`` on the throughput of ``ipfi explain``.

Run from the repository root::

    python benchmarks/bench_monitoring.py            # 7 interleaved rounds (a few minutes)
    python benchmarks/bench_monitoring.py --quick    # 3 rounds

Each round runs the same session (:class:`~ipfi_cli.run.explain.ExplainSession`, in this process,
traces to ``/dev/null``) four ways, in an order that alternates from round to round so load bursts
from other processes hit every variant:

* ``plain``: the sample HistGradientBoosting model on 2,000 rows around the drift of
  ``sample_data/agrawal_drift.csv`` (9 features, M = 10, one OpenMP thread);
* ``metrics``: the same with ``--metrics-port 0`` and a scraper in another process fetching
  ``/metrics`` every 0.5 s (Prometheus' default is every 15 s: this is 30 times more; the
  server's side of each scrape runs in this process and counts);
* ``detect``: ``--detect`` (the reference of the webhook: the webhook posts the detector's events);
* ``webhook``: ``--detect --webhook`` to a receiver in another process (its CPU is not ours),
  every event posted (``--webhook-cooldown 0``).

The figure is CPU time of this process (``time.process_time``: the exporter's and the sender's
threads count), the median over the rounds; the target is a ratio <= 1.03 for ``metrics/plain``
and ``webhook/detect``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


SCRAPER = """
import sys, time, urllib.request
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
            r.read()
    except OSError:
        pass
    time.sleep(0.5)
"""


def stream_file(folder: Path) -> Path:
    lines = (ROOT / "sample_data" / "agrawal_drift.csv").read_text().splitlines()
    path = folder / "bench_monitoring.csv"
    path.write_text("\n".join([lines[0], *lines[1 + 9000:1 + 11000]]) + "\n")
    return path


def run(path: Path, variant: str, webhook: str) -> tuple[float, int]:
    from ipfi_cli.core.params import PFIParams
    from ipfi_cli.run.explain import ExplainSession
    from ipfi_cli.run.monitor import MonitorSettings
    from ipfi_cli.run.plan import InputSpec, Selection
    from ipfi_cli.run.report import PlainReporter
    from ipfi_cli.run.settings import Display, ExplainSettings, ModelSpec, OutputSpec
    from ipfi_cli.run.watch import WatchSettings

    monitor = None
    if variant == "metrics":
        monitor = MonitorSettings(metrics_port=0)
    elif variant == "webhook":
        monitor = MonitorSettings(webhook=webhook, webhook_cooldown=0.0)
    watch = WatchSettings() if variant in ("detect", "webhook") else None
    settings = ExplainSettings(ModelSpec(str(ROOT / "sample_data" / "agrawal_hgb.joblib")), Selection(target="class"),
                               inputs=InputSpec(path=str(path)), output=OutputSpec(path=os.devnull), seed=1,
                               params=PFIParams(n_repeats=10), display=Display(live=False), watch=watch,
                               monitor=monitor)
    session = ExplainSession(settings, PlainReporter(quiet=True))
    stop = threading.Event()
    scraper = None
    if variant == "metrics":
        def scrape() -> None:  # Prometheus' side runs in another process: its CPU is not ours
            while session.monitor is None or session.monitor.exporter.server is None:
                if stop.wait(0.01):
                    return
            url = f"http://127.0.0.1:{session.monitor.exporter.server.port}/metrics"
            client = subprocess.Popen([sys.executable, "-c", SCRAPER, url])
            stop.wait()
            client.kill()
            client.wait()

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
    start = time.process_time()
    session.run()
    seconds = time.process_time() - start
    stop.set()
    if scraper is not None:
        scraper.join()
    posted = session.monitor.notifier.sender.stats.sent if variant == "webhook" else 0
    if variant == "metrics":
        LAST_SESSION.append(session)
    return seconds, posted


LAST_SESSION: list[Any] = []


def update_costs(session: Any) -> tuple[float, float]:
    """CPU seconds of one metrics update (what the stream pays every second) and of one scrape's
    exposition (paid by the server thread), measured directly on a finished run's session."""
    from ipfi_cli.io.prometheus import exposition
    from ipfi_cli.run.monitor import MetricsExporter, MonitorSettings

    exporter = MetricsExporter(MonitorSettings(metrics_port=None), session.settings)
    snapshot = session.snapshot()
    n = 2000
    start = time.process_time()
    for _ in range(n):
        exporter._update(snapshot)  # what on_snapshot does once a second
    update = (time.process_time() - start) / n
    start = time.process_time()
    for _ in range(n):
        exposition(exporter.metrics)
    scrape = (time.process_time() - start) / n
    return update, scrape


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    import tempfile

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())  # type: ignore[union-attr]
        webhook = f"http://127.0.0.1:{port}/hook"
        variants = ["plain", "metrics", "detect", "webhook"]
        times: dict[str, list[float]] = {v: [] for v in variants}
        posted: list[int] = []
        with tempfile.TemporaryDirectory() as folder:
            path = stream_file(Path(folder))
            run(path, "plain", webhook)  # warm-up: imports, model load caches
            for r in range(rounds):
                order = variants if r % 2 == 0 else variants[::-1]
                for variant in order:
                    seconds, sent = run(path, variant, webhook)
                    times[variant].append(seconds)
                    if variant == "webhook":
                        posted.append(sent)
                print(f"round {r + 1}: " + ", ".join(f"{v} {times[v][-1]:.2f} s" for v in variants), flush=True)
    finally:
        receiver.kill()
        receiver.wait()
    median: dict[str, Any] = {v: statistics.median(times[v]) for v in variants}
    print(f"\nipfi explain, 2,000 rows, HGB, M = 10, {rounds} interleaved rounds; Python {platform.python_version()}")
    print("CPU seconds (median): " + ", ".join(f"{v} {median[v]:.3f}" for v in variants))
    for name, (a, b) in {"--metrics-port (scraped every 0.5 s) / plain": ("metrics", "plain"),
                         "--webhook / --detect": ("webhook", "detect")}.items():
        ratio = median[a] / median[b]
        print(f"{name}: {ratio:.3f} (target <= 1.03: {'met' if ratio <= 1.03 else 'NOT met'})")
    print(f"events posted per webhook run: {sorted(set(posted))}")
    update, scrape = update_costs(LAST_SESSION[-1])
    print(f"one metrics update: {update * 1e6:.0f} us of CPU (once a second while rows flow: "
          f"{update * 100:.3f} % of a busy second); one scrape's exposition: {scrape * 1e6:.0f} us "
          f"(every 15 s by default: {scrape / 15 * 100:.4f} %)")


if __name__ == "__main__":
    main()
