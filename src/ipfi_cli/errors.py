"""The problems ipfi reports: one hierarchy, each a one-line message.

Every layer raises these (the core's own errors derive from them too), and the command line
maps them to exit codes in one place (:mod:`ipfi_cli.cli.errors`): :class:`UsageError` exits
2, every other :class:`IpfiError` exits 1. ``str(error)`` is the line a user sees.

>>> str(InputError("expected a number, got 'x'", source="data.csv", row=7, line=8, column="age"))
"data.csv: row 7 (line 8), column 'age': expected a number, got 'x'"
>>> isinstance(ModelError("no predict method"), ValueError)
True
"""

from __future__ import annotations

from ipfi_cli.text import quoted, terminal_safe


class IpfiError(Exception):
    """A problem ipfi reports as one line (exit code 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(IpfiError, ValueError):
    """An option's value is wrong (exit code 2); ``option`` names it (``"--features"``)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class InputError(IpfiError, ValueError):
    """A problem with the input data, located as precisely as known.

    ``str(error)`` is one line: ``source: row R (line L), column 'c': message``.
    """

    def __init__(self, message: str, *, source: str | None = None, row: int | None = None,
                 line: int | None = None, column: str | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.row = row
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}" + (f" (line {self.line})" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {quoted(self.column)}")
        prefix = f"{self.source}: " if self.source else ""
        return prefix + (", ".join(where) + ": " if where else "") + self.message


class ModelError(IpfiError, ValueError):
    """The model cannot be loaded, or cannot be used as asked (a method, an output, a loss)."""


class ServiceError(ModelError):
    """The model could not be reached, or refused the request (a served model): not a problem of
    one row, so it is never located in a row nor skipped."""


class ModelCallError(ModelError):
    """The model raised while predicting or learning: ``cause`` is its own exception.

    A run's model calls go through :class:`ipfi_cli.models.loading.GuardedPredictor`, which raises
    this, so that a run can tell the model failing on a row (located and named, or skipped) from
    ipfi failing (reported as unexpected, never skipped).
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {first_line(cause)}")
        self.cause = cause

    def __reduce__(self) -> tuple[type, tuple[BaseException]]:  # pickled (a Dask worker's) with its cause
        return type(self), (self.cause,)


class StateError(IpfiError, ValueError):
    """A ``--state`` file cannot be read, written or continued from."""


class OutputError(IpfiError):
    """An output file cannot be written."""


class RunError(IpfiError):
    """The run cannot go on, or produced nothing (no row explained, a non-finite loss)."""


def first_line(error: BaseException) -> str:
    """The line a user sees of an error (its type's name if it has none): another library's first
    line; ipfi's own message whole, which is one line by design, with any line break or control
    character of the data it quotes shown escaped (a header name "a<LF>b" cut the line at "a").

    >>> first_line(ValueError("Found unknown categories ['XX']\\nmore detail"))
    "Found unknown categories ['XX']"
    >>> first_line(InputError("the columns are: a\\nb, y", source="f.csv"))
    'f.csv: the columns are: a\\\\nb, y'
    """
    if isinstance(error, IpfiError):
        text = terminal_safe(str(error)).strip()
        return text or type(error).__name__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
