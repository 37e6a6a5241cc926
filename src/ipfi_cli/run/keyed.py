"""``ipfi explain --by COLUMN[,COLUMN]``: one explainer (and change watch) per value of a key.

:class:`PerKeyExplainers` is the strategy (:class:`~ipfi_cli.run.explaining.Explaining`) an
:class:`~ipfi_cli.run.explain.ExplainSession` is given with ``--by``: the run's explainer is a
:class:`~ipfi_cli.run.key_runs.KeyedExplainer`, one :class:`~ipfi_cli.run.key_runs.KeyRun` per key
(its explainer, change watch and counters), built when the key first comes with the run's settings
and seed, and kept by :class:`~ipfi_cli.core.keyed.KeyedExplainers` (``max_keys``: the least
recently seen saved as plain data and evicted, restored when they come back). Each key's rows
are explained, numbered and written (``--every`` counts them) exactly as a run on that key's rows
alone would, so its trace records equal that run's, byte for byte, but for the key columns that
start them. A row's number in a key's trace is its place among that key's input rows (bad ones
too: a row whose key can be read counts for that key); messages name the row by its place in the
whole input.

Rows are explained in the input's order: consecutive rows of one key go to its explainer
together, and the records of all keys are written interleaved as their rows come. The last row
of every key is written at the end (in the order the keys first came), as one run writes its
last row. A key column is not a feature (a model that names it as an input still gets it; it is
never explained), and a row without a value in one is a bad row naming the column.

The model is shared and static: ``--learn`` (one model learning every key's rows), late labels
and the metrics exporter are refused before the first row.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ipfi_cli.errors import InputError, IpfiError, RunError, UsageError
from ipfi_cli.run.building import check_saveable
from ipfi_cli.run.checks import all_zero_warning, check_output_names, labels_match_nothing
from ipfi_cli.run.explaining import Say
from ipfi_cli.run.key_runs import Key, KeyedEvent, KeyedExplainer, KeyedWatch, KeyRun, KeyWriter, key_label, row_key
from ipfi_cli.run.keyed_joint import JointKeys, KeyPart
from ipfi_cli.run.keyed_steps import KeyedSteps
from ipfi_cli.run.observers import Snapshot
from ipfi_cli.run.settings import Progress, RunParts, RunStatus
from ipfi_cli.run.steps import RowSteps
from ipfi_cli.run.watch import ChangeWatch

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.io.values import Row
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.rows import GoodRow, RowChecker
    from ipfi_cli.run.settings import ExplainSettings


class PerKeyExplainers:
    """One explainer per key: see the module docstring."""

    blocks = False

    def __init__(self, settings: ExplainSettings, say: Say) -> None:
        self.settings = settings
        self.say = say
        self.plan: RunPlan | None = None
        self.parts: RunParts | None = None
        self.steps: KeyedSteps | None = None
        self._tell: Callable[[Sequence[Any]], None] = lambda events: None  # the session's observers hear events
        # a micro-batch's records (input row, key, key's row, values, bounds) and change events (input row,
        # event), written in the input's order once every key has explained its rows
        self._records: list[tuple[int, Key, int, Sequence[float], Sequence[float] | None]] = []
        self._events: list[tuple[int, KeyedEvent]] = []
        #: every key's figures at the end (:meth:`write_last` gathers them, restoring each evicted key once)
        self._finals: list[tuple[Key, Snapshot]] | None = None
        self._joint_keys: JointKeys | None = None  # every key's rows of a micro-batch in one model call
        self._entered: set[Key] = set()  # the keys of the micro-batch's group whose rows were taken up
        self._entered_last: tuple[Key, KeyRun] | None = None

    def refuse(self) -> None:
        """What ``--by`` cannot do yet, refused before anything starts (the metrics server, the model, the input)."""
        s = self.settings
        if s.model.learn:
            raise UsageError("cannot be used with --learn yet: one model would learn every key's rows, so a key's "
                             "traces would not be those of a run on its rows alone (a model per key is not "
                             "implemented)", "--by")
        if s.labels:
            raise UsageError("cannot be used with --labels yet (the rows waiting for labels are not kept per key)",
                             "--by")
        if s.monitor is not None and s.monitor.wanted:
            raise UsageError("cannot be used with the metrics exporter or the webhook yet (they describe one "
                             "explainer, not one per key)", "--by")

    def make_parts(self, plan: RunPlan, checker: RowChecker, build: Callable[[], Explainer]) -> RunParts:
        s = self.settings
        prototype = build()
        if s.state is not None or s.keys.max_keys is not None:
            check_saveable(prototype, "--state" if s.state is not None else "--max-keys")
        check_output_names(prototype.names, s.output.bounds, plan.source)
        taken = {"row", "method", *prototype.names, *(f"{n}_bound" for n in prototype.names if s.output.bounds)}
        clash = [c for c in plan.by if c in taken]
        if clash:
            raise InputError(f"the key column {clash[0]!r} has the name of a trace field (row, a feature or a bound) "
                             "or of the method field of compare's traces, which `ipfi plot` reads: rename the column",
                             source=plan.source)
        watch = ChangeWatch(s.watch, prototype, plan.loss) if s.watch is not None else None

        def factory(key: Hashable) -> KeyRun:
            return KeyRun(build(), copy.deepcopy(watch) if watch is not None else None)

        return RunParts(explainer=KeyedExplainer(prototype, factory, s.keys.max_keys),  # type: ignore[arg-type]
                        progress=Progress(), checker=checker,
                        watch=KeyedWatch(watch) if watch is not None else None)  # type: ignore[arg-type]

    def start(self, plan: RunPlan, parts: RunParts, *, report_events: Callable[[Sequence[Any]], None],
              refresh: Callable[[], None]) -> RowSteps:
        self.plan, self.parts, self._tell = plan, parts, report_events
        self._joint_keys = None
        self.steps = KeyedSteps(plan, self.settings, parts, report_events=self._keep_events, refresh=refresh)
        return self.steps

    @property
    def keyed(self) -> KeyedExplainer:
        assert self.parts is not None
        return cast(KeyedExplainer, self.parts.explainer)  # what make_parts put there

    def explain_block(self, batch: RowBlock) -> IpfiError | None:
        return self.explain_batch(batch.rows())

    def explain_batch(self, batch: list[Row]) -> IpfiError | None:
        """Number each row among its key's; explain every key's good rows of the micro-batch together (one
        model call for all the keys where their explainers allow: :class:`~ipfi_cli.run.keyed_joint.JointKeys`),
        then write the records and report the change events in the input's order.

        A row the model fails on stops the run after the rows before it; keys explained before its key in
        this micro-batch may have gone past it: each key's records are still those of a run on its rows."""
        parts, steps, plan = self.parts, self.steps, self.plan
        assert parts is not None and steps is not None and plan is not None
        keyed = self.keyed
        numbers: dict[int, tuple[Key, int]] = {}  # input row -> (its key, its number among the key's rows)
        for row in batch:
            key = row_key(row.values, plan.by)
            if key is not None:
                numbers[row.number] = (key, keyed.number(key))
        good, bad_row = parts.checker.check(batch)
        by_key: dict[Key, list[GoodRow]] = {}
        for good_row in good:
            by_key.setdefault(numbers[good_row.number][0], []).append(good_row)
        # one model call for every key (in groups of at most --max-keys, all live while pending); with
        # --bounds each key's explainer gives the bounds after the rows whose records are due
        group = keyed.keyed.max_keys or len(by_key)
        items = list(by_key.items())
        self._joint.probe({key: rows[0] for key, rows in items if not keyed.keyed.seen(key)})
        try:
            for start in range(0, len(items), max(1, group)):
                new = [key for key, _ in items[start:start + group] if not keyed.keyed.seen(key)]
                key_parts: list[KeyPart] = [
                    (key, keyed.get(key), [row._replace(number=numbers[row.number][1]) for row in rows], rows)
                    for key, rows in items[start:start + group]]
                self._entered.clear()
                stopped = True
                try:
                    self._joint.explain(key_parts)
                    stopped = steps.failure is not None
                finally:
                    if stopped:  # the run stops before the later keys' rows: as if they never came (one
                        # key at a time, they would not have been made)
                        for key in new:
                            if key not in self._entered:
                                keyed.keyed.forget(key)
                    if self._entered_last is not None:  # the key shown: the last one explained
                        keyed.current, keyed.current_key = self._entered_last[1], self._entered_last[0]
                if steps.failure is not None:
                    break
        finally:
            self._write_pending()
        return steps.failure if steps.failure is not None else bad_row

    @property
    def _joint(self) -> JointKeys:
        if self._joint_keys is None:
            assert self.steps is not None
            self._joint_keys = JointKeys(self.keyed, self.steps, self._explain_key, self._enter)
        return self._joint_keys

    def _explain_key(self, part: KeyPart) -> None:
        """One key's rows of the micro-batch, on their own (its model calls)."""
        steps = self.steps
        assert steps is not None
        leave = self._enter(part)
        try:
            steps.explain(part[2])
        finally:
            leave()

    def _enter(self, part: KeyPart) -> Callable[[], None]:
        """Point the steps (and the key shown) at ``part``'s key; returns what points them back, counting
        the key's rows explained meanwhile in the run's."""
        parts, steps = self.parts, self.steps
        assert parts is not None and steps is not None
        key, run, own, rows = part
        self._entered.add(key)
        self._entered_last = (key, run)
        self.keyed.current, self.keyed.current_key = run, key
        steps.input_rows = {mine.number: row.number for mine, row in zip(own, rows)}
        steps.parts = RunParts(explainer=run.explainer, progress=run.progress, checker=parts.checker,
                               watch=run.watch, writer=KeyWriter(self._records, key, steps.input_rows))
        before = run.progress.rows

        def leave() -> None:
            assert parts is not None and steps is not None
            parts.progress.rows += run.progress.rows - before
            steps.parts = parts
        return leave

    def _write_pending(self) -> None:
        """The micro-batch's records and change events, in the order of their input rows."""
        parts = self.parts
        assert parts is not None
        records, events = sorted(self._records, key=lambda r: r[0]), sorted(self._events, key=lambda e: e[0])
        self._records.clear()
        self._events.clear()
        for _, key, row, values, bounds in records:
            parts.writer.write(row, values, bounds, key=key)
        if records:
            parts.writer.flush()
        if events:
            found = [event for _, event in events]
            if isinstance(parts.watch, KeyedWatch):
                parts.watch.events.extend(found)
            self._tell(found)

    def _keep_events(self, events: Sequence[Any]) -> None:
        """A key's change events, with the key, kept until the micro-batch's records are written."""
        plan, steps, key = self.plan, self.steps, self.keyed.current_key
        assert plan is not None and steps is not None and key is not None
        for event in events:
            where = steps.input_rows.get(getattr(event, "row", 0), 0)
            self._events.append((where, KeyedEvent({"key": dict(zip(plan.by, key)), **event.to_dict()})))

    def input_ended(self) -> None:
        pass

    def write_last(self) -> None:
        """Every key ends with its last row's record (``every`` may have skipped it), as one run does.

        One pass over the keys, in the order they first came: an evicted key is restored once (and not
        kept: nothing is evicted or written for it), and what the end needs of it besides (the summary
        table, the checks, ``--meta``) is gathered then, not restored again."""
        keyed, s, plan, parts = self.keyed, self.settings, self.plan, self.parts
        assert plan is not None and parts is not None
        finals: list[tuple[Key, Snapshot]] = []
        summaries: list[dict[str, Any]] = []
        for key in keyed.keys():
            run = keyed.peek(key)
            last = run.progress.last
            if last is not None and run.progress.last_written != last[0]:
                out = self.settings.output
                bound = run.explainer.bound_array(out.delta).tolist() if out.bounds else None
                parts.writer.write(last[0], last[1], bound, key=key)
                run.progress.last_written = last[0]  # (an evicted key's copy is dropped: the state was saved before)
            finals.append((key, self._key_snapshot(run)))
            if s.output.meta:
                summaries.append(keyed.summary(key, run, plan.by, s.output.delta))
        self._finals = finals
        if s.output.meta:
            keyed.final_summaries = summaries

    # -- display ----------------------------------------------------------------------------------
    def snapshot(self, snapshot: Snapshot, final: bool) -> Snapshot:
        """The key last explained, and how many keys; at the end every key's figures too."""
        assert self.plan is not None
        keyed, by = self.keyed, self.plan.by
        snapshot.n_keys = keyed.n_keys
        if keyed.current_key is not None and keyed.current is not None:
            snapshot.key = key_label(by, keyed.current_key)
            snapshot.key_rows = keyed.current.progress.rows
            if keyed.current.watch is not None:
                snapshot.marks = keyed.current.watch.marks()
        if final:
            finals = self._finals if self._finals is not None else [
                (key, self._key_snapshot(keyed.peek(key))) for key in keyed.keys()]
            snapshot.per_key = [(key_label(by, key), figures) for key, figures in finals]
        return snapshot

    def _key_snapshot(self, run: KeyRun) -> Snapshot:
        explainer = run.explainer
        return Snapshot(names=explainer.names, importances=explainer.importance_array().tolist(),
                        bounds=explainer.bound_array(self.settings.output.delta).tolist(), rows=run.progress.rows,
                        explained=explainer.n_explained, loss=explainer.mean_loss,
                        marks=run.watch.marks() if run.watch is not None else {})

    def report(self, status: RunStatus, *, events_before: int, state: StateKeeper | None) -> RunStatus:
        """Each key's changes, then the checks of a finished run over every key."""
        s, say, keyed, plan, parts = self.settings, self.say, self.keyed, self.plan, self.parts
        assert plan is not None and parts is not None
        if status in (RunStatus.BROKEN_PIPE, RunStatus.ERROR):
            if state is not None:
                state.report_kept(say)
            return status
        if s.watch is not None:
            quiet_keys = 0
            for key in keyed.keys():
                run = keyed.peek(key)
                assert run.watch is not None
                if not run.watch.events:
                    quiet_keys += 1
                    continue
                for line in run.watch.summary_lines(run.explainer.importance_array()):
                    say(f"key {key_label(plan.by, key)}: {line}")
            if quiet_keys:
                say(f"no change detected in {quiet_keys:,} of {len(keyed.keys()):,} key(s) (delta {s.watch.delta}, "
                    f"min change {s.watch.min_change})")
        watch = parts.watch
        if status is RunStatus.STOPPED_ON_CHANGE and isinstance(watch, KeyedWatch) \
                and len(watch.events) > events_before:
            first = watch.events[events_before].fields
            which = "next" if events_before else "first"
            say(f"stopped at the {which} change (key {key_label(plan.by, tuple(first['key'].values()))}, its row "
                f"{first.get('row', 0):,}); every record written is complete"
                + (f"; the state is saved in {s.state.path}: run the same command again to continue"
                   if s.state else ""),
                "status")
        if s.display.verbose:
            say(f"wrote {parts.writer.records:,} record(s) for {len(keyed.keys()):,} key(s) to "
                f"{s.output.path or '<stdout>'}")
        if status is RunStatus.OK:
            self._check_keys(plan, parts)
        return status

    def _check_keys(self, plan: RunPlan, parts: RunParts) -> None:
        """A finished run: something explained, labels that match the model; keys that are unmeasurable
        or all zero are named (a warning: a run on their rows alone would fail or warn)."""
        from ipfi_cli.core.losses import unmeasurable

        keyed, by = self.keyed, plan.by
        explained, loss_sum, unfit, zero = 0, 0.0, [], []
        finals = self._finals if self._finals is not None else [
            (key, self._key_snapshot(keyed.peek(key))) for key in keyed.keys()]
        for key, figures in finals:
            n = figures.explained
            if n:
                explained += n
                loss_sum += figures.loss * n
                if unmeasurable(plan.loss, figures.loss, n):
                    unfit.append(key)
                elif all_zero_warning(figures.importances, n):
                    zero.append(key)
        if explained == 0:
            skipped_rows, rows = parts.checker.skipped, parts.progress.rows
            why = (parts.checker.all_bad() if skipped_rows and not rows
                   else "the input has no rows" if not rows
                   else "each key's first row only fills its reservoir; a row is explained against earlier rows "
                        "of its key")
            raise RunError(f"{plan.source}: no row was explained: {why}")
        if plan.labels.none_matched:
            raise RunError(f"{plan.source}: {labels_match_nothing(plan.labels)}")
        overall = unmeasurable(plan.loss, loss_sum / explained, explained)
        if overall is not None:
            raise RunError(f"{plan.source}: {overall}")
        for keys, what in ((unfit, "their loss is at its maximum on every row or not finite: they measure no "
                                   "importance"),
                           (zero, "every feature scored exactly 0 in them")):
            if keys:
                shown = "; ".join(key_label(by, k) for k in keys[:3]) + ("; ..." if len(keys) > 3 else "")
                self.say(f"{len(keys):,} key(s) ({shown}): {what}", "warning")

