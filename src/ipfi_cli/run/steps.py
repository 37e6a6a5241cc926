"""How a session explains its good rows and writes their records.

A static model explains a micro-batch in as few ``explain_many`` calls as its width
allows; a learning model explains each row with ``explain_one`` and then learns it. When
the model fails inside a call, the part is bisected (the explainer is all or nothing per
call, so the halves that work count exactly as if explained together) down to the row it
fails on, which is named with its column and skipped or made the run's failure.

Only ipfi's own errors about a row are located that way: the model's exceptions arrive as
:class:`~ipfi_cli.errors.ModelCallError` (the run's predictor is guarded), a label the loss
cannot take as a :class:`~ipfi_cli.errors.IpfiError`. Any other exception is ipfi failing: it
stops the run as unexpected, after the records already written, and is never skipped as a row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError, IpfiError, RunError, ServiceError, UsageError
from ipfi_cli.run.report import RecentLoss
from ipfi_cli.run.rows import GoodBlock, GoodRow
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.settings import ExplainSettings, RunParts


class RowSteps:
    """Explain good rows of the run ``plan`` and write the due records of its trace.

    ``parts`` are the run's mutable pieces (the explainer, the counters, the row checker, the
    writer, the change watch: read from it at each step, so a resumed run's are the ones used);
    ``report_events`` hears each row's change events; ``refresh`` is called after each row of a
    learning model (a snapshot when one is due).
    """

    def __init__(self, plan: RunPlan, settings: ExplainSettings, parts: RunParts, *,
                 report_events: Callable[[Sequence[Any]], None], refresh: Callable[[], None]) -> None:
        self.settings = settings
        self.parts = parts
        self.report_events = report_events
        self.refresh = refresh
        self.predictor = plan.predictor
        self.columns = plan.columns
        self.output = plan.loss.output
        self.source = plan.source
        self.loss, self.labels = plan.loss, plan.labels
        self._mismatch_checked = False  # the labels were checked against the model's outputs
        self.failure: IpfiError | None = None  # a row the model failed on (on_bad_row "fail")
        self.reference: tuple[dict[str, Any], Any] | None = None  # a row the model took, and its label
        self.recent = RecentLoss()  # a learning model's loss on its last explained rows (the live view's)

    def check_labels(self, say: Callable[..., None]) -> None:
        """Once enough rows are explained: a zero-one loss of 1 on every one of them means the
        labels and the model's outputs are probably of different kinds; say so (once)."""
        from ipfi_cli.run.labels import MISMATCH_ROWS, mismatch_example

        explainer, learn = self.parts.explainer, self.settings.model.learn
        needed = MISMATCH_ROWS * (8 if learn else 1)  # a learning model starts out wrong
        if self._mismatch_checked or explainer.n_explained < needed:
            return
        self._mismatch_checked = True
        if self.loss.name == "zero-one" and explainer.mean_loss == 1.0:
            example = mismatch_example(self.predictor, self.columns, self.reference)
            say(f"every one of the first {explainer.n_explained:,} explained rows has a wrong prediction (loss 1): "
                f"the labels probably do not match the model's outputs{example}; check --target and the "
                "label values", "warning")
        n_classes = len(self.labels.classes or [])
        if self.loss.name == "log" and n_classes >= 2 and not learn and explainer.mean_loss > 3 * math.log(n_classes):
            say(f"the model's mean log loss over the first {explainer.n_explained:,} explained rows is "
                f"{explainer.mean_loss:.2f}, more than three times a uniform guess's (ln {n_classes} = "
                f"{math.log(n_classes):.2f}): the labels may not match its probability columns (for a served "
                "model, check that --classes lists the classes in the order of its outputs)", "warning")

    def explain(self, good: list[GoodRow]) -> None:
        """Explain (and with ``learn``, then learn) the good rows of one micro-batch."""
        if self.settings.model.learn:
            self._learn_rows(good)
        else:
            self._explain_static(good)

    def explain_block(self, good: GoodBlock) -> None:
        """Explain a block of good rows parsed in bulk (a static model): its inputs go to the
        explainer as arrays, cut where a record needs the bounds after its own row and the explainer
        cannot give them (as :meth:`_explain_static` cuts). Where the rows need more (event times, a model that fails
        on one of them, the stream's first row), they take the row path, with the same numbers."""
        explainer = self.parts.explainer
        if (self.settings.model.learn or explainer.n_seen == 0 or self.failure is not None
                or getattr(explainer, "time_column", None) is not None):  # event times are read from whole rows
            self.explain(good.good_rows())
            return
        s, begin = self.settings, 0
        cut = s.output.bounds and not self._bounds_per_row()
        while begin < len(good):
            every = s.output.every
            end = min(len(good), begin + (every - self.parts.progress.rows % every if cut else len(good)))
            if not self._explain_block_part(good, begin, end):
                self.explain(good.good_rows()[end:])  # after the row the model failed on: the row path
                return
            begin = end

    def _explain_block_part(self, good: GoodBlock, begin: int, end: int) -> bool:
        """Rows ``begin:end`` of ``good`` in one call; False when the model failed on one of them
        (found and skipped, or made the run's failure, by bisecting the part's rows)."""
        explainer, watch = self.parts.explainer, self.parts.watch
        try:
            result = explainer.explain_many(good.inputs[begin:end], good.labels[begin:end],
                                            return_contributions=watch is not None, **self.bounds_asked(end - begin))
        except ServiceError:  # the model cannot be reached: about no row
            raise
        except IpfiError as error:  # the explainer is as before the call: find the row
            self._bisect(good.good_rows()[begin:end], error)
            return False
        block = good.block
        numbers = block.numbers[begin:end]
        first_line = None if block.first_line is None else block.first_line + begin
        row_at = lambda offset: GoodRow(numbers[offset], None if first_line is None else first_line + offset,  # noqa: E731
                                        block.row_values(begin + offset), good.labels[begin + offset])
        row_bounds = getattr(explainer, "last_row_bounds", None) if self._bounds_per_row() else None
        if watch is None:
            self._emit_rows(numbers, result, row_at, row_bounds)
        else:
            estimates, contributions, losses = result
            self._emit_rows(numbers, estimates, row_at, row_bounds)
            events = watch.rows(list(numbers), contributions, losses, estimates)
            if events:
                self.report_events(events)
        self.reference = (block.row_values(end - 1), good.labels[end - 1])
        return True

    def _nonfinite_loss(self, row: GoodRow) -> RunError:
        where = f"row {row.number}" + (f" (line {row.line})" if row.line is not None else "")
        return RunError(f"{self.source}: {where}: the loss is "
                        "not a finite number (the model's prediction is NaN or infinite, or the label is too large); "
                        "every later importance would be NaN, so the run stops here")

    def _due(self, count: int) -> bool:
        return count % self.settings.output.every == 0

    def _explain_static(self, good: list[GoodRow]) -> None:
        """Explain a micro-batch of a static model in as few model calls as its width allows;
        with bounds a record needs the bounds after its own row: where the explainer cannot give them
        after each row of a call (:meth:`_bounds_per_row`), the batch is cut there."""
        s = self.settings
        begin = 0
        cut = s.output.bounds and not self._bounds_per_row()
        while begin < len(good):
            size = s.output.every - self.parts.progress.rows % s.output.every if cut else len(good) - begin
            self._explain_part(good[begin:begin + size])
            begin += size

    def _explain_part(self, part: list[GoodRow]) -> None:
        """Explain ``part`` in one call; if the model fails, bisect (the explainer is all or
        nothing per call) to the row it fails on, which is skipped or stops the run.

        Leading rows the model cannot take are dropped in a loop (thousands of them must not
        deepen the stack); only the bisection recurses, log2(len(part)) deep."""
        start = 0
        explainer = self.parts.explainer
        while self.failure is None and start < len(part) and explainer.n_seen == 0:
            # the first row only fills the reservoir: checked alone, so a row the model cannot
            # take never becomes a replacement value for later rows
            if self._model_takes(part[start]):
                break
            start += 1
        part = part[start:]
        if self.failure is not None or not part:
            return
        watch = self.parts.watch
        per_row = self._bounds_per_row()
        try:
            result = explainer.explain_many([p.values for p in part], [p.label for p in part],
                                            return_contributions=watch is not None, **self.bounds_asked(len(part)))
        except ServiceError:  # the model cannot be reached: about no row
            raise
        except IpfiError as error:  # locate the row the model (or its label) failed on
            self._bisect(part, error)
            return
        row_bounds = getattr(explainer, "last_row_bounds", None) if per_row else None
        if watch is None:
            self._emit(part, result, row_bounds)
            return
        estimates, contributions, losses = result
        self._emit(part, estimates, row_bounds)
        events = watch.rows([p.number for p in part], contributions, losses, estimates)
        if events:
            self.report_events(events)

    def _bisect(self, part: list[GoodRow], error: BaseException) -> None:
        """After the model failed on ``part`` in one call: the row it failed on (alone), or the two
        halves explained in turn."""
        if len(part) == 1:
            self._bad_model_row(part[0], error)
            return
        middle = len(part) // 2
        self._explain_part(part[:middle])
        self._explain_part(part[middle:])

    def _model_takes(self, row: GoodRow) -> bool:
        try:  # what the run asks of the model: a served model's probabilities are no label
            self.predictor.predict_records([{c: row.values[c] for c in self.columns}], self.output, row.label)
        except ServiceError:  # the model cannot be reached: about no row
            raise
        except IpfiError as error:
            self._bad_model_row(row, error)
            return False
        return True

    def _bad_model_row(self, row: GoodRow, error: BaseException) -> None:
        """The model cannot take ``row``: name it (and its column); skip it or stop after the rows before it."""
        from ipfi_cli.core.row_values import NeedsNumbersError
        from ipfi_cli.run.failures import failing_column, failure_message

        text_column = error.column if isinstance(error, NeedsNumbersError) else None
        if text_column is not None and isinstance(row.values.get(text_column), str) \
                and getattr(self.parts.explainer, "n_seen", 1) == 0:
            # text where no row has yet been taken: a column of text (a stray word in a column of numbers is
            # the reader's bad row), on which every row would fail alike; the set-up's problem, said once
            self.failure = UsageError(
                f"column {quoted(text_column)} holds text ({quoted(row.values[text_column])} in row "
                f"{row.number:,}), and conditional removal draws the model's inputs from a Gaussian fit of numbers: "
                "use marginal removal (the default), or a model whose inputs are numbers", "--removal")
            return
        if isinstance(error, InputError) and error.column is not None:
            # a value the explainer itself cannot take (an event time that is not a time, text for
            # conditional removal): about the row and that column, not the model
            message = str(InputError(error.message, source=self.source, row=row.number, line=row.line,
                                     column=error.column))
            if self.settings.reading.on_bad_row == "skip":
                self.parts.checker.skip(message)
            else:
                self.failure = InputError(message)
            return
        reference = self.reference[0] if self.reference is not None else None
        column = failing_column(self.predictor, self.columns, row.values, row.label, self.output,
                                reference)
        message = failure_message(self.source, row.number, row.line, row.values,
                                  self.columns, error, column)
        if self.settings.reading.on_bad_row == "skip":
            self.parts.checker.skip(message)
        else:
            self.failure = InputError(message)

    def _bounds_per_row(self, explainer: Any = None) -> bool:
        """With ``--bounds``, whether the explainer (default: the run's) gives the bounds after each row of a
        call (iPFI's, by any method and smoothing), so micro-batches need not be cut at records."""
        explainer = self.parts.explainer if explainer is None else explainer
        # the class must have it: a wrapper that hands attributes on to an inner explainer has not
        return bool(self.settings.output.bounds and getattr(type(explainer), "bounds_per_row", None) is not None
                    and explainer.bounds_per_row)

    def bounds_asked(self, n_rows: int, explainer: Any = None, done: int | None = None) -> dict[str, Any]:
        """What a call on the next ``n_rows`` rows asks ``explainer`` (default: the run's, ``done`` rows
        written by default) for besides the estimates: with :meth:`_bounds_per_row`, the bounds after the rows
        whose records are due (their offsets)."""
        if not self._bounds_per_row(explainer):
            return {}
        every = self.settings.output.every
        done = self.parts.progress.rows if done is None else done
        return {"bounds_delta": self.settings.output.delta,
                "bounds_rows": [offset for offset in range(n_rows) if (done + offset + 1) % every == 0]}

    def _emit(self, part: list[GoodRow], array: Any, row_bounds: Any = None) -> None:
        """Write the due records of an explained part; a non-finite loss stops the run there."""
        self._emit_rows([p.number for p in part], array, part.__getitem__, row_bounds)
        self.reference = (dict(part[-1].values), part[-1].label)

    def _emit_rows(self, numbers: Sequence[int], array: Any, row_at: Callable[[int], GoodRow],
                   row_bounds: Any = None) -> None:
        """:meth:`_emit` for rows numbered ``numbers``; ``row_at(offset)`` is the row a
        non-finite loss is reported on. ``row_bounds``: the bounds after each row (else the
        part ends at its only record, and the explainer's bounds now are that record's)."""
        import numpy as np

        parts, s = self.parts, self.settings
        explainer, writer, progress = parts.explainer, parts.writer, parts.progress
        fresh = explainer.n_explained == 0 or progress.rows == 0
        broken = ~np.isfinite(array).all(axis=1)
        if fresh:
            broken[0] = False  # the stream's first row has no estimate yet (NaN)
        stop = int(broken.argmax()) if broken.any() else len(numbers)
        every, done = s.output.every, progress.rows
        due = slice((-(done + 1)) % every, stop, every)  # the offsets o with (done + o + 1) % every == 0
        if not s.output.bounds:
            bound = None
        elif row_bounds is not None:
            bound = np.asarray(row_bounds)[due]
        else:
            bound = explainer.bound_array(s.output.delta).tolist()
        progress.rows = done + stop
        due_numbers = numbers[due]
        if len(due_numbers):
            writer.write_many(due_numbers, array[due], bound)
            progress.last_written = due_numbers[-1]
        if stop < len(numbers):
            raise self._nonfinite_loss(row_at(stop))
        progress.last = (numbers[-1], array[-1].tolist())

    def _learn_rows(self, good: list[GoodRow]) -> None:
        import numpy as np

        parts, s = self.parts, self.settings
        explainer, writer, progress, watch = parts.explainer, parts.writer, parts.progress, parts.watch
        predictor, columns = self.predictor, self.columns
        for row in good:
            x = {c: row.values[c] for c in columns}
            if explainer.n_seen == 0 and not self._model_takes(row):  # the first row is not predicted
                if self.failure is not None:
                    raise self.failure
                continue
            explained = explainer.n_explained
            try:
                # a row's event time (--time-column) is read from the whole row
                estimates = explainer.explain_one(row.values if getattr(explainer, "time_column", None) else x,
                                                  row.label)
            except ServiceError:  # the model cannot be reached: about no row
                raise
            except IpfiError as error:
                self._bad_model_row(row, error)
                if self.failure is not None:
                    raise self.failure from error
                continue
            if explainer.n_explained and not np.isfinite(estimates).all():
                raise self._nonfinite_loss(row)  # before the model learns the row
            if explainer.n_explained > explained:  # not the stream's first row (only stored)
                self.recent.add(explainer.last_loss)
            if watch is not None:
                events = watch.row(row.number, explainer)
                if events:
                    self.report_events(events)
            try:
                predictor.learn_one(x, row.label)
            except ServiceError:  # the model cannot be reached: about no row
                raise
            except IpfiError as error:
                from ipfi_cli.run.failures import failure_message

                message = failure_message(self.source, row.number, row.line, row.values,
                                          columns, error, None)
                raise InputError(message.replace("the model failed on this row", "the model failed to learn the row")
                                 ) from error  # a half-learned row cannot be skipped: stop
            progress.rows += 1
            values = estimates.tolist()
            if self._due(progress.rows):
                bounds = explainer.bound_array(s.output.delta).tolist() if s.output.bounds else None
                writer.write(row.number, values, bounds)
                writer.flush()
                progress.last_written = row.number
            progress.last = (row.number, values)
            self.reference = (x, row.label)
            self.refresh()
