"""How a session's rows become records: the :class:`Explaining` strategy, and one explainer for the run.

An :class:`~ipfi_cli.run.explain.ExplainSession` reads micro-batches and hands each to the
strategy it was given: :class:`SingleExplainer` (one explainer for the whole run) or, with
``--by``, :class:`~ipfi_cli.run.keyed.PerKeyExplainers` (one per key). The strategy builds the
run's :class:`~ipfi_cli.run.settings.RunParts` (the explainer and change watch), its
:class:`~ipfi_cli.run.steps.RowSteps`, explains the batches, writes the last record at the end,
adds what it knows to the snapshots, and checks a finished run's numbers (:meth:`~Explaining.report`).

:class:`SingleExplainer` holds back the good rows (nothing explained, nothing written) while no
label has matched a class of a fixed model: a run whose labels match none is refused before any
record (after :data:`HOLD_ROWS` rows, or at the end of the input).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ipfi_cli.errors import IpfiError, RunError
from ipfi_cli.run.building import check_saveable
from ipfi_cli.run.checks import all_zero_warning, check_output_names, labels_match_nothing
from ipfi_cli.run.settings import Progress, RunParts, RunStatus
from ipfi_cli.run.steps import RowSteps
from ipfi_cli.run.watch import ChangeWatch

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.io.values import Row
    from ipfi_cli.run.observers import Snapshot
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.rows import GoodRow, RowChecker
    from ipfi_cli.run.settings import ExplainSettings

#: rows held back at most while no label has matched a class of a fixed model (then the run is refused)
HOLD_ROWS = 1000

Say = Callable[..., None]  # a reporter's message(text, kind=None)


class Explaining(Protocol):
    """What a session asks of its strategy, in the order it asks (see the module docstring)."""

    @property
    def steps(self) -> RowSteps | None:
        """The row steps, once :meth:`start` made them (the snapshot reads their recent loss)."""

    @property
    def blocks(self) -> bool:
        """Whether a static run's CSV blocks parsed in bulk may be explained as arrays."""

    def refuse(self) -> None:
        """What the strategy cannot do with the settings, refused before anything starts."""

    def make_parts(self, plan: RunPlan, checker: RowChecker, build: Callable[[], Explainer]) -> RunParts:
        """The run's explainer (``build`` makes one with the run's settings and seed) and change watch."""

    def start(self, plan: RunPlan, parts: RunParts, *, report_events: Callable[[Sequence[Any]], None],
              refresh: Callable[[], None]) -> RowSteps:
        """The run is set up (``parts``: a resumed run's); its row steps."""

    def explain_batch(self, batch: list[Row]) -> IpfiError | None:
        """Check, explain and write one micro-batch; the error to stop with, after the rows before it."""

    def explain_block(self, batch: RowBlock) -> IpfiError | None:
        """:meth:`explain_batch` for a block of rows parsed in bulk."""

    def input_ended(self) -> None:
        """The input ended (before its last checkpoint and records)."""

    def write_last(self) -> None:
        """End the output with the last row's record (``every`` may have skipped it)."""

    def snapshot(self, snapshot: Snapshot, final: bool) -> Snapshot:
        """The run's snapshot with what the strategy adds (``final``: the run has ended)."""

    def report(self, status: RunStatus, *, events_before: int, state: StateKeeper | None) -> RunStatus:
        """The end-of-run lines of the changes found, then the checks of a finished run's numbers."""


class SingleExplainer:
    """One explainer for the whole run; see the module docstring."""

    blocks = True

    def __init__(self, settings: ExplainSettings, say: Say) -> None:
        self.settings = settings
        self.say = say
        self.plan: RunPlan | None = None
        self.parts: RunParts | None = None
        self.steps: RowSteps | None = None
        #: good rows held back while no label has matched a class of a fixed model; ``None``: released
        self._held: list[GoodRow] | None = []

    def refuse(self) -> None:
        pass

    def make_parts(self, plan: RunPlan, checker: RowChecker, build: Callable[[], Explainer]) -> RunParts:
        """The run's explainer (refused here if ``--state`` cannot hold it) and change watch."""
        s = self.settings
        explainer = build()
        if s.state is not None:
            check_saveable(explainer, "--state")
        check_output_names(explainer.names, s.output.bounds, plan.source)
        watch = ChangeWatch(s.watch, explainer, plan.loss) if s.watch is not None else None
        return RunParts(explainer=explainer, progress=Progress(), checker=checker, watch=watch)

    def start(self, plan: RunPlan, parts: RunParts, *, report_events: Callable[[Sequence[Any]], None],
              refresh: Callable[[], None]) -> RowSteps:
        self.plan, self.parts = plan, parts
        self.steps = RowSteps(plan, self.settings, parts, report_events=report_events, refresh=refresh)
        return self.steps

    def explain_block(self, batch: RowBlock) -> IpfiError | None:
        """Checked and explained as arrays where its rows allow, else row by row."""
        parts, steps = self.parts, self.steps
        assert parts is not None and steps is not None
        block = parts.checker.check_block(batch) if self._held is None else None
        if block is None:
            return self.explain_batch(batch.rows())
        steps.explain_block(block)
        parts.writer.flush()
        return steps.failure

    def explain_batch(self, batch: list[Row]) -> IpfiError | None:
        """The error to stop with: a bad row, or the row the model failed on (it comes first)."""
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

    def input_ended(self) -> None:
        """Rows still held had labels none of which is a class of the model: refused, before any
        record or the summary."""
        if self._held and self.plan is not None:
            raise RunError(f"{self.plan.source}: {labels_match_nothing(self.plan.labels)}")
        self._held = None

    def write_last(self) -> None:
        parts = self.parts
        assert parts is not None
        progress = parts.progress
        last = progress.last
        if last is not None and progress.last_written != last[0]:
            out = self.settings.output
            bound = parts.explainer.bound_array(out.delta).tolist() if out.bounds else None
            parts.writer.write(last[0], last[1], bound)
            progress.last_written = last[0]

    def snapshot(self, snapshot: Snapshot, final: bool) -> Snapshot:
        return snapshot

    def report(self, status: RunStatus, *, events_before: int, state: StateKeeper | None) -> RunStatus:
        s, say, plan, parts = self.settings, self.say, self.plan, self.parts
        assert plan is not None and parts is not None
        explainer, watch = parts.explainer, parts.watch
        if status in (RunStatus.BROKEN_PIPE, RunStatus.ERROR):
            if state is not None:
                state.report_kept(say)
            return status
        if watch is not None:
            for line in watch.summary_lines(explainer.importance_array()):
                say(line)
        if status is RunStatus.STOPPED_ON_CHANGE and watch is not None:
            first, last = watch.events[events_before].row, parts.progress.last_written
            which = "next" if events_before else "first"  # a resumed run stops at its next change
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
            given_up = int(getattr(parts.reader, "given_up", 0) or 0)  # late labels that did not come in time
            why = (parts.checker.all_bad() if skipped_rows and not rows
                   else f"no row got its label within --label-wait ({given_up:,} given up)" if given_up and rows <= 1
                   else "the input has no rows" if not rows
                   else "one row only fills the reservoir; a row is explained against earlier rows")
            raise RunError(f"{plan.source}: no row was explained: {why}")
        return status

