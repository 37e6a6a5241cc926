"""Checkpoints and resuming of a long ``ipfi explain`` run (``--state``).

A :class:`StateKeeper` saves the whole run (the explainer's state as plain data, the learned
model with ``--learn`` beside it, the session's counters, where the traces end and their CRC) every
``checkpoint_every`` input rows and at exit, through :mod:`ipfi_cli.io.run_state` (atomic,
durable). Running the same command again continues: the state file holds one format with
one version, and one check of the settings (:func:`~ipfi_cli.run.state_checks.run_settings`) refuses a continuation
with other options, another model file, another ipfi version or another input, naming
what differs. The traces file is cut back to the checkpoint, so a resumed run ends
byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import os
import pickle
import time
import zlib
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.state_fields import StateFieldError, within
from ipfi_cli.errors import InputError, OutputError, StateError
from ipfi_cli.io.writers import WRITERS, output_format_for, trace_header
from ipfi_cli.run.signals import DeferredSignals, defer_signals
from ipfi_cli.run.state_checks import check_state, run_settings, settings_differences
from ipfi_cli.version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable

    from ipfi_cli.io.readers import RowReader
    from ipfi_cli.io.values import Row
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.settings import ExplainSettings, RunParts


def fingerprint(row: Row) -> int:
    """A checksum of one input row (its values, or its error), to recognise it when resuming."""
    text = repr(row.values) if row.error is None else row.error.message
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


class StateKeeper:
    """The ``--state`` file of one run: what it resumed from, and the checkpoints it saves."""

    def __init__(self, path: str, *, skip_seen: bool, resumed: dict[str, Any] | None) -> None:
        self.path = path
        self.skip_seen = skip_seen
        self.resumed = resumed  # the state file's content when continuing
        self.stdout_note: str | None = None  # continuing into a pipe: which earlier records repeat
        self.settings: dict[str, Any] = {}
        self.tracked: Any = None  # the traces' byte count and CRC (TrackedOutput)
        self.checkpoint_rows = 0  # input rows at the last checkpoint
        self.checkpoints = 0
        self.to_skip = 0  # rows of the input the resumed state has already read
        self.last_print: int | None = None  # fingerprint of the last input row handled
        # the run's guard against Ctrl-C/SIGTERM (see ipfi_cli.run.signals): in the middle of a micro-batch
        # a stop waits for its end, a second one stops at once (the state stays at its last checkpoint);
        # a checkpoint being saved and the end of the run are never cut short
        self.busy = False
        self.stop_requested = False
        self.force_on_second = True
        self.forced = False
        self.saving = False
        self.ending = False
        self._run: tuple[ExplainSettings, int, RowReader, Any] | None = None  # what begin() was told
        self.lock: Any = None  # the StateLock held while the run uses the state
        # the run's lineage: the digest of its first checkpoint, kept by every later one and by the runs
        # that continue it, so a merge knows a shard state continued after it was merged
        self.lineage: str | None = None if resumed is None else resumed["run"].get("lineage")

    @classmethod
    def open(cls, path: str, *, skip_seen: bool) -> StateKeeper:
        """The keeper of ``path``: continuing from it if it exists (the ipfi version checked first)."""
        from ipfi_cli.io.run_state import StateLock, load_state, remove_stale_temporaries

        lock = StateLock(path)
        lock.acquire()  # before reading: another run on this state may be writing it
        try:
            remove_stale_temporaries(path, lock)  # a save killed halfway (kill -9) left them
            resumed = load_state(path) if os.path.exists(path) else None
            if resumed is not None and resumed.get("ipfi") != __version__:
                raise StateError(f"{path}: the state was written by ipfi {resumed.get('ipfi')}, and a run "
                                 f"continues only with the version that started it (this is ipfi {__version__}); "
                                 "finish it with that version, or start a new run with a new --state")
            if resumed is not None:
                check_state(path, resumed)
        except BaseException:
            lock.release()
            raise
        keeper = cls(path, skip_seen=skip_seen, resumed=resumed)
        keeper.lock = lock
        return keeper

    def release(self) -> None:
        """The run is over: another may use the state."""
        if self.lock is not None:
            self.lock.release()

    # -- before the first row -----------------------------------------------------------------
    def seed(self, asked: int | None, drawn: int) -> int:
        """The run's seed: the one asked for, else the resumed run's, else ``drawn``."""
        if asked is not None:
            return asked
        return self.resumed["run"]["seed"] if self.resumed is not None else drawn

    def saved_model(self) -> Any:
        """The learned model the resumed run saved (``None`` when starting, or for a static model);
        its file is checked against the SHA-256 the state holds before it is unpickled."""
        from ipfi_cli.io.run_state import load_model_beside

        if self.resumed is None or self.resumed["model"] is None:
            return None
        return pickle.loads(load_model_beside(self.path, self.resumed["model"]))

    def continue_reader(self, reader: RowReader) -> None:
        """With ``--no-skip-seen`` the input continues the stream: row numbers and column kinds go on."""
        if self.resumed is not None and not self.skip_seen:
            reader.rows_read = self.resumed["run"]["input_rows"]
            reader.assume_kinds(self.resumed["run"]["kinds"])

    def begin(self, plan: RunPlan, settings: ExplainSettings, parts: RunParts, *, seed: int, reader: RowReader,
              say: Callable[[str], None]) -> RunParts | None:
        """Note the run's settings (for the checkpoints); when continuing, check them and return the
        resumed run's pieces (its explainer and change watch restored from the state's plain data, its
        counters), else ``None``."""
        import copy
        from dataclasses import replace

        from ipfi_cli.io.run_state import StateFileError

        self.settings = now = run_settings(plan, settings, parts)
        self._run = (settings, seed, reader, plan.loaded)
        if parts.watch is not None:
            from ipfi_cli.core.change_windows import adwin_saves_as_data

            if not adwin_saves_as_data():  # say so before any row, not at the first checkpoint
                parts.watch.detector.state_dict()  # raises the StateError that explains it
        if self.resumed is None:
            return None
        if self.resumed["run"].get("merged") and self.skip_seen:
            raise StateError(f"{self.path}: a merged state continues with new rows only: add --no-skip-seen (its "
                             "shards' inputs are not one input to skip)")
        differences = settings_differences(self.resumed["settings"], now)
        if differences:
            raise StateError(f"{self.path}: the state belongs to a run with other settings "
                             f"({'; '.join(differences)}); use that run's options, or a new --state to start a "
                             "new run")
        # the restored pieces are new (the given ones stay as they were); the model is shared
        model = parts.explainer.model
        explainer = copy.deepcopy(parts.explainer, {id(model): model})
        try:
            with within("explainer"):
                explainer.load_state_dict(self.resumed["explainer"])
        except StateFieldError as error:
            raise StateFileError(self.path, str(error)) from None
        except (KeyError, TypeError, ValueError) as error:
            raise StateError(f"{self.path}: the explainer's state cannot be continued ({error})") from None
        run = self.resumed["run"]
        if run["last"] is not None and len(run["last"][1]) != len(parts.explainer.names):
            raise StateFileError(self.path, f"the state's run.last must hold {len(parts.explainer.names)} "
                                            f"importances (one per feature explained), not {len(run['last'][1])}")
        progress = replace(parts.progress, rows=run["rows"], last_written=run["last_written"],
                           last=(run["last"][0], list(run["last"][1])) if run["last"] else None,
                           input_rows=run["input_rows"])
        self.checkpoint_rows = run["input_rows"]
        parts.checker.skipped, parts.checker.first_skip = run["skipped"], run["first_skip"]
        watch = parts.watch
        if watch is not None:
            if self.resumed.get("watch") is None:
                raise StateError(f"{self.path}: the state belongs to a run without change detection; use that "
                                 "run's options, or a new --state to start a new run")
            watch = copy.deepcopy(watch)
            try:
                with within("watch"):
                    watch.load_state_dict(self.resumed["watch"])
            except StateFieldError as error:
                raise StateFileError(self.path, str(error)) from None
        self.last_print = run["last_print"]
        self.to_skip = progress.input_rows if self.skip_seen else 0
        rows = progress.input_rows
        say(f"continuing from {self.path}: {rows:,} input row(s) already handled; "
            + (f"skipping the first {rows:,} row(s) of the input" if self.skip_seen
               else f"the input continues the stream at row {rows + 1:,}")
            + (f"; traces continue at row {rows + 1:,}" if rows else ""))
        return replace(parts, explainer=explainer, progress=progress, watch=watch)

    def open_writer(self, plan: RunPlan, s: ExplainSettings, parts: RunParts) -> Any:
        """The trace writer on a :class:`~ipfi_cli.io.trace_output.TrackedOutput`: a new file, stdout,
        or (continuing) the traces file cut back to where the state says it ends."""
        import sys

        from ipfi_cli.io.trace_output import TrackedOutput, reopen_traces

        path = s.output.path if s.output.path and s.output.path != "-" else None
        try:
            if self.resumed is not None:
                output = self.resumed["run"]["output"]
                if path is not None:
                    tracked = reopen_traces(path, output["size"], output["crc"])
                else:  # stdout: the continuation, for appending to the earlier output (cut back when a file)
                    from ipfi_cli.io.trace_output import continue_stdout_traces

                    sys.stdout.flush()
                    self.stdout_note = continue_stdout_traces(output["size"], output["crc"], trace_header(
                        parts.explainer.names, s.output.bounds, output_format_for(s.output.path, s.output.format),
                        s.selection.by or ()))
                    tracked = TrackedOutput(sys.stdout.buffer, size=output["size"], crc=output["crc"])
            elif path is not None:
                tracked = TrackedOutput(open(path, "wb"), close=True)
            else:
                tracked = TrackedOutput(sys.stdout.buffer)
        except StateError as error:
            raise StateError(f"{error} (the traces of the state {self.path})") from None
        except OSError as error:
            raise OutputError(f"{s.output.path or '<stdout>'}: cannot write the output file ({error.strerror or error})"
                              ) from None
        self.tracked = tracked
        # the header is already there (unless nothing was written: a merged state's first traces)
        tracked.muted = self.resumed is not None and self.resumed["run"]["output"]["size"] > 0
        writer = WRITERS[output_format_for(s.output.path, s.output.format)](
            tracked, parts.explainer.names, bounds=s.output.bounds, close=True, key_columns=s.selection.by or ())
        tracked.muted = False
        if self.resumed is not None:
            writer.records = self.resumed["run"]["records"]
        writer.flush()
        return writer

    def events_kept(self) -> int | None:
        """Continuing a run: how many events its events file held at the checkpoint."""
        if self.resumed is None or self.resumed.get("watch") is None:
            return None
        return int(self.resumed["watch"]["written"])

    def watch_signals(self) -> DeferredSignals | None:
        """Defer Ctrl-C/SIGTERM to the end of a micro-batch (only on the main thread)."""
        return defer_signals(self)

    # -- while streaming ----------------------------------------------------------------------
    def drop_seen(self, batch: list[Row], source: str) -> list[Row]:
        """Drop the rows of ``batch`` that the resumed state has already read; check the last one."""
        if not self.to_skip:
            return batch
        if len(batch) < self.to_skip:
            self.to_skip -= len(batch)
            return []
        last, rest = batch[self.to_skip - 1], batch[self.to_skip:]
        self.to_skip = 0
        if fingerprint(last) != self.last_print:
            raise InputError(f"row {last.number} is not the row the state {self.path} read there: is this the same "
                             "input? (with --no-skip-seen the input holds only the rows after those the state has "
                             "read)", source=source)
        return rest

    def after_batch(self, parts: RunParts, batch: list[Row]) -> None:
        """A micro-batch is done: checkpoint when due; an interruption asked for during it stops now."""
        self.last_print = fingerprint(batch[-1])
        assert self._run is not None
        spec = self._run[0].state
        assert spec is not None  # a state keeper is the run's --state
        if parts.progress.input_rows - self.checkpoint_rows >= spec.checkpoint_every:
            self.checkpoint(parts)
        self.busy = False
        if self.stop_requested:
            self.ending = True
            raise KeyboardInterrupt

    def at_end(self, parts: RunParts, source: str) -> None:
        """The input ended: it must hold every row the state has read; then the last checkpoint."""
        if self.to_skip:
            handled = parts.progress.input_rows
            raise InputError(f"the input ends after {handled - self.to_skip:,} row(s), but the state {self.path} "
                             f"has read {handled:,}: is this the same input? (with --no-skip-seen the input holds "
                             "only the rows after those)", source=source)
        self.checkpoint(parts)

    def on_interrupt(self, parts: RunParts) -> None:
        """The run stops: save the state, unless it stopped in the middle of a micro-batch (a second
        Ctrl-C): the state then stays at its last checkpoint."""
        self.ending = True  # a further Ctrl-C waits for the save
        if not self.busy and not self.forced:  # between micro-batches: the state is consistent
            self.checkpoint(parts)

    def report_kept(self, say: Callable[[str], None]) -> None:
        """After a failure: say that the state stays at its last checkpoint."""
        if self.checkpoints or self.resumed is not None:
            say(f"the state in {self.path} stays at its last checkpoint (input row "
                                     f"{self.checkpoint_rows:,}); running the command again continues from there")

    def kept_note(self) -> str:
        """What a run stopped without saving leaves: the state at its last checkpoint, or none yet."""
        if self.checkpoints or self.resumed is not None:
            return (f"the state in {self.path} stays at its last checkpoint (input row {self.checkpoint_rows:,}): "
                    "run the same command again to continue from there")
        return (f"no state was saved in {self.path} yet (the first checkpoint comes after --checkpoint-every input "
                "rows): running the same command again starts over")

    # -- saving ---------------------------------------------------------------------------------
    def checkpoint(self, parts: RunParts) -> None:
        """Save the state: traces flushed and synced first, so it never claims a record not in the file."""
        saving, self.saving = self.saving, True  # a Ctrl-C meanwhile waits for the save's end
        try:
            self._checkpoint(parts)
        finally:
            self.saving = saving

    def _checkpoint(self, parts: RunParts) -> None:
        from ipfi_cli.io.run_state import remove_other_models, save_model_beside, save_state, state_digest
        from ipfi_cli.version import __version__

        assert self._run is not None
        s, seed, reader, loaded = self._run
        progress, writer, checker = parts.progress, parts.writer, parts.checker
        writer.flush()
        self.tracked.sync()
        last = progress.last
        run = {
            "seed": seed, "input_rows": progress.input_rows, "rows": progress.rows,
            "skipped": checker.skipped, "first_skip": checker.first_skip,
            "last_written": progress.last_written,
            "last": [last[0], [float(v) for v in last[1]]] if last is not None else None,
            "records": writer.records, "kinds": reader.column_kinds(), "last_print": self.last_print,
            "output": {"size": self.tracked.size, "crc": self.tracked.crc,
                       "path": os.path.abspath(s.output.path) if s.output.path and s.output.path != "-" else None},
            "input": reader.name, "saved": time.time(),
        }
        if self.resumed is not None and self.resumed["run"].get("parts"):  # a merge continued: still made of them
            run["parts"] = self.resumed["run"]["parts"]
            run["lineages"] = self.resumed["run"].get("lineages", [])
        if parts.events_file is not None and parts.watch is not None:
            parts.watch.written = parts.events_file.written
        # the learned model is the one part that is not plain data: a pickle beside the state, which
        # the state vouches for by its SHA-256 (written first, so the state never refers to a missing file)
        model = save_model_beside(self.path, pickle.dumps(loaded.model, protocol=pickle.HIGHEST_PROTOCOL)) \
            if s.model.learn else None
        payload = {"ipfi": __version__, "settings": self.settings, "explainer": parts.explainer.state_dict(),
                   "model": model, "run": run, "watch": None if parts.watch is None else parts.watch.state_dict()}
        if self.lineage is None:
            self.lineage = state_digest(payload)
        run["lineage"] = self.lineage
        save_state(self.path, payload, lock=self.lock)
        remove_other_models(self.path, model)
        self.checkpoint_rows = progress.input_rows
        self.checkpoints += 1
