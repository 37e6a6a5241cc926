"""Posting change events to a webhook without ever holding the stream back.

:meth:`WebhookSender.send` only puts a JSON body on a bounded queue (a full queue drops the
post and counts it); one background thread posts them in order, retrying a post that
failed for a reason that may pass (no connection, a timeout, HTTP 408, 429 or 5xx) with
exponential back-off, and giving up on one the receiver refused (other 4xx). A post whose
``dedup`` key was queued before is not queued again, and one whose ``cooldown`` key was
queued less than ``cooldown`` seconds ago is suppressed (one page per feature and direction,
not one per row of a flapping feature). :meth:`close` waits a bounded time for the queue to
drain; what is still unsent then is counted as dropped. The end-of-run line says why the last
failed attempt failed (:func:`failure_reason`: the HTTP status and its reason phrase, or the
network error; :mod:`ipfi_cli.io.urls`), one printable line that never holds the URL's secrets. A ``user:password@`` in
the URL is sent as HTTP basic authentication, as ``--pushgateway`` sends it
(:func:`~ipfi_cli.io.urls.split_credentials`). Standard library only.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ipfi_cli.io.urls import check_url, failure_reason, shown_url, split_credentials

__all__ = ["RETRY_STATUSES", "WebhookSender", "WebhookStats", "failure_reason", "shown_url"]

_STOP = object()
#: statuses worth another try: the receiver may take the same post later
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass
class WebhookStats:
    """What became of the posts of one run."""

    queued: int = 0  # accepted onto the queue
    sent: int = 0  # answered with a 2xx status
    retries: int = 0  # attempts after a first one failed
    failed: int = 0  # given up: refused (4xx) or still failing after every retry
    dropped: int = 0  # never attempted: the queue was full, or still unsent when the run ended
    suppressed: int = 0  # within the cooldown of the same key
    duplicates: int = 0  # the same event again
    last_failure: str | None = None  # why the last failed attempt failed (see failure_reason)

    def summary(self, url: str) -> str | None:
        """One line for the end of a run (``None`` when there was nothing to post)."""
        if not (self.queued or self.dropped or self.suppressed or self.duplicates):
            return None
        parts = [f"{self.sent:,} of {self.queued:,} post(s) delivered"]
        if self.retries:
            parts.append(f"{self.retries:,} retried attempt(s)")
        if self.failed:
            parts.append(f"{self.failed:,} failed after retries or refused")
        if self.dropped:
            parts.append(f"{self.dropped:,} dropped (queue full or unsent at the end)")
        if self.suppressed:
            parts.append(f"{self.suppressed:,} suppressed by the cooldown")
        if self.duplicates:
            parts.append(f"{self.duplicates:,} duplicate(s) not sent again")
        if self.last_failure and (self.retries or self.failed):
            parts.append(f"the last failed attempt: {self.last_failure}")
        return f"--webhook {url}: " + "; ".join(parts)


class WebhookSender:
    """Post JSON bodies to ``url`` from a background thread (see the module docstring).

    >>> sender = WebhookSender("http://127.0.0.1:9/", retries=0, timeout=0.5)  # nothing listens on port 9
    >>> sender.send(b'{"event": 1}', dedup="e1")
    True
    >>> sender.send(b'{"event": 1}', dedup="e1")  # the same event: not queued twice
    False
    >>> stats = sender.close(wait=5)
    >>> (stats.queued, stats.sent, stats.failed, stats.duplicates)
    (1, 0, 1, 1)
    """

    def __init__(self, url: str, *, queue_size: int = 1000, retries: int = 3, timeout: float = 5.0,
                 backoff: float = 0.5, max_backoff: float = 30.0, cooldown: float = 0.0,
                 headers: Mapping[str, str] | None = None) -> None:
        problem = check_url(url)
        if problem is not None:  # refused here: the thread would fail on every post
            raise ValueError(problem)
        self.url = url  # as given: failure reasons mask its secrets
        # a user:password@ is HTTP basic authentication (urllib would take it for part of the host)
        self._target, authorization = split_credentials(url)
        self.retries = retries
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.cooldown = cooldown
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        if authorization is not None:
            self.headers["Authorization"] = authorization
        self.stats = WebhookStats()
        self._dropped_late = 0  # counted by the thread (the other counters of the thread: sent, retries, failed)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._seen: set[Hashable] = set()
        self._last: dict[Hashable, float] = {}
        self._abort = threading.Event()
        self._thread = threading.Thread(target=self._work, name="ipfi-webhook", daemon=True)
        self._thread.start()

    # -- the stream's side: never blocks ---------------------------------------------------------
    def send(self, body: bytes, *, dedup: Hashable | None = None, cooldown: Hashable | None = None) -> bool:
        """Queue one post; ``False`` when it is not queued (a duplicate, in its cooldown, or the queue is full)."""
        if dedup is not None:
            if dedup in self._seen:
                self.stats.duplicates += 1
                return False
        now = time.monotonic()
        if cooldown is not None and self.cooldown > 0:
            last = self._last.get(cooldown)
            if last is not None and now - last < self.cooldown:
                self.stats.suppressed += 1
                return False
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.stats.dropped += 1
            return False
        if dedup is not None:
            self._seen.add(dedup)
        if cooldown is not None:
            self._last[cooldown] = now
        self.stats.queued += 1
        return True

    def close(self, wait: float = 10.0) -> WebhookStats:
        """Let the queue drain for at most ``wait`` seconds, stop the thread, and return the counts."""
        deadline = time.monotonic() + wait
        try:
            self._queue.put(_STOP, timeout=max(0.0, wait))
        except queue.Full:
            pass
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._abort.set()  # what is left is dropped; a post under way ends by its timeout
            try:
                self._queue.put_nowait(_STOP)
            except queue.Full:
                pass
            self._thread.join(timeout=self.timeout + 1.0)
        while True:  # anything the thread did not reach
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self._dropped_late += 1
        self.stats.dropped += self._dropped_late
        self._dropped_late = 0
        return self.stats

    # -- the thread ----------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._abort.is_set():
                self._dropped_late += 1
                continue
            self._deliver(item)

    def _deliver(self, body: bytes) -> None:
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats.retries += 1
                if self._abort.wait(min(self.backoff * 2 ** (attempt - 1), self.max_backoff)):
                    break
            outcome = self._post(body)
            if outcome == "sent":
                self.stats.sent += 1
                return
            if outcome == "refused":
                break
        self.stats.failed += 1

    def _post(self, body: bytes) -> str:
        try:
            request = urllib.request.Request(self._target, data=body, headers=self.headers, method="POST")
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's URL
                response.read()
            return "sent"
        except urllib.error.HTTPError as error:
            self.stats.last_failure = failure_reason(error, self.url)
            return "retry" if error.code in RETRY_STATUSES else "refused"
        except (OSError, ValueError) as error:  # no connection, a timeout, a reset
            self.stats.last_failure = failure_reason(error, self.url)
            return "retry"
