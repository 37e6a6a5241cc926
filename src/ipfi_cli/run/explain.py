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
registry (:func:`~ipfi_cli.core.explainer.make_explainer`) from ``settings.method``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import RunError, UsageError
from ipfi_cli.io.readers import RowReader
from ipfi_cli.run.checks import all_zero_warning, check_inputs, check_output_names, labels_match_nothing
from ipfi_cli.run.observers import SNAPSHOT_INTERVAL, EventsFile, RunEnd, RunObserver, RunStart
from ipfi_cli.run.report import RateMeter, Reporter, Snapshot
from ipfi_cli.run.settings import ExplainSettings, Progress, RunStatus, StopOnChange
from ipfi_cli.run.watch import ChangeWatch

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer

#: the end-of-run lines of a run that ended without failing
_ENDED = (RunStatus.OK, RunStatus.INTERRUPTED, RunStatus.STOPPED_ON_CHANGE)


class ExplainSession:
    """One ``ipfi explain`` run; :meth:`run` returns its :class:`RunStatus`.

    ``reporter`` receives the run's messages and, as its first observer, its snapshots;
    ``observers`` (see :class:`~ipfi_cli.run.observers.RunObserver`) hear about it too.
    """

    def __init__(self, settings: ExplainSettings, reporter: Reporter,
                 observers: Sequence[RunObserver] = ()) -> None:
        self.settings = settings
        self.reporter = reporter
        self.observers: list[RunObserver] = [reporter, *observers]
        self.events_file: EventsFile | None = None  # --events: one of the observers
        self._ended = False
        self._next_snapshot = 0.0
        self.seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        self.progress = Progress()
        self.status = RunStatus.STARTING
        self.error: str | None = None
        self.started = time.time()
        self.first_row_time: float | None = None
        self.meter = RateMeter()
        self.explainer: Explainer | None = None
        self.writer: Any = None
        self.reader: RowReader | None = None
        self.loaded: Any = None
        self.loss: Any = None
        self.classification: bool | None = None
        self.input_columns: list[str] = []
        self.columns: list[str] = []
        self.checker: Any = None
        self.labels: Any = None
        self.state: Any = None  # a StateKeeper with --state
        self.steps: Any = None  # the RowSteps that explain good rows and write their records
        self.watch: ChangeWatch | None = None  # change detection, with settings.watch
        self._mismatch_checked = False

    # -- set-up -------------------------------------------------------------------------------
    def run(self) -> RunStatus:
        """Set up, stream the input to its end (or an interruption), report; errors propagate."""
        import numpy as np

        from ipfi_cli.io.readers import open_rows
        from ipfi_cli.io.values import reader_options
        from ipfi_cli.models.loading import load_predictor
        from ipfi_cli.run import setup

        s = self.settings
        if s.state:
            from ipfi_cli.run.resume import StateKeeper

            self.state = StateKeeper.open(s.state, skip_seen=s.skip_seen)
            self.seed = self.state.seed(s.seed, self.seed)
        self.loaded = loaded = load_predictor(s.model, learn=s.learn, trust=s.trust, http=s.http)
        if s.learn:
            # a learning model is checkpointed and unpickled on resume: the sets inside it (river's
            # Select) must iterate in the same order in both copies (see ipfi_cli.run.canonical)
            from ipfi_cli.run.canonical import canonical_copy

            saved = self.state.saved_model() if self.state is not None else None
            loaded.rewrap(canonical_copy(saved if saved is not None else loaded.model))
        for line in loaded.warnings:
            self.reporter.message(line, "warning")
        self.classification = setup.choose_task(loaded, s.task)
        self.loss = setup.choose_loss(loaded, self.classification, s.loss)
        self.labels = setup.label_matcher(loaded, self.classification, s.learn)
        if loaded.kind == "river" and not s.learn:
            self.reporter.message("note: the river model is explained as it is and does not learn; add --learn "
                                  "to explain each row and then learn it")
        self.reader = reader = open_rows(s.input, format=s.format,
                                         **reader_options(s.na_values, s.no_default_na, s.delimiter))
        try:
            reader.keep_as_text(s.text)
            if self.state is not None:
                self.state.continue_reader(reader)
            # an overflowing loss is reported as one line naming the row, not as numpy warnings
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                self._prepare(reader)
                return self._stream(reader)
        finally:
            reader.close()

    def _prepare(self, reader: RowReader) -> None:
        """Columns, row checks, the explainer, the state and the writer, before the first row."""
        from ipfi_cli.core.explainer import make_explainer
        from ipfi_cli.run import setup
        from ipfi_cli.run.rows import RowChecker

        s, loaded = self.settings, self.loaded
        source = reader.name
        self.input_columns = reader.columns
        known = loaded.predictor.columns
        if not self.input_columns and reader.format == "jsonl" and not known:
            bad = [row.error for row in reader]  # no good row at all: only bad ones, if any
            if bad and s.on_bad_row == "fail" and bad[0] is not None:
                raise bad[0]
            raise RunError(f"{source}: no row was explained: the input has no rows"
                           + (f" but {len(bad):,} bad one(s); the first: {bad[0]}" if bad else ""))
        notes: list[str] = []
        if reader.format == "jsonl":
            # JSONL objects need not share keys: a model that names its inputs gets those, else
            # the first object's keys are the inputs; each row is checked for them and the target
            named = [*(s.features or []), *(c for members in s.groups.values() for c in members)]
            inputs = (list(known) if known else list(dict.fromkeys(named)) if s.features
                      else [c for c in self.input_columns if c != s.target])
            columns = [*inputs, s.target]
            check_target = True
        else:
            columns, check_target = self.input_columns or list(known or []), bool(self.input_columns)
        self.columns = setup.model_columns(loaded, columns, s.target, source, check_target=check_target,
                                           features=s.features, drop=s.drop, groups=s.groups, notes=notes)
        features, groups = setup.explained_columns(loaded, self.columns, s.features, s.drop, s.groups)
        check_inputs(loaded, self.columns, source)
        for line in notes:
            self.reporter.message(line, "note")
        self.checker = RowChecker(source=source, target=s.target, columns=self.columns, to_label=self.labels,
                                  check_columns=reader.format == "jsonl", learn=s.learn, on_bad_row=s.on_bad_row,
                                  on_skip=self._on_skip,
                                  on_first_row=setup.first_row_hook(loaded, self.labels, self.columns),
                                  known_keys=({*self.input_columns, s.target} if reader.format == "jsonl" and not known
                                              and not s.features else None))
        if s.half_life is not None or s.running_mean:  # smoothing whose state merges (ipfi merge)
            from ipfi_cli.core.mergeable import MergeablePFI

            if s.time_column is not None and self.input_columns and s.time_column not in self.input_columns:
                raise UsageError(f"no such input column: {s.time_column} (the columns: "
                                 f"{', '.join(self.input_columns)})", "--time-column")
            self.explainer = MergeablePFI(
                loaded.predictor, self.columns, loss=self.loss, n_repeats=s.repeats, sampling=s.sampling,
                reservoir_size=s.reservoir_size, features=features, groups=groups or None, seed=self.seed,
                half_life=s.half_life, time_column=s.time_column)
        else:
            self.explainer = make_explainer(
                s.method, loaded.predictor, self.columns, loss=self.loss, alpha=s.alpha, n_repeats=s.repeats,
                sampling=s.sampling, reservoir_size=s.reservoir_size, features=features, groups=groups or None,
                seed=self.seed)
        check_output_names(self.explainer.names, s.bounds, source)
        if s.watch is not None:
            self.watch = ChangeWatch(s.watch, self.explainer, self.loss)
        if self.state is not None:
            self.state.begin(self)
        if s.watch is not None and s.watch.events:
            self.events_file = EventsFile(s.watch.events,
                                          keep=self.state.events_kept() if self.state is not None else None)
            self.observers.insert(1, self.events_file)
        from ipfi_cli.run.steps import RowSteps

        self.steps = RowSteps(self)
        if s.verbose:
            self._describe(source, reader.format)
        self.writer = self.state.open_writer(self) if self.state is not None else self._open_writer()
        start = RunStart(title=self.title(), names=list(self.explainer.names), seed=self.seed, method=s.method,
                         learning=s.learn, source=source)
        for observer in self.observers:
            observer.on_start(start)

    def _open_writer(self) -> Any:
        from ipfi_cli.io.writers import open_trace_writer

        s = self.settings
        assert self.explainer is not None
        try:
            writer = open_trace_writer(s.output, self.explainer.names, format=s.output_format, bounds=s.bounds)
            writer.flush()  # the header, for `tail -f`
        except OSError as error:
            if isinstance(error, BrokenPipeError):
                raise
            from ipfi_cli.errors import OutputError

            raise OutputError(f"{s.output}: cannot write the output file ({error.strerror or error})") from None
        return writer

    def title(self) -> str:
        mode = "learning" if self.settings.learn else "static"
        return f"ipfi explain · {type(self.loaded.model).__name__} · {mode} · {self.loss.name} loss"

    def _describe(self, source: str, fmt: str) -> None:
        s, loaded, explainer, say = self.settings, self.loaded, self.explainer, self.reporter.message
        assert explainer is not None
        task = "classification" if self.classification else "regression"
        mode = "learning (explain each row, then learn it)" if s.learn else "static"
        say(f"model {s.model}: {loaded.description}; {task}, loss {self.loss.name}; {mode}")
        unused = [c for c in self.input_columns if c not in self.columns and c != s.target]
        say(f"input {source} ({fmt}); target {s.target!r}; model inputs ({len(self.columns)}): "
            f"{', '.join(self.columns)}" + (f"; not used: {', '.join(unused)}" if unused else ""))
        if loaded.predictor.n_features is not None and not loaded.predictor.columns:
            say("by position: " + ", ".join(f"x{i} <- {c}" for i, c in enumerate(self.columns)))
        say(f"explaining ({len(explainer.names)}): "
            + ", ".join(n if n not in s.groups else f"{n}=[{','.join(s.groups[n])}]" for n in explainer.names))
        say(f"alpha {s.alpha}, repeats {s.repeats}, sampling {s.sampling}, reservoir {s.reservoir_size}, "
            f"seed {self.seed} (--seed {self.seed} repeats this run)")

    # -- the loop ---------------------------------------------------------------------------------
    def _stream(self, reader: RowReader) -> RunStatus:
        s, state = self.settings, self.state
        self.status = RunStatus.RUNNING
        idle = self.refresh
        signals = state.watch_signals() if state is not None else None
        try:
            for batch in reader.batches(s.batch_size, idle=idle):
                if state is not None:
                    batch = state.drop_seen(batch, reader.name)
                    if not batch:
                        continue
                    state.busy = True
                if self.first_row_time is None:
                    self.first_row_time = time.monotonic()
                good, failure = self.checker.check(batch)
                if good:
                    self.steps.explain(good)
                    self.writer.flush()
                if self.steps.failure is not None:  # the model failed on a good row: it comes first
                    failure = self.steps.failure
                if failure is not None:  # after the rows before it are explained and written
                    raise failure
                self._check_labels_match()
                self.progress.input_rows += len(batch)
                if state is not None:
                    state.after_batch(self, batch)
                self.refresh()
                if self.watch is not None and self.watch.events and s.watch is not None and s.watch.stop_on_change:
                    raise StopOnChange
            if state is not None:
                state.at_end(self, reader.name)  # before the end-of-input record
            self._write_last()
            self.writer.flush()
            self.status = RunStatus.OK
        except KeyboardInterrupt:
            self.status = RunStatus.INTERRUPTED
            if state is not None:
                state.on_interrupt(self)
        except StopOnChange:
            self.status = RunStatus.STOPPED_ON_CHANGE
            if state is not None:
                state.on_interrupt(self)
            self._write_last()
        except BrokenPipeError:
            self.status = RunStatus.BROKEN_PIPE
        except BaseException as error:
            self.status = RunStatus.ERROR
            self.error = str(error)
            raise
        finally:
            if signals is not None:
                signals.restore()
            self._close()
        return self._report()

    def _close(self) -> None:
        """Close the output, end the observers (the live table stops, the summary shows), write
        ``--meta``; runs whatever happened."""
        from ipfi_cli.io.writers import silence_stdout

        notes: list[tuple[str, str | None]] = []
        try:
            if self.writer is not None:
                try:
                    self.writer.close()
                except BrokenPipeError:
                    self.status = RunStatus.BROKEN_PIPE
                except KeyboardInterrupt:
                    self.status = RunStatus.INTERRUPTED
            if self.status is RunStatus.BROKEN_PIPE:
                silence_stdout()
            if self.status in _ENDED:
                notes = self._end_notes()
        finally:
            self._end(notes)
            if self.settings.meta and self.status is not RunStatus.STARTING:
                from ipfi_cli.run.meta import write_meta

                try:
                    write_meta(self)
                except OSError as error:
                    self.reporter.message(f"{self.settings.meta}: cannot write the metadata file "
                                          f"({error.strerror or error})", "error")
                    if self.status is RunStatus.OK:
                        self.status = RunStatus.ERROR

    def _end_notes(self) -> list[tuple[str, str | None]]:
        """The end of a run that did not fail: save the learned model; the lines said before the summary."""
        s, status = self.settings, self.status
        notes: list[tuple[str, str | None]] = []
        if status is RunStatus.OK and s.save_model:
            from ipfi_cli.models.files import save_model

            save_model(s.save_model, self.loaded.model)
            if s.verbose:
                notes.append((f"saved the learned model to {s.save_model}", None))
        skipped = self.checker.skipped_summary()
        if skipped:
            notes.append((skipped, "warning"))
        for line in (self.checker.late_keys_summary(), self.reader.noted_missing_summary() if self.reader else None):
            if line:
                notes.append((line, "note"))
        unknown = self.labels.unknown_summary()
        if unknown:
            notes.append((unknown, "warning"))
        if status is RunStatus.INTERRUPTED:
            notes.append((f"interrupted after {self.progress.rows:,} rows; every record written is complete"
                          + ("; the model was not saved" if s.save_model else "")
                          + (f"; the state is saved in {s.state}: run the same command again to continue"
                             if s.state else ""), "status"))
        return notes

    def _end(self, notes: list[tuple[str, str | None]]) -> None:
        """Tell every observer that the run ended (once). The reporter's display errors never hide
        the run's outcome; another observer's first error is raised after all have heard."""
        if self._ended or self.explainer is None:
            return
        self._ended = True
        snapshot = self.snapshot() if self.status is not RunStatus.BROKEN_PIPE else None
        end = RunEnd(title=self.title(), status=self.status.value, snapshot=snapshot, notes=tuple(notes))
        failure: Exception | None = None
        for observer in self.observers:
            try:
                observer.on_end(end)
            except Exception as error:  # noqa: BLE001 - every observer hears of the end
                if observer is not self.reporter and failure is None:
                    failure = error
        if failure is not None and self.status in _ENDED:
            raise failure

    def _report(self) -> RunStatus:
        s, say, status = self.settings, self.reporter.message, self.status
        if status in (RunStatus.BROKEN_PIPE, RunStatus.ERROR):
            if self.state is not None:
                self.state.report_kept(self)
            return status
        assert self.explainer is not None
        if self.watch is not None:
            for line in self.watch.summary_lines(self.explainer.importance_array()):
                say(line)
        if status is RunStatus.STOPPED_ON_CHANGE and self.watch is not None:
            say(f"stopped at the first change (row {self.watch.events[0].row:,}); every record written is complete"
                + (f"; the state is saved in {s.state}: run the same command again to continue" if s.state else ""),
                "status")
        if s.verbose:
            say(f"wrote {self.writer.records:,} record(s) to {s.output or '<stdout>'}")
        if status is RunStatus.OK and self.explainer.n_explained > 0:
            source = self.reader.name if self.reader else s.input
            if self.labels.none_matched:
                raise RunError(f"{source}: {labels_match_nothing(self.labels)}")
            zero = all_zero_warning(self.explainer.importance_array(), self.explainer.n_explained)
            if zero:
                say(zero, "warning")
        if status is RunStatus.OK and self.explainer.n_explained == 0:
            skipped_rows, rows = self.checker.skipped, self.progress.rows
            why = (f"all {skipped_rows:,} row(s) were bad" if skipped_rows and not rows
                   else "the input has no rows" if not rows
                   else "one row only fills the reservoir; a row is explained against earlier rows")
            raise RunError(f"{self.reader.name if self.reader else s.input}: no row was explained: {why}")
        return status

    def _on_skip(self, error: Any) -> None:
        if self.settings.verbose:
            self.reporter.message(f"skipped {error}", "warning")

    def _check_labels_match(self) -> None:
        """Once enough rows are explained: a zero-one loss of 1 on every one of them means the
        labels and the model's outputs are probably of different kinds; say so."""
        from ipfi_cli.run.labels import MISMATCH_ROWS, mismatch_example

        explainer = self.explainer
        assert explainer is not None
        needed = MISMATCH_ROWS * (8 if self.settings.learn else 1)  # a learning model starts out wrong
        if self._mismatch_checked or explainer.n_explained < needed:
            return
        self._mismatch_checked = True
        if self.loss.name == "zero-one" and explainer.mean_loss == 1.0:
            example = mismatch_example(self.loaded.predictor, self.columns, self.steps.reference)
            self.reporter.message(
                f"every one of the first {explainer.n_explained:,} explained rows has a wrong prediction (loss 1): "
                f"the labels probably do not match the model's outputs{example}; check --target and the "
                "label values", "warning")

    def _write_last(self) -> None:
        """Always end with the last row's record (``every`` may have skipped it)."""
        last = self.progress.last
        if last is not None and self.progress.last_written != last[0]:
            assert self.explainer is not None
            bound = self.explainer.bound_array(self.settings.delta).tolist() if self.settings.bounds else None
            self.writer.write(last[0], last[1], bound)
            self.progress.last_written = last[0]

    # -- display ----------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The run as the observers see it now."""
        explainer, progress = self.explainer, self.progress
        assert explainer is not None
        explained = explainer.n_explained
        self.meter.update(progress.rows, explained, explainer.mean_loss)
        elapsed = time.monotonic() - self.first_row_time if self.first_row_time is not None else 0.0
        rate, recent_loss = self.meter.rate, self.meter.recent_loss if self.settings.learn else float("nan")
        if self.status not in (RunStatus.RUNNING, RunStatus.STARTING):  # the final one: the whole run's figures
            recent_loss = float("nan")
            if elapsed > 0:
                rate = progress.rows / elapsed
        return Snapshot(names=explainer.names, importances=explainer.importance_array().tolist(),
                        bounds=explainer.bound_array(self.settings.delta).tolist(), rows=progress.rows,
                        explained=explained, skipped=self.checker.skipped, elapsed=elapsed, rate=rate,
                        loss=explainer.mean_loss,
                        recent_loss=recent_loss,
                        seed=self.seed, learning=self.settings.learn,
                        marks=self.watch.marks() if self.watch is not None else {})

    def refresh(self) -> None:
        """A snapshot to every observer (after each micro-batch, and while the input is idle)."""
        if self.explainer is None:
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
