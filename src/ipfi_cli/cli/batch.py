"""``ipfi batch``: batch PFI of a static model on a whole file (the paper's eq. 3)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.errors import reporting, usage_error
from ipfi_cli.cli.learn_options import model_spec
from ipfi_cli.cli.model_options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ANSWER_MB,
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_MODEL_WAIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    ConcurrencyOpt,
    HeaderOpt,
    MaxAnswerMbOpt,
    MaxRequestRowsOpt,
    ModelOpt,
    ModelUrlOpt,
    ModelWaitOpt,
    Protocol,
    ProtocolOpt,
    RetriesOpt,
    TimeoutOpt,
)
from ipfi_cli.cli.monitor_options import (
    MetricsLabelOpt,
    MetricsTextfileOpt,
    PushgatewayOpt,
    PushJobOpt,
    PushLabelOpt,
    monitor_settings,
)
from ipfi_cli.cli.options import (
    DEFAULT_MAX_ROWS,
    PANEL_ESTIMATOR,
    AllowUnknownCategoriesOpt,
    DataArg,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    DropOpt,
    EmptyCoalitionOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    LossOpt,
    MaxRowsOpt,
    MethodName,
    NaValuesOpt,
    NJobsOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    PermutationsOpt,
    QuietOpt,
    SchedulerOpt,
    SeedOpt,
    SkipInitialSpaceOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    WorkersOpt,
    check_outputs,
    draw_seed,
    input_spec,
    selection,
    value,
)
from ipfi_cli.core.params import DEFAULT_REPEATS
from ipfi_cli.io.targets import data_files
from ipfi_cli.run.settings import DEFAULT_PUSH_JOB
from ipfi_cli.run.signals import hold_until_exit

BatchRepeatsOpt = Annotated[int, typer.Option(
    "--repeats", "-M", min=1, help="Random permutations of the whole data per feature (M; the paper uses 10).",
    rich_help_panel=PANEL_ESTIMATOR)]

BATCH_FIELDS = ["feature", "importance", "std", "n_repeats", "n_rows", "loss", "baseline_loss"]
SAGE_FIELDS = ["feature", "importance", "std_error", "n_permutations", "n_rows", "loss", "explained_loss"]


def batch(
    data: DataArg,
    model: ModelOpt = None,
    target: TargetOpt = None,
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    max_request_rows: MaxRequestRowsOpt = DEFAULT_MAX_REQUEST_ROWS,
    max_answer_mb: MaxAnswerMbOpt = DEFAULT_MAX_ANSWER_MB,
    retries: RetriesOpt = DEFAULT_RETRIES,
    model_wait: ModelWaitOpt = DEFAULT_MODEL_WAIT,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    repeats: BatchRepeatsOpt = DEFAULT_REPEATS,
    method: Annotated[MethodName, typer.Option(
        "--method", help="pfi: batch permutation feature importance; sage: batch SAGE (Shapley values of the loss, "
        "the baseline of explain --method sage).", rich_help_panel=PANEL_ESTIMATOR)] = "pfi",
    permutations: PermutationsOpt = 2000,
    background: Annotated[int, typer.Option(
        "--background", min=1, help="With --method sage: rows drawn (with --seed) whose values stand in for "
        "absent features: --inner K of them drawn per coalition, or with --inner all every coalition's prediction "
        "averaged over all of them.", rich_help_panel=PANEL_ESTIMATOR)] = 64,
    inner: Annotated[Optional[str], typer.Option(
        "--inner", help="With --method sage: draw K background rows per coalition, the game explain --method sage "
        "--inner K estimates (its baseline). Default: explain's, 2 with the squared loss (both then estimate Covert "
        "et al.'s SAGE), else 1 (the Shapley values of the loss under one random imputation). all: every "
        "background row averaged (Covert et al.'s SAGE, as sage-importance's MarginalImputer).",
        rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="K|all")] = None,
    empty_coalition: EmptyCoalitionOpt = "imputed",
    max_rows: MaxRowsOpt = DEFAULT_MAX_ROWS,
    seed: SeedOpt = None,
    n_jobs: NJobsOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    loss: LossOpt = None,
    task: TaskOpt = "auto",
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    decimal: DecimalOpt = None,
    text: TextOpt = None,
    skip_initial_space: SkipInitialSpaceOpt = False,
    allow_unknown_categories: AllowUnknownCategoriesOpt = False,
    on_bad_row: OnBadRowOpt = "fail",
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    metrics_textfile: MetricsTextfileOpt = None,
    metrics_label: MetricsLabelOpt = None,
    pushgateway: PushgatewayOpt = None,
    push_job: PushJobOpt = DEFAULT_PUSH_JOB,
    push_label: PushLabelOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Batch PFI of a static model on a whole file (the baseline iPFI approximates).

    Per feature or group: the mean increase in loss over --repeats random permutations of all rows (with the unbiased N/(N-1) scaling), its standard deviation over the repeats (ddof=1) and the number of repeats. Records go to stdout (CSV or JSONL), a table to stderr. The file is read whole; at most --max-rows of its rows are kept (a uniform sample of them all beyond that, said in a note).

    With --method sage: batch SAGE (Covert et al.'s permutation estimator, the baseline of explain --method sage): per feature its Shapley value of the loss, its standard error, and the explained loss the values add up to.
    """
    monitor = monitor_settings(metrics_textfile=metrics_textfile, metrics_label=metrics_label, pushgateway=pushgateway,
                               push_job=push_job, push_label=push_label)
    check_outputs({"--output": output, "--metrics-textfile": metrics_textfile},
                  {"DATA": data_files(data), "--model": model}, written_at_end=("--output", "--metrics-textfile"))
    started = time.time()
    with reporting(debug):
        from ipfi_cli.cli.ui import TerminalReporter, show_batch_table
        from ipfi_cli.core import batch_pfi
        from ipfi_cli.io.writers import write_records
        from ipfi_cli.models.loading import load_predictor
        from ipfi_cli.run.dataset import load_dataset

        inputs = input_spec(data, input_format, na_values, no_default_na, delimiter, text, decimal,
                            skip_initial_space)
        chosen = selection(target, task, loss, features, drop, group, allow_unknown_categories)
        if value(method) != "sage":
            from ipfi_cli.run.distributed import check_dask_options

            check_dask_options(workers, scheduler)  # a malformed address before the data is read
        inner_count = parse_inner(inner)  # before the data is read
        seed = draw_seed(seed)
        spec = model_spec(model, model_url, protocol, header, timeout, max_request_rows, max_answer_mb, retries,
                          model_wait, concurrency, classes, trust, learn=False, save_model=None)
        model, http = spec.path, spec.http
        reporter = TerminalReporter(live=False, quiet=quiet)
        dataset = load_dataset(load_predictor(model, trust=spec.trust, http=http), inputs, chosen, reporter,
                               on_bad_row=value(on_bad_row), verbose=verbose, max_rows=max_rows, seed=seed)
        if verbose:
            reporter.message(f"model {dataset.loaded.description}; {len(dataset.frame)} rows; columns "
                             f"{', '.join(dataset.columns)}; loss {dataset.loss.name}; repeats {repeats}; seed {seed}")
        if value(method) == "sage":
            if workers is not None or scheduler is not None:
                raise usage_error("batch SAGE runs in this process; --workers and --scheduler spread batch PFI",
                                  "--method")
            _batch_sage(dataset, permutations, background, seed, output, value(output_format), quiet, inner_count,
                        value(empty_coalition), reporter)
            return
        from ipfi_cli.models.hashing import depends_on_hashing, workers_must_hash_alike
        from ipfi_cli.run.distributed import dask_client, dask_runner

        hashing = workers_must_hash_alike(model)
        predictor = dataset.loaded.predictor
        # every process, this one too, predicts with a copy of the same bytes (a served model's numbers
        # are the server's: its requests are counted here)
        if http is None and depends_on_hashing(model):
            from ipfi_cli.models.snapshot import Snapshot

            predictor = Snapshot(predictor)
        with dask_client(workers, scheduler, hashing=hashing) as client:
            start = time.perf_counter()
            result = batch_pfi(predictor, dataset.frame, dataset.targets, dataset.columns,
                               loss=dataset.loss, n_repeats=repeats, features=dataset.features,
                               groups=dataset.groups, seed=seed, n_jobs=n_jobs,
                               runner=None if client is None else dask_runner(client, hashing=hashing))
            seconds = time.perf_counter() - start
        records = [{"feature": name, "importance": mean, "std": std, "n_repeats": result.n_repeats,
                    "n_rows": result.n_rows, "loss": dataset.loss.name, "baseline_loss": result.baseline_loss}
                   for name, mean, std in zip(result.names, result.mean, result.std)]
        write_records(output, value(output_format), BATCH_FIELDS, records)
        hold_until_exit()  # the result is written: a Ctrl-C now would only cut the table short
        from ipfi_cli.run.checks import all_zero_warning

        zero = all_zero_warning(result.mean, result.n_rows)
        if zero:
            reporter.message(zero, "warning")
        if monitor is not None:
            from ipfi_cli.run.metrics import batch_families, served_families
            from ipfi_cli.run.monitor import publish
            from ipfi_cli.run.setup import served_model

            families = batch_families(list(result.names), list(map(float, result.mean)), list(map(float, result.std)),
                                      result.n_rows, result.baseline_loss, dataset.loss.name)
            served = served_model(dataset.loaded)
            if served is not None:  # the served model's requests, as explain exports them
                families += served_families(served.stats(), served.latency(), not served.is_down)
            publish(monitor, families, started)
        if not quiet:
            show_batch_table(result, dataset.loss.name, seconds)
            _say_requests(dataset, reporter)


def _say_requests(dataset: Any, reporter: Any) -> None:
    """A served model's requests, in one line (``ipfi explain`` records them in ``--meta``)."""
    from ipfi_cli.run.setup import served_model

    served = served_model(dataset.loaded)
    if served is None:
        return
    stats = served.stats()
    reporter.message(f"the served model answered {stats['requests']:,} request(s) ({stats['rows_sent']:,} rows, "
                     f"{stats['seconds']:.1f} s); {stats['retried']:,} tried again, "
                     f"{stats['waited_seconds']:.1f} s waiting for it", "note")


def _batch_sage(dataset: Any, permutations: int, background: int, seed: int | None, output: str | None,
                output_format: str | None, quiet: bool, inner: int | str | None, empty: str, reporter: Any) -> None:
    import numpy as np

    from ipfi_cli.cli.ui import show_sage_table
    from ipfi_cli.core.batch import as_block
    from ipfi_cli.core.sage import batch_sage
    from ipfi_cli.io.writers import write_records

    if dataset.features is not None and set(dataset.features) != set(dataset.columns) - {
            c for members in (dataset.groups or {}).values() for c in members}:
        raise usage_error("SAGE shares the loss among all the model's inputs: drop --features (--group is fine)",
                          "--features")
    n_inner = sage_inner(inner, dataset.loss, empty)
    rows = as_block(dataset.frame, dataset.columns)
    picked = np.random.default_rng(np.random.SeedSequence(seed)).choice(len(rows), min(background, len(rows)),
                                                                        replace=False)
    start = time.perf_counter()
    result = batch_sage(dataset.loaded.predictor, rows, dataset.targets, dataset.columns, loss=dataset.loss,
                        n_permutations=permutations, background=rows[np.sort(picked)], groups=dataset.groups,
                        seed=seed, n_inner=n_inner, empty=empty)
    seconds = time.perf_counter() - start
    records = [{"feature": name, "importance": float(v), "std_error": float(se), "n_permutations": permutations,
                "n_rows": len(rows), "loss": dataset.loss.name, "explained_loss": result.explained_loss}
               for name, v, se in zip(result.names, result.values, result.std_errors)]
    write_records(output, output_format, SAGE_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the table short
    from ipfi_cli.run.checks import all_zero_warning

    zero = all_zero_warning(result.values, len(rows))
    if zero:
        reporter.message(zero, "warning")
    if not quiet:
        show_sage_table(result, dataset.loss.name, len(rows), seconds, sage_game(n_inner, len(picked), empty))


def parse_inner(inner: str | None) -> int | str | None:
    """``--inner``: a number of background rows drawn per coalition, ``"all"`` (every background row
    averaged, Covert et al.'s game) or ``None`` (not given: explain's default, see :func:`sage_inner`)."""
    from ipfi_cli.text import quoted

    if inner is None:
        return None
    if inner.strip().lower() == "all":
        return "all"
    try:
        count = int(inner.strip())
    except ValueError:
        raise usage_error(f"expected a number of background rows per coalition or all, got {quoted(inner)}",
                          "--inner") from None
    if count < 1:
        raise usage_error(f"at least 1 background row per coalition, got {count}", "--inner")
    return count


def sage_inner(inner: int | str | None, loss: Any, empty: str) -> int | None:
    """Background rows drawn per coalition: ``--inner`` as parsed, by default explain's (so that both
    commands estimate one game); ``None`` for ``all``."""
    from ipfi_cli.core.sage_game import default_inner

    if inner is None:
        return default_inner(loss, empty)
    return None if inner == "all" else int(inner)


def sage_game(n_inner: int | None, n_background: int, empty: str) -> str:
    """The game a batch SAGE estimated, as its table says it."""
    if n_inner is None:
        return f"every one of {n_background:,} background rows averaged per coalition (Covert et al.'s game)"
    drawn = f"{n_inner} background row{'s' if n_inner > 1 else ''} of {n_background:,} drawn per coalition"
    if empty == "imputed":
        return f"{drawn} (explain --method sage --inner {n_inner}'s game)"
    return f"{drawn}, no feature scored by the mean prediction (explain --inner {n_inner} --empty-coalition mean's game)"
