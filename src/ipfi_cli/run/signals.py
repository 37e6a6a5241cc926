"""Ctrl-C and SIGTERM during a run: wait for the end of the micro-batch under way.

Between micro-batches the explainer, the records written and (with ``--state``) the saved state
agree, so a run that stops there can end its output with the last explained row's record, or
continue from its state. While the run waits for input the signal stops it at once; during a
micro-batch it is deferred to the batch's end, and a line on stderr says so. A second signal
during the same batch (:data:`SECOND_SIGNAL_AFTER` seconds or more after the first) stops at once
when the guard allows it (``force_on_second``): the records written are whole, but the output has
no last record and ``--state`` stays at its last checkpoint. A checkpoint being saved is never
cut short, nor is the end of a run (once the batches are over: the last record, the state,
``--meta``): a signal then only gets a line saying so.

The ``ipfi`` process calls :func:`install` first thing: from then on Ctrl-C and SIGTERM raise
:class:`KeyboardInterrupt` (which the command line turns into one line and exit 130), and
:func:`hold_until_exit` has them ignored once a command has written its results or is exiting.
"""

from __future__ import annotations

import os
import signal
import threading
import time

TYPE_CHECKING = False  # the ipfi process imports this module first thing: typing would delay its handlers
if TYPE_CHECKING:
    from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: a second signal stops at once only this many seconds after the first: one Ctrl-C that reaches the
#: process twice (a wrapper that passes SIGTERM on, and the terminal's SIGINT to the whole group) is one
SECOND_SIGNAL_AFTER = 1.0

#: the environment variable that tells a re-executed ``ipfi`` to let through the signals its
#: first process blocked across ``exec`` (:func:`block_for_exec`, :func:`unblock_after_exec`)
BLOCKED_ENV = "_IPFI_SIGNALS_BLOCKED"

_process = False  # install() was called: this is the ipfi command's process, not a library user's
_requested: int | None = None  # a signal that reached the process's handler and was not yet acted on
_holding = False  # the command has written its results: signals are ignored


def write_stderr(text: str) -> None:
    """One line on stderr from a signal handler: a raw write, which takes no lock that the
    interrupted code may hold (``print`` could fail as a reentrant call)."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _interrupt(signum: int, frame: Any) -> None:
    """The process's handler outside a run's micro-batches: stop (or, holding, nothing)."""
    global _requested
    if _holding:
        return
    _requested = signum
    raise KeyboardInterrupt


def install() -> None:
    """Ctrl-C and SIGTERM raise :class:`KeyboardInterrupt` in this process from now on (SIGTERM's
    default would end it with no word and no cleanup); main thread only, as signals are."""
    global _process
    if threading.current_thread() is not threading.main_thread():
        return
    _process = True
    for sig in SIGNALS:
        # a SIGINT ignored from the start (a background job of a script) stays so, as Python leaves it
        if signal.getsignal(sig) is not signal.SIG_IGN or sig == signal.SIGTERM:
            signal.signal(sig, _interrupt)


def installed() -> bool:
    """Whether :func:`install` has run (this is the ``ipfi`` process)."""
    return _process


def hold_until_exit() -> None:
    """The ``ipfi`` process has written its results (or is exiting): Ctrl-C and SIGTERM are
    ignored, so nothing is cut short and no traceback comes while Python ends.
    Only in the ``ipfi`` process (:func:`install`); a program that uses ipfi keeps its handlers."""
    global _holding
    if not _process or threading.current_thread() is not threading.main_thread():
        return
    _holding = True
    for sig in SIGNALS:
        # ignored, not a Python handler: Python's end puts back the default (death by the signal) for
        # those, and freeing a large model afterwards can take a while
        signal.signal(sig, signal.SIG_IGN)


def take_request() -> int | None:
    """The signal that reached the process's handler before a run's loop began, if any (its
    :class:`KeyboardInterrupt` may have been swallowed by a library during the set-up); forgotten
    once taken."""
    global _requested
    signum, _requested = _requested, None
    return signum


def block_for_exec() -> None:
    """Before re-executing ``ipfi``: hold SIGINT and SIGTERM pending (the mask survives ``exec``)
    so that one sent meanwhile is not met by the new interpreter's default (dying with no word)."""
    if not hasattr(signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    os.environ[BLOCKED_ENV] = "1"


def unblock_after_exec() -> None:
    """Undo :func:`block_for_exec` (after a failed ``exec``, or in the new process once
    :func:`install` has run): a signal held pending is delivered now."""
    if os.environ.pop(BLOCKED_ENV, None) is None or not hasattr(signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


class BatchGuard:
    """Whether a micro-batch is under way, and whether a stop waits for its end.

    ``force_on_second``: a second signal during a batch stops at once (:attr:`forced` then says
    the explainer may be in the middle of the batch). :attr:`saving`: a checkpoint is being
    written (a signal waits for it); :attr:`ending`: the batches are over (a signal changes nothing).
    """

    def __init__(self, *, force_on_second: bool = False) -> None:
        self.busy = False
        self.stop_requested = False
        self.force_on_second = force_on_second
        self.forced = False
        self.saving = False
        self.ending = False

    def batch_done(self) -> None:
        """The micro-batch is done: a stop asked for during it happens now."""
        self.busy = False
        if self.stop_requested:
            self.ending = True
            raise KeyboardInterrupt


class DeferredSignals:
    """SIGINT and SIGTERM handled by ``guard`` until :meth:`restore` (see the module docstring).

    ``notice``: the line written to stderr when a stop is deferred to the end of the batch
    (``None``: none).
    """

    def __init__(self, guard: Any, notice: str | None = None) -> None:
        said_ending: list[bool] = []
        first: list[float] = []  # when the stop was asked for

        def stop(signum: int, frame: Any) -> None:
            if getattr(guard, "ending", False):  # the last record, the state, --meta: never cut short
                if notice is not None and not said_ending:
                    said_ending.append(True)
                    write_stderr("ipfi: already stopping: finishing the output first (the last record, the state, "
                                  "--meta)\n")
                return
            if not guard.busy:
                guard.ending = True
                raise KeyboardInterrupt
            if guard.stop_requested and getattr(guard, "force_on_second", False) \
                    and not getattr(guard, "saving", False) \
                    and (not first or time.monotonic() - first[0] >= SECOND_SIGNAL_AFTER):
                guard.forced = True
                guard.ending = True
                raise KeyboardInterrupt
            if not guard.stop_requested:
                first.append(time.monotonic())
                if notice is not None:
                    write_stderr(f"ipfi: {notice}\n")
            guard.stop_requested = True

        self._previous = {sig: signal.signal(sig, stop) for sig in SIGNALS}

    def restore(self, *, ending: bool = False) -> None:
        """Put back the handlers there were; ``ending``: the run is over and, in the ``ipfi``
        process, what remains is its end (:func:`hold_until_exit` instead)."""
        if ending and _process:
            hold_until_exit()
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def defer_signals(guard: Any, notice: str | None = None) -> DeferredSignals | None:
    """:class:`DeferredSignals` for ``guard``; ``None`` off the main thread (signals go to it only)
    and once the process holds them until it exits (:func:`hold_until_exit`)."""
    if threading.current_thread() is not threading.main_thread() or _holding:
        return None
    return DeferredSignals(guard, notice)
