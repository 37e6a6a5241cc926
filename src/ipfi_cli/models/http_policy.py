"""What happens when a served model does not answer, and what its requests cost: the outage policy
and the counts of :class:`~ipfi_cli.models.http.HttpPredictor` (which sends the requests).

* **the model is unreachable** (connection refused or reset, a timeout, 408, 429, 502, 503, 504):
  the request is sent again after a pause (exponential from 0.25 s to 5 s; ``Retry-After`` is
  honoured) for as long as ``model_wait`` seconds from the first failure. Meanwhile the run
  reads no input (the producer upstream waits: nothing is dropped) and :attr:`RequestLedger.on_notice`
  hears a line every 30 s; when the model answers again the run goes on with the same numbers.
  Past ``model_wait``: :class:`~ipfi_cli.models.http_options.HttpModelError`.
* **the server failed on the request** (500): tried again at most ``retries`` times.

The counts (requests answered, rows sent, tries by outcome, retries, outages, a latency
histogram) are shared by the threads of the requests in flight; ``--meta`` records
:meth:`RequestLedger.stats` and the metrics export them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ipfi_cli.models.http_options import FIRST_PAUSE, MAX_PAUSE, HttpModelError, HttpOptions, format_duration

#: upper bounds (seconds) of the request latency histogram's buckets (Prometheus' defaults)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: seconds of an outage before the first notice, and between two notices
FIRST_NOTICE = 5.0
NOTICE_EVERY = 30.0


class RequestLedger:
    """A served model's requests: their counts, and whether the model is down now (one per predictor)."""

    def __init__(self, options: HttpOptions) -> None:
        self.options = options
        self.requests = 0
        self.rows_sent = 0
        self.seconds = 0.0
        self.retried = 0
        self.outcomes: dict[str, int] = {}  # tries by outcome: ok, unavailable, error, refused
        self.latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)  # answered requests by seconds taken
        self.latency_sum = 0.0
        self.waited = 0.0  # seconds spent waiting for an unreachable model
        self.outages = 0
        #: hears one line while the model is unreachable (every 30 s) and when it answers again
        self.on_notice: Callable[[str], None] | None = None
        #: hears ``True`` when the model becomes unreachable and ``False`` when it answers again
        self.on_down: Callable[[bool], None] | None = None
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._noticed_at: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in ("_lock", "on_notice", "on_down"):
            state[name] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def count(self, outcome: str, seconds: float | None = None) -> None:
        """One try's outcome; ``seconds``: an answered request's latency."""
        with self._lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if seconds is not None:
                self.requests += 1
                self.seconds += seconds
                self.latency_sum += seconds
                index = next((i for i, bound in enumerate(LATENCY_BUCKETS) if seconds <= bound),
                             len(LATENCY_BUCKETS))
                self.latency_counts[index] += 1

    def sent(self, rows: int) -> None:
        with self._lock:
            self.rows_sent += rows

    def tries(self) -> Tries:
        """The tries of one request."""
        return Tries(self)

    def stats(self) -> dict[str, Any]:
        """What the run asked of the server: requests answered, rows sent, seconds spent in requests,
        tries repeated (``retried``: each a request sent again after a failure), tries by outcome,
        outages and the seconds waited in them. ``--meta`` records it; the metrics export it."""
        with self._lock:
            return {"requests": self.requests, "rows_sent": self.rows_sent, "seconds": round(self.seconds, 3),
                    "retried": self.retried, "outcomes": dict(sorted(self.outcomes.items())),
                    "outages": self.outages, "waited_seconds": round(self.waited, 3),
                    "concurrency": self.options.concurrency}

    def latency(self) -> tuple[tuple[float, ...], list[int], float]:
        """The latency histogram of answered requests: bucket bounds, counts per bucket (the last
        above every bound), and the sum of seconds."""
        with self._lock:
            return LATENCY_BUCKETS, list(self.latency_counts), self.latency_sum

    @property
    def is_down(self) -> bool:
        """Whether the model is unreachable now (a request is waiting for it)."""
        return self._down_since is not None

    def _down(self, now: float) -> None:
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = now
            self._noticed_at = None
            self.outages += 1
        if self.on_down is not None:
            self.on_down(True)

    def _notice(self, down: float, problem: str) -> None:
        """A line after FIRST_NOTICE seconds of an outage, then every NOTICE_EVERY seconds (one for all
        the requests in flight)."""
        now = time.monotonic()
        with self._lock:
            since = self._down_since if self._down_since is not None else now - down
            due = since + FIRST_NOTICE if self._noticed_at is None else self._noticed_at + NOTICE_EVERY
            if now < due:
                return
            self._noticed_at = now
        if self.on_notice is not None:
            self.on_notice(f"model unreachable for {format_duration(now - since)}; waiting up to "
                           f"{format_duration(self.options.model_wait)} (--model-wait): {problem}")

    def _back(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            since, self._down_since = self._down_since, None
        if self.on_down is not None:
            self.on_down(False)
        if self.on_notice is not None and time.monotonic() - since >= FIRST_NOTICE:
            self.on_notice(f"the model answers again, after {format_duration(time.monotonic() - since)}")


class Tries:
    """One request's tries under the policy (the module docstring)."""

    def __init__(self, ledger: RequestLedger) -> None:
        self.ledger = ledger
        self.tries = 0
        self.failures = 0
        self.outage_began: float | None = None

    def answered(self, seconds: float) -> None:
        """The request was answered (2xx) after ``seconds``."""
        self.ledger.count("ok", seconds)
        if self.outage_began is not None:
            self.ledger._back()

    def wait(self, problem: str, unavailable: bool, retry_after: float | None) -> None:
        """A try failed (``unavailable``: the model cannot answer now): pause before the next one, or
        raise :class:`HttpModelError` when the policy gives up."""
        ledger, options = self.ledger, self.ledger.options
        self.tries += 1
        now = time.monotonic()
        if unavailable:
            ledger.count("unavailable")
            if self.outage_began is None:
                self.outage_began = now
                ledger._down(now)
            down = now - self.outage_began
            if down >= options.model_wait:
                raise HttpModelError(f"{options.display_url}: the model did not answer for {format_duration(down)} "
                                     f"(--model-wait {format_duration(options.model_wait)}): {problem}")
            ledger._notice(down, problem)
            pause = min(MAX_PAUSE, retry_after if retry_after is not None else FIRST_PAUSE * 2 ** (self.tries - 1),
                        max(0.05, options.model_wait - down))
        else:
            ledger.count("error")
            self.failures += 1
            if self.failures > options.retries:
                raise HttpModelError(f"{options.display_url}: gave up after {self.tries} "
                                     f"tr{'y' if self.tries == 1 else 'ies'} (--retries {options.retries}): {problem}")
            pause = min(MAX_PAUSE, retry_after if retry_after is not None else FIRST_PAUSE * 2 ** (self.failures - 1))
        time.sleep(pause)
        with ledger._lock:
            ledger.retried += 1
            if unavailable:
                ledger.waited += pause
