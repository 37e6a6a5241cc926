"""The streaming session behind ``ipfi explain``: read, explain (or explain then learn), write, report.

:class:`ExplainSession` takes an :class:`ExplainSettings` (everything the command was asked
to do) and a :class:`~ipfi_cli.run.report.Reporter`, and :meth:`~ExplainSession.run`
returns a :class:`RunStatus`. It imports neither Typer nor Rich: the command line maps the
status and the :mod:`ipfi_cli.errors` it raises to exit codes, and chooses the reporter.

The loop reads micro-batches of whatever rows are already available
(:meth:`ipfi_cli.io.readers.RowReader.batches`) and hands each to its strategy
(:class:`~ipfi_cli.run.explaining.Explaining`: one explainer, or one per key with ``--by``). A
static model explains each batch with one ``explain_many`` call (the numbers are those of
``explain_one`` row by row); with ``learn`` each row is explained with the current model and then
learned. What the run builds before its first row is in :mod:`ipfi_cli.run.building`; how it
ends (the output closed, the last lines, ``--meta``) in :class:`~ipfi_cli.run.ending.RunEnding`;
``--state`` checkpoints and resuming in :mod:`ipfi_cli.run.resume`.

The session reports to a list of observers (:mod:`ipfi_cli.run.observers`): the reporter
(the live table or the plain summary) first, then ``--events``' file, then any given, then the
metrics exporter and the webhook (:mod:`ipfi_cli.run.monitor`). The explainer is any
:class:`~ipfi_cli.core.explainer.Explainer`, built by the method registry
(:func:`~ipfi_cli.core.explainer.make_explainer`) from ``settings.method.name``.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.params import PFIParams
from ipfi_cli.errors import IpfiError, OutputError, ServiceError, UsageError
from ipfi_cli.io.readers import RowReader
from ipfi_cli.run.building import (
    build_explainer,
    describe,
    join_labels,
    load_model,
    open_writer,
    run_selection,
    run_title,
)
from ipfi_cli.run.ending import RunEnding
from ipfi_cli.run.explaining import Explaining, Say, SingleExplainer
from ipfi_cli.run.keyed import PerKeyExplainers
from ipfi_cli.run.observers import SNAPSHOT_INTERVAL, EventsFile, Ranking, RunObserver, RunStart
from ipfi_cli.run.plan import InputSpec, RunPlan, Selection, plan_run
from ipfi_cli.run.report import PlainReporter, Reporter, RunClock, Snapshot
from ipfi_cli.run.settings import (
    ExplainSettings,
    KeySpec,
    MethodSpec,
    ModelSpec,
    OutputSpec,
    ReadSpec,
    RunParts,
    RunStatus,
    StateSpec,
    StopOnChange,
)
from ipfi_cli.run.signals import BatchGuard, defer_signals, take_request
from ipfi_cli.run.watch import ChangeWatch, WatchSettings

#: the line on stderr when Ctrl-C or SIGTERM comes during a micro-batch (see :mod:`ipfi_cli.run.signals`)
STOP_NOTICE = ("stopping at the end of the micro-batch under way; Ctrl-C again stops at once (the output then "
               "ends at the last record written, without the last explained row's)")
STOP_NOTICE_STATE = ("stopping at the end of the micro-batch under way, then saving the state; Ctrl-C again stops "
                     "at once (the state then stays at its last checkpoint)")

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.io.values import Row
    from ipfi_cli.run.monitor import StreamMonitor
    from ipfi_cli.run.resume import StateKeeper


_PARAMS, _METHOD, _OUTPUT, _READING, _KEYS = PFIParams(), MethodSpec(), OutputSpec(), ReadSpec(), KeySpec()


def explain_stream(model: Any, rows: Iterable[Mapping[str, Any]], *, target: str | Selection,
                   params: PFIParams = _PARAMS, method: MethodSpec = _METHOD, learn: bool = False,
                   seed: int | None = None, output: OutputSpec = _OUTPUT, reading: ReadSpec = _READING,
                   state: StateSpec | None = None, watch: WatchSettings | None = None, keys: KeySpec = _KEYS,
                   reporter: Reporter | None = None, observers: Sequence[RunObserver] = ()) -> ExplainSession:
    """Run a streaming session from objects: ``model`` (scikit-learn, river, a function) on
    ``rows`` (mappings column -> value, the label under ``target``), with the values the command
    line builds from its options (:mod:`ipfi_cli.run.settings`): ``target`` is the label's
    column, or a :class:`~ipfi_cli.run.plan.Selection` (with ``features``, ``groups``, ``by``...);
    ``params`` iPFI's (``--alpha``, ``--repeats``...), ``method`` the method and its smoothing,
    ``output`` where the traces go (by default stdout) and how often, ``state`` a ``--state``
    file, ``watch`` change detection, ``keys`` how ``by``'s keys are kept. The traces are the
    command's on the same rows; ``observers`` hear the run as it goes. Returns the finished
    session (its ``status``, ``explainer``, ``plan``); errors raise.

    A model that learns is copied first (as ``ipfi explain --learn`` learns a loaded copy); the
    rows are read in micro-batches of ``reading.batch_size`` rows (1 for a live generator).

    >>> from sklearn.linear_model import LinearRegression
    >>> import io
    >>> model = LinearRegression().fit([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [0.0, 2.0, 0.0])
    >>> rows = [{"a": float(i % 3), "b": float(i % 2), "y": 2.0 * (i % 3)} for i in range(50)]
    >>> out = io.StringIO()
    >>> session = explain_stream(model, rows, target="y", seed=0, output=OutputSpec(path="/dev/null"),
    ...                          reporter=PlainReporter(out, quiet=True))
    >>> session.status.value, session.parts.progress.rows
    ('ok', 50)
    >>> a, b = session.explainer.importance_array()   # the model ignores b
    >>> round(float(a), 2), abs(float(b)) < 1e-12
    (1.81, True)
    """
    settings = ExplainSettings(
        model=ModelSpec(f"<{type(model).__name__}>", learn=learn, instance=model),
        inputs=InputSpec(path="<rows>", rows=rows),
        selection=target if isinstance(target, Selection) else Selection(target=target), method=method,
        params=params, output=output, reading=reading, seed=seed, state=state, watch=watch, keys=keys)
    session = new_session(settings, reporter if reporter is not None else PlainReporter(quiet=True), observers)
    session.run()
    return session


def interrupted_before_rows(session: ExplainSession | None, state: str | None) -> str:
    """The line for a Ctrl-C or SIGTERM before a run's first row (while it loads the model, reads
    the state, opens the output): it leaves what there was, and continuing a run it says so."""
    if session is not None and session.status is not RunStatus.STARTING:  # it has said how it ended
        return "interrupted"
    keeper = session.state if session is not None else None
    if keeper is not None and keeper.resumed is not None:
        run = keeper.resumed["run"]
        traces = ("the output of the run it continues is unchanged" if keeper.tracked is None
                  else f"the traces are kept up to its checkpoint (row {run['last_written']:,})")
        return (f"interrupted before the first new row: the state in {keeper.path} is unchanged (input row "
                f"{run['input_rows']:,}) and {traces}; run the same command again to continue")
    if keeper is None and state is not None and os.path.exists(state):  # not read yet
        return (f"interrupted before the first new row: the state in {state} and the output of the run it "
                "continues are unchanged; run the same command again to continue")
    return "interrupted before the first row; no record was written" + ("" if state is None else
                                                                         ", no state was saved")


def new_session(settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver] = ()) -> ExplainSession:
    """The session ``settings`` ask for, its options checked: one explainer, or one per key with ``by``
    (:class:`~ipfi_cli.run.keyed.PerKeyExplainers`)."""
    if settings.keys.max_keys is not None and not settings.selection.by:
        raise UsageError("needs --by (it bounds the keys' explainers kept live)", "--max-keys")
    if (settings.keys.workers is not None or settings.keys.scheduler is not None) and not settings.selection.by:
        raise UsageError("needs --by (the keys are what is spread over the workers)",
                         "--workers" if settings.keys.workers is not None else "--scheduler")
    if settings.selection.by and (settings.keys.workers is not None or settings.keys.scheduler is not None):
        raise UsageError("the keys spread over Dask workers are a run of files: "
                         "ipfi_cli.run.keyed_spread.SpreadKeyedSession(settings, reporter).run()",
                         "--workers" if settings.keys.workers is not None else "--scheduler")
    return ExplainSession(settings, reporter, observers)


def explaining_for(settings: ExplainSettings, say: Say) -> Explaining:
    """The strategy ``settings`` ask for: one explainer, or one per key of ``selection.by``."""
    return PerKeyExplainers(settings, say) if settings.selection.by else SingleExplainer(settings, say)


class ExplainSession:
    """One ``ipfi explain`` run; :meth:`run` returns its :class:`RunStatus`.

    ``reporter`` receives the run's messages and, as its first observer, its snapshots;
    ``observers`` (see :class:`~ipfi_cli.run.observers.RunObserver`) hear about it too.
    ``explaining`` is how the rows become records (by default what ``settings`` ask for:
    :func:`explaining_for`). The set-up is one value (:attr:`plan`, a
    :class:`~ipfi_cli.run.plan.RunPlan`); what changes as rows stream is in :attr:`parts` (the
    explainer, the counters, the row checker, the reader, the writer, the change watch), which the
    strategy, :class:`~ipfi_cli.run.resume.StateKeeper` and :class:`~ipfi_cli.run.ending.RunEnding`
    receive as arguments.
    """

    def __init__(self, settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver] = (), *,
                 explaining: Explaining | None = None) -> None:
        self.settings = settings
        self.reporter = reporter
        self.observers: list[RunObserver] = [reporter, *observers]
        self.explaining = explaining if explaining is not None else explaining_for(settings, reporter.message)
        self.seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        self.status = RunStatus.STARTING
        self.clock = RunClock()
        self.plan: RunPlan | None = None
        self.parts: RunParts | None = None
        self.state: StateKeeper | None = None  # with --state
        self.monitor: StreamMonitor | None = None  # metrics and the webhook, with settings.monitor
        self.ending: RunEnding | None = None  # how the run ends, once it is set up

    @property
    def watch(self) -> ChangeWatch | None:
        """The run's change detection (``--detect``), once the run is set up."""
        return self.parts.watch if self.parts is not None else None

    @property
    def explainer(self) -> Explainer | None:
        return self.parts.explainer if self.parts is not None else None

    def lost_beyond(self) -> str | None:
        """The error line of a run that lost more than ``--max-lost`` (``None``: within it, or no limit)."""
        return self.ending.lost_beyond() if self.ending is not None else None

    # -- set-up -------------------------------------------------------------------------------
    def run(self) -> RunStatus:
        """Set up, stream the input to its end (or an interruption), report; errors propagate."""
        s = self.settings
        self.explaining.refuse()  # before anything starts (the metrics server, the model, the input)
        if s.monitor is not None and s.monitor.wanted:
            from ipfi_cli.run.monitor import StreamMonitor

            self.monitor = StreamMonitor(s)
            self.monitor.serve(self.reporter.message)  # /metrics answers from the start, before the input's first line
        try:
            return self._run()
        finally:
            if self.state is not None:
                self.state.release()
            if self.monitor is not None:
                self.monitor.close()

    def _run(self) -> RunStatus:
        import numpy as np

        s = self.settings
        if s.state is not None:
            from ipfi_cli.run.resume import StateKeeper

            self.state = StateKeeper.open(s.state.path, skip_seen=s.state.skip_seen)
            self.seed = self.state.seed(s.seed, self.seed)
        loaded = load_model(s, self.state)
        self.plan, reader = plan_run(
            loaded, s.inputs, run_selection(s, loaded), learn=s.model.learn, say=self.reporter.message,
            on_bad_row=s.reading.on_bad_row, before_rows=self.state.continue_reader if self.state is not None else None,
            join=join_labels(s))
        try:
            # an overflowing loss is reported as one line naming the row, not as numpy warnings
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                self._prepare(self.plan, reader)
                return self._stream(reader)
        finally:
            reader.close()

    def _prepare(self, plan: RunPlan, reader: RowReader) -> None:
        """The explainer, the state, the change watch and the writer, before the first row."""
        s, say, state = self.settings, self.reporter.message, self.state
        checker = plan.row_checker(on_bad_row=s.reading.on_bad_row, on_skip=self._on_skip, say=say)
        parts = self.explaining.make_parts(plan, checker, lambda: build_explainer(plan, s, self.seed, reader))
        parts.reader = reader
        explainer = parts.explainer
        if state is not None:
            restored = state.begin(plan, s, parts, seed=self.seed, reader=reader, say=say)
            if restored is not None:
                parts = restored
        self.parts = parts
        if s.watch is not None and s.watch.events:
            parts.events_file = EventsFile(s.watch.events, keep=state.events_kept() if state is not None else None)
            self.observers.insert(1, parts.events_file)
        self.explaining.start(plan, parts, report_events=self.report_events, refresh=self.refresh_when_due)
        if s.display.verbose:
            describe(s, plan, parts.explainer, self.seed, say)
        if take_request() is not None:  # a Ctrl-C whose KeyboardInterrupt a library swallowed: stop before any write
            raise KeyboardInterrupt
        parts.writer = state.open_writer(plan, s, parts) if state is not None else open_writer(s, explainer.names)
        if state is not None and state.stdout_note:  # traces continued into a pipe
            say(state.stdout_note, "status")
        if self.monitor is not None:  # the metrics exporter and the webhook observe the run too
            from ipfi_cli.run.setup import served_model

            self.observers.extend(self.monitor.observers(say, served=served_model(plan.loaded), reader=reader))
        self.ending = RunEnding(s, self.reporter, self.observers, plan=plan, seed=self.seed,
                                started=self.clock.started, state=state, monitor=self.monitor, snapshot=self.snapshot)
        detector = parts.watch.detector if parts.watch is not None else None
        ranking = (Ranking(tuple(float(v) for v in detector.reference), int(detector.k),
                           float(detector.ndcg_threshold))
                   if detector is not None and detector.reference is not None else None)
        start = RunStart(title=run_title(s, plan), names=list(explainer.names), seed=self.seed, method=s.method.name,
                         learning=s.model.learn, source=plan.source, loss=plan.loss.name,
                         detect=parts.watch is not None, ranking=ranking)
        for observer in self.observers:
            observer.on_start(start)

    # -- the loop ---------------------------------------------------------------------------------
    def _stream(self, reader: RowReader) -> RunStatus:
        s, state, plan, parts, ending = self.settings, self.state, self.plan, self.parts, self.ending
        steps, explaining = self.explaining.steps, self.explaining
        assert plan is not None and parts is not None and steps is not None and ending is not None
        self.status = RunStatus.RUNNING
        error_text: str | None = None
        between_batches = True  # an interruption came between micro-batches (not a forced one)
        # Ctrl-C/SIGTERM wait for the end of the micro-batch: the explainer and the records agree then
        # a resumed run's earlier changes are in its watch: it stops at a new one (--stop-on-change)
        events_before = len(parts.watch.events) if parts.watch is not None else 0
        guard: Any = state if state is not None else BatchGuard(force_on_second=True)
        signals = defer_signals(guard, STOP_NOTICE_STATE if state is not None else STOP_NOTICE)
        try:
            if signals is not None and take_request() is not None:  # as in _prepare, since then
                guard.ending = True
                raise KeyboardInterrupt
            for batch in self._batches(reader):
                if state is not None:
                    batch = state.drop_seen(batch if isinstance(batch, list) else batch.rows(), reader.name)
                    if not batch:
                        continue
                guard.busy = True
                if self.clock.first_row is None:
                    self.clock.first_row = time.monotonic()
                failure = explaining.explain_batch(batch) if isinstance(batch, list) \
                    else explaining.explain_block(batch)
                if failure is not None:  # after the rows before it are explained and written
                    guard.ending = True
                    raise failure
                steps.check_labels(self.reporter.message)
                parts.progress.input_rows += len(batch)
                if state is not None:
                    state.after_batch(parts, batch if isinstance(batch, list) else batch.rows())
                else:
                    guard.batch_done()
                self.refresh()
                if parts.watch is not None and len(parts.watch.events) > events_before and s.watch is not None \
                        and s.watch.stop_on_change:
                    guard.ending = True
                    raise StopOnChange
            guard.ending = True  # the input ended: what remains is the end, which a Ctrl-C does not cut short
            explaining.input_ended()
            if state is not None:
                state.at_end(parts, reader.name)  # before the end-of-input record
            explaining.write_last()
            parts.writer.flush()
            self.status = RunStatus.OK
        except KeyboardInterrupt:
            self.status = RunStatus.INTERRUPTED
            if state is not None:
                state.on_interrupt(parts)
            between_batches = not getattr(guard, "forced", False)
            if state is None and between_batches:  # the explainer agrees with the last row's record
                self._write_last_after_error(parts)
        except StopOnChange:
            self.status = RunStatus.STOPPED_ON_CHANGE
            if state is not None:
                state.on_interrupt(parts)
            explaining.write_last()
        except BrokenPipeError:
            self.status = RunStatus.BROKEN_PIPE
        except BaseException as error:
            self.status = RunStatus.ERROR
            error_text = str(error)
            if state is None and isinstance(error, IpfiError) and not isinstance(error, OutputError):
                self._write_last_after_error(parts)
            if isinstance(error, ServiceError) and state is not None:  # the model is gone: how to go on
                raise ServiceError(f"{error}; {state.kept_note()}") from error
            raise
        finally:
            guard.ending = True
            try:
                self.status = ending.close(parts, self.status, error=error_text, between_batches=between_batches)
            finally:
                if signals is not None:
                    signals.restore(ending=True)
        return ending.settle(parts, lambda: explaining.report(self.status, events_before=events_before, state=state))

    def _batches(self, reader: RowReader) -> Iterator[list[Row] | RowBlock]:
        """The input's micro-batches; a static run without ``--state`` reading a CSV takes
        blocks parsed in bulk where the rows allow (:mod:`ipfi_cli.io.blocks`)."""
        s = self.settings
        if (getattr(reader, "supports_blocks", False) and self.state is None and not s.model.learn
                and self.explaining.blocks):
            return reader.batches(s.reading.batch_size, idle=self.refresh, blocks=True)
        return reader.batches(s.reading.batch_size, idle=self.refresh)

    def _write_last_after_error(self, parts: RunParts) -> None:
        """A run stopped by its input or model still ends its output with the last explained row's
        record (nothing computed is lost). Not with ``--state``: a resumed run writes what an
        uninterrupted one would, and this record would be one more."""
        try:
            self.explaining.write_last()
            parts.writer.flush()
        except (OSError, IpfiError):  # the output failed too: the error that stopped the run is said
            pass

    def _on_skip(self, error: Any) -> None:
        if self.settings.display.verbose:
            self.reporter.message(f"skipped {error}", "warning")

    # -- display ----------------------------------------------------------------------------------
    def snapshot(self, status: RunStatus | None = None) -> Snapshot:
        """The run as the observers see it now (``status``: the run's, by default)."""
        from ipfi_cli.core.explainer import loss_sum

        assert self.parts is not None
        status = self.status if status is None else status
        explainer, progress, watch, clock = self.parts.explainer, self.parts.progress, self.parts.watch, self.clock
        clock.meter.update(progress.rows)
        elapsed = clock.elapsed()
        steps = self.explaining.steps
        recent = steps.recent if steps is not None and self.settings.model.learn else None
        rate, recent_loss = clock.meter.rate, recent.value if recent is not None else float("nan")
        final = status not in (RunStatus.RUNNING, RunStatus.STARTING)
        if final:  # the final one: the whole run's figures
            recent_loss = float("nan")
            if elapsed > 0:
                rate = progress.rows / elapsed
        snapshot = Snapshot(
            names=explainer.names, importances=explainer.importance_array().tolist(),
            bounds=explainer.bound_array(self.settings.output.delta).tolist(), rows=progress.rows,
            explained=explainer.n_explained, skipped=self.parts.checker.skipped, elapsed=elapsed, rate=rate,
            loss=explainer.mean_loss, loss_sum=loss_sum(explainer), recent_loss=recent_loss,
            recent_rows=recent.rows if recent is not None else 0, seed=self.seed, learning=self.settings.model.learn,
            marks=watch.marks() if watch is not None else {},
            model_calls=int(getattr(explainer, "n_model_calls", 0)),
            predictions=int(getattr(explainer, "n_predictions", 0)))
        return self.explaining.snapshot(snapshot, final)

    def refresh(self) -> None:
        """A snapshot to every observer (after each micro-batch, and while the input is idle)."""
        if self.parts is None:
            return
        snapshot = self.snapshot()
        self.clock.next_snapshot = time.monotonic() + SNAPSHOT_INTERVAL
        for observer in self.observers:
            observer.on_snapshot(snapshot)

    def refresh_when_due(self) -> None:
        """A snapshot if the last is :data:`~ipfi_cli.run.observers.SNAPSHOT_INTERVAL` old (within a
        long ``--learn`` micro-batch)."""
        if time.monotonic() >= self.clock.next_snapshot:
            self.refresh()

    def report_events(self, events: Sequence[Any]) -> None:
        """Change events just found, to every observer."""
        for observer in self.observers:
            observer.on_events(events)
