"""The streaming session behind ``ipfi explain``: read, explain (or explain then learn), write, report.

:class:`ExplainSession` takes an :class:`ExplainSettings` (everything the command was asked
to do) and a :class:`~ipfi_cli.run.report.Reporter`, and :meth:`~ExplainSession.run`
returns a :class:`RunStatus`. It imports neither Typer nor Rich: the command line maps the
status and the :mod:`ipfi_cli.errors` it raises to exit codes, and chooses the reporter.

The loop reads micro-batches of whatever rows are already available
(:meth:`ipfi_cli.io.readers.RowReader.batches`). A static model explains each batch with
one ``explain_many`` call (the numbers are those of ``explain_one`` row by row); with
``learn`` each row is explained with the current model and then learned. ``--state``
checkpoints and resuming live in :mod:`ipfi_cli.run.resume`.

The session reports to a list of observers (:mod:`ipfi_cli.run.observers`): the reporter
(the live table or the plain summary) first, then ``--events``' file, then any given.
The explainer is any :class:`~ipfi_cli.core.explainer.Explainer`, built by the method
registry (:func:`~ipfi_cli.core.explainer.make_explainer`) from ``settings.method.name``.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.params import PFIParams
from ipfi_cli.errors import IpfiError, OutputError, RunError, ServiceError, UsageError
from ipfi_cli.io.readers import RowReader
from ipfi_cli.run.checks import check_output_names, labels_match_nothing
from ipfi_cli.run.ending import RunEndMixin
from ipfi_cli.run.keyed import KeyedSessionMixin
from ipfi_cli.run.observers import SNAPSHOT_INTERVAL, EventsFile, RunObserver, RunStart
from ipfi_cli.run.plan import InputSpec, RunPlan, Selection, plan_run
from ipfi_cli.run.report import PlainReporter, RateMeter, Reporter, Snapshot
from ipfi_cli.run.settings import (
    ExplainSettings,
    KeySpec,
    MethodSpec,
    ModelSpec,
    OutputSpec,
    Progress,
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
    from ipfi_cli.run.rows import GoodRow, RowChecker
    from ipfi_cli.run.steps import RowSteps

#: rows held back at most while no label has matched a class of a fixed model (then the run is refused)
HOLD_ROWS = 1000


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
        model=ModelSpec(f"<{type(model).__name__}>", learn=learn), inputs=InputSpec(path="<rows>"),
        selection=target if isinstance(target, Selection) else Selection(target=target), method=method,
        params=params, output=output, reading=reading, seed=seed, state=state, watch=watch, keys=keys)
    session = new_session(settings, reporter if reporter is not None else PlainReporter(quiet=True), observers,
                          model=model, rows=rows)
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


def new_session(settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver] = (), *,
                model: Any = None, rows: Iterable[Mapping[str, Any]] | None = None) -> ExplainSession:
    """The session ``settings`` ask for: one explainer, or one per key with ``by``
    (:class:`~ipfi_cli.run.keyed.KeyedSession`)."""
    if settings.keys.max_keys is not None and not settings.selection.by:
        raise UsageError("needs --by (it bounds the keys' explainers kept live)", "--max-keys")
    if (settings.keys.workers is not None or settings.keys.scheduler is not None) and not settings.selection.by:
        raise UsageError("needs --by (the keys are what is spread over the workers)",
                         "--workers" if settings.keys.workers is not None else "--scheduler")
    if settings.selection.by and (settings.keys.workers is not None or settings.keys.scheduler is not None):
        raise UsageError("the keys spread over Dask workers are a run of files: "
                         "ipfi_cli.run.keyed_spread.SpreadKeyedSession(settings, reporter).run()",
                         "--workers" if settings.keys.workers is not None else "--scheduler")
    if settings.selection.by:
        return KeyedSession(settings, reporter, observers, model=model, rows=rows)
    return ExplainSession(settings, reporter, observers, model=model, rows=rows)


class ExplainSession(RunEndMixin):
    """One ``ipfi explain`` run; :meth:`run` returns its :class:`RunStatus`.

    ``reporter`` receives the run's messages and, as its first observer, its snapshots;
    ``observers`` (see :class:`~ipfi_cli.run.observers.RunObserver`) hear about it too.
    The set-up is one value (:attr:`plan`, a :class:`~ipfi_cli.run.plan.RunPlan`); what
    changes as rows stream is in :attr:`parts` (the explainer, the counters, the row
    checker, the writer, the change watch), which :class:`~ipfi_cli.run.steps.RowSteps`,
    :class:`~ipfi_cli.run.resume.StateKeeper` and :func:`~ipfi_cli.run.meta.write_meta`
    receive as arguments.
    """

    def __init__(self, settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver] = (), *,
                 model: Any = None, rows: Iterable[Mapping[str, Any]] | None = None) -> None:
        self.settings = settings
        self._model = model  # a model object instead of settings.model.path's file
        self._rows = rows  # rows as objects instead of settings.inputs.path
        self.reporter = reporter
        self.observers: list[RunObserver] = [reporter, *observers]
        self.seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        self.status = RunStatus.STARTING
        self.error: str | None = None
        self.between_batches = True  # an interruption came between micro-batches (not a forced one)
        self.events_before = 0  # changes the watch held when this run began (a resumed run's earlier ones)
        self.started = time.time()
        self.first_row_time: float | None = None
        self.meter = RateMeter()
        self.plan: RunPlan | None = None
        self.reader: RowReader | None = None
        self.parts: RunParts | None = None
        self.state: StateKeeper | None = None  # with --state
        self.steps: RowSteps | None = None  # explain good rows and write their records
        self.monitor: StreamMonitor | None = None  # metrics and the webhook, with settings.monitor
        self._ended = False
        self._next_snapshot = 0.0
        self._mismatch_checked = False
        #: good rows held back (not explained, nothing written) while no label has matched a class of a
        #: fixed model yet: a run whose labels match none is refused before any record; ``None``: released
        self._held: list[GoodRow] | None = []

    @property
    def watch(self) -> ChangeWatch | None:
        """The run's change detection (``--detect``), once the run is set up."""
        return self.parts.watch if self.parts is not None else None

    @property
    def explainer(self) -> Explainer | None:
        return self.parts.explainer if self.parts is not None else None

    # -- set-up -------------------------------------------------------------------------------
    def run(self) -> RunStatus:
        """Set up, stream the input to its end (or an interruption), report; errors propagate."""
        s = self.settings
        if s.monitor is not None and s.monitor.wanted:
            from ipfi_cli.run.monitor import StreamMonitor

            self.monitor = StreamMonitor(s.monitor)
            self.monitor.serve(self)  # /metrics answers from the start, before the input's first line
        try:
            return self._run()
        finally:
            if self.state is not None:
                self.state.release()
            if self.monitor is not None:
                self.monitor.close()

    def _run(self) -> RunStatus:
        import numpy as np

        from ipfi_cli.models.loading import load_predictor, wrap_model

        s = self.settings
        if s.state is not None:
            from ipfi_cli.run.resume import StateKeeper

            self.state = StateKeeper.open(s.state.path, skip_seen=s.state.skip_seen)
            self.seed = self.state.seed(s.seed, self.seed)
        loaded = (wrap_model(self._model, name=s.model.path, learn=s.model.learn) if self._model is not None
                  else load_predictor(s.model.path, learn=s.model.learn, trust=s.model.trust, http=s.model.http))
        if s.model.learn:
            # a learning model is checkpointed and unpickled on resume: the sets inside it (river's
            # Select) must iterate in the same order in both copies (see ipfi_cli.run.canonical)
            from ipfi_cli.run.canonical import canonical_copy

            saved = self.state.saved_model() if self.state is not None else None
            loaded.rewrap(canonical_copy(saved if saved is not None else loaded.model))
        if s.model.save_model:  # refused now rather than after the whole run
            from ipfi_cli.models.files import check_save_model

            check_save_model(s.model.save_model, loaded.model)
        inputs = s.inputs if self._rows is None else replace(s.inputs, rows=self._rows)
        selection = s.selection
        labels = s.labels
        if labels is not None and s.selection.target is None:
            raise UsageError("Missing option '--target': --labels gives the labels of the column --target names")
        if labels is not None and not loaded.predictor.columns and labels.id_column not in (selection.drop or []):
            # an id is not an input (unless the model names it)
            selection = replace(selection, drop=[*(selection.drop or []), labels.id_column])
        if s.method.time_column is not None:
            if s.method.time_column == s.selection.target:
                raise UsageError(f"the target {s.selection.target!r} cannot be the event time too", "--time-column")
            if not loaded.predictor.columns and s.method.time_column not in (selection.drop or []) \
                    and s.method.time_column not in (selection.features or []):
                # the event time is not an input either (unless the model names it, or --features does)
                selection = replace(selection, drop=[*(selection.drop or []), s.method.time_column])
        self.plan, self.reader = plan_run(
            loaded, inputs, selection, learn=s.model.learn, say=self.reporter.message, on_bad_row=s.reading.on_bad_row,
            before_rows=self.state.continue_reader if self.state is not None else None,
            join=self._join_labels if labels is not None else None)
        try:
            # an overflowing loss is reported as one line naming the row, not as numpy warnings
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                self._prepare(self.plan, self.reader)
                return self._stream(self.reader)
        finally:
            self.reader.close()

    def _join_labels(self, features: RowReader) -> Any:
        """The input joined with ``--labels`` by ``--id`` (see :mod:`ipfi_cli.run.late_labels`)."""
        from ipfi_cli.io.labels import LabelStream
        from ipfi_cli.io.values import reader_options
        from ipfi_cli.run.late_labels import JoinedReader, LabelWait

        s, late = self.settings, self.settings.labels
        assert late is not None
        labels = LabelStream(late.source, late.id_column, s.selection.target or "", follow=late.follow,
                             reader_options=reader_options(s.inputs.na_values, s.inputs.no_default_na, None))
        try:
            return JoinedReader(features, labels, late.id_column, s.selection.target or "", LabelWait.parse(late.wait))
        except BaseException:
            labels.close()
            raise

    def _prepare(self, plan: RunPlan, reader: RowReader) -> None:
        """The explainer, the state, the change watch and the writer, before the first row."""
        s = self.settings
        checker = plan.row_checker(on_bad_row=s.reading.on_bad_row, on_skip=self._on_skip, say=self.reporter.message)
        parts = self._make_parts(plan, checker)
        explainer = parts.explainer
        if self.state is not None:
            restored = self.state.begin(plan, s, parts, seed=self.seed, reader=reader, say=self.reporter.message)
            if restored is not None:
                parts = restored
        self.parts = parts
        if s.watch is not None and s.watch.events:
            parts.events_file = EventsFile(s.watch.events,
                                           keep=self.state.events_kept() if self.state is not None else None)
            self.observers.insert(1, parts.events_file)
        self.steps = self._make_steps(plan, parts)
        if s.display.verbose:
            self._describe(plan)
        if take_request() is not None:  # a Ctrl-C whose KeyboardInterrupt a library swallowed: stop before any write
            raise KeyboardInterrupt
        parts.writer = self.state.open_writer(plan, s, parts) if self.state is not None else self._open_writer()
        if self.state is not None and self.state.stdout_note:  # traces continued into a pipe
            self.reporter.message(self.state.stdout_note, "status")
        if self.monitor is not None:  # the metrics exporter and the webhook observe the run too
            self.observers.extend(self.monitor.observers(self))
        start = RunStart(title=self.title(), names=list(explainer.names), seed=self.seed, method=s.method.name,
                         learning=s.model.learn, source=plan.source)
        for observer in self.observers:
            observer.on_start(start)

    def _make_parts(self, plan: RunPlan, checker: RowChecker) -> RunParts:
        """The run's explainer (refused here if ``--state`` cannot hold it) and change watch."""
        s = self.settings
        explainer = self._build_explainer(plan)
        if s.state is not None:
            self._check_saveable(explainer, "--state")
        check_output_names(explainer.names, s.output.bounds, plan.source)
        watch = ChangeWatch(s.watch, explainer, plan.loss) if s.watch is not None else None
        return RunParts(explainer=explainer, progress=Progress(), checker=checker, watch=watch)

    def _build_explainer(self, plan: RunPlan) -> Explainer:
        """A new explainer with the run's settings and seed (no row seen)."""
        from ipfi_cli.core.explainer import make_explainer

        s = self.settings
        if s.method.half_life is not None or s.method.running_mean:  # smoothing whose state merges (ipfi merge)
            if s.method.name != "pfi" or s.method.removal != "marginal" or s.method.smoothing != "exponential" \
                    or s.output.bounds_method == "realisations":
                raise UsageError("smoothing that merges is iPFI's with marginal removal and the chebyshev or normal "
                                 "bound: drop --method, --removal and --smoothing, and choose one of those bounds",
                                 "--half-life" if s.method.half_life is not None else "--running-mean")
            from ipfi_cli.core.mergeable import MergeablePFI
            from ipfi_cli.run.setup import check_readable

            check_readable(self.reader, [s.method.time_column])
            time_column = s.method.time_column
            if time_column is not None and plan.input_columns and time_column not in plan.input_columns:
                raise UsageError(f"no such input column: {s.method.time_column} (the columns: "
                                 f"{', '.join(plan.input_columns)})", "--time-column")
            return MergeablePFI(
                plan.predictor, plan.columns, loss=plan.loss, n_repeats=s.params.n_repeats, sampling=s.params.sampling,
                reservoir_size=s.params.reservoir_size, features=plan.features, groups=plan.groups or None,
                seed=self.seed, half_life=s.method.half_life, time_column=s.method.time_column,
                bounds_method=s.output.bounds_method)
        return make_explainer(
            s.method.name, plan.predictor, plan.columns, loss=plan.loss, alpha=s.params.alpha,
            n_repeats=s.params.n_repeats,
            sampling=s.params.sampling, reservoir_size=s.params.reservoir_size, features=plan.features,
            groups=plan.groups or None, seed=self.seed, **self._method_settings())

    @staticmethod
    def _check_saveable(explainer: Explainer, option: str) -> None:
        """The state is plain data: refuse before the first row an explainer whose state it cannot hold."""
        try:
            explainer.state_dict()
        except (ValueError, NotImplementedError) as error:
            hint = "; use --conditional-sampler gaussian" \
                if explainer.params().get("conditional_sampler") == "tree" else ""
            raise UsageError(f"cannot save this explainer's state as data: {error}{hint}", option) from None

    def _make_steps(self, plan: RunPlan, parts: RunParts) -> RowSteps:
        from ipfi_cli.run.steps import RowSteps

        return RowSteps(plan, self.settings, parts, report_events=self.report_events, refresh=self.refresh_when_due)

    def _method_settings(self) -> dict[str, Any]:
        """The method's own settings, passed only where they differ from the paper's iPFI."""
        s = self.settings
        own: dict[str, Any] = {}
        if s.method.smoothing != "exponential":
            own["smoothing"] = s.method.smoothing
        if s.method.removal != "marginal":
            own["removal"] = s.method.removal
            own["conditional_sampler"] = s.method.conditional_sampler
        if s.method.name == "sage":
            own["n_inner"] = s.method.inner
            own["empty"] = s.method.empty_coalition
        if s.output.bounds_method != "chebyshev":
            own["bounds_method"] = s.output.bounds_method
        return own

    def _open_writer(self) -> Any:
        from ipfi_cli.io.writers import open_trace_writer

        s, parts = self.settings, self.parts
        assert parts is not None
        try:
            writer = open_trace_writer(s.output.path, parts.explainer.names, format=s.output.format,
                                       bounds=s.output.bounds,
                                       key_columns=s.selection.by or ())
            writer.flush()  # the header, for `tail -f`
        except OSError as error:
            if isinstance(error, BrokenPipeError):
                raise
            from ipfi_cli.errors import OutputError

            raise OutputError(f"{s.output.path}: cannot write the output file ({error.strerror or error})") from None
        return writer

    def title(self) -> str:
        assert self.plan is not None
        s = self.settings
        mode = "learning" if s.model.learn else "static"
        method = "" if s.method.name == "pfi" else f" · {s.method.name}"  # the paper's iPFI: the title it always had
        removal = "" if s.method.removal == "marginal" else f" · {s.method.removal} removal"
        return (f"ipfi explain · {type(self.plan.loaded.model).__name__} · {mode} · {self.plan.loss.name} loss"
                f"{method}{removal}")

    def _describe(self, plan: RunPlan) -> None:
        s, say = self.settings, self.reporter.message
        assert self.parts is not None
        names, loaded, columns = self.parts.explainer.names, plan.loaded, plan.columns
        task = "classification" if plan.classification else "regression"
        mode = "learning (explain each row, then learn it)" if s.model.learn else "static"
        say(f"model {s.model.path}: {loaded.description}; {task}, loss {plan.loss.name}; {mode}")
        unused = [c for c in plan.input_columns if c not in columns and c != s.selection.target and c not in plan.by]
        target = f"target {s.selection.target!r}" if s.selection.target is not None \
            else "no target (a label-free loss)"
        say(f"input {plan.source} ({plan.input_format}); {target}; model inputs ({len(columns)}): "
            f"{', '.join(columns)}" + (f"; not used: {', '.join(unused)}" if unused else ""))
        if loaded.predictor.n_features is not None and not loaded.predictor.columns:
            say("by position: " + ", ".join(f"x{i} <- {c}" for i, c in enumerate(columns)))
        if plan.by:
            say(f"one explainer per key of {', '.join(plan.by)}"
                + (f", at most {s.keys.max_keys:,} live (the others saved as plain data)" if s.keys.max_keys else ""))
        groups = s.selection.groups
        say(f"explaining ({len(names)}): "
            + ", ".join(n if n not in groups else f"{n}=[{','.join(groups[n])}]" for n in names))
        inner = getattr(self.explainer, "n_inner", s.method.inner)
        say(f"method {s.method.name}, removal {s.method.removal}"
            + (f" ({s.method.conditional_sampler} sampler)" if s.method.removal != "marginal" else "")
            + f", smoothing {s.method.smoothing}"
            + (f", {inner} imputation(s) per coalition, the empty one {s.method.empty_coalition}"
               if s.method.name == "sage"
               else ""))
        params = s.params
        say(f"alpha {params.alpha}, repeats {params.n_repeats}, sampling {params.sampling}, "
            f"reservoir {params.reservoir_size}, "
            f"seed {self.seed} (--seed {self.seed} repeats this run)")

    # -- the loop ---------------------------------------------------------------------------------
    def _stream(self, reader: RowReader) -> RunStatus:
        s, state, plan, parts, steps = self.settings, self.state, self.plan, self.parts, self.steps
        assert plan is not None and parts is not None and steps is not None
        self.status = RunStatus.RUNNING
        # Ctrl-C/SIGTERM wait for the end of the micro-batch: the explainer and the records agree then
        # a resumed run's earlier changes are in its watch: it stops at a new one (--stop-on-change)
        self.events_before = len(parts.watch.events) if parts.watch is not None else 0
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
                if self.first_row_time is None:
                    self.first_row_time = time.monotonic()
                failure = self._explain_batch(batch) if isinstance(batch, list) else self._explain_block(batch)
                if failure is not None:  # after the rows before it are explained and written
                    guard.ending = True
                    raise failure
                self._check_labels_match(plan, parts)
                parts.progress.input_rows += len(batch)
                if state is not None:
                    state.after_batch(parts, batch if isinstance(batch, list) else batch.rows())
                else:
                    guard.batch_done()
                self.refresh()
                if parts.watch is not None and len(parts.watch.events) > self.events_before and s.watch is not None \
                        and s.watch.stop_on_change:
                    guard.ending = True
                    raise StopOnChange
            guard.ending = True  # the input ended: what remains is the end, which a Ctrl-C does not cut short
            self._refuse_held()
            if state is not None:
                state.at_end(parts, reader.name)  # before the end-of-input record
            self._write_last(parts)
            parts.writer.flush()
            self.status = RunStatus.OK
        except KeyboardInterrupt:
            self.status = RunStatus.INTERRUPTED
            if state is not None:
                state.on_interrupt(parts)
            self.between_batches = not getattr(guard, "forced", False)
            if state is None and self.between_batches:  # the explainer agrees with the last row's record
                self._write_last_after_error(parts)
        except StopOnChange:
            self.status = RunStatus.STOPPED_ON_CHANGE
            if state is not None:
                state.on_interrupt(parts)
            self._write_last(parts)
        except BrokenPipeError:
            self.status = RunStatus.BROKEN_PIPE
        except BaseException as error:
            self.status = RunStatus.ERROR
            self.error = str(error)
            if state is None and isinstance(error, IpfiError) and not isinstance(error, OutputError):
                self._write_last_after_error(parts)
            if isinstance(error, ServiceError) and state is not None:  # the model is gone: how to go on
                raise ServiceError(f"{error}; {state.kept_note()}") from error
            raise
        finally:
            guard.ending = True
            try:
                self._close(plan, parts)
            finally:
                if signals is not None:
                    signals.restore(ending=True)
        return self._settle(lambda: self._report(plan, parts))

    def _batches(self, reader: RowReader) -> Iterator[list[Row] | RowBlock]:
        """The input's micro-batches; a static run without ``--state`` reading a CSV takes
        blocks parsed in bulk where the rows allow (:mod:`ipfi_cli.io.blocks`)."""
        s = self.settings
        if (getattr(reader, "supports_blocks", False) and self.state is None and not s.model.learn
                and not s.selection.by):
            return reader.batches(s.reading.batch_size, idle=self.refresh, blocks=True)
        return reader.batches(s.reading.batch_size, idle=self.refresh)

    def _explain_block(self, batch: RowBlock) -> IpfiError | None:
        """:meth:`_explain_batch` for a block parsed in bulk: checked and explained as arrays
        where its rows allow, else row by row."""
        parts, steps = self.parts, self.steps
        assert parts is not None and steps is not None
        block = parts.checker.check_block(batch) if self._held is None else None
        if block is None:
            return self._explain_batch(batch.rows())
        steps.explain_block(block)
        parts.writer.flush()
        return steps.failure

    def _explain_batch(self, batch: list[Row]) -> IpfiError | None:
        """Check, explain and write one micro-batch; the error to stop with (a bad row, or the row
        the model failed on: it comes first), after the rows before it."""
        parts, steps = self.parts, self.steps
        assert parts is not None and steps is not None
        good, bad_row = parts.checker.check(batch)
        if self._held is not None:
            good = self._hold(good, stopping=bad_row is not None)
        if good:
            steps.explain(good)
            parts.writer.flush()
        return steps.failure if steps.failure is not None else bad_row

    def _hold(self, good: list[GoodRow], stopping: bool) -> list[GoodRow]:
        """The rows to explain now: none while every label so far matches no class of a fixed model
        (they are held, up to :data:`HOLD_ROWS`), the held ones and these once one matches (or the
        run stops at a bad row: the rows before it are explained, as without the hold)."""
        assert self._held is not None and self.plan is not None
        labels = self.plan.labels
        self._held.extend(good)
        if self.plan.loss.relative:  # a label-free loss reads no label: there is nothing to match
            held, self._held = self._held, None
            return held
        pending = (labels.classification and labels.fixed and labels.classes is not None
                   and (labels.matched == 0 or labels.none_matched))
        if pending and not stopping:
            if len(self._held) >= HOLD_ROWS:
                raise RunError(f"{self.plan.source}: the first {len(self._held):,} rows' labels: "
                               f"{labels_match_nothing(labels)}")
            return []
        held, self._held = self._held, None
        return held

    def _refuse_held(self) -> None:
        """At the end of the input: rows still held had labels none of which is a class of the model:
        refused, before any record or the summary."""
        if self._held and self.plan is not None:
            raise RunError(f"{self.plan.source}: {labels_match_nothing(self.plan.labels)}")
        self._held = None

    def _on_skip(self, error: Any) -> None:
        if self.settings.display.verbose:
            self.reporter.message(f"skipped {error}", "warning")

    # -- display ----------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The run as the observers see it now."""
        from ipfi_cli.core.explainer import loss_sum

        assert self.parts is not None
        explainer, progress, watch = self.parts.explainer, self.parts.progress, self.parts.watch
        explained = explainer.n_explained
        self.meter.update(progress.rows)
        elapsed = time.monotonic() - self.first_row_time if self.first_row_time is not None else 0.0
        recent = self.steps.recent if self.steps is not None and self.settings.model.learn else None
        rate, recent_loss = self.meter.rate, recent.value if recent is not None else float("nan")
        if self.status not in (RunStatus.RUNNING, RunStatus.STARTING):  # the final one: the whole run's figures
            recent_loss = float("nan")
            if elapsed > 0:
                rate = progress.rows / elapsed
        return Snapshot(names=explainer.names, importances=explainer.importance_array().tolist(),
                        bounds=explainer.bound_array(self.settings.output.delta).tolist(), rows=progress.rows,
                        explained=explained, skipped=self.parts.checker.skipped, elapsed=elapsed, rate=rate,
                        loss=explainer.mean_loss, loss_sum=loss_sum(explainer), recent_loss=recent_loss,
                        recent_rows=recent.rows if recent is not None else 0,
                        seed=self.seed,
                        learning=self.settings.model.learn, marks=watch.marks() if watch is not None else {})

    def refresh(self) -> None:
        """A snapshot to every observer (after each micro-batch, and while the input is idle)."""
        if self.parts is None:
            return
        snapshot = self.snapshot()
        self._next_snapshot = time.monotonic() + SNAPSHOT_INTERVAL
        for observer in self.observers:
            observer.on_snapshot(snapshot)

    def refresh_when_due(self) -> None:
        """A snapshot if the last is :data:`~ipfi_cli.run.observers.SNAPSHOT_INTERVAL` old (within a
        long ``--learn`` micro-batch)."""
        if time.monotonic() >= self._next_snapshot:
            self.refresh()

    def report_events(self, events: Sequence[Any]) -> None:
        """Change events just found, to every observer."""
        for observer in self.observers:
            observer.on_events(events)


class KeyedSession(KeyedSessionMixin, ExplainSession):
    """``ipfi explain --by``: one explainer (and change watch) per key; see :mod:`ipfi_cli.run.keyed`."""
