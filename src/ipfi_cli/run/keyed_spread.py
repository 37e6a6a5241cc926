"""``ipfi explain --by ... --workers N`` (or ``--scheduler ADDRESS``): the keys spread over Dask workers.

Each key's explainer sees only that key's rows (see :mod:`ipfi_cli.run.keyed`), so keys can be
explained apart. The keys are split into one shard per worker by a hash of the key's text
(:func:`shard_of`); every shard is one task (:func:`explain_shard`) that reads the input itself
(a file, a folder of partitions or a glob that every worker can read: the data stays where the
workers are) and explains only its keys' rows, with the run's settings and seed. The task
returns its records, change events and keys; this process writes them in the input's order, so
the traces, events and summary are the bytes of the run in one process. A worker lost mid-run has
its shard run again by Dask on another.

A row whose key cannot be read (a missing key value, a malformed line) belongs to shard 0, so
each bad row is counted (or stops the run) once. A shard that meets a bad row with
``--on-bad-row fail`` stops there; the run writes the records of the rows before the first such
row of all shards and stops with its error, as one process does (whose records of other keys in
that row's micro-batch may go a little further).

Not yet: standard input (the workers read the input themselves), ``--state`` and
``--stop-on-change`` (refused before the first row); the records are written when every shard is
done, so Ctrl-C before then leaves the traces with the header only, says so, and stops
the workers' tasks (and a local cluster).
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError, IpfiError, UsageError
from ipfi_cli.models.hashing import workers_must_hash_alike
from ipfi_cli.run.explain import ExplainSession
from ipfi_cli.run.key_runs import Key, KeyedEvent, KeyRun, row_key
from ipfi_cli.run.keyed import PerKeyExplainers
from ipfi_cli.run.keyed_joint import KeyPart
from ipfi_cli.run.observers import RunEnd, RunObserver
from ipfi_cli.run.report import PlainReporter, Reporter
from ipfi_cli.run.settings import ExplainSettings, RunParts, RunStatus
from ipfi_cli.run.signals import hold_until_exit

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.rows import RowChecker


def shard_of(key: Key, shards: int) -> int:
    """The shard of ``key``: a hash of its canonical text, the same in every process (unlike ``hash``).

    Keys that are equal are one key (as in one process, where a dict holds them): ``7``, ``7.0`` and
    ``True`` (equal to ``1``) are each written as the integer they equal, so they share a shard.

    >>> shard_of(("eu",), 4) == shard_of(("eu",), 4), 0 <= shard_of(("eu", 3.0), 4) < 4
    (True, True)
    >>> shard_of((7.0,), 5) == shard_of((7,), 5), shard_of((True,), 5) == shard_of((1,), 5)
    (True, True)
    """
    return zlib.crc32(repr(tuple(_canonical(v) for v in key)).encode("utf-8", "backslashreplace")) % shards


def _canonical(value: Any) -> Any:
    """One representative of the values equal to ``value`` (a number equal to an integer: that integer)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, (str, int, float)) and hasattr(value, "item"):  # a NumPy scalar
        return _canonical(value.item())
    return value


@dataclass
class ShardResult:
    """What one shard sends back: its records and events (each with its input row), its keys with
    the input row of each key's first explained row, the counters, and the error it stopped on."""

    records: list[tuple[int, Key, int, Sequence[float], Sequence[float] | None]] = field(default_factory=list)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: (its first explained row, key, its pieces, its rows numbered, its last explained row)
    keys: list[tuple[int, Key, KeyRun, int, int]] = field(default_factory=list)
    input_rows: int = 0
    skipped: int = 0
    first_skip: tuple[int, str] | None = None
    labels_matched: int = 0
    labels_unknown: dict[Any, int] = field(default_factory=dict)
    failure: tuple[int, IpfiError] | None = None


class _ShardReporter(PlainReporter):
    """A shard's reporter: errors and status lines only, and no end (the run in the ipfi process says it)."""

    def on_end(self, end: RunEnd) -> None:
        pass


class ShardKeys(PerKeyExplainers):
    """The keys of one shard's rows, in a worker: it keeps its records instead of writing them."""

    def __init__(self, settings: ExplainSettings, shard: int, shards: int) -> None:
        super().__init__(settings, lambda text, kind=None: None)
        self.shard, self.shards = shard, shards
        self.result = ShardResult()
        self._first: dict[Key, int] = {}
        self._last: dict[Key, int] = {}

    def make_parts(self, plan: RunPlan, checker: RowChecker, build: Callable[[], Explainer]) -> RunParts:
        checker.on_skip = self._on_skip
        return super().make_parts(plan, checker, build)

    def _owns(self, values: dict[str, Any] | None) -> bool:
        assert self.plan is not None
        key = row_key(values, self.plan.by)
        return self.shard == 0 if key is None else shard_of(key, self.shards) == self.shard

    def explain_batch(self, batch: list[Any]) -> IpfiError | None:
        self.result.input_rows += len(batch)
        mine = [row for row in batch if self._owns(row.values)]
        if not mine:
            return None
        failure = super().explain_batch(mine)
        if failure is not None:
            self.result.failure = (getattr(failure, "row", None) or mine[0].number, failure)
        return failure

    def _on_skip(self, error: Any) -> None:
        if self.result.first_skip is None:
            self.result.first_skip = (getattr(error, "row", None) or 0, str(error))

    def _enter(self, part: KeyPart) -> Callable[[], None]:
        key, rows = part[0], part[3]
        self._first.setdefault(key, rows[0].number)
        self._last[key] = rows[-1].number
        return super()._enter(part)

    def _write_pending(self) -> None:
        self.result.records.extend(self._records)
        self.result.events.extend((row, event.to_dict()) for row, event in self._events)
        self._records.clear()
        self._events.clear()

    def write_last(self) -> None:
        self._finals = []  # the run writes every key's last record, in the order the keys came over all shards

    def report(self, status: RunStatus, *, events_before: int, state: Any) -> RunStatus:
        return status  # the run checks the keys of all shards together

    def finish(self, plan: RunPlan | None) -> ShardResult:
        """The result, once the session's run returned or raised."""
        result = self.result
        if self.parts is not None:
            keyed = self.keyed
            result.skipped = self.parts.checker.skipped
            result.keys = [(self._first[key], key, keyed.peek(key), keyed.numbered.get(key, 0), self._last[key])
                           for key in keyed.keys()]
        if plan is not None:
            result.labels_matched = plan.labels.matched
            result.labels_unknown = dict(plan.labels.unknown)
        return result


def explain_shard(settings: ExplainSettings, shard: int, shards: int) -> ShardResult:
    """Explain the keys of ``shard`` (of ``shards``) with ``settings``: runs in a Dask worker."""
    keys = ShardKeys(settings, shard, shards)
    session = ExplainSession(settings, _ShardReporter(quiet=True), explaining=keys)
    try:
        session.run()
    except InputError as error:  # a bad row with --on-bad-row fail: the run decides which stops it
        if keys.result.failure is None:
            keys.result.failure = (error.row or 0, error)
    return keys.finish(session.plan)


class SpreadKeys(PerKeyExplainers):
    """The keys of a run spread over Dask workers, as the ipfi process holds them once the shards are done."""

    def refuse(self) -> None:
        super().refuse()
        s = self.settings
        option = "--scheduler" if s.keys.scheduler else "--workers"
        if s.inputs.path in (None, "-"):
            raise UsageError("needs an input file, folder or glob: the workers read it themselves, not this "
                             "process's standard input", option)
        if s.state is not None:
            raise UsageError("cannot be used with --state yet (the keys' states are on the workers)", option)
        if s.watch is not None and s.watch.stop_on_change:
            raise UsageError("cannot be used with --stop-on-change yet", option)
        from ipfi_cli.run.distributed import check_dask_options

        check_dask_options(s.keys.workers, s.keys.scheduler)  # a malformed address before the model is loaded


class SpreadKeyedSession(ExplainSession):
    """``ipfi explain --by`` with its keys spread over Dask workers; see the module docstring. Its loop
    hands the shards to the workers and writes what they send back."""

    def __init__(self, settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver] = ()) -> None:
        self.keys = SpreadKeys(settings, reporter.message)
        super().__init__(settings, reporter, observers, explaining=self.keys)

    def _stream(self, reader: Any) -> RunStatus:
        from ipfi_cli.run.distributed import dask_client, gather_tasks

        plan, parts, ending = self.plan, self.parts, self.ending
        assert plan is not None and parts is not None and ending is not None
        s = self.settings
        replace = dataclasses.replace
        shard_settings = replace(
            s, seed=self.seed, output=replace(s.output, path=os.devnull, format=None, meta=None),
            display=replace(s.display, verbose=False, quiet=True), keys=replace(s.keys, workers=None, scheduler=None),
            watch=_quiet_watch(s.watch), inputs=replace(s.inputs, path=_here(s.inputs.path)),
            model=replace(s.model, path=_here(s.model.path), save_model=None))
        self.status = RunStatus.RUNNING
        failure: IpfiError | None = None
        error_text: str | None = None
        merged = False  # whether the shards' results came back (a run interrupted before has written no record)
        try:
            hashing = workers_must_hash_alike(s.model.path)
            with dask_client(s.keys.workers, s.keys.scheduler, hashing=hashing) as client:
                shards = s.keys.workers or max(1, len(client.scheduler_info()["workers"]))
                if s.display.verbose:
                    self.reporter.message(f"explaining the keys in {shards} shard(s) on Dask workers")
                results: list[ShardResult] = gather_tasks(client, explain_shard,
                                                          [(shard_settings, i, shards) for i in range(shards)],
                                                          hashing=hashing)
            _as_given(results, shard_settings.inputs.path, s.inputs.path)
            failure = self._merge(results, parts)
            merged = True
            self.refresh()  # the display hears of the rows (its summary shows what it last heard)
            if failure is None:
                self.keys.write_last()
            parts.writer.flush()
            self.status = RunStatus.OK if failure is None else RunStatus.ERROR
        except KeyboardInterrupt:
            self.status = RunStatus.INTERRUPTED
        except BrokenPipeError:
            self.status = RunStatus.BROKEN_PIPE
        except BaseException as error:
            self.status = RunStatus.ERROR
            error_text = str(error)
            raise
        finally:
            hold_until_exit()  # in the ipfi process: the end (the records, --meta) is not cut short
            self.status = ending.close(
                parts, self.status, error=error_text,
                interrupted_note=None if merged else "interrupted before the Dask workers were done: no records "
                "written (a run spread over workers writes them once every shard is done)")
        if failure is not None:
            raise failure
        return ending.settle(parts, lambda: self.keys.report(self.status, events_before=0, state=None))

    def _merge(self, results: list[ShardResult], parts: RunParts) -> IpfiError | None:
        """Write the shards' records and events in the input's order, up to the first failing row; take
        their keys (in the order they first came), counters and label counts."""
        assert self.plan is not None
        stops = [r.failure for r in results if r.failure is not None]
        stop_row, failure = min(stops, key=lambda f: f[0]) if stops else (None, None)
        records = sorted((r for result in results for r in result.records), key=lambda r: r[0])
        events = sorted((e for result in results for e in result.events), key=lambda e: e[0])
        for where, key, row, values, bounds in records:
            if stop_row is None or where < stop_row:
                parts.writer.write(row, values, bounds, key=key)
        keyed, latest = self.keys.keyed, -1
        for _, key, run, numbered, last in sorted((k for result in results for k in result.keys),
                                                  key=lambda k: k[0]):
            keyed.keyed.adopt(key, run)
            keyed.numbered[key] = numbered
            parts.progress.rows += run.progress.rows
            if last > latest:  # the key shown is the one explained last
                latest, keyed.current, keyed.current_key = last, run, key
        parts.progress.input_rows = max((r.input_rows for r in results), default=0)
        checker = parts.checker
        checker.skipped = sum(r.skipped for r in results)
        firsts = [r.first_skip for r in results if r.first_skip is not None]
        if firsts:
            checker.first_skip = min(firsts, key=lambda f: f[0])[1]
        labels = self.plan.labels
        labels.matched += sum(r.labels_matched for r in results)
        for result in results:
            for label, count in result.labels_unknown.items():
                labels.unknown[label] = labels.unknown.get(label, 0) + count
        found = [KeyedEvent(fields) for where, fields in events if stop_row is None or where < stop_row]
        if found:
            if parts.watch is not None:
                parts.watch.events.extend(found)
            self.report_events(found)
        return failure


def _as_given(results: list[ShardResult], here: Any, given: Any) -> None:
    """Messages name the input as the user gave it, not by the absolute path the workers read."""
    if here == given or not isinstance(here, str) or not isinstance(given, str):
        return
    for result in results:
        if result.first_skip is not None:
            row, text = result.first_skip
            result.first_skip = (row, text.replace(here, given, 1))
        if result.failure is None:
            continue
        failure = result.failure[1]
        if getattr(failure, "source", None) == here:
            failure.source = given  # type: ignore[attr-defined]
        elif isinstance(failure, IpfiError) and here in failure.message:  # the model's failure: one line
            failure.message = failure.message.replace(here, given, 1)
            failure.args = (failure.message,)


def _quiet_watch(watch: Any) -> Any:
    """The change watch's settings for a shard: no events file (this process writes the events)."""
    return None if watch is None else dataclasses.replace(watch, events=None, fail_on_change=False,
                                                          reference=_here(watch.reference))


def _here(path: Any) -> Any:
    """A relative path of this process's folder as an absolute one, for workers elsewhere; other text
    (a glob, a model URI, ``None``) as it is."""
    if isinstance(path, str) and path and not os.path.isabs(path) and "://" not in path \
            and (os.path.exists(path) or any(c in path for c in "*?[")):
        return os.path.abspath(path)
    return path
