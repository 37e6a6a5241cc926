"""Exit codes, and the one place where errors become them.

Every command runs its body inside :func:`reporting`: an :class:`~ipfi_cli.errors.IpfiError`
becomes one ``ipfi: error: ...`` line on stderr and exit 1, a
:class:`~ipfi_cli.errors.UsageError` one ``ipfi: usage error: ...`` line and exit 2, a closed output pipe
a quiet exit 1, anything unexpected one line naming its type (the traceback with ``--debug``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import typer

from ipfi_cli.errors import IpfiError, UsageError, first_line
from ipfi_cli.io.writers import silence_stdout
from ipfi_cli.run import signals
from ipfi_cli.run.signals import hold_until_exit
from ipfi_cli.text import message_line, terminal_safe

EXIT_OK = 0
EXIT_ERROR = 1  # data, model or runtime error; also: the output pipe was closed (e.g. `| head`)
EXIT_USAGE = 2  # bad command line (Typer's own exit code for usage errors)
EXIT_CHANGED = 3  # a change was detected, with --fail-on-change or --stop-on-change
EXIT_LOST = 4  # explain --max-lost: more rows given up waiting for labels and webhook posts undelivered than allowed
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 data or model error (or the output pipe closed early, as with "
    "`| head`); 2 usage error; 3 a change was detected (explain --fail-on-change or --stop-on-change; also when the "
    "--pushgateway push at the end then failed); 4 more rows given up waiting for their labels and webhook posts "
    "not delivered than explain --max-lost allows; 130 interrupted (Ctrl-C or SIGTERM)."
)


def usage_error(message: str, option: str | None = None) -> Exception:
    """An exception to raise for a bad option value: the app prints it as one line, its control
    characters escaped (it may quote data, such as column names), and exits 2. Without ``option``
    (the command line as a whole must change: an option to add), the message is all the line says."""
    if option is None:
        usage = next(kind for kind in typer.BadParameter.__mro__ if kind.__name__ == "UsageError")
        return usage(message)  # type: ignore[no-any-return]
    return typer.BadParameter(message, param_hint=f"'{option}'")


def say(message: str, kind: str | None = None) -> None:
    """One line on stderr, prefixed ``ipfi:`` (and ``error:``/``warning:`` when given); a very long
    one loses its middle (:func:`~ipfi_cli.text.message_line`)."""
    prefix = f"ipfi: {kind}: " if kind else "ipfi: "
    try:
        print(prefix + message_line(message), file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing more we can do
        pass


@contextlib.contextmanager
def reporting(debug: bool = False) -> Iterator[None]:
    """Run a command body: known errors become one stderr line and an exit code."""
    previous = _sigterm_as_interrupt()
    try:
        yield
    except KeyboardInterrupt:  # a command that ends its own output on Ctrl-C says so and exits itself
        raise interrupted("interrupted; no result was written") from None
    except (typer.Exit, typer.Abort, typer.BadParameter):
        raise
    except UsageError as error:
        raise usage_error(error.message, error.option) from None
    except BrokenPipeError:
        silence_stdout()
        raise typer.Exit(EXIT_ERROR) from None
    except Exception as error:  # noqa: BLE001 - this is the command's last line of defence
        if debug:
            _print_traceback()
        if isinstance(error, IpfiError):
            say(first_line(error), "error")
        else:
            say(f"unexpected {type(error).__name__}: {first_line(error)} (run with --debug for the traceback)",
                "error")
        raise typer.Exit(EXIT_ERROR) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _print_traceback() -> None:
    """``--debug``: the exception being handled's traceback on stderr, each line's control characters
    escaped as in the one-line messages (its last line is the error's message, which may quote a
    file's column names or values). Split at line feeds only, so a carriage return is shown too."""
    text = traceback.format_exc().rstrip("\n")
    try:
        print("\n".join(map(terminal_safe, text.split("\n"))), file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing more we can do
        pass


#: a command said in a line that Ctrl-C or SIGTERM stopped it (:func:`interrupted`)
_interruption_said = False


def interrupted(message: str | None) -> typer.Exit:
    """Ctrl-C or SIGTERM stopped a command: say ``message`` (``None``: the command's run said it
    already), note it, and return the exit to raise (130)."""
    global _interruption_said

    hold_until_exit()  # what is said now is said whole
    if message is not None:
        say(message)
    _interruption_said = True
    return typer.Exit(EXIT_INTERRUPTED)


def interruption_said() -> bool:
    """Whether a command said that Ctrl-C or SIGTERM stopped it (see :func:`interrupted`)."""
    return _interruption_said


def _sigterm_as_interrupt() -> Any:
    """SIGTERM (``kill``, ``docker stop``, systemd) stops a command as Ctrl-C does: its output
    ends cleanly and it exits 130. Returns the handler it replaced (``None`` off the main thread,
    or in the ``ipfi`` process, whose handlers :mod:`ipfi_cli.run.signals` installed first)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    if signals.installed():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)
