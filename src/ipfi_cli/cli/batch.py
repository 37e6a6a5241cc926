"""``ipfi batch``: batch PFI of a static model on a whole file (the paper's eq. 3).

Also home of the helpers the batch-mode commands (``batch``, ``compare``) share: reading
a whole file with pandas (batch mode may; streaming never does), preparing the model's
columns and labels, and writing flat records as CSV or JSONL.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Annotated, Any, BinaryIO, Optional, Sequence

import typer

from ipfi_cli.cli.common import (
    PANEL_ESTIMATOR, CliError, DebugOpt, DropOpt, FeaturesOpt, FormatOpt, GroupOpt,
    LoadedModel, LossOpt, ModelOpt, OutputFormatOpt, OutputOpt, QuietOpt, SeedOpt, TargetOpt, Task, ThreadsOpt, TrustOpt,
    TaskOpt, VerboseOpt, choose_loss, choose_task, label_converter, load_predictor, model_columns, parse_groups,
    reporting, say, select_features, split_names,
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


def read_frame(path: str, input_format: str | None) -> Any:
    """The whole file as a DataFrame (CSV or JSONL, gzip allowed, '-' for stdin)."""
    import pandas as pd

    from ipfi_cli.io.readers import detect_format

    source: Any = sys.stdin.buffer if path == "-" else path
    fmt = input_format or detect_format(None if path == "-" else path) or "csv"
    if path == "-" and input_format is None:
        data = sys.stdin.buffer.read()
        if data[:2] == b"\x1f\x8b":
            import gzip

            data = gzip.decompress(data)
        fmt = "jsonl" if data.lstrip()[:1] == b"{" else "csv"
        import io

        source = io.BytesIO(data)
    try:
        if fmt == "jsonl":
            frame = pd.read_json(source, lines=True, compression="infer" if path != "-" else None)
        else:
            frame = pd.read_csv(source, compression="infer" if path != "-" else None)
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError, OSError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CliError(f"{path}: cannot read the data ({detail})") from None
    if frame.empty:
        raise CliError(f"{path}: no data rows")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def prepare(data: str, model: str, target: str, *, input_format: str | None, task: Task, loss: Any,
            features: Sequence[str] | None, drop: Sequence[str] | None, group: Sequence[str] | None,
            learn: bool = False, trust: Sequence[str] | None = None) -> Prepared:
    """Load the model and the data, check the columns and options, convert the labels."""
    groups = parse_groups(group)
    loaded = load_predictor(model, learn=learn, trust=trust)
    for line in loaded.warnings:
        say(line, "warning")
    frame = read_frame(data, input_format)
    source = "<stdin>" if data == "-" else data
    columns = model_columns(loaded, list(frame.columns), target, source)
    selected, groups = select_features(columns, split_names(features), split_names(drop), groups)
    classification = choose_task(loaded, task)
    chosen_loss = choose_loss(loaded, classification, loss)
    convert = label_converter(loaded, classification)
    targets = []
    for number, value in enumerate(frame[target].tolist(), start=1):
        try:
            targets.append(convert(value))
        except ValueError as error:
            raise CliError(f"{source}: row {number}: {error}") from None
    return Prepared(loaded, frame[columns], targets, columns, selected, groups, chosen_loss, classification, source)


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
    model: ModelOpt,
    target: TargetOpt,
    trust: TrustOpt = None,
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
        prepared = prepare(data, model, target, input_format=input_format.value if input_format else None,
                           task=task, loss=loss, features=features, drop=drop, group=group, trust=trust)
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
