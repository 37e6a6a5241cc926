"""``ipfi explain``: stream rows in, write importance traces out.

This module only parses options: :class:`~ipfi_cli.run.explain.ExplainSession` does the
work, reporting through :class:`~ipfi_cli.cli.ui.TerminalReporter`, and its status becomes
the exit code here. Heavy libraries are imported inside the run, so ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ipfi_cli.cli.config import running_config
from ipfi_cli.cli.errors import EXIT_CHANGED, EXIT_ERROR, interrupted, reporting, usage_error
from ipfi_cli.cli.explain_checks import (
    check_bounds_options,
    check_change_options,
    check_files,
    check_label_options,
    check_state_options,
    half_life_seconds_of,
    key_columns_of,
)
from ipfi_cli.cli.explainer_options import ConditionalSamplerOpt, RemovalOpt, SmoothingOpt
from ipfi_cli.cli.model_options import (
    DEFAULT_MAX_ANSWER_MB,
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WAIT,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    HeaderOpt,
    MaxAnswerMbOpt,
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
from ipfi_cli.cli.monitor_options import (
    MetricsAddrOpt,
    MetricsLabelOpt,
    MetricsPortOpt,
    MetricsTextfileOpt,
    PushgatewayOpt,
    PushJobOpt,
    PushLabelOpt,
    WebhookCooldownOpt,
    WebhookFormatOpt,
    WebhookOpt,
    WebhookRetriesOpt,
    monitor_settings,
)
from ipfi_cli.cli.options import (
    PANEL_DISPLAY,
    PANEL_ESTIMATOR,
    PANEL_INPUT,
    PANEL_MODEL,
    PANEL_OUTPUT,
    PICKLE_WARNING,
    AllowUnknownCategoriesOpt,
    BoundsMethod,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    DropOpt,
    EmptyCoalitionOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    InnerOpt,
    InputArg,
    LossOpt,
    MethodName,
    NaValuesOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    QuietOpt,
    RepeatsOpt,
    Sampling,
    SeedOpt,
    SkipInitialSpaceOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    input_spec,
    parse_groups,
    pfi_params,
    selection,
    split_names,
    value,
)
from ipfi_cli.cli.ui import TerminalReporter, live_display_allowed, stream_is_terminal
from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLING
from ipfi_cli.run.explain import ExplainSession, interrupted_before_rows, new_session
from ipfi_cli.run.settings import (
    CHECKPOINT_EVERY,
    DEFAULT_LABEL_WAIT,
    DEFAULT_METRICS_ADDR,
    DEFAULT_PUSH_JOB,
    DEFAULT_WEBHOOK_COOLDOWN,
    DEFAULT_WEBHOOK_FORMAT,
    DEFAULT_WEBHOOK_RETRIES,
    ExplainSettings,
    RunStatus,
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
PANEL_CHANGES = "Change detection"
PANEL_LABELS = "Late labels"
PANEL_KEYS = "One explainer per key"


def explain(
    input: InputArg = None,
    model: ModelOpt = None,
    target: TargetOpt = ...,  # type: ignore[assignment]
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    max_request_rows: MaxRequestRowsOpt = DEFAULT_MAX_REQUEST_ROWS,
    max_answer_mb: MaxAnswerMbOpt = DEFAULT_MAX_ANSWER_MB,
    retries: RetriesOpt = DEFAULT_RETRIES,
    retry_wait: RetryWaitOpt = DEFAULT_RETRY_WAIT,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    decimal: DecimalOpt = None,
    text: TextOpt = None,
    skip_initial_space: SkipInitialSpaceOpt = False,
    allow_unknown_categories: AllowUnknownCategoriesOpt = False,
    task: TaskOpt = "auto",
    loss: LossOpt = None,
    learn: Annotated[bool, typer.Option(
        "--learn", help="Prequential learning: explain each row with the current model, then learn it "
        "(river models, learn_one).", rich_help_panel=PANEL_MODEL)] = False,
    save_model: Annotated[Optional[str], typer.Option(
        "--save-model", help="With --learn: write the learned model here at the end (joblib, atomic).",
        rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH")] = None,
    method: Annotated[MethodName, typer.Option(
        "--method", help="The explaining method: pfi, incremental permutation feature importance (how much the "
        "loss grows without a feature); sage, incremental SAGE (the loss the model explains shared out among the "
        "features: the values add up to the explained loss, said at the end and in --meta).",
        rich_help_panel=PANEL_ESTIMATOR)] = "pfi",
    removal: RemovalOpt = "marginal",
    conditional_sampler: ConditionalSamplerOpt = "gaussian",
    smoothing: SmoothingOpt = "exponential",
    inner: InnerOpt = None,
    empty_coalition: EmptyCoalitionOpt = "imputed",
    alpha: Annotated[float, typer.Option(
        "--alpha", "-a", help="Smoothing: the weight of the newest row, in (0, 1]. The estimate averages "
        "roughly the last 2/alpha rows.", rich_help_panel=PANEL_ESTIMATOR)] = DEFAULT_ALPHA,
    time_column: Annotated[Optional[str], typer.Option(
        "--time-column", help="With --half-life: the column of each row's event time (seconds, or ISO 8601 "
        "text such as 2024-05-01 13:00:00, UTC unless it has an offset).", rich_help_panel=PANEL_ESTIMATOR,
        show_default=False, metavar="COL")] = None,
    half_life: Annotated[Optional[str], typer.Option(
        "--half-life", help="Smooth by event time instead of by rows (forward decay): a row half-life older "
        "weighs half as much, whatever the rows' rate (90s, 30m, 1h, 2d). Replaces --alpha; the state of "
        "shards merges (ipfi merge).", rich_help_panel=PANEL_ESTIMATOR, show_default=False,
        metavar="DURATION")] = None,
    running_mean: Annotated[bool, typer.Option(
        "--running-mean", help="Every row weighs alike (the static setting's estimator) instead of --alpha's "
        "smoothing; the state of shards merges (ipfi merge).", rich_help_panel=PANEL_ESTIMATOR)] = False,
    repeats: RepeatsOpt = DEFAULT_REPEATS,
    sampling: Annotated[Sampling, typer.Option(
        "--sampling", help="Which earlier rows replace a feature's value: geometric prefers recent rows "
        "(follows drift); uniform treats all rows alike.", rich_help_panel=PANEL_ESTIMATOR)] = DEFAULT_SAMPLING,
    reservoir_size: Annotated[int, typer.Option(
        "--reservoir-size", min=1, help="Earlier rows remembered per permutation.",
        rich_help_panel=PANEL_ESTIMATOR)] = DEFAULT_RESERVOIR_SIZE,
    seed: SeedOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    every: Annotated[int, typer.Option(
        "--every", "-e", min=1, help="Write a record every N explained rows (rows skipped as bad are not counted; the last row is always "
        "written).",
        rich_help_panel=PANEL_OUTPUT)] = 1,
    bounds: Annotated[bool, typer.Option(
        "--bounds", help="Add a <feature>_bound column per feature: the confidence half-width at level "
        "--delta, by --bounds-method.", rich_help_panel=PANEL_OUTPUT)] = False,
    bounds_method: Annotated[BoundsMethod, typer.Option(
        "--bounds-method", help="How bounds are computed: chebyshev (the paper's; assumes independent rows, "
        "no distribution; conservative), normal (independent rows, normal quantile; too narrow when reservoir "
        "rows are reused for long) or realisations (calibrated: counts each row as explained row and as the "
        "replacement drawn for later rows, and the spread of the M realisations; needs --repeats 2 or more).",
        rich_help_panel=PANEL_OUTPUT)] = "chebyshev",
    delta: Annotated[float, typer.Option(
        "--delta", help="Bounds hold with probability 1 - delta (approximately; see the docs); from 1e-10. "
        "Bounds need --alpha at most 0.5.",
        rich_help_panel=PANEL_OUTPUT)] = 0.05,
    meta: Annotated[Optional[str], typer.Option(
        "--meta", help="Write a JSON sidecar here at the end: seed, all settings, library versions, rows "
        "seen, final importances.", rich_help_panel=PANEL_OUTPUT, show_default=False, metavar="FILE")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="At most this many rows per model call for a static model, and per "
        "micro-batch (rows already waiting are batched; a slow stream is never held back; with --learn the "
        "model still learns row by row).", rich_help_panel=PANEL_INPUT)] = 1000,
    on_bad_row: OnBadRowOpt = "fail",
    state: Annotated[Optional[str], typer.Option(
        "--state", help="Keep the run's whole state in this file (the explainer, the counters, where the traces "
        "end and, with --learn, the model), saved atomically every --checkpoint-every rows and at exit. If the "
        "file exists the run continues from it: run the same command again. The file is plain data (JSON and NumPy "
        "arrays, checksummed): loading it runs no code. With --learn the learned model is saved beside it as a "
        "pickle (STATE.model-*), which the state vouches for by its SHA-256.", rich_help_panel=PANEL_STATE, show_default=False, metavar="PATH")] = None,
    checkpoint_every: Annotated[int, typer.Option(
        "--checkpoint-every", min=1, help="With --state: save the state after this many more input rows (at the "
        "end of the micro-batch that reaches them: --batch-size rows at most, also with --learn).", rich_help_panel=PANEL_STATE)] = CHECKPOINT_EVERY,
    skip_seen: Annotated[bool, typer.Option(
        "--skip-seen/--no-skip-seen", help="When continuing from --state: the input is the whole stream again and "
        "the rows the state has read are skipped (the last one is checked), or, with --no-skip-seen, the input "
        "holds only the rows after them (row numbers continue).", rich_help_panel=PANEL_STATE)] = True,
    detect: Annotated[bool, typer.Option(
        "--detect", help="Watch for changes: an ADWIN test per feature (and on the model's loss) on the per-row "
        "contributions, with a false-alarm bound (see --change-delta). Changes are listed at the end and marked "
        "in the live table. Implied by the other options of this panel.", rich_help_panel=PANEL_CHANGES)] = False,
    change_delta: Annotated[float, typer.Option(
        "--change-delta", help="ADWIN's confidence: the false-alarm probability of one test (smaller: fewer false "
        "alarms, later detections).", rich_help_panel=PANEL_CHANGES)] = 0.002,
    min_change: Annotated[float, typer.Option(
        "--min-change", min=0.0, help="The smallest change of a mean importance (or loss) worth an event, in "
        "importance units.", rich_help_panel=PANEL_CHANGES)] = 0.01,
    events: Annotated[Optional[str], typer.Option(
        "--events", help="Write each change as one JSON line, at once, to FILE ('-': stderr).",
        rich_help_panel=PANEL_CHANGES, show_default=False, metavar="FILE")] = None,
    reference: Annotated[Optional[str], typer.Option(
        "--reference", help="An importance vector to compare the ranking with: the CSV of `ipfi batch`, or a trace "
        "file (its last record). An event when nDCG@k falls below --ndcg-threshold.",
        rich_help_panel=PANEL_CHANGES, show_default=False, metavar="FILE")] = None,
    ndcg_threshold: Annotated[float, typer.Option(
        "--ndcg-threshold", help="With --reference: the nDCG@k below which the ranking has departed (Clarify's 0.9).",
        rich_help_panel=PANEL_CHANGES)] = 0.9,
    top_k: Annotated[Optional[int], typer.Option(
        "--top-k", min=1, help="With --reference: how many top features the nDCG scores (default: 10, or all if "
        "fewer).", rich_help_panel=PANEL_CHANGES, show_default=False)] = None,
    fail_on_change: Annotated[bool, typer.Option(
        "--fail-on-change", help="Exit with code 3 after the stream ends if a change was detected "
        "(`ipfi explain ... --fail-on-change || page-oncall`).", rich_help_panel=PANEL_CHANGES)] = False,
    stop_on_change: Annotated[bool, typer.Option(
        "--stop-on-change", help="Stop at the first change (after flushing, and with --state saving the state) and "
        "exit with code 3.", rich_help_panel=PANEL_CHANGES)] = False,
    metrics_port: MetricsPortOpt = None,
    metrics_addr: MetricsAddrOpt = DEFAULT_METRICS_ADDR,
    metrics_textfile: MetricsTextfileOpt = None,
    metrics_label: MetricsLabelOpt = None,
    pushgateway: PushgatewayOpt = None,
    push_job: PushJobOpt = DEFAULT_PUSH_JOB,
    push_label: PushLabelOpt = None,
    webhook: WebhookOpt = None,
    webhook_format: WebhookFormatOpt = DEFAULT_WEBHOOK_FORMAT,
    webhook_cooldown: WebhookCooldownOpt = DEFAULT_WEBHOOK_COOLDOWN,
    webhook_retries: WebhookRetriesOpt = DEFAULT_WEBHOOK_RETRIES,
    by: Annotated[Optional[str], typer.Option(
        "--by", help="One explainer (and change detector) per value of these key columns (COL or COL,COL): each "
        "key's traces are those of a run on its rows alone with the key columns dropped and the same --seed. "
        "Records start with the key "
        "columns, then row: the row's place among its key's rows; --every counts each key's rows. Key columns are "
        "not features. A row with no value in one is a bad row (see --on-bad-row). The summary is per key (every "
        "key in --meta). Not with --learn, --labels or the metrics/webhook options.",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="COL[,COL]")] = None,
    max_keys: Annotated[Optional[int], typer.Option(
        "--max-keys", min=1, help="With --by: keep at most N keys' explainers live. The least recently seen are "
        "saved as plain data (their state's bytes, in files of a temporary folder: about 75 kB a key for 9 features, --repeats 10, "
        "a reservoir of 100; more with --detect) and rebuilt when the key comes back (about 3 ms for an eviction "
        "and a return): the same bytes out, the memory of N explainers, more time when keys alternate often.",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="N")] = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", min=1, help="With --by: spread the keys over a local Dask cluster of N worker processes "
        "(127.0.0.1), one shard of keys each; the same bytes as one process. The input must be a file, folder or "
        "glob (each worker reads it). Not with --state or --stop-on-change yet. Needs ipfi-cli[dask].",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="N")] = None,
    scheduler: Annotated[Optional[str], typer.Option(
        "--scheduler", help="With --by: spread the keys over a running Dask cluster (tcp://HOST:PORT), one shard "
        "per worker; the workers need ipfi and the model's libraries and read the input and model files "
        "themselves.", rich_help_panel=PANEL_KEYS, show_default=False, metavar="ADDRESS")] = None,
    labels: Annotated[Optional[str], typer.Option(
        "--labels", help="Labels that arrive late: read the --target column from this file or named pipe (CSV or "
        "JSONL, with the --id column too), joined to the input's rows by --id. Each row waits for its label and rows "
        "are explained in the input's order, so the traces are those of the same rows with their labels inline.",
        rich_help_panel=PANEL_LABELS, show_default=False, metavar="SOURCE")] = None,
    id_column: Annotated[Optional[str], typer.Option(
        "--id", help="With --labels: the column that identifies a row in both streams (read as text).",
        rich_help_panel=PANEL_LABELS, show_default=False, metavar="COL")] = None,
    label_wait: Annotated[str, typer.Option(
        "--label-wait", help="With --labels: how long a row waits for its label, in rows (at most N rows wait, and "
        "N labels ahead of their rows) or seconds (30s, 5m). A row whose label does not come is counted, never "
        "explained.", rich_help_panel=PANEL_LABELS, metavar="N|SECONDS")] = DEFAULT_LABEL_WAIT,
    labels_follow: Annotated[bool, typer.Option(
        "--labels-follow", help="With --labels: the labels file grows while ipfi runs; read it as `tail -f` does.",
        rich_help_panel=PANEL_LABELS)] = False,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
    no_live: Annotated[bool, typer.Option(
        "--no-live", help="No live table on stderr; a summary table at the end instead.",
        rich_help_panel=PANEL_DISPLAY)] = False,
    debug: DebugOpt = False,
) -> None:
    try:  # the checks of the options: a Ctrl-C here leaves what there was
        if quiet and verbose:
            raise usage_error("use either --quiet or --verbose, not both", "--quiet")
        params = pfi_params(alpha, repeats, sampling, reservoir_size)
        check_bounds_options(bounds=bounds, bounds_method=value(bounds_method), delta=delta, repeats=repeats,
                             method=value(method), smoothing=value(smoothing), running_mean=running_mean,
                             half_life=half_life, alpha=params.alpha)
        if save_model and not learn:
            raise usage_error("needs --learn (without it the model does not change)", "--save-model")
        check_state_options(state=state, checkpoint_every=checkpoint_every, skip_seen=skip_seen)
        check_files(input=input, model=model, labels=labels, reference=reference, state=state, output=output, meta=meta,
                    events=events, save_model=save_model, metrics_textfile=metrics_textfile)
        key_columns = key_columns_of(by, max_keys)
        check_label_options(labels=labels, id_column=id_column, labels_follow=labels_follow, label_wait=label_wait,
                            state=state, input=input)
        half_life_seconds = half_life_seconds_of(time_column, half_life, running_mean)
        check_change_options(change_delta, ndcg_threshold)
        from ipfi_cli.run.watch import WatchSettings

        monitor = monitor_settings(metrics_port=metrics_port, metrics_addr=metrics_addr, metrics_textfile=metrics_textfile,
                                   metrics_label=metrics_label, pushgateway=pushgateway, push_job=push_job,
                                   push_label=push_label, webhook=webhook, webhook_format=webhook_format,
                                   webhook_cooldown=webhook_cooldown, webhook_retries=webhook_retries)
        watching = detect or bool(events or reference or fail_on_change or stop_on_change or webhook)
        watch = WatchSettings(delta=change_delta, min_change=min_change, events=events, reference=reference,
                              ndcg_threshold=ndcg_threshold, top_k=top_k, fail_on_change=fail_on_change,
                              stop_on_change=stop_on_change) if watching else None

        live = (not no_live and live_display_allowed(quiet)
                and not (output in (None, "-") and stream_is_terminal(sys.stdout)))
    except KeyboardInterrupt:
        raise interrupted(interrupted_before_rows(None, state)) from None
    session: ExplainSession | None = None
    with reporting(debug):
        try:
            inputs = input_spec(input, input_format, na_values, no_default_na, delimiter, text, decimal,
                                skip_initial_space)
            chosen = selection(target, task, loss, features, drop, group, allow_unknown_categories)
            model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                                       max_request_rows=max_request_rows, max_answer_mb=max_answer_mb,
                                       retries=retries, retry_wait=retry_wait, classes=classes)
            settings = ExplainSettings(
                model=model, target=chosen.target, input=inputs.path, trust=split_names(trust), format=inputs.format,
                na_values=na_values, no_default_na=inputs.no_default_na, delimiter=inputs.delimiter,
                decimal=inputs.decimal, skip_initial_space=inputs.skip_initial_space,
                allow_unknown_categories=allow_unknown_categories,
                text=split_names(text), task=chosen.task, loss=chosen.loss, learn=learn, save_model=save_model,
                method=value(method), alpha=params.alpha, time_column=time_column, half_life=half_life_seconds,
                running_mean=running_mean, repeats=params.n_repeats,
                smoothing=value(smoothing), removal=value(removal), conditional_sampler=value(conditional_sampler),
                inner=inner, empty_coalition=value(empty_coalition), sampling=params.sampling,
                reservoir_size=params.reservoir_size, seed=seed, features=split_names(features), drop=split_names(drop),
                groups=parse_groups(group), output=output, output_format=value(output_format),
                every=every, bounds=bounds, delta=delta, bounds_method=value(bounds_method), meta=meta,
                batch_size=batch_size, on_bad_row=value(on_bad_row),
                verbose=verbose, quiet=quiet, live=not no_live, debug=debug, state=state,
                checkpoint_every=checkpoint_every, skip_seen=skip_seen, watch=watch, http=http,
                monitor=monitor, labels=labels, id_column=id_column, label_wait=label_wait, labels_follow=labels_follow,
                by=key_columns, max_keys=max_keys, workers=workers, scheduler=scheduler, config=running_config())
            reporter = TerminalReporter(live=live, quiet=quiet)
            if key_columns and (workers is not None or scheduler is not None):
                from ipfi_cli.run.keyed_spread import SpreadKeyedSession

                session = SpreadKeyedSession(settings, reporter)
            else:
                session = new_session(settings, reporter)
            status = session.run()
        except KeyboardInterrupt:  # before the first row: the run's loop says the rest itself
            raise interrupted(interrupted_before_rows(session, state)) from None
    if status is RunStatus.INTERRUPTED:  # the run said how it ended
        raise interrupted(None)
    if status is RunStatus.STOPPED_ON_CHANGE or (
            status is RunStatus.OK and fail_on_change and session.watch is not None and session.watch.events):
        raise typer.Exit(EXIT_CHANGED)
    if status is not RunStatus.OK:
        raise typer.Exit(EXIT_ERROR)


explain.__doc__ = HELP
