"""The end of an ``ipfi explain`` run: close the output, the end-of-run lines, the observers, ``--meta``.

:class:`RunEnding` is the collaborator an :class:`~ipfi_cli.run.explain.ExplainSession` makes once
it is set up and calls once the rows are done (or a row, the model or the output stopped them):
:meth:`~RunEnding.close` closes the writer, says the lines that end a run (bad rows skipped, late
labels, labels matching no class, SAGE's explained loss, a weak conditional sampler), tells every
observer the run ended, and writes ``--meta``; :meth:`~RunEnding.settle` then runs the strategy's
checks of the numbers (:meth:`~ipfi_cli.run.explaining.Explaining.report`: a run whose numbers
cannot be right is refused with one line) and raises an observer's failure at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import first_line
from ipfi_cli.io.writers import silence_stdout
from ipfi_cli.run.building import run_title
from ipfi_cli.run.observers import RunEnd
from ipfi_cli.run.settings import RunParts, RunStatus

if TYPE_CHECKING:
    from ipfi_cli.run.monitor import StreamMonitor
    from ipfi_cli.run.observers import RunObserver, Snapshot
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.report import Reporter
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.settings import ExplainSettings

#: the end-of-run lines of a run that ended without failing
_ENDED = (RunStatus.OK, RunStatus.INTERRUPTED, RunStatus.STOPPED_ON_CHANGE)


class RunEnding:
    """How a run ends: see the module docstring. Given the run's fixed pieces when it is set up
    (``snapshot(status)``: the run's figures as they are); :meth:`close` is told its parts and how
    it stopped."""

    def __init__(self, settings: ExplainSettings, reporter: Reporter, observers: Sequence[RunObserver], *,
                 plan: RunPlan, seed: int, started: float, state: StateKeeper | None,
                 monitor: StreamMonitor | None, snapshot: Callable[[RunStatus], Snapshot]) -> None:
        self.settings = settings
        self.reporter = reporter
        self.observers = observers  # the session's list (the events file and the monitor's are in it)
        self.plan = plan
        self.seed = seed
        self.started = started
        self.state = state
        self.monitor = monitor
        self.snapshot = snapshot
        self.reader: Any = None  # the input's reader (its late labels' counts), known at close
        self._ended = False  # the observers heard of the end
        #: an observer's failure at the end of a run that ended well (a failed --pushgateway push): the
        #: records and --meta are complete; :meth:`settle` raises it, unless the run exits for a change
        self.end_failure: Exception | None = None

    def close(self, parts: RunParts, status: RunStatus, *, error: str | None = None, between_batches: bool = True,
              interrupted_note: str | None = None) -> RunStatus:
        """Close the output, end the observers (the live table stops, the summary shows), write
        ``--meta`` (with an observer's failure at the end as its error); runs whatever happened.
        ``between_batches``: an interruption came between micro-batches (not a forced one);
        ``interrupted_note``: the status line of an interruption, instead of the usual one.
        Returns the status (a closed pipe, or ``--meta`` unwritable, change it)."""
        self.reader = parts.reader
        notes: list[tuple[str, str | None]] = []
        try:
            if parts.writer is not None:
                try:
                    parts.writer.close()
                except BrokenPipeError:
                    status = RunStatus.BROKEN_PIPE
                except KeyboardInterrupt:
                    status = RunStatus.INTERRUPTED
            if status is RunStatus.BROKEN_PIPE:
                silence_stdout()
            if status in _ENDED:
                notes = self._end_notes(parts, status, between_batches)
                if interrupted_note is not None and status is RunStatus.INTERRUPTED:
                    notes = [(text, kind) for text, kind in notes
                             if not (kind == "status" and text.startswith("interrupted"))]
                    notes.append((interrupted_note, "status"))
        finally:
            try:
                self._end(notes, status)
            except Exception as failure:  # noqa: BLE001 - --meta is written first; settle raises it
                self.end_failure = failure
            if self.settings.output.meta and status is not RunStatus.STARTING:
                from ipfi_cli.run.meta import write_meta

                if error is None and self.end_failure is not None:
                    error = first_line(self.end_failure)
                try:
                    write_meta(self.settings.output.meta, plan=self.plan, settings=self.settings, parts=parts,
                               status=status, error=error, seed=self.seed, started=self.started,
                               state=self.state, pushed=self._pushed(), counts=self.lost_counts())
                except OSError as failed:
                    self.reporter.message(f"{self.settings.output.meta}: cannot write the metadata file "
                                          f"({failed.strerror or failed})", "error")
                    if status is RunStatus.OK:
                        status = RunStatus.ERROR
        return status

    def lost_counts(self) -> dict[str, Any]:
        """What the run lost or left out, counted (``--meta``; ``--max-lost``): the late labels' join
        (``"labels"``, with ``--labels``), the webhook's posts (``"webhook"``, with ``--webhook``), and
        ``"lost"``: the rows given up waiting for their labels plus the posts not delivered (failed or
        dropped), the number ``--max-lost`` bounds."""
        counts: dict[str, Any] = {}
        lost = 0
        reader_counts = getattr(self.reader, "counts", None)
        if reader_counts is not None:  # a JoinedReader (late labels)
            counts["labels"] = reader_counts()
            lost += counts["labels"]["given_up"]
        notifier = self.monitor.notifier if self.monitor is not None else None
        if notifier is not None:
            stats = notifier.sender.stats
            counts["webhook"] = {"queued": stats.queued, "delivered": stats.sent, "failed": stats.failed,
                                 "dropped": stats.dropped, "suppressed": stats.suppressed,
                                 "duplicates": stats.duplicates, "retries": stats.retries}
            lost += stats.failed + stats.dropped
        if counts:
            counts["lost"] = lost
        return counts

    def lost_beyond(self) -> str | None:
        """The error line of a run that lost more than ``--max-lost`` (``None``: within it, or no limit)."""
        limit = self.settings.max_lost
        counts = self.lost_counts()
        if limit is None or counts.get("lost", 0) <= limit:
            return None
        parts = []
        if "labels" in counts and counts["labels"]["given_up"]:
            parts.append(f"{counts['labels']['given_up']:,} row(s) given up waiting for their label")
        if "webhook" in counts:
            undelivered = counts["webhook"]["failed"] + counts["webhook"]["dropped"]
            if undelivered:
                parts.append(f"{undelivered:,} webhook post(s) not delivered")
        return f"lost {counts['lost']:,} ({', '.join(parts)}), more than --max-lost {limit:,}"

    def _pushed(self) -> bool | None:
        """Whether the metrics were pushed to ``--pushgateway`` (``None``: no push was asked for)."""
        exporter = self.monitor.exporter if self.monitor is not None else None
        return None if exporter is None or not exporter.settings.pushgateway else exporter.pushed

    def settle(self, parts: RunParts, report: Callable[[], RunStatus]) -> RunStatus:
        """The run's status from ``report()`` (the strategy's checks), then an observer's failure at the end
        (:attr:`end_failure`): raised, or, when the run exits for a change it found (exit code 3,
        ``--fail-on-change`` or ``--stop-on-change``), said as an error line, the status kept."""
        failure = self.end_failure
        try:
            status = report()
        except BaseException:
            if failure is not None:  # the run failed for another reason too: both are said
                self.reporter.message(first_line(failure), "error")
            raise
        if failure is None:
            return status
        watch = parts.watch
        if status is RunStatus.STOPPED_ON_CHANGE or (
                status is RunStatus.OK and self.settings.watch is not None and self.settings.watch.fail_on_change
                and watch is not None and len(watch.events) > 0):
            self.reporter.message(f"{first_line(failure)} (the exit code is 3 all the same: a change was detected)",
                                  "error")
            return status
        raise failure

    def _end_notes(self, parts: RunParts, status: RunStatus, between_batches: bool) -> list[tuple[str, str | None]]:
        """The end of a run that did not fail: save the learned model; the lines said before the summary."""
        s, plan = self.settings, self.plan
        notes: list[tuple[str, str | None]] = []
        # interrupted between micro-batches, the model is whole: a long run never loses what it learned
        saved = s.model.save_model and (status is RunStatus.OK
                                        or (status is RunStatus.INTERRUPTED and between_batches))
        if saved:
            from ipfi_cli.models.files import save_model

            assert s.model.save_model  # saved implies it
            save_model(s.model.save_model, plan.loaded.model)
            if s.display.verbose:
                notes.append((f"saved the learned model to {s.model.save_model}", None))
        skipped = parts.checker.skipped_summary()
        if skipped:
            notes.append((skipped, "warning"))
        summary = getattr(self.reader, "summary", None)  # the late labels' (a JoinedReader)
        for line in (summary() if summary is not None else []):
            notes.append((line, "warning"))
        empty_rows = getattr(self.reader, "empty_rows_summary", None)  # CSV rows of empty fields, skipped
        for line in (parts.checker.late_keys_summary(),
                     self.reader.noted_missing_summary() if self.reader is not None else None,
                     empty_rows() if empty_rows is not None else None):
            if line:
                notes.append((line, "note"))
        for line in (plan.labels.unknown_summary(), plan.labels.spelling_summary()):
            if line:
                notes.append((line, "warning"))
        notes.extend(self._method_notes(parts.explainer))
        if status is RunStatus.INTERRUPTED and not between_batches:  # a second Ctrl-C in a micro-batch
            kept = ("; " + self.state.kept_note() if self.state is not None else
                    "; the output ends at the last record written (without the last explained row's)")
            notes.append((f"stopped at once in the middle of a micro-batch, after {parts.progress.rows:,} rows; every "
                          "record written is complete" + ("; the model was not saved" if s.model.save_model else "")
                          + kept,
                          "status"))
        elif status is RunStatus.INTERRUPTED:
            notes.append((f"interrupted after {parts.progress.rows:,} rows; every record written is complete"
                          + ((f"; the model as learned so far is saved to {s.model.save_model}" if saved
                              else "; the model was not saved") if s.model.save_model else "")
                          + (f"; the state is saved in {s.state.path}: run the same command again to continue"
                             if s.state else ""), "status"))
        return notes

    @staticmethod
    def _method_notes(explainer: Any) -> list[tuple[str, str | None]]:
        """SAGE's explained loss; a conditional sampler too weak to trust."""
        notes: list[tuple[str, str | None]] = []
        explained = getattr(explainer, "explained_loss", None)
        if explained is not None and explainer is not None and explainer.n_explained:
            empty = ("the smoothed mean prediction's" if getattr(explainer, "empty", "imputed") == "mean"
                     else f"the loss with every feature imputed ({explainer.n_inner} per coalition, the game of "
                     f"batch --method sage --inner {explainer.n_inner})")
            notes.append((f"explained loss {explained:.4f}: {empty} {explainer.marginal_loss:.4f} minus the "
                          f"model's {explainer.model_loss:.4f} (smoothed); the SAGE values add up to it", "note"))
        fit = getattr(explainer, "removal_fit", None) or {}
        explained = {explainer.columns[i] for cols in explainer.groups.values() for i in cols} if fit else set()
        weak = [name for name, r2 in fit.items() if name in explained and r2 == r2 and r2 < 0.1]
        if weak:
            remover = getattr(explainer, "_remover", None) or getattr(getattr(explainer, "conditional", None),
                                                                         "_remover", None)
            gaussian = getattr(remover, "name", None) == "gaussian"
            notes.append((f"the conditional sampler's R^2 is below 0.1 for {', '.join(weak)}: the others barely "
                          "predict them, so their conditional values are close to marginal ones"
                          + (" for a feature near Gaussian (the draw is from the fitted Gaussian, not the feature's "
                             "own values: a uniform or discrete feature's can differ by some percent)"
                             if gaussian else ""), "note"))
        return notes

    def _end(self, notes: list[tuple[str, str | None]], status: RunStatus) -> None:
        """Tell every observer that the run ended (once). The reporter's display errors never hide
        the run's outcome; another observer's first error is raised after all have heard."""
        if self._ended:
            return
        self._ended = True
        snapshot = self.snapshot(status) if status is not RunStatus.BROKEN_PIPE else None
        end = RunEnd(title=run_title(self.settings, self.plan), status=status.value, snapshot=snapshot,
                     notes=tuple(notes))
        failure: Exception | None = None
        for observer in self.observers:
            try:
                observer.on_end(end)
            except Exception as error:  # noqa: BLE001 - every observer hears of the end
                if observer is not self.reporter and failure is None:
                    failure = error
        if failure is not None and status in _ENDED:
            raise failure
