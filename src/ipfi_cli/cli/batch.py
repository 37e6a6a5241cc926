"""``ipfi batch``: batch PFI of a static model on a whole file (the paper's eq. 3).

Also home of the helpers the batch-mode commands (``batch``, ``compare``) share: reading
a whole file through the same reader and row checks as ``explain`` (so one file means one
thing to every command), preparing the model's columns and labels, and writing flat
records as CSV or JSONL.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Annotated, Any, BinaryIO, Optional, Sequence

import typer

from ipfi_cli.cli.common import (
    PANEL_ESTIMATOR, CliError, DebugOpt, DelimiterOpt, DropOpt, FeaturesOpt, FormatOpt, GroupOpt,
    LoadedModel, LossOpt, NaValuesOpt, NoDefaultNaOpt, OnBadRow, OnBadRowOpt, OutputFormatOpt, OutputOpt,
    QuietOpt, SeedOpt, TargetOpt, Task, ThreadsOpt, TrustOpt, TaskOpt, VerboseOpt, choose_loss, choose_task,
    first_row_hook, label_matcher, load_predictor, model_columns, parse_groups, read_options, reporting, say,
    select_features, split_names,
)
from ipfi_cli.cli.model_options import (
    ClassesOpt, HeaderOpt, MaxRequestRowsOpt, ModelOpt, ModelUrlOpt, Protocol, ProtocolOpt, RetriesOpt, RetryWaitOpt,
    TimeoutOpt, model_source,
)

DataArg = Annotated[str, typer.Argument(
    help="CSV or JSONL file (.gz allowed), read whole; '-' reads standard input.", show_default=False,
    metavar="DATA")]
NJobsOpt = Annotated[Optional[int], typer.Option(
    "--n-jobs", "-j", help="Parallel workers (joblib) for the permutations, one feature per task; -1: all "
    "cores. Results do not depend on it.", rich_help_panel=PANEL_ESTIMATOR, show_default=False)]
BatchRepeatsOpt = Annotated[int, typer.Option(
    "--repeats", "-M", min=1, help="Random permutations of the whole data per feature (M; the paper uses 10).",
    rich_help_panel=PANEL_ESTIMATOR)]

BATCH_FIELDS = ["feature", "importance", "std", "n_repeats", "n_rows", "loss", "baseline_loss"]


# -- shared by the batch-mode commands -----------------------------------------------------------
@dataclass
class Prepared:
    """A whole data file made ready for the core: the model, its columns, rows and labels."""

    loaded: LoadedModel
    frame: Any  # pandas DataFrame of the model's columns
    targets: list[Any]
    columns: list[str]
    features: list[str] | None
    groups: dict[str, list[str]]
    loss: Any
    classification: bool
    source: str


def prepare(data: str, model: str, target: str, *, input_format: str | None, task: Task, loss: Any,
            features: Sequence[str] | None, drop: Sequence[str] | None, group: Sequence[str] | None,
            learn: bool = False, trust: Sequence[str] | None = None, on_bad_row: str = "fail",
            na_values: Sequence[str] | None = None, no_default_na: bool = False, delimiter: str | None = None,
            quiet: bool = False, verbose: bool = False, http: Any = None) -> Prepared:
    """Load the model and the whole input, check columns, options and rows, convert the labels.

    The rows go through :mod:`ipfi_cli.io.readers` and :class:`~ipfi_cli.run.rows.RowChecker`,
    as in ``ipfi explain``: the same values, the same bad rows, the same messages.
    """
    from ipfi_cli.io.readers import open_rows
    from ipfi_cli.run.rows import RowChecker, read_good_rows, rows_frame

    groups = parse_groups(group)
    options = read_options(na_values, no_default_na, delimiter)
    loaded = load_predictor(model, learn=learn, trust=trust, http=http)
    if not quiet:
        for line in loaded.warnings:
            say(line, "warning")
    classification = choose_task(loaded, task)
    chosen_loss = choose_loss(loaded, classification, loss)
    matcher = label_matcher(loaded, classification, learn)
    features, drop = split_names(features), split_names(drop)
    with open_rows(None if data == "-" else data, format=input_format, hint=False, **options) as reader:
        source = reader.name
        notes: list[str] = []
        input_columns = reader.columns
        if not input_columns:
            bad = [row.error for row in reader]
            if bad and on_bad_row == "fail":
                raise bad[0]
            raise CliError(f"{source}: no data rows" + (f" ({len(bad):,} bad row(s); the first: {bad[0]})"
                                                        if bad else ""))
        if reader.format == "jsonl":
            known = loaded.predictor.columns
            input_columns = [*(known or [c for c in input_columns if c != target]), target]
        columns = model_columns(loaded, input_columns, target, source, features=features, drop=drop,
                                groups=groups, notes=notes)
        schema = bool(loaded.predictor.columns)
        selected, groups = select_features(columns, features, drop if schema else
                                           [c for c in drop or [] if c in columns], groups)
        if not quiet:
            for line in notes:
                say(line, "note")

        def on_skip(error: Any) -> None:
            if verbose:
                say(f"skipped {error}", "warning")

        checker = RowChecker(source=source, target=target, columns=columns, to_label=matcher,
                             check_columns=reader.format == "jsonl", learn=learn, on_bad_row=on_bad_row,
                             on_skip=on_skip, on_first_row=first_row_hook(loaded, matcher, columns))
        rows = read_good_rows(reader, checker)
    if checker.skipped and not quiet:
        say(checker.skipped_summary() or "", "warning")
    unknown = matcher.unknown_summary()
    if unknown and not quiet:
        say(unknown, "warning")
    if len(rows) < 2:
        why = f"all {checker.skipped:,} row(s) were bad" if checker.skipped and not rows else \
            f"{len(rows)} good row(s); batch PFI needs at least 2"
        raise CliError(f"{source}: no data to explain: {why}")
    return Prepared(loaded, rows_frame(rows, columns), [r.label for r in rows], columns, selected, groups,
                    chosen_loss, classification, source)


def _csv_cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


class RecordWriter:
    """Flat records with a fixed header as CSV (``\\n``, floats as repr, missing empty) or JSONL (NaN as null)."""

    def __init__(self, stream: BinaryIO, fields: Sequence[str], fmt: str) -> None:
        self.stream = stream
        self.fields = list(fields)
        self.fmt = fmt
        if fmt == "csv":
            stream.write((",".join(_csv_cell(f) for f in self.fields) + "\n").encode())

    def write(self, record: dict[str, Any]) -> None:
        if self.fmt == "csv":
            self.stream.write((",".join(_csv_cell(record.get(f)) for f in self.fields) + "\n").encode())
        else:
            import orjson

            self.stream.write(orjson.dumps({f: record.get(f) for f in self.fields},
                                           option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def write_records(output: str | None, fmt: str | None, fields: Sequence[str], records: Sequence[dict[str, Any]]) -> None:
    """Write records to ``output`` (a file, atomically) or to stdout."""
    from ipfi_cli.io.writers import atomic_write, output_format_for

    chosen = output_format_for(output, fmt)

    def write(stream: BinaryIO) -> None:
        writer = RecordWriter(stream, fields, chosen)
        for record in records:
            writer.write(record)
        stream.flush()

    if output and output != "-":
        try:
            atomic_write(output, write)
        except OSError as error:
            raise CliError(f"{output}: cannot write ({error.strerror or error})") from None
    else:
        write(sys.stdout.buffer)


def stderr_console(quiet: bool) -> Any:
    from rich.console import Console

    return Console(stderr=True, quiet=quiet, highlight=False)


def number(value: float, digits: int = 4) -> str:
    return "–" if value != value else f"{value:.{digits}f}"


# -- the command ------------------------------------------------------------------------------------
def batch(
    data: DataArg,
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
    repeats: BatchRepeatsOpt = 10,
    seed: SeedOpt = None,
    n_jobs: NJobsOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    loss: LossOpt = None,
    task: TaskOpt = Task.auto,
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    on_bad_row: OnBadRowOpt = OnBadRow.fail,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Batch PFI of a static model on a whole file (the baseline iPFI approximates).

    Per feature or group: the mean increase in loss over --repeats random permutations of all rows (with the unbiased N/(N-1) scaling), its standard deviation over the repeats (ddof=1) and the number of repeats. Records go to stdout (CSV or JSONL), a table to stderr. The file is read whole.
    """
    with reporting(debug):
        model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                                   max_request_rows=max_request_rows, retries=retries, retry_wait=retry_wait,
                                   classes=classes)
        prepared = prepare(data, model, target, input_format=input_format.value if input_format else None,
                           task=task, loss=loss, features=features, drop=drop, group=group, trust=trust,
                           on_bad_row=on_bad_row.value, na_values=na_values, no_default_na=no_default_na,
                           delimiter=delimiter, quiet=quiet, verbose=verbose, http=http)
        from ipfi_cli.core import batch_pfi

        if verbose and not quiet:
            say(f"model {prepared.loaded.description}; {len(prepared.frame)} rows; columns "
                f"{', '.join(prepared.columns)}; loss {prepared.loss.name}; repeats {repeats}; seed {seed}")
        start = time.perf_counter()
        result = batch_pfi(prepared.loaded.predictor, prepared.frame, prepared.targets, prepared.columns,
                           loss=prepared.loss, n_repeats=repeats, features=prepared.features,
                           groups=prepared.groups, seed=seed, n_jobs=n_jobs)
        seconds = time.perf_counter() - start
        records = [{"feature": name, "importance": mean, "std": std, "n_repeats": result.n_repeats,
                    "n_rows": result.n_rows, "loss": prepared.loss.name, "baseline_loss": result.baseline_loss}
                   for name, mean, std in zip(result.names, result.mean, result.std)]
        write_records(output, output_format.value if output_format else None, BATCH_FIELDS, records)
        if not quiet:
            show_batch_table(result, prepared.loss.name, seconds)


def show_batch_table(result: Any, loss_name: str, seconds: float) -> None:
    from rich.table import Table

    console = stderr_console(False)
    console.print(f"batch PFI: {result.n_rows:,} rows, {result.n_repeats} repeats, {loss_name} loss "
                  f"(baseline {number(result.baseline_loss)}), {seconds:.1f} s")
    table = Table()
    table.add_column("feature")
    table.add_column("importance", justify="right")
    table.add_column("std", justify="right")
    order = sorted(range(len(result.names)), key=lambda j: -result.mean[j])
    for j in order:
        table.add_row(result.names[j], number(result.mean[j]), number(result.std[j]))
    console.print(table)
