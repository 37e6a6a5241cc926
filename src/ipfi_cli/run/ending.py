"""The end of an ``ipfi explain`` run: close the output, the last record, the end-of-run lines, ``--meta``.

:class:`RunEndMixin` is the part of :class:`~ipfi_cli.run.explain.ExplainSession` that runs once
the rows are done (or a row, the model or the output stopped them): it closes the writer, says the
lines that end a run (bad rows skipped, late labels, labels matching no class, SAGE's explained
loss, a weak conditional sampler), tells every observer the run ended, writes ``--meta``, and
refuses a run whose numbers cannot be right (no label matched a class, a loss that cannot
measure the model, no row explained) with one line.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import IpfiError, RunError, first_line
from ipfi_cli.run.checks import all_zero_warning, labels_match_nothing
from ipfi_cli.run.observers import RunEnd
from ipfi_cli.run.plan import RunPlan
from ipfi_cli.run.settings import RunParts, RunStatus

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.io.readers import RowReader
    from ipfi_cli.run.observers import RunObserver, Snapshot
    from ipfi_cli.run.report import Reporter
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.settings import ExplainSettings
    from ipfi_cli.run.steps import RowSteps

#: the end-of-run lines of a run that ended without failing
_ENDED = (RunStatus.OK, RunStatus.INTERRUPTED, RunStatus.STOPPED_ON_CHANGE)

if TYPE_CHECKING:
    class _SessionBase:
        """The type checker's view of the session the mixin is part of (:class:`~ipfi_cli.run.explain.ExplainSession`,
        not imported: it imports this module): what the mixin uses of it. Not a class at run time."""

        settings: ExplainSettings
        reporter: Reporter
        observers: list[RunObserver]
        seed: int
        status: RunStatus
        error: str | None
        started: float
        plan: RunPlan | None
        reader: RowReader | None
        parts: RunParts | None
        state: StateKeeper | None
        steps: RowSteps | None

        @property
        def explainer(self) -> Explainer | None: ...

        def title(self) -> str: ...

        def snapshot(self) -> Snapshot: ...
else:
    _SessionBase = object


class RunEndMixin(_SessionBase):
    """How an :class:`~ipfi_cli.run.explain.ExplainSession` ends: see the module docstring."""

    _ended: bool  # the observers heard of the end
    between_batches: bool  # an interruption came between micro-batches
    events_before: int  # changes the watch held when this run began
    _mismatch_checked: bool  # the labels were checked against the model's outputs
    #: an observer's failure at the end of a run that ended well (a failed --pushgateway push): the
    #: records and --meta are complete; :meth:`_settle` raises it, unless the run exits for a change
    end_failure: Exception | None = None

    def _close(self, plan: RunPlan, parts: RunParts) -> None:
        """Close the output, end the observers (the live table stops, the summary shows), write
        ``--meta`` (with an observer's failure at the end as its error); runs whatever happened."""
        from ipfi_cli.io.writers import silence_stdout

        notes: list[tuple[str, str | None]] = []
        try:
            if parts.writer is not None:
                try:
                    parts.writer.close()
                except BrokenPipeError:
                    self.status = RunStatus.BROKEN_PIPE
                except KeyboardInterrupt:
                    self.status = RunStatus.INTERRUPTED
            if self.status is RunStatus.BROKEN_PIPE:
                silence_stdout()
            if self.status in _ENDED:
                notes = self._end_notes(plan, parts)
        finally:
            try:
                self._end(notes)
            except Exception as failure:  # noqa: BLE001 - --meta is written first; _settle raises it
                self.end_failure = failure
            if self.settings.output.meta and self.status is not RunStatus.STARTING:
                from ipfi_cli.run.meta import write_meta

                error = self.error
                if error is None and self.end_failure is not None:
                    error = first_line(self.end_failure)
                try:
                    write_meta(self.settings.output.meta, plan=plan, settings=self.settings, parts=parts,
                               status=self.status, error=error, seed=self.seed, started=self.started,
                               state=self.state, pushed=self._pushed(), counts=self.lost_counts())
                except OSError as error:
                    self.reporter.message(f"{self.settings.output.meta}: cannot write the metadata file "
                                          f"({error.strerror or error})", "error")
                    if self.status is RunStatus.OK:
                        self.status = RunStatus.ERROR

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
        notifier = getattr(getattr(self, "monitor", None), "notifier", None)
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
        monitor = getattr(self, "monitor", None)
        exporter = getattr(monitor, "exporter", None)
        return None if exporter is None or not exporter.settings.pushgateway else exporter.pushed

    def _settle(self, report: Any) -> RunStatus:
        """The run's status from ``report()`` (:meth:`_report`), then an observer's failure at the end
        (:attr:`end_failure`): raised, or, when the run exits for a change it found (exit code 3,
        ``--fail-on-change`` or ``--stop-on-change``), said as an error line, the status kept."""
        failure = self.end_failure
        try:
            status: RunStatus = report()
        except BaseException:
            if failure is not None:  # the run failed for another reason too: both are said
                self.reporter.message(first_line(failure), "error")
            raise
        if failure is None:
            return status
        watch = self.parts.watch if self.parts is not None else None
        if status is RunStatus.STOPPED_ON_CHANGE or (
                status is RunStatus.OK and self.settings.watch is not None and self.settings.watch.fail_on_change
                and watch is not None and len(watch.events) > 0):
            self.reporter.message(f"{first_line(failure)} (the exit code is 3 all the same: a change was detected)",
                                  "error")
            return status
        raise failure

    def _end_notes(self, plan: RunPlan, parts: RunParts) -> list[tuple[str, str | None]]:
        """The end of a run that did not fail: save the learned model; the lines said before the summary."""
        s, status = self.settings, self.status
        notes: list[tuple[str, str | None]] = []
        # interrupted between micro-batches, the model is whole: a long run never loses what it learned
        saved = s.model.save_model and (status is RunStatus.OK
                                        or (status is RunStatus.INTERRUPTED and self.between_batches))
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
        unknown = plan.labels.unknown_summary()
        if unknown:
            notes.append((unknown, "warning"))
        notes.extend(self._method_notes())
        if status is RunStatus.INTERRUPTED and not self.between_batches:  # a second Ctrl-C in a micro-batch
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

    def _method_notes(self) -> list[tuple[str, str | None]]:
        """SAGE's explained loss; a conditional sampler too weak to trust."""
        explainer: Any = self.explainer
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

    def _end(self, notes: list[tuple[str, str | None]]) -> None:
        """Tell every observer that the run ended (once). The reporter's display errors never hide
        the run's outcome; another observer's first error is raised after all have heard."""
        if self._ended or self.parts is None:
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

    def _report(self, plan: RunPlan, parts: RunParts) -> RunStatus:
        s, say, status, explainer, watch = self.settings, self.reporter.message, self.status, parts.explainer, \
            parts.watch
        if status in (RunStatus.BROKEN_PIPE, RunStatus.ERROR):
            if self.state is not None:
                self.state.report_kept(say)
            return status
        if watch is not None:
            for line in watch.summary_lines(explainer.importance_array()):
                say(line)
        if status is RunStatus.STOPPED_ON_CHANGE and watch is not None:
            first, last = watch.events[self.events_before].row, parts.progress.last_written
            which = "next" if self.events_before else "first"  # a resumed run stops at its next change
            say(f"stopped at the {which} change (row {first:,}); every record written is complete"
                + (f" (the traces run to row {last:,}, the end of the change's micro-batch; --batch-size 1 stops "
                   "at the change's row)" if last > first else "")
                + (f"; the state is saved in {s.state.path}: run the same command again to continue"
                   if s.state else ""),
                "status")
        if s.display.verbose:
            say(f"wrote {parts.writer.records:,} record(s) to {s.output.path or '<stdout>'}")
        if status is RunStatus.OK and explainer.n_explained > 0:
            if plan.labels.none_matched:
                raise RunError(f"{plan.source}: {labels_match_nothing(plan.labels)}")
            from ipfi_cli.core.losses import unmeasurable

            unfit = unmeasurable(plan.loss, explainer.mean_loss, explainer.n_explained)
            if unfit is not None:
                if plan.loaded.kind == "river" and not s.model.learn:
                    unfit += " (or the river model, which does not learn without --learn, has learned nothing yet)"
                raise RunError(f"{plan.source}: {unfit}")
            zero = all_zero_warning(explainer.importance_array(), explainer.n_explained)
            if zero:
                say(zero, "warning")
        if status is RunStatus.OK and explainer.n_explained == 0:
            skipped_rows, rows = parts.checker.skipped, parts.progress.rows
            given_up = int(getattr(self.reader, "given_up", 0) or 0)  # late labels that did not come in time
            why = (parts.checker.all_bad() if skipped_rows and not rows
                   else f"no row got its label within --label-wait ({given_up:,} given up)" if given_up and rows <= 1
                   else "the input has no rows" if not rows
                   else "one row only fills the reservoir; a row is explained against earlier rows")
            raise RunError(f"{plan.source}: no row was explained: {why}")
        return status

    def _check_labels_match(self, plan: RunPlan, parts: RunParts) -> None:
        """Once enough rows are explained: a zero-one loss of 1 on every one of them means the
        labels and the model's outputs are probably of different kinds; say so."""
        from ipfi_cli.run.labels import MISMATCH_ROWS, mismatch_example

        explainer = parts.explainer
        needed = MISMATCH_ROWS * (8 if self.settings.model.learn else 1)  # a learning model starts out wrong
        if self._mismatch_checked or explainer.n_explained < needed:
            return
        self._mismatch_checked = True
        if plan.loss.name == "zero-one" and explainer.mean_loss == 1.0:
            assert self.steps is not None
            example = mismatch_example(plan.predictor, plan.columns, self.steps.reference)
            self.reporter.message(
                f"every one of the first {explainer.n_explained:,} explained rows has a wrong prediction (loss 1): "
                f"the labels probably do not match the model's outputs{example}; check --target and the "
                "label values", "warning")
        n_classes = len(plan.labels.classes or [])
        if plan.loss.name == "log" and n_classes >= 2 and not self.settings.model.learn \
                and explainer.mean_loss > 3 * math.log(n_classes):
            self.reporter.message(
                f"the model's mean log loss over the first {explainer.n_explained:,} explained rows is "
                f"{explainer.mean_loss:.2f}, more than three times a uniform guess's (ln {n_classes} = "
                f"{math.log(n_classes):.2f}): the labels may not match its probability columns (for a served "
                "model, check that --classes lists the classes in the order of its outputs)", "warning")

    def _write_last_after_error(self, parts: RunParts) -> None:
        """A run stopped by its input or model still ends its output with the last explained row's
        record (nothing computed is lost). Not with ``--state``: a resumed run writes what an
        uninterrupted one would, and this record would be one more."""
        try:
            self._write_last(parts)
            parts.writer.flush()
        except (OSError, IpfiError):  # the output failed too: the error that stopped the run is said
            pass

    def _write_last(self, parts: RunParts) -> None:
        """Always end with the last row's record (``every`` may have skipped it)."""
        progress = parts.progress
        last = progress.last
        if last is not None and progress.last_written != last[0]:
            out = self.settings.output
            bound = parts.explainer.bound_array(out.delta).tolist() if out.bounds else None
            parts.writer.write(last[0], last[1], bound)
            progress.last_written = last[0]
