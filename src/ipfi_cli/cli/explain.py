"""``ipfi explain``: stream rows in, write importance traces out.

The Typer function :func:`explain` only parses options; :class:`ExplainRun` does the
work and can be driven from Python with an :class:`ExplainSettings`. Heavy libraries are
imported inside the run, so ``ipfi --help`` stays fast.

The loop reads micro-batches of whatever rows are already available
(:meth:`ipfi_cli.io.readers.RowReader.batches`). A static model explains each batch with
one ``explain_many`` call (the numbers are those of ``explain_one`` row by row); with
``--learn`` each row is explained with the current model and then learned.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import pickle
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.common import (
    EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, PANEL_DISPLAY, PANEL_ESTIMATOR, PANEL_INPUT,
    PANEL_MODEL, PANEL_OUTPUT, PICKLE_WARNING, CliError, DebugOpt, DropOpt, FeaturesOpt, FormatOpt, GroupOpt,
    InputArg, LossOpt, OnBadRow, OnBadRowOpt, OutputFormatOpt, OutputOpt, QuietOpt, RepeatsOpt,
    Sampling, SeedOpt, TargetOpt, Task, TaskOpt, ThreadsOpt, TrustOpt, VerboseOpt, DelimiterOpt, NaValuesOpt,
    NoDefaultNaOpt, first_line, choose_loss, choose_task, first_row_hook, label_matcher, library_versions, live_display_allowed,
    load_predictor, model_columns, parse_groups, quiet_broken_pipe, read_options, reporting, say, select_features,
    split_names, stream_is_terminal, usage_error,
)
from ipfi_cli.cli.model_options import (
    ClassesOpt, HeaderOpt, MaxRequestRowsOpt, ModelOpt, ModelUrlOpt, Protocol, ProtocolOpt, RetriesOpt, RetryWaitOpt,
    TimeoutOpt, model_source,
)

HELP = f"""Explain a model on a stream: incremental permutation feature importance (iPFI) per row.

Reads rows (CSV with a header, or JSONL) from INPUT or standard input, explains each with the model, and writes one trace record per row: the row number, then the current importance of every feature (the smoothed increase of the loss when that feature's value is replaced by an earlier row's). Traces go to standard output (or --output); a live table goes to stderr when it is a terminal and the traces do not.

Examples:

  cat data.csv | ipfi explain -m model.joblib -t class > traces.csv

  ipfi explain stream.csv -m river_model.pkl -t class --learn --every 1000

  ipfi explain stream.csv -m model.pkl -t class --learn -o traces.csv --state run.state

With --state the run can stop at any time (Ctrl-C, SIGTERM, a crash) and continue: run the same command again. The traces file then ends exactly as one uninterrupted run would have written it.

{PICKLE_WARNING}
"""

PANEL_STATE = "Checkpoints and resume"
CHECKPOINT_EVERY = 10_000


@dataclass
class ExplainSettings:
    """Everything ``ipfi explain`` was asked to do (also written to ``--meta``)."""

    model: str
    target: str
    input: str | None = None
    http: Any = None  # HttpOptions of a served model (--model-url); --meta gets it without header values
    trust: list[str] | None = None
    format: str | None = None
    na_values: list[str] | None = None
    no_default_na: bool = False
    delimiter: str | None = None
    task: str = "auto"
    loss: str | None = None
    learn: bool = False
    save_model: str | None = None
    alpha: float = 0.001
    repeats: int = 10
    sampling: str = "geometric"
    reservoir_size: int = 100
    seed: int | None = None
    features: list[str] | None = None
    drop: list[str] | None = None
    groups: dict[str, list[str]] = field(default_factory=dict)
    output: str | None = None
    output_format: str | None = None
    every: int = 1
    bounds: bool = False
    delta: float = 0.05
    meta: str | None = None
    batch_size: int = 1000
    on_bad_row: str = "fail"
    state: str | None = None
    checkpoint_every: int = CHECKPOINT_EVERY
    skip_seen: bool = True
    verbose: bool = False
    quiet: bool = False
    live: bool = True
    debug: bool = False


def explain(
    input: InputArg = None,
    model: ModelOpt = None,
    target: TargetOpt = ...,  # type: ignore[assignment]
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = 30.0,
    max_request_rows: MaxRequestRowsOpt = 5000,
    retries: RetriesOpt = 5,
    retry_wait: RetryWaitOpt = 30.0,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    task: TaskOpt = Task.auto,
    loss: LossOpt = None,
    learn: Annotated[bool, typer.Option(
        "--learn", help="Prequential learning: explain each row with the current model, then learn it "
        "(river models, learn_one).", rich_help_panel=PANEL_MODEL)] = False,
    save_model: Annotated[Optional[str], typer.Option(
        "--save-model", help="With --learn: write the learned model here at the end (joblib, atomic).",
        rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH")] = None,
    alpha: Annotated[float, typer.Option(
        "--alpha", "-a", help="Smoothing: the weight of the newest row, in (0, 1]. The estimate averages "
        "roughly the last 2/alpha rows.", rich_help_panel=PANEL_ESTIMATOR)] = 0.001,
    repeats: RepeatsOpt = 10,
    sampling: Annotated[Sampling, typer.Option(
        "--sampling", help="Which earlier rows replace a feature's value: geometric prefers recent rows "
        "(follows drift); uniform treats all rows alike.", rich_help_panel=PANEL_ESTIMATOR)] = Sampling.geometric,
    reservoir_size: Annotated[int, typer.Option(
        "--reservoir-size", min=1, help="Earlier rows remembered per permutation.",
        rich_help_panel=PANEL_ESTIMATOR)] = 100,
    seed: SeedOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    every: Annotated[int, typer.Option(
        "--every", "-e", min=1, help="Write a record every N rows (the last row is always written).",
        rich_help_panel=PANEL_OUTPUT)] = 1,
    bounds: Annotated[bool, typer.Option(
        "--bounds", help="Add a <feature>_bound column per feature: the Chebyshev confidence half-width "
        "at level --delta.", rich_help_panel=PANEL_OUTPUT)] = False,
    delta: Annotated[float, typer.Option(
        "--delta", help="Bounds hold with probability 1 - delta (approximately; see the docs).",
        rich_help_panel=PANEL_OUTPUT)] = 0.05,
    meta: Annotated[Optional[str], typer.Option(
        "--meta", help="Write a JSON sidecar here at the end: seed, all settings, library versions, rows "
        "seen, final importances.", rich_help_panel=PANEL_OUTPUT, show_default=False, metavar="FILE")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="At most this many rows per model call for a static model (rows already "
        "waiting are batched; a slow stream is never held back).", rich_help_panel=PANEL_INPUT)] = 1000,
    on_bad_row: OnBadRowOpt = OnBadRow.fail,
    state: Annotated[Optional[str], typer.Option(
        "--state", help="Keep the run's whole state in this file (the explainer, the counters, where the traces "
        "end and, with --learn, the model), saved atomically every --checkpoint-every rows and at exit. If the "
        "file exists the run continues from it: run the same command again. The file is a pickle: only continue "
        "from state files you wrote.", rich_help_panel=PANEL_STATE, show_default=False, metavar="PATH")] = None,
    checkpoint_every: Annotated[int, typer.Option(
        "--checkpoint-every", min=1, help="With --state: save the state after this many more input rows (at the "
        "end of the micro-batch that reaches them).", rich_help_panel=PANEL_STATE)] = CHECKPOINT_EVERY,
    skip_seen: Annotated[bool, typer.Option(
        "--skip-seen/--no-skip-seen", help="When continuing from --state: the input is the whole stream again and "
        "the rows the state has read are skipped (the last one is checked), or, with --no-skip-seen, the input "
        "holds only the rows after them (row numbers continue).", rich_help_panel=PANEL_STATE)] = True,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
    no_live: Annotated[bool, typer.Option(
        "--no-live", help="No live table on stderr; a summary table at the end instead.",
        rich_help_panel=PANEL_DISPLAY)] = False,
    debug: DebugOpt = False,
) -> None:
    if quiet and verbose:
        raise usage_error("use either --quiet or --verbose, not both", "--quiet")
    model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                               max_request_rows=max_request_rows, retries=retries, retry_wait=retry_wait,
                               classes=classes)
    if not 0.0 < alpha <= 1.0:
        raise usage_error(f"must be in (0, 1], got {alpha}", "--alpha")
    if not 0.0 < delta < 1.0:
        raise usage_error(f"must be in (0, 1), got {delta}", "--delta")
    if save_model and not learn:
        raise usage_error("needs --learn (without it the model does not change)", "--save-model")
    if not state and checkpoint_every != CHECKPOINT_EVERY:
        raise usage_error("needs --state (where to save the checkpoints)", "--checkpoint-every")
    if not state and not skip_seen:
        raise usage_error("needs --state (it says how to continue from one)", "--no-skip-seen")
    if state:
        same = [(name, path) for name, path in (("--output", output), ("INPUT", input), ("--model", model),
                                                 ("--meta", meta), ("--save-model", save_model))
                if path and path != "-" and os.path.abspath(path) == os.path.abspath(state)]
        if same:
            raise usage_error(f"is the same file as {same[0][0]}", "--state")
    read_options(na_values, no_default_na, delimiter)  # bad values are usage errors, before any work
    settings = ExplainSettings(
        model=model, target=target, input=input, trust=split_names(trust), format=format.value if format else None,
        na_values=na_values, no_default_na=no_default_na, delimiter=delimiter, task=task.value,
        loss=loss.value if loss else None, learn=learn, save_model=save_model, alpha=alpha, repeats=repeats,
        sampling=sampling.value, reservoir_size=reservoir_size, seed=seed, features=split_names(features),
        drop=split_names(drop), groups=parse_groups(group), output=output,
        output_format=output_format.value if output_format else None, every=every, bounds=bounds, delta=delta,
        meta=meta, batch_size=batch_size, on_bad_row=on_bad_row.value, verbose=verbose, quiet=quiet,
        live=not no_live, debug=debug, state=state, checkpoint_every=checkpoint_every, skip_seen=skip_seen, http=http)
    with reporting(debug):
        code = ExplainRun(settings).execute()
    if code != EXIT_OK:
        raise typer.Exit(code)


explain.__doc__ = HELP


# -- the run ------------------------------------------------------------------------------------
class ExplainRun:
    """One ``ipfi explain`` run. :meth:`execute` returns the exit code."""

    def __init__(self, settings: ExplainSettings) -> None:
        self.s = settings
        self.seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        self.rows = 0  # good rows processed
        self.skipped = 0
        self.first_skip: str | None = None
        self.last_written = 0  # row number of the last record written
        self.last: tuple[int, list[float]] | None = None  # last row's number and estimates
        self.status = "starting"
        self.error: str | None = None
        self.started = time.time()
        self.first_row_time: float | None = None
        self._rate = float("nan")
        self._recent_loss = float("nan")
        self._mark: tuple[float, int, int, float] | None = None  # time, rows, explained, loss sum
        self.explainer: Any = None
        self.writer: Any = None
        self.reader: Any = None
        self.loaded: Any = None
        self.dashboard: Any = None
        self.columns: list[str] = []
        self.input_columns: list[str] = []
        self.notes: list[str] = []  # one-time notes about the set-up (stderr, not with --quiet)
        self.checker: Any = None
        self.labels: Any = None
        self._reference: dict[str, Any] | None = None  # a row the model took (to find a failing column)
        self._mismatch_checked = False
        # --state: what a checkpoint holds besides the explainer, and how this run resumed
        self.input_rows = 0  # input rows handled (good and bad), the resume point
        self.resumed: dict[str, Any] | None = None  # the state file's content when continuing
        self.tracked: Any = None  # the traces' byte count and CRC (TrackedOutput)
        self.checkpoint_rows = 0  # input_rows at the last checkpoint
        self.checkpoints = 0
        self._to_skip = 0  # rows of the input the resumed state has already read
        self._last_print: int | None = None  # fingerprint of the last input row handled
        self._run_settings: dict[str, Any] = {}
        self._busy = False  # in the middle of a micro-batch: Ctrl-C/SIGTERM wait for its end
        self._failure: Exception | None = None  # a row the model failed on (--on-bad-row fail)
        self._stop = False

    # -- set-up ---------------------------------------------------------------------------------
    def execute(self) -> int:
        s = self.s
        from ipfi_cli.io.readers import open_rows

        if s.state and os.path.exists(s.state):
            self._load_state()
        self.loaded = loaded = load_predictor(s.model, learn=s.learn, trust=s.trust, http=s.http)
        if s.learn:
            # a learning model is saved in --state and unpickled on resume: sets inside it (river's
            # Select) must iterate in the same order in both copies (see ipfi_cli.run.canonical)
            from ipfi_cli.models import as_predictor
            from ipfi_cli.run.canonical import canonical_copy

            model = pickle.loads(self.resumed["model"]) if self.resumed is not None else loaded.model
            loaded.model = canonical_copy(model)
            loaded.predictor = as_predictor(loaded.model)
        if not s.quiet:
            for line in loaded.warnings:
                say(line, "warning")
        classification = choose_task(loaded, Task(s.task))
        self.loss = loss = choose_loss(loaded, classification, s.loss)
        self.classification = classification
        self.labels = label_matcher(loaded, classification, s.learn)
        if loaded.kind == "river" and not s.learn and not s.quiet:
            say("note: the river model is explained as it is and does not learn; add --learn to "
                "explain each row and then learn it")

        self.reader = reader = open_rows(s.input, format=s.format,
                                         **read_options(s.na_values, s.no_default_na, s.delimiter))
        if self.resumed is not None and not s.skip_seen:  # the input continues the stream
            reader.rows_read = self.resumed["run"]["input_rows"]
            reader.assume_kinds(self.resumed["run"]["kinds"])
        import numpy as np

        try:
            # an overflowing loss is reported as one line naming the row, not as numpy warnings
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return self._run_reader(reader, loaded, loss)
        finally:
            reader.close()

    def _run_reader(self, reader: Any, loaded: Any, loss: Any) -> int:
        s = self.s
        source = reader.name
        self.input_columns = reader.columns
        if not self.input_columns and reader.format == "jsonl" and not loaded.predictor.columns:
            bad = [row.error for row in reader]  # no good row at all: only bad ones, if any
            if bad and s.on_bad_row == "fail":
                raise bad[0]
            raise CliError(f"{source}: no row was explained: the input has no rows"
                           + (f" but {len(bad):,} bad one(s); the first: {bad[0]}" if bad else ""))
        if reader.format == "jsonl":
            # JSONL objects need not share keys: a model that names its inputs gets those, else
            # the first object's keys are the inputs; each row is checked for them and the target
            known = loaded.predictor.columns
            inputs = list(known) if known else [c for c in self.input_columns if c != s.target]
            self.columns = columns = model_columns(loaded, [*inputs, s.target], s.target, source,
                                                   features=s.features, drop=s.drop, groups=s.groups,
                                                   notes=self.notes)
        else:
            self.columns = columns = model_columns(loaded, self.input_columns or loaded.predictor.columns,
                                                   s.target, source, check_target=bool(self.input_columns),
                                                   features=s.features, drop=s.drop, groups=s.groups,
                                                   notes=self.notes)
        schema = bool(loaded.predictor.columns)
        features, groups = select_features(columns, s.features,
                                           s.drop if schema else [c for c in s.drop or [] if c in columns], s.groups)
        if not s.quiet:
            for line in self.notes:
                say(line, "note")
        from ipfi_cli.run.rows import RowChecker

        self.checker = RowChecker(source=source, target=s.target, columns=columns, to_label=self.labels,
                                  check_columns=reader.format == "jsonl", learn=s.learn, on_bad_row=s.on_bad_row,
                                  on_skip=self._on_skip, on_first_row=first_row_hook(loaded, self.labels, columns))

        from ipfi_cli.core import IncrementalPFI

        self.explainer = IncrementalPFI(
            loaded.predictor, columns, loss=loss, alpha=s.alpha, n_repeats=s.repeats, sampling=s.sampling,
            reservoir_size=s.reservoir_size, features=features, groups=groups or None, seed=self.seed)
        if s.state:
            self._prepare_state()
        if s.verbose:
            self._describe(source, reader.format)
        self.writer = self._open_writer()
        self.live = (s.live and live_display_allowed(s.quiet, False)
                     and not (s.output in (None, "-") and stream_is_terminal(__import__("sys").stdout)))
        if self.live:
            from ipfi_cli.cli.live import Dashboard

            self.dashboard = Dashboard(self._title(), live=True)
            self.dashboard.start()
        return self._stream(reader)

    def _open_writer(self) -> Any:
        from ipfi_cli.io.writers import open_trace_writer

        s = self.s
        if s.state:
            return self._open_tracked_writer()
        try:
            writer = open_trace_writer(s.output, self.explainer.names, format=s.output_format, bounds=s.bounds)
            writer.flush()  # the header, for `tail -f`
        except OSError as error:
            if isinstance(error, BrokenPipeError):
                raise
            raise CliError(f"{s.output}: cannot write the output file ({error.strerror or error})") from None
        return writer

    def _title(self) -> str:
        mode = "learning" if self.s.learn else "static"
        return f"ipfi explain · {type(self.loaded.model).__name__} · {mode} · {self.loss.name} loss"

    def _describe(self, source: str, fmt: str) -> None:
        s, loaded, explainer = self.s, self.loaded, self.explainer
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

    # -- checkpoints and resume (--state) ---------------------------------------------------------
    def _load_state(self) -> None:
        """Read the state file of the run to continue; a foreign or other-version file stops here."""
        from ipfi_cli import __version__
        from ipfi_cli.io.run_state import StateError, load_state

        s = self.s
        try:
            payload = load_state(s.state)
        except StateError as error:
            raise CliError(str(error)) from None
        if payload.get("ipfi") != __version__:
            raise CliError(f"{s.state}: the state was written by ipfi {payload.get('ipfi')}, and a run continues only "
                           f"with the version that started it (this is ipfi {__version__}); finish it with that "
                           "version, or start a new run with a new --state")
        self.resumed = payload
        if s.seed is None:
            self.seed = payload["run"]["seed"]

    def _settings_now(self) -> dict[str, Any]:
        """Everything that must be the same for a run to continue another: option -> value."""
        from ipfi_cli.core import checkpoint
        from ipfi_cli.io.writers import output_format_for
        from ipfi_cli.models.sources import model_digest

        s = self.s
        core = checkpoint.settings(self.explainer)
        return {
            "model inputs": core["columns"], "explained (--features/--drop/--group)": core["names"],
            "--group": core["groups"], "--loss": core["loss"], "--alpha": core["alpha"], "--repeats": core["n_repeats"],
            "--sampling": core["sampling"], "--reservoir-size": core["reservoir_size"], "--seed": core["seed"],
            "--model": model_digest(s.model), "--target": s.target, "--learn": s.learn,
            "--task": "classification" if self.classification else "regression", "--every": s.every,
            "--bounds": s.bounds, "--delta": s.delta if s.bounds else None,
            "--output-format": output_format_for(s.output, s.output_format),
        }

    def _prepare_state(self) -> None:
        """Note this run's settings; when continuing, check them and restore the explainer and counters."""
        s = self.s
        self._run_settings = now = self._settings_now()
        if self.resumed is None:
            return
        saved = self.resumed["settings"]
        differences = []
        for key, value in now.items():
            if saved.get(key) != value:
                differences.append(f"{key}: the model file differs from the one the run started with"
                                   if key == "--model" else f"{key}: state {saved.get(key)!r}, now {value!r}")
        if differences:
            raise CliError(f"{s.state}: the state belongs to a run with other settings ({'; '.join(differences)}); "
                           "use that run's options, or a new --state to start a new run")
        from ipfi_cli.core import checkpoint

        try:
            self.explainer = checkpoint.restore(self.resumed["checkpoint"], self.loaded.predictor,
                                                checkpoint.settings(self.explainer))
        except checkpoint.CheckpointError as error:
            raise CliError(f"{s.state}: {error}") from None
        run = self.resumed["run"]
        self.rows, self.skipped, self.first_skip = run["rows"], run["skipped"], run["first_skip"]
        self.last_written = run["last_written"]
        self.last = (run["last"][0], list(run["last"][1])) if run["last"] else None
        self.input_rows = self.checkpoint_rows = run["input_rows"]
        self._last_print = run["last_print"]
        self._to_skip = self.input_rows if s.skip_seen else 0
        if not s.quiet:
            rows = self.input_rows
            say(f"continuing from {s.state}: {rows:,} input row(s) already handled; "
                + (f"skipping the first {rows:,} row(s) of the input" if s.skip_seen
                   else f"the input continues the stream at row {rows + 1:,}")
                + (f"; traces continue at row {rows + 1:,}" if rows else ""))

    def _open_tracked_writer(self) -> Any:
        """The trace writer on a :class:`TrackedOutput`: a new file, stdout, or (continuing) the
        traces file cut back to where the state says it ends."""
        import sys

        from ipfi_cli.io.run_state import StateError, TrackedOutput, reopen_traces
        from ipfi_cli.io.writers import WRITERS, output_format_for

        s = self.s
        to_file = bool(s.output) and s.output != "-"
        try:
            if self.resumed is not None:
                output = self.resumed["run"]["output"]
                if to_file:
                    tracked = reopen_traces(s.output, output["size"], output["crc"])
                else:  # stdout: the continuation, for appending to the earlier output
                    tracked = TrackedOutput(sys.stdout.buffer, size=output["size"], crc=output["crc"])
            elif to_file:
                tracked = TrackedOutput(open(s.output, "wb"), close=True)
            else:
                tracked = TrackedOutput(sys.stdout.buffer)
        except StateError as error:
            raise CliError(f"{error} (the traces of the state {s.state})") from None
        except OSError as error:
            raise CliError(f"{s.output}: cannot write the output file ({error.strerror or error})") from None
        self.tracked = tracked
        tracked.muted = self.resumed is not None  # the header is already there
        writer = WRITERS[output_format_for(s.output, s.output_format)](
            tracked, self.explainer.names, bounds=s.bounds, close=True)
        tracked.muted = False
        if self.resumed is not None:
            writer.records = self.resumed["run"]["records"]
        writer.flush()
        return writer

    def _checkpoint(self) -> None:
        """Save the state: traces flushed and synced first, so it never claims a record not in the file."""
        from ipfi_cli import __version__
        from ipfi_cli.core import checkpoint
        from ipfi_cli.io.run_state import StateError, save_state

        s = self.s
        self.writer.flush()
        self.tracked.sync()
        last = self.last
        run = {
            "seed": self.seed, "input_rows": self.input_rows, "rows": self.rows, "skipped": self.skipped,
            "first_skip": self.first_skip, "last_written": self.last_written,
            "last": [last[0], [float(v) for v in last[1]]] if last is not None else None,
            "records": self.writer.records, "kinds": self.reader.column_kinds(), "last_print": self._last_print,
            "output": {"size": self.tracked.size, "crc": self.tracked.crc,
                       "path": os.path.abspath(s.output) if s.output and s.output != "-" else None},
            "input": self.reader.name, "saved": time.time(),
        }
        payload = {"ipfi": __version__, "settings": self._run_settings, "checkpoint": checkpoint.dump(self.explainer),
                   "model": pickle.dumps(self.loaded.model, protocol=pickle.HIGHEST_PROTOCOL) if s.learn else None,
                   "run": run}
        try:
            save_state(s.state, payload)
        except StateError as error:
            raise CliError(str(error)) from None
        self.checkpoint_rows = self.input_rows
        self.checkpoints += 1

    def _skip_seen(self, batch: list[Any]) -> list[Any]:
        """Drop the rows of ``batch`` that the resumed state has already read; check the last one."""
        if len(batch) < self._to_skip:
            self._to_skip -= len(batch)
            return []
        last, rest = batch[self._to_skip - 1], batch[self._to_skip:]
        self._to_skip = 0
        if _fingerprint(last) != self._last_print:
            raise CliError(f"{self.reader.name}: row {last.number} is not the row the state {self.s.state} read "
                           "there: is this the same input? (with --no-skip-seen the input holds only the rows after "
                           "those the state has read)")
        return rest

    def _watch_signals(self) -> dict[int, Any]:
        """With --state, Ctrl-C and SIGTERM wait for the end of the current micro-batch, so the
        state saved at exit is consistent; while waiting for input they stop at once."""
        import signal
        import threading

        if not self.s.state or threading.current_thread() is not threading.main_thread():
            return {}

        def stop(signum: int, frame: Any) -> None:
            if self._busy:
                self._stop = True
            else:
                raise KeyboardInterrupt

        return {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    # -- the loop -------------------------------------------------------------------------------
    def _stream(self, reader: Any) -> int:
        s = self.s
        self.status = "running"
        idle = self._refresh if self.dashboard is not None else None
        handlers = self._watch_signals()
        try:
            for batch in reader.batches(s.batch_size, idle=idle):
                if self._to_skip:
                    batch = self._skip_seen(batch)
                    if not batch:
                        continue
                self._busy = True
                if self.first_row_time is None:
                    self.first_row_time = time.monotonic()
                good, failure = self.checker.check(batch)
                if good:
                    if s.learn:
                        self._learn_rows(good)
                    else:
                        self._explain_static(good)
                    self.writer.flush()
                if self._failure is not None:  # the model failed on a good row: it comes first
                    failure = self._failure
                if failure is not None:  # after the rows before it are explained and written
                    raise failure
                self._check_labels_match()
                self.input_rows += len(batch)
                if s.state:
                    self._last_print = _fingerprint(batch[-1])
                    if self.input_rows - self.checkpoint_rows >= s.checkpoint_every:
                        self._checkpoint()
                self._busy = False
                if self._stop:
                    raise KeyboardInterrupt
                if self.dashboard is not None and self.dashboard.due():
                    self._refresh()
            if self._to_skip:
                raise CliError(f"{reader.name}: the input ends after {self.input_rows - self._to_skip:,} row(s), but "
                               f"the state {s.state} has read {self.input_rows:,}: is this the same input? (with "
                               "--no-skip-seen the input holds only the rows after those)")
            if s.state:  # before the end-of-input record, which a longer stream would not have here
                self._checkpoint()
            self._write_last()
            self.writer.flush()
            self.status = "ok"
        except KeyboardInterrupt:
            self.status = "interrupted"
            if s.state and not self._busy:  # between micro-batches: the state is consistent
                self._busy = True  # a second Ctrl-C waits for the save
                self._checkpoint()
        except BrokenPipeError:
            self.status = "broken-pipe"
        except BaseException as error:
            self.status = "error"
            self.error = str(error)
            raise
        finally:
            if handlers:
                import signal

                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
            self._close()
        return self._report()

    def _close(self) -> None:
        """Flush and close the output, stop the live view; runs whatever happened."""
        if self.dashboard is not None:
            try:
                self.dashboard.stop(self._snapshot() if self.status != "broken-pipe" else None)
            except Exception:  # noqa: BLE001 - never hide the real outcome behind a display error
                pass
        if self.writer is not None:
            try:
                self.writer.close()
            except BrokenPipeError:
                self.status = "broken-pipe"
            except KeyboardInterrupt:
                self.status = "interrupted"
        if self.status == "broken-pipe":
            quiet_broken_pipe()
        if self.s.meta and self.status != "starting":
            try:
                self._write_meta()
            except OSError as error:
                say(f"{self.s.meta}: cannot write the metadata file ({error.strerror or error})", "error")
                if self.status == "ok":
                    self.status = "error"

    def _report(self) -> int:
        s = self.s
        if self.status in ("broken-pipe", "error") and s.state and (self.checkpoints or self.resumed) \
                and not s.quiet:
            say(f"the state in {s.state} stays at its last checkpoint (input row {self.checkpoint_rows:,}); "
                "running the command again continues from there")
        if self.status == "broken-pipe":
            return EXIT_ERROR
        if self.status == "error":
            return EXIT_ERROR
        if self.status == "ok" and s.save_model:
            from ipfi_cli.io.model_files import save_model

            save_model(s.save_model, self.loaded.model)
            if s.verbose:
                say(f"saved the learned model to {s.save_model}")
        if self.skipped and not s.quiet:
            say(f"skipped {self.skipped:,} bad row(s); the first: {self.first_skip}", "warning")
        unknown = self.labels.unknown_summary() if self.labels is not None else None
        if unknown and not s.quiet:
            say(unknown, "warning")
        nothing = self.status == "ok" and (self.explainer is None or self.explainer.n_explained == 0)
        if self.status == "interrupted":
            say(f"interrupted after {self.rows:,} rows; every record written is complete"
                + ("; the model was not saved" if s.save_model else "")
                + (f"; the state is saved in {s.state}: run the same command again to continue" if s.state else ""))
        if not s.quiet and self.dashboard is None:
            from ipfi_cli.cli.live import Dashboard

            Dashboard(self._title(), live=False).print_final(self._snapshot())
        if s.verbose and self.writer is not None:
            say(f"wrote {self.writer.records:,} record(s) to {s.output or '<stdout>'}")
        if nothing:
            why = (f"all {self.skipped:,} row(s) were bad" if self.skipped and not self.rows
                   else "the input has no rows" if not self.rows
                   else "one row only fills the reservoir; a row is explained against earlier rows")
            say(f"{self.reader.name if self.reader else s.input}: no row was explained: {why}", "error")
            return EXIT_ERROR
        return EXIT_INTERRUPTED if self.status == "interrupted" else EXIT_OK

    def _on_skip(self, error: Any) -> None:
        self.skipped += 1
        if self.first_skip is None:
            self.first_skip = str(error)
        if self.s.verbose:
            say(f"skipped {error}", "warning")

    def _check_labels_match(self) -> None:
        """Once enough rows are explained: a zero-one loss of 1 on every one of them means the
        labels and the model's outputs are probably of different kinds; say so (stderr)."""
        from ipfi_cli.run.labels import MISMATCH_ROWS

        explainer = self.explainer
        needed = MISMATCH_ROWS * (8 if self.s.learn else 1)  # a learning model starts out wrong
        if self._mismatch_checked or explainer.n_explained < needed:
            return
        self._mismatch_checked = True
        if self.loss.name == "zero-one" and explainer.mean_loss == 1.0 and not self.s.quiet:
            example = ""
            if self._reference is not None:
                from ipfi_cli.core.losses import Output

                try:
                    predicted = self.loaded.predictor.predict_records(
                        [{c: self._reference[c] for c in self.columns}], Output.LABEL, None)[0]
                    example = f" (the model predicts values like {predicted!r}; the labels read like {self._reference_label!r})"
                except Exception:  # noqa: BLE001 - only an example for the message
                    pass
            say(f"every one of the first {explainer.n_explained:,} explained rows has a wrong prediction (loss 1): "
                f"the labels probably do not match the model's outputs{example}; check --target and the "
                "label values", "warning")

    def _nonfinite_loss(self, number: int, line: int) -> CliError:
        return CliError(f"{self.reader.name}: row {number} (line {line}): the loss is not a finite number (the model's "
                        "prediction is NaN or infinite, or the label is too large); every later importance would "
                        "be NaN, so the run stops here")

    def _due(self, count: int) -> bool:
        return count % self.s.every == 0

    def _explain_static(self, good: list[Any]) -> None:
        """Explain a micro-batch of a static model in as few model calls as its width allows;
        with --bounds a record needs the bounds after its own row, so the batch is cut there."""
        s = self.s
        begin = 0
        while begin < len(good):
            size = s.every - self.rows % s.every if s.bounds else len(good) - begin
            self._explain_part(good[begin:begin + size])
            begin += size

    def _explain_part(self, part: list[Any]) -> None:
        """Explain ``part`` in one call; if the model fails, bisect (the explainer is all or
        nothing per call) to the row it fails on, which is skipped or stops the run."""
        if self._failure is not None or not part:
            return
        if self.explainer.n_seen == 0 and not self._model_takes(part[0]):
            # the first row only fills the reservoir: checked alone, so a row the model cannot
            # take never becomes a replacement value for later rows
            self._explain_part(part[1:])
            return
        try:
            array = self.explainer.explain_many([p.values for p in part], [p.label for p in part])
        except Exception as error:  # noqa: BLE001 - locate the row the model failed on
            if len(part) == 1:
                self._bad_model_row(part[0], error)
                return
            middle = len(part) // 2
            self._explain_part(part[:middle])
            self._explain_part(part[middle:])
            return
        self._emit(part, array)

    def _model_takes(self, row: Any) -> bool:
        from ipfi_cli.core.losses import Output

        try:
            self.loaded.predictor.predict_records([{c: row.values[c] for c in self.columns}],
                                                  self.loss.output if self.loss.output is not Output.PROBA
                                                  else Output.LABEL, row.label)
        except Exception as error:  # noqa: BLE001
            self._bad_model_row(row, error)
            return False
        return True

    def _bad_model_row(self, row: Any, error: BaseException) -> None:
        """The model cannot take ``row``: name it (and its column); skip it or stop after the rows before it."""
        from ipfi_cli.run.failures import failing_column, failure_message

        column = failing_column(self.loaded.predictor, self.columns, row.values, row.label, self.loss.output,
                                self._reference)
        message = failure_message(self.reader.name, row.number, row.line, row.values, self.columns, error, column)
        if self.s.on_bad_row == "skip":
            self._on_skip(message)
        else:
            self._failure = CliError(message)

    def _emit(self, part: list[Any], array: Any) -> None:
        """Write the due records of an explained part; a non-finite loss stops the run there."""
        import numpy as np

        explainer, writer, s = self.explainer, self.writer, self.s
        fresh = explainer.n_explained == 0 or self.rows == 0
        broken = np.isnan(array).any(axis=1)
        if fresh:
            broken[0] = False  # the stream's first row has no estimate yet (NaN)
        stop = int(broken.argmax()) if broken.any() else len(part)
        estimates = array.tolist()
        bound = explainer.bound_array(s.delta).tolist() if s.bounds else None
        for offset in range(stop):
            self.rows += 1
            if self._due(self.rows):
                writer.write(part[offset].number, estimates[offset], bound)
                self.last_written = part[offset].number
        if stop < len(part):
            raise self._nonfinite_loss(part[stop].number, part[stop].line)
        self.last = (part[-1].number, estimates[-1])
        self._reference, self._reference_label = dict(part[-1].values), part[-1].label

    def _learn_rows(self, good: list[tuple[int, int, dict[str, Any], Any]]) -> None:
        import numpy as np

        explainer, writer, s = self.explainer, self.writer, self.s
        predictor = self.loaded.predictor
        columns = self.columns
        dashboard = self.dashboard
        for row in good:
            number, line, values, label = row
            x = {c: values[c] for c in columns}
            if explainer.n_seen == 0 and not self._model_takes(row):  # the first row is not predicted
                if self._failure is not None:
                    raise self._failure
                continue
            try:
                estimates = explainer.explain_one(x, label)
            except Exception as error:  # noqa: BLE001
                self._bad_model_row(row, error)
                if self._failure is not None:
                    raise self._failure from error
                continue
            if explainer.n_explained and np.isnan(estimates).any():
                raise self._nonfinite_loss(number, line)  # before the model learns the row
            try:
                predictor.learn_one(x, label)
            except Exception as error:  # noqa: BLE001
                from ipfi_cli.run.failures import failure_message

                message = failure_message(self.reader.name, number, line, values, columns, error, None)
                raise CliError(message.replace("the model failed on this row", "the model failed to learn the row")
                               ) from error  # a half-learned row cannot be skipped: stop
            self.rows += 1
            if self._due(self.rows):
                writer.write(number, estimates.tolist(), explainer.bound_array(s.delta).tolist() if s.bounds else None)
                writer.flush()
                self.last_written = number
            self.last = (number, estimates)
            self._reference, self._reference_label = x, label
            if dashboard is not None and dashboard.due():
                self._refresh()
        if self.last is not None and not isinstance(self.last[1], list):
            self.last = (self.last[0], self.last[1].tolist())

    def _write_last(self) -> None:
        """Always end with the last row's record (``--every`` may have skipped it)."""
        if self.last is not None and self.last_written != self.last[0]:
            bound = self.explainer.bound_array(self.s.delta).tolist() if self.s.bounds else None
            values = self.last[1] if isinstance(self.last[1], list) else self.last[1].tolist()
            self.writer.write(self.last[0], values, bound)
            self.last_written = self.last[0]

    # -- display --------------------------------------------------------------------------------
    def _snapshot(self) -> Any:
        from ipfi_cli.cli.live import Snapshot

        explainer = self.explainer
        now = time.monotonic()
        explained = explainer.n_explained
        loss_sum = explainer.mean_loss * explained if explained else 0.0
        if self._mark is not None:
            t0, rows0, explained0, loss0 = self._mark
            if now - t0 >= 0.2:
                rate = (self.rows - rows0) / (now - t0)
                self._rate = rate if self._rate != self._rate else 0.5 * self._rate + 0.5 * rate
                if explained > explained0:
                    recent = (loss_sum - loss0) / (explained - explained0)
                    self._recent_loss = (recent if self._recent_loss != self._recent_loss
                                         else 0.5 * self._recent_loss + 0.5 * recent)
                self._mark = (now, self.rows, explained, loss_sum)
        else:
            self._mark = (now, self.rows, explained, loss_sum)
        elapsed = now - self.first_row_time if self.first_row_time is not None else 0.0
        rate = self._rate
        if self.status not in ("running", "starting") and elapsed > 0:
            rate = self.rows / elapsed  # the whole run's average in the final table
        return Snapshot(names=explainer.names, importances=explainer.importance_array().tolist(),
                        bounds=explainer.bound_array(self.s.delta).tolist(), rows=self.rows, explained=explained,
                        skipped=self.skipped, elapsed=elapsed, rate=rate, loss=explainer.mean_loss,
                        recent_loss=self._recent_loss if self.s.learn else float("nan"), seed=self.seed,
                        learning=self.s.learn)

    def _refresh(self) -> None:
        if self.dashboard is not None:
            self.dashboard.update(self._snapshot())

    # -- metadata -------------------------------------------------------------------------------
    def _write_meta(self) -> None:
        from ipfi_cli.io.writers import write_json

        s, explainer = self.s, self.explainer
        settings = asdict(s)
        settings["seed"] = self.seed
        settings["http"] = s.http.for_meta() if s.http is not None else None
        settings["loss"] = self.loss.name if getattr(self, "loss", None) else s.loss
        settings["task"] = ("classification" if self.classification else "regression") \
            if hasattr(self, "classification") else s.task
        finished = time.time()
        meta: dict[str, Any] = {
            "command": "explain",
            "status": self.status,
            "error": self.error,
            "seed": self.seed,
            "settings": settings,
            "model": {"path": s.model, "type": type(self.loaded.model).__name__, "kind": self.loaded.kind}
            if self.loaded is not None else None,
            "input": {"source": self.reader.name if self.reader else s.input,
                      "format": self.reader.format if self.reader and self.reader._format else s.format,
                      "columns": self.input_columns},
            "model_columns": self.columns,
            "names": explainer.names if explainer is not None else None,
            "rows": {"processed": self.rows, "skipped": self.skipped,
                     "explained": explainer.n_explained if explainer is not None else 0,
                     "records_written": self.writer.records if self.writer is not None else 0},
            "final": {"importances": explainer.importances, "bounds": explainer.bounds(s.delta),
                      "mean_loss": explainer.mean_loss} if explainer is not None else None,
            "versions": library_versions(),
            "started": _dt.datetime.fromtimestamp(self.started, _dt.timezone.utc).isoformat(timespec="seconds"),
            "finished": _dt.datetime.fromtimestamp(finished, _dt.timezone.utc).isoformat(timespec="seconds"),
            "elapsed_seconds": round(finished - self.started, 3),
        }
        if s.state:
            meta["state"] = {"path": s.state, "checkpoints_saved": self.checkpoints,
                             "continued_after_input_row": self.resumed["run"]["input_rows"] if self.resumed else None,
                             "input_rows_handled": self.input_rows}
        if s.http is not None and self.loaded is not None:
            meta["http"] = self.loaded.predictor.stats()  # requests, rows sent, seconds: never a header
        write_json(s.meta, meta)



def _fingerprint(row: Any) -> int:
    """A checksum of one input row (its values, or its error), to recognise it when resuming."""
    import zlib

    text = repr(row.values) if row.error is None else row.error.message
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _file_digest(path: str) -> str:
    """SHA-256 of a file's bytes (the model a run started with)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
