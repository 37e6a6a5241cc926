"""Ctrl-C and SIGTERM during a run: wait for the end of the micro-batch under way.

Between micro-batches the explainer, the records written and (with ``--state``) the saved state
agree, so a run that stops there can end its output with the last explained row's record, or
continue from its state. While the run waits for input the signal stops it at once; during a
micro-batch it is deferred to the batch's end. A second signal during the same batch stops at
once when the guard allows it (a run without ``--state``, which then writes no last record).
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class BatchGuard:
    """Whether a micro-batch is under way, and whether a stop waits for its end.

    ``force_on_second``: a second signal during a batch stops at once (:attr:`forced` then says
    the explainer may be in the middle of the batch).
    """

    def __init__(self, *, force_on_second: bool = False) -> None:
        self.busy = False
        self.stop_requested = False
        self.force_on_second = force_on_second
        self.forced = False

    def batch_done(self) -> None:
        """The micro-batch is done: a stop asked for during it happens now."""
        self.busy = False
        if self.stop_requested:
            raise KeyboardInterrupt


class DeferredSignals:
    """SIGINT and SIGTERM handled by ``guard`` until :meth:`restore` (see the module docstring)."""

    def __init__(self, guard: Any) -> None:
        def stop(signum: int, frame: Any) -> None:
            if not guard.busy:
                raise KeyboardInterrupt
            if guard.stop_requested and getattr(guard, "force_on_second", False):
                guard.forced = True
                raise KeyboardInterrupt
            guard.stop_requested = True

        self._previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def defer_signals(guard: Any) -> DeferredSignals | None:
    """:class:`DeferredSignals` for ``guard``; ``None`` off the main thread (signals go to it only)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return DeferredSignals(guard)
