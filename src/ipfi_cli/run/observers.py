"""Who hears about a run as it goes: the :class:`RunObserver` protocol, and the change-events file.

A session (:class:`~ipfi_cli.run.explain.ExplainSession`) reports to a list of observers.
Each receives, in this order:

- ``on_start(start)`` once, before the first row is read (a :class:`RunStart`: title, names, seed, loss);
- ``on_snapshot(snapshot)`` after every micro-batch once its records are written, and in between
  at most every :data:`SNAPSHOT_INTERVAL` seconds while a ``--learn`` micro-batch runs or the
  input is idle (a :class:`Snapshot`), whether or not a terminal is attached;
- ``on_events(events)`` for each row's change events (``--detect``), as soon as they are found
  (a list of :class:`~ipfi_cli.core.changes.ChangeEvent` / :class:`~ipfi_cli.core.changes.RankingEvent`);
- ``on_end(end)`` once, when the stream has ended, whatever happened (a :class:`RunEnd`: the
  status, the last snapshot, and the end-of-run notes a reporter prints).

The run's reporter (the live table or the plain summary, :mod:`ipfi_cli.cli.ui`) is the first
observer; :class:`EventsFile` (``--events``) is another. An observer must not raise: what it
fails on is its own business (an exception stops the run like a failing model would).

A Python observer that keeps the last importances:

>>> class LastImportances:
...     def __init__(self): self.last = {}
...     def on_start(self, start): pass
...     def on_snapshot(self, snapshot): self.last = dict(zip(snapshot.names, snapshot.importances))
...     def on_events(self, events): pass
...     def on_end(self, end): pass
>>> keeper = LastImportances()
>>> isinstance(keeper, RunObserver)
True
>>> keeper.on_snapshot(Snapshot(names=["a", "b"], importances=[0.5, 0.25], bounds=[0.1, 0.1]))
>>> keeper.last
{'a': 0.5, 'b': 0.25}

Pass it to the session: ``ExplainSession(settings, reporter, observers=[keeper]).run()``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol, runtime_checkable

from ipfi_cli.errors import OutputError
from ipfi_cli.io.targets import NamedOutput

#: seconds between snapshots while a ``--learn`` micro-batch runs or the input is idle
SNAPSHOT_INTERVAL = 0.25
#: the statuses (RunStatus values) of a run that ended without failing: it shows a summary
ENDED = ("ok", "interrupted", "stopped-on-change")


@dataclass
class Snapshot:
    """What a run shows of itself at one moment."""

    names: Sequence[str]
    importances: Sequence[float]
    bounds: Sequence[float]
    rows: int = 0  # rows read and explained (the first row of a stream is only stored)
    explained: int = 0
    skipped: int = 0
    elapsed: float = 0.0
    rate: float = float("nan")  # recent rows per second
    loss: float = float("nan")  # the model's mean loss over the explained rows
    loss_sum: float = 0.0  # the model's loss summed over the explained rows (never decreases)
    recent_loss: float = float("nan")  # ... over the last recent_rows explained rows (a learning model's)
    recent_rows: int = 0
    seed: int | None = None
    learning: bool = False
    marks: dict[str, str] = field(default_factory=dict)  # feature -> its latest change ("↓ row 10,231")
    # explain --by: the key shown (the one last explained) and its rows, how many keys; at the end every key's
    key: str | None = None
    key_rows: int = 0
    n_keys: int = 0
    per_key: Sequence[tuple[str, Snapshot]] = ()
    model_calls: int = 0  # calls the explainer made to the model
    predictions: int = 0  # rows the model predicted in those calls


@dataclass(frozen=True)
class Ranking:
    """``--reference``: the importances a run's ranking is compared with (nDCG@k), and the threshold
    below which a ranking event is raised."""

    reference: tuple[float, ...]
    k: int
    threshold: float


@dataclass(frozen=True)
class RunStart:
    """What a run is, as it starts."""

    title: str  # "ipfi explain · <model type> · static|learning · <loss> loss"
    names: Sequence[str]  # the explained features and groups
    seed: int
    method: str = "pfi"
    learning: bool = False
    source: str = ""  # the input's name
    loss: str = ""  # the loss the importances are in
    detect: bool = False  # change detection is on (--detect): its change events may come
    ranking: Ranking | None = None  # --detect with --reference


@dataclass(frozen=True)
class RunEnd:
    """How a run ended."""

    title: str
    status: str  # a RunStatus value: "ok", "interrupted", "stopped-on-change", "broken-pipe", "error"
    snapshot: Snapshot | None  # the last state (None when stdout was closed: show nothing more)
    notes: Sequence[tuple[str, str | None]] = field(default_factory=tuple)  # (text, kind) end-of-run lines


@runtime_checkable
class RunObserver(Protocol):
    """Receives a run's start, snapshots, change events and end (see the module's docstring)."""

    def on_start(self, start: RunStart) -> None: ...

    def on_snapshot(self, snapshot: Snapshot) -> None: ...

    def on_events(self, events: Sequence[Any]) -> None: ...

    def on_end(self, end: RunEnd) -> None: ...


class EventsFile:
    """``--events FILE`` (or ``-`` for stderr): each change event as one JSONL line, written at once.

    ``keep``: continuing a run, keep the file's first ``keep`` events (those of the checkpoint).
    A write that fails (a full disk) is an :class:`~ipfi_cli.errors.OutputError` naming the option
    and the file.
    """

    def __init__(self, path: str, *, keep: int | None = None) -> None:
        self.path = path
        self.written = keep or 0  # events in the file
        self._stream: IO[bytes] | None = None
        if path == "-":
            self._stream = NamedOutput(sys.stderr.buffer, "--events <stderr>")  # type: ignore[assignment]
            return
        try:
            if keep is not None and os.path.exists(path):
                with open(path, "rb") as f:
                    lines = f.read().split(b"\n")[:keep]
                with open(path, "wb") as f:
                    f.write(b"".join(line + b"\n" for line in lines if line))
                stream = open(path, "ab")
            else:
                stream = open(path, "wb")
        except OSError as error:
            raise OutputError(f"{path}: cannot write the events file ({error.strerror or error})") from None
        self._stream = NamedOutput(stream, f"--events {path}")  # type: ignore[assignment]

    def on_start(self, start: RunStart) -> None:
        pass

    def on_snapshot(self, snapshot: Snapshot) -> None:
        pass

    def on_events(self, events: Sequence[Any]) -> None:
        if self._stream is None or not events:
            return
        import orjson

        for event in events:
            self._stream.write(orjson.dumps(event.to_dict()) + b"\n")
        self._stream.flush()
        self.written += len(events)

    def on_end(self, end: RunEnd) -> None:
        self.close()

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        if self.path == "-":
            stream.flush()
        else:
            stream.close()
