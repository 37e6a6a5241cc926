"""The labels stream of ``--labels SOURCE --id COLUMN``: ``(id, label)`` pairs read in a thread.

:class:`LabelStream` reads a file, a named pipe or (``--labels-follow``) a file that grows, as
``tail -f`` reads it (:class:`FollowedFile`), and hands the pairs to the join
(``run/late_labels.py``) through a bounded queue, ended by :data:`END`.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, BinaryIO

from ipfi_cli.errors import InputError
from ipfi_cli.io.readers import RowReader, open_rows
from ipfi_cli.io.values import detect_format

#: put on the queue after the last pair (or after the error that ended the stream)
END = object()


class MissingLabel:
    """A label the labels source gives as missing: its row becomes a bad row, located in the labels source."""

    def __init__(self, error: InputError) -> None:
        self.error = error


class FollowedFile:
    """A regular file read as it grows (``tail -f``): at its end, reading waits for more until :meth:`stop`."""

    def __init__(self, path: str, poll: float = 0.05) -> None:
        self._file: BinaryIO = open(path, "rb", buffering=0)
        self._stop = threading.Event()
        self._poll = poll

    def read(self, size: int = -1) -> bytes:
        while True:
            chunk = self._file.read(size if size > 0 else 1 << 16)
            if chunk or self._stop.is_set():
                return chunk or b""
            self._stop.wait(self._poll)

    read1 = read

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        self._file.close()



class LabelStream:
    """Reads ``(id, label)`` pairs from the labels source in a thread, into a bounded queue."""

    def __init__(self, path: str, id_column: str, target: str, *, follow: bool, format: str | None = None,
                 reader_options: dict[str, Any] | None = None) -> None:
        options = reader_options or {}
        self.followed: FollowedFile | None = None
        if follow:
            try:
                self.followed = FollowedFile(path)
            except OSError as error:
                raise InputError(f"cannot open the labels file ({error.strerror or error})", source=path) from None

            self.reader = RowReader(self.followed, name=path, format=detect_format(path, format),  # type: ignore[arg-type]
                                    close=True, **options)
        else:
            self.reader = open_rows(path, format=format, hint=False, **options)
        self.path = path
        self.id_column = id_column
        self.target = target
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=4096)
        self.rows = 0
        self._thread = threading.Thread(target=self._read, name="ipfi-labels", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            columns = self.reader.columns  # in this thread: a named pipe's header may come late
            lacking = [c for c in (self.id_column, self.target) if columns and c not in columns]
            if lacking:
                raise InputError(f"no column {lacking[0]!r} (the labels need the --id {self.id_column!r} and the "
                                 f"--target {self.target!r} columns); the columns are: {', '.join(columns)}",
                                 source=self.path)
            self.reader.keep_as_text([self.id_column])
            for row in self.reader:
                if row.error is not None:
                    raise row.error
                values = row.values or {}
                for column in (self.id_column, self.target):
                    if column not in values:
                        raise InputError(f"no column {column!r} (the labels source needs --id {self.id_column!r} "
                                         f"and --target {self.target!r}); it has: {', '.join(values)}",
                                         source=self.path, row=row.number, line=row.line)
                ident = values[self.id_column]
                if ident is None or ident == "" or ident != ident:
                    raise InputError("the id is missing", source=self.path, row=row.number, line=row.line,
                                     column=self.id_column)
                self.rows += 1
                label = values[self.target]
                if label is None or label == "" or label != label:  # located here, not in the features file
                    label = MissingLabel(InputError("missing label", source=self.path, row=row.number,
                                                    line=row.line, column=self.target))
                self.queue.put((str(ident), label))
        except Exception as error:  # noqa: BLE001 - handed to the session, which reports it
            self.queue.put(error)
        self.queue.put(END)

    def close(self) -> None:
        if self.followed is not None:
            self.followed.stop()
        # the thread is a daemon: a reader blocked on a pipe nobody writes to does not hold the exit
