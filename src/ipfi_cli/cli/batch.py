"""``ipfi batch``: batch PFI of a static model on a whole file (the paper's eq. 3)."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from ipfi_cli.cli.errors import reporting
from ipfi_cli.cli.model_options import (
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WAIT,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    HeaderOpt,
    MaxRequestRowsOpt,
    ModelOpt,
    ModelUrlOpt,
    Protocol,
    ProtocolOpt,
    RetriesOpt,
    RetryWaitOpt,
    TimeoutOpt,
    model_source,
)
from ipfi_cli.cli.options import (
    PANEL_ESTIMATOR,
    DataArg,
    DebugOpt,
    DelimiterOpt,
    DropOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    LossOpt,
    NaValuesOpt,
    NJobsOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    QuietOpt,
    SeedOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    draw_seed,
    input_spec,
    selection,
    split_names,
    value,
)
from ipfi_cli.core.params import DEFAULT_REPEATS

BatchRepeatsOpt = Annotated[int, typer.Option(
    "--repeats", "-M", min=1, help="Random permutations of the whole data per feature (M; the paper uses 10).",
    rich_help_panel=PANEL_ESTIMATOR)]

BATCH_FIELDS = ["feature", "importance", "std", "n_repeats", "n_rows", "loss", "baseline_loss"]


def batch(
    data: DataArg,
    model: ModelOpt = None,
    target: TargetOpt = ...,  # type: ignore[assignment]
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    max_request_rows: MaxRequestRowsOpt = DEFAULT_MAX_REQUEST_ROWS,
    retries: RetriesOpt = DEFAULT_RETRIES,
    retry_wait: RetryWaitOpt = DEFAULT_RETRY_WAIT,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    repeats: BatchRepeatsOpt = DEFAULT_REPEATS,
    seed: SeedOpt = None,
    n_jobs: NJobsOpt = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", help="Run the permutations on a local Dask cluster of N worker processes (127.0.0.1); the "
        "same seed gives the same numbers. Needs ipfi-cli[dask].", show_default=False, metavar="N")] = None,
    scheduler: Annotated[Optional[str], typer.Option(
        "--scheduler", help="Run the permutations on a running Dask cluster (tcp://HOST:PORT); its workers need "
        "ipfi and the model's libraries.", show_default=False, metavar="ADDRESS")] = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    loss: LossOpt = None,
    task: TaskOpt = "auto",
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    text: TextOpt = None,
    on_bad_row: OnBadRowOpt = "fail",
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
        from ipfi_cli.cli.ui import TerminalReporter, show_batch_table
        from ipfi_cli.core import batch_pfi
        from ipfi_cli.io.writers import write_records
        from ipfi_cli.models.loading import load_predictor
        from ipfi_cli.run.dataset import load_dataset

        inputs = input_spec(data, input_format, na_values, no_default_na, delimiter, text)
        chosen = selection(target, task, loss, features, drop, group)
        seed = draw_seed(seed)
        model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                                   max_request_rows=max_request_rows, retries=retries, retry_wait=retry_wait,
                                   classes=classes)
        reporter = TerminalReporter(live=False, quiet=quiet)
        dataset = load_dataset(load_predictor(model, trust=split_names(trust), http=http), inputs, chosen, reporter,
                               on_bad_row=value(on_bad_row), verbose=verbose)
        if verbose:
            reporter.message(f"model {dataset.loaded.description}; {len(dataset.frame)} rows; columns "
                             f"{', '.join(dataset.columns)}; loss {dataset.loss.name}; repeats {repeats}; seed {seed}")
        from ipfi_cli.run.distributed import dask_client, run_on

        with dask_client(workers, scheduler) as client:
            start = time.perf_counter()
            result = run_on(client, batch_pfi, dataset.loaded.predictor, dataset.frame, dataset.targets,
                            dataset.columns, loss=dataset.loss, n_repeats=repeats, features=dataset.features,
                            groups=dataset.groups, seed=seed, n_jobs=n_jobs)
            seconds = time.perf_counter() - start
        records = [{"feature": name, "importance": mean, "std": std, "n_repeats": result.n_repeats,
                    "n_rows": result.n_rows, "loss": dataset.loss.name, "baseline_loss": result.baseline_loss}
                   for name, mean, std in zip(result.names, result.mean, result.std)]
        write_records(output, value(output_format), BATCH_FIELDS, records)
        if not quiet:
            show_batch_table(result, dataset.loss.name, seconds)
